// Strict eager's standalone float32 reductions that are not a last-dim row sum (a bias
// gradient's sum over the leading dims, a full sum, a max over a middle dim, a transposed view)
// run as the fused reducer's wasm kernel: the test checks that path is taken and that its values
// are the JS loop's to the bit (float64 accumulation in index order, rounded once), NaN included.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { wasmFusedStats } from "../../../src/device/cpu/wasm/fused_wasm.js";

const on = process.env.TORCHTS_CPU_BACKEND !== "js";

/** out[kept index] = reduction of x over `dims`, in index order, in float64 (the JS kernel's order). */
function reference(x: Float32Array, shape: number[], dims: number[], op: "sum" | "max" | "min"): number[] {
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const kept = shape.map((_, d) => d).filter((d) => !dims.includes(d));
  const outShape = kept.map((d) => shape[d]!);
  const nOut = outShape.reduce((a, b) => a * b, 1);
  const nRed = dims.reduce((a, d) => a * shape[d]!, 1);
  const out: number[] = [];
  for (let o = 0; o < nOut; o++) {
    let base = 0, r = o;
    for (let k = kept.length - 1; k >= 0; k--) {
      base += (r % outShape[k]!) * strides[kept[k]!]!;
      r = Math.floor(r / outShape[k]!);
    }
    let acc = op === "sum" ? 0 : op === "max" ? -Infinity : Infinity;
    for (let i = 0; i < nRed; i++) {
      let off = base, q = i;
      for (let k = dims.length - 1; k >= 0; k--) {
        off += (q % shape[dims[k]!]!) * strides[dims[k]!]!;
        q = Math.floor(q / shape[dims[k]!]!);
      }
      const v = x[off]!;
      if (op === "sum") acc += v;
      else if (acc === acc && (v !== v || (op === "max" ? v > acc : v < acc))) acc = v;
    }
    out.push(Math.fround(acc));
  }
  return out;
}

test("strict float32 reductions over leading, all and middle dims run in wasm with the JS kernel's exact sums", { skip: !on }, async () => {
  torch.manualSeed(11);
  const cases: [number[], number[]][] = [[[4, 64, 128], [0, 1]], [[4, 64, 130], [0, 1, 2]], [[8, 300, 5], [1]], [[300, 77], [0]], [[6, 40, 50], [0, 2]]];
  for (const [shape, dims] of cases) {
    const x = torch.randn(shape).mul(100);
    const host = (await x.data()) as Float32Array;
    if (shape.length === 3) host[7] = NaN; // max/min propagate it; sum too
    const xs = torch.tensor(host).view(shape);
    for (const op of ["sum", "max", "min"] as const) {
      const y = torch.withEagerMode("strict", () => (op === "sum" ? xs.sum(dims) : op === "max" ? xs.amax(dims) : xs.amin(dims)));
      const got = Array.from((await y.data()) as Float32Array);
      const want = reference(host, shape, dims, op);
      assert.deepEqual(got, want, `${op} over ${dims} of [${shape}]`);
    }
  }
  // a transposed view: reduced dim with stride 1 inside kept ones
  const t = torch.randn([128, 96]);
  const th = (await t.data()) as Float32Array;
  const got = Array.from((await torch.withEagerMode("strict", () => t.t().sum(0)).data()) as Float32Array);
  assert.deepEqual(got, reference(th, [128, 96], [1], "sum"));
});

test("the wasm reducer is what strict eager runs for a leading-dims sum (not the JS loop)", { skip: !on }, () => {
  const x = torch.randn([16, 33, 64]);
  const before = wasmFusedStats.runs;
  torch.withEagerMode("strict", () => x.sum([0, 1]));
  assert.ok(wasmFusedStats.runs > before, "a wasm fused kernel ran");
});

test("fused column sums whose inputs broadcast inside the kept dims (a layer norm weight gradient) run in wasm, equal to strict", { skip: !on }, async () => {
  torch.manualSeed(12);
  // sum over the batch of dy * (x - mean) * rstd with mean, rstd [B, T, 1] broadcast over C: the
  // kept dims [T, C] see strides (1, 0) in the statistics, two levels of output index
  for (const [B, T, C] of [[4, 64, 128], [3, 5, 12], [2, 7, 4]]) {
    const dy = torch.randn([B, T, C]), x = torch.randn([B, T, C]);
    const mean = torch.randn([B, T, 1]), rstd = torch.rand([B, T, 1]).add(0.5);
    const f = () => dy.mul(x.sub(mean).mul(rstd)).add(dy).sum(0);
    const want = (await torch.withEagerMode("strict", f).data()) as Float32Array;
    const before = { ...wasmFusedStats };
    const got = (await torch.withEagerMode("fused", f).data()) as Float32Array;
    assert.ok(wasmFusedStats.built > before.built && wasmFusedStats.declined === before.declined, `[${B}, ${T}, ${C}]: the wasm reduction was built`);
    assert.deepEqual(got, want, `[${B}, ${T}, ${C}]`);
    const compiled = (await torch.compile(f)().data()) as Float32Array;
    assert.deepEqual(compiled, want, `[${B}, ${T}, ${C}] compiled`);
  }
  // a row length not a multiple of 4 keeps the JS kernel, with the same values
  const dy = torch.randn([3, 5, 6]), s = torch.rand([3, 5, 1]);
  const g = () => dy.mul(s).sum(0);
  const before = wasmFusedStats.declined;
  assert.deepEqual(await torch.withEagerMode("fused", g).data(), await torch.withEagerMode("strict", g).data());
  assert.ok(wasmFusedStats.declined > before, "C = 6: declined");
});
