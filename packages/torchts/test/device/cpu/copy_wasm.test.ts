// The wasm row copies of the cpu kernels (src/device/cpu/wasm/copy.ts): cat writes each float32
// input into its slab of the output with them (contiguous rows, a transposed input's strided
// rows, sliced and broadcast inputs), and scatter_add's whole-row path (embedding's backward)
// adds rows with them. The test checks that those paths are taken and that values equal an
// element-by-element reference to the bit, in every mode, duplicate indices and errors included.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { wasmCopyStats } from "../../../src/device/cpu/wasm/ops.js";
const F = torch.nn.functional;

const on = process.env.TORCHTS_CPU_BACKEND !== "js";
const MODES = ["strict", "fused", "compiled"] as const;

function lcg(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296) * 2 - 1;
}

/** The cat of `parts` (each a getter over its shape) along dim: each part's elements written at their output offsets. */
function catRef(parts: { shape: number[]; at: (ix: number[]) => number }[], dim: number, outShape: number[]): Float32Array {
  const out = new Float32Array(outShape.reduce((a, b) => a * b, 1));
  const os = outShape.map((_, d) => outShape.slice(d + 1).reduce((a, b) => a * b, 1));
  let start = 0;
  for (const p of parts) {
    const n = p.shape.reduce((a, b) => a * b, 1);
    for (let flat = 0; flat < n; flat++) {
      const ix = new Array<number>(p.shape.length);
      for (let d = p.shape.length - 1, r = flat; d >= 0; d--) {
        ix[d] = r % p.shape[d]!;
        r = Math.floor(r / p.shape[d]!);
      }
      out[ix.reduce((o, v, d) => o + (d === dim ? v + start : v) * os[d]!, 0)] = p.at(ix);
    }
    start += p.shape[dim]!;
  }
  return out;
}

function run<T>(mode: (typeof MODES)[number], f: (...a: torch.Tensor[]) => T, ...args: torch.Tensor[]): T {
  return mode === "compiled" ? (torch.compile(f) as (...a: torch.Tensor[]) => T)(...args) : torch.withEagerMode(mode, () => f(...args));
}

test("cat lands float32 inputs (contiguous, transposed, sliced, broadcast) with wasm row copies, equal to the reference", async () => {
  const r = lcg(3);
  const A = Float32Array.from({ length: 2 * 6 * 5 }, r); // [2, 6, 5]
  const B = Float32Array.from({ length: 2 * 5 * 6 }, r); // [2, 5, 6], transposed to [2, 6, 5]
  const C = Float32Array.from({ length: 2 * 6 * 9 }, r); // [2, 6, 9], narrowed to [2, 6, 3] from column 2
  const D = Float32Array.from({ length: 5 }, r); // [5], broadcast to [2, 6, 5]
  const parts = [
    { shape: [2, 6, 5], at: ([i, j, k]: number[]) => A[(i! * 6 + j!) * 5 + k!]! },
    { shape: [2, 6, 5], at: ([i, j, k]: number[]) => B[(i! * 5 + k!) * 6 + j!]! },
    { shape: [2, 6, 3], at: ([i, j, k]: number[]) => C[(i! * 6 + j!) * 9 + 2 + k!]! },
    { shape: [2, 6, 5], at: ([, , k]: number[]) => D[k!]! },
  ];
  for (const dim of [2, 1, 0]) {
    // along dims 0 and 1 the narrowed input would not fit: it is left out there
    const use = dim === 2 ? parts : [parts[0]!, parts[1]!, parts[3]!];
    const outShape = [2, 6, 5];
    outShape[dim] = use.reduce((s, p) => s + p.shape[dim]!, 0);
    const want = catRef(use, dim, outShape);
    for (const mode of MODES) {
      const before = wasmCopyStats.copyRows;
      const got = run(mode, (a, b, c, d) => {
        const xs = [a!.view(2, 6, 5), b!.view(2, 5, 6).transpose(1, 2), c!.view(2, 6, 9).narrow(2, 2, 3), d!.expand(2, 6, 5)];
        return torch.cat(dim === 2 ? xs : [xs[0]!, xs[1]!, xs[3]!], dim);
      }, torch.tensor(A), torch.tensor(B), torch.tensor(C), torch.tensor(D));
      assert.deepEqual(got.shape, outShape);
      assert.deepEqual((await got.data()) as Float32Array, want, `cat dim ${dim}, ${mode}`);
      if (on) assert.ok(wasmCopyStats.copyRows > before, `cat dim ${dim}, ${mode}: the wasm row copy ran`);
    }
  }
});

test("cat of empty, one-element and large transposed float32 inputs", async () => {
  const r = lcg(11);
  const big = Float32Array.from({ length: 4 * 128 * 64 }, r); // [4, 128, 64] -> transposed [4, 64, 128], as attention's key gradient
  const one = Float32Array.from({ length: 4 * 64 }, r);
  for (const mode of MODES) {
    const got = run(mode, (a, b) => torch.cat([a!.view(4, 128, 64).transpose(1, 2), torch.zeros([4, 64, 0]), b!.view(4, 64, 1)], 2), torch.tensor(big), torch.tensor(one));
    assert.deepEqual(got.shape, [4, 64, 129]);
    const want = catRef([
      { shape: [4, 64, 128], at: ([i, j, k]) => big[(i! * 128 + k!) * 64 + j!]! },
      { shape: [4, 64, 1], at: ([i, j]) => one[i! * 64 + j!]! },
    ], 2, [4, 64, 129]);
    assert.deepEqual((await got.data()) as Float32Array, want, mode);
  }
});

test("scatter_add's whole-row path adds rows in index order in wasm: duplicates accumulate as float32, bit for bit", async () => {
  const [V, Dm, N] = [11, 37, 64]; // 37: rows end in a partial vector
  const r = lcg(7);
  const w = Float32Array.from({ length: V * Dm }, r);
  const ids = Array.from({ length: N }, (_, i) => (i * 5) % 7); // many repeats
  const g = Float32Array.from({ length: N * Dm }, () => r() * 1e3);
  const want = new Float32Array(V * Dm);
  for (let i = 0; i < N; i++) for (let c = 0; c < Dm; c++) want[ids[i]! * Dm + c] = Math.fround(want[ids[i]! * Dm + c]! + g[i * Dm + c]!);
  for (const mode of MODES) {
    const before = wasmCopyStats.addRows;
    const W = torch.tensor(w).view(V, Dm).requiresGrad_(true);
    const step = (idx: torch.Tensor, gy: torch.Tensor) => {
      F.embedding(idx, W).backward(gy);
      return W.grad!;
    };
    const got = run(mode, step, torch.tensor(ids, { dtype: "int64" }), torch.tensor(g).view(N, Dm));
    assert.deepEqual((await got.data()) as Float32Array, want, mode);
    if (on) assert.ok(wasmCopyStats.addRows > before, `${mode}: the wasm row add ran`);
  }
  // scatter_add itself, onto a non-zero self: self's values are the start of each sum
  const self = Float32Array.from({ length: V * Dm }, r);
  const want2 = Float32Array.from(self);
  for (let i = 0; i < N; i++) for (let c = 0; c < Dm; c++) want2[ids[i]! * Dm + c] = Math.fround(want2[ids[i]! * Dm + c]! + g[i * Dm + c]!);
  const idx = torch.tensor(ids, { dtype: "int64" }).view(N, 1).expand(N, Dm);
  const got2 = torch.tensor(self).view(V, Dm).scatterAdd(0, idx, torch.tensor(g).view(N, Dm));
  assert.deepEqual((await got2.data()) as Float32Array, want2);
});

test("scatter_add on the row path refuses a bad index with PyTorch's error and writes nothing", async () => {
  const self = torch.arange(0, 40, { dtype: "float32" }).view(5, 8);
  const src = torch.ones([3, 8]);
  const bad = torch.tensor([[1], [5], [2]], { dtype: "int64" }).expand(3, 8);
  for (const mode of ["strict", "fused"] as const) {
    assert.throws(() => torch.withEagerMode(mode, () => { const y = self.scatterAdd(0, bad, src); torch.sync(); return y; }), /index 5 is out of bounds for dimension 0 with size 5/);
    assert.deepEqual(Array.from((await self.data()) as Float32Array), Array.from({ length: 40 }, (_, i) => i), `${mode}: self unchanged`);
    const ok = torch.tensor([[4], [0], [4]], { dtype: "int64" }).expand(3, 8);
    const got = (await self.scatterAdd(0, ok, src).data()) as Float32Array;
    assert.deepEqual(Array.from(got.slice(32, 40)), [34, 35, 36, 37, 38, 39, 40, 41], `${mode}: usable after the error`);
  }
});

test("scatter_add starts from a contiguous, broadcast or strided self, as cross-entropy's backward does", async () => {
  const r = lcg(9);
  const [Rr, Cc] = [33, 10];
  const tg = Array.from({ length: Rr }, (_, i) => (i * 3) % Cc);
  const s = Float32Array.from({ length: Rr }, r);
  const base = Float32Array.from({ length: Rr * Cc }, r);
  const idx = torch.tensor(tg, { dtype: "int64" }).view(Rr, 1);
  const src = torch.tensor(s).view(Rr, 1);
  const selves: [string, () => torch.Tensor, (i: number, c: number) => number][] = [
    ["contiguous", () => torch.tensor(base).view(Rr, Cc), (i, c) => base[i * Cc + c]!],
    ["broadcast", () => torch.full([1, 1], 2.5).expand(Rr, Cc), () => 2.5],
    ["transposed", () => torch.tensor(base).view(Cc, Rr).t(), (i, c) => base[c * Rr + i]!],
  ];
  for (const [name, make, at] of selves)
    for (const mode of ["strict", "fused"] as const) {
      const got = (await torch.withEagerMode(mode, () => make().scatterAdd(1, idx, src)).data()) as Float32Array;
      const want = new Float32Array(Rr * Cc);
      for (let i = 0; i < Rr; i++) for (let c = 0; c < Cc; c++) want[i * Cc + c] = at(i, c) + (tg[i] === c ? s[i]! : 0);
      assert.deepEqual(got, want, `${name}, ${mode}`);
    }
});
