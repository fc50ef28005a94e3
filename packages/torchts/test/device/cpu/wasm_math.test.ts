// The inline vector math (VMath) in both code paths (plain SIMD and relaxed fused multiply-add),
// each compiled into its own small module: ulp error against float64 Math over dense sweeps,
// and the special values softmax depends on (expNonPos: -inf -> 0, NaN kept, flush below
// ~-87.68). Then the softmax / logSoftmax row kernels on the rows torch treats specially.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { emitModule, Fn, I32, OP, V128 } from "../../../src/device/cpu/wasm/emitter.js";
import { detect } from "../../../src/device/cpu/wasm/features.js";
import { VMath } from "../../../src/device/cpu/wasm/vmath.js";
import { softmaxRowsF32 } from "../../../src/device/cpu/wasm/index.js";
import { erf as erf64 } from "../../../src/device/cpu/math.js";

const on = process.env.TORCHTS_CPU_BACKEND !== "js";
const features = detect();
const MIN_NORMAL = 1.1754943508222875e-38;

type Op = "exp" | "expNonPos" | "tanh" | "sigmoid" | "log" | "erf";
const N = 1 << 18;

/** dst[i] = op(src[i]) for each op and each code path, in one module over a fresh memory. */
function build(fma: boolean) {
  const ops: Op[] = ["exp", "expNonPos", "tanh", "sigmoid", "log", "erf"];
  const fns = ops.map((op) => {
    const f = new Fn(op, [I32, I32, I32]);
    const m = new VMath(f, fma);
    const x = f.local(V128), p = f.local(I32), q = f.local(I32), end = f.local(I32);
    f.get(0).set(p).get(1).set(q).get(1).get(2).i32(2).op(OP.i32shl).op(OP.i32add).set(end);
    f.forLt(q, end, 16, () => {
      f.get(p).v128load().set(x).get(q);
      m[op](x);
      f.v128store().get(p).i32(16).op(OP.i32add).set(p);
    });
    return f;
  });
  const pages = Math.ceil((8 * N + 64) / 65536);
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  const inst = new WebAssembly.Instance(new WebAssembly.Module(emitModule(fns, { initial: pages, maximum: pages }) as BufferSource), { env: { memory } });
  const ex = inst.exports as Record<Op, (src: number, dst: number, n: number) => void>;
  const X = new Float32Array(memory.buffer, 0, N), Y = new Float32Array(memory.buffer, 4 * N, N);
  return (op: Op, xs: ArrayLike<number>): Float32Array => {
    X.set(xs);
    ex[op](0, 4 * N, Math.ceil(xs.length / 4) * 4);
    return Y.slice(0, xs.length);
  };
}

function ulps(got: number, want: number): number {
  const a = Math.abs(Math.fround(want));
  const ulp = a < MIN_NORMAL ? 2 ** -149 : 2 ** (Math.floor(Math.log2(a)) - 23);
  return Math.abs(got - want) / ulp;
}

function sweep(lo: number, hi: number): Float32Array {
  const x = new Float32Array(N);
  for (let i = 0; i < N; i++) x[i] = lo + ((hi - lo) * i) / (N - 1);
  return x;
}

const paths = [false, ...(features.relaxedSimd ? [true] : [])];

for (const fma of paths) {
  const run = on ? build(fma) : null;
  const name = fma ? "relaxed madd" : "plain SIMD";

  test(`VMath (${name}): exp, expNonPos, tanh, sigmoid, log within a few ulp of float64 Math`, { skip: !on }, () => {
    const cases: [Op, (v: number) => number, number, number, number][] = [
      ["exp", Math.exp, -104, 88.7, 2],
      ["expNonPos", Math.exp, -87.3, 0, 2],
      ["tanh", Math.tanh, -10, 10, 8],
      ["sigmoid", (v) => 1 / (1 + Math.exp(-v)), -87, 87, 4],
      ["log", Math.log, 1, 5000, 2], // softmax's row sums
      ["log", Math.log, 1e-30, 2, 2],
    ];
    for (const [op, ref, lo, hi, maxUlp] of cases) {
      const x = sweep(lo, hi);
      if (op === "log") x.set([1, Math.SQRT1_2, Math.fround(Math.SQRT1_2) * (1 + 2 ** -23), 0.5, 2, MIN_NORMAL, 3.4e38]);
      const y = run!(op, x);
      for (let i = 0; i < N; i++) {
        const want = ref(x[i]!);
        // denormal results: an absolute bound (a flush or a last-bit difference is fine)
        if (Math.abs(want) < MIN_NORMAL) assert.ok(Math.abs(y[i]! - want) < MIN_NORMAL, `${op}(${x[i]}) = ${y[i]}`);
        else assert.ok(ulps(y[i]!, want) <= maxUlp, `${op}(${x[i]}) = ${y[i]}, want ${want}`);
      }
    }
  });

  test(`VMath (${name}): expNonPos agrees with exp to an ulp and keeps softmax's special values`, { skip: !on }, () => {
    const x = sweep(-87.3, 0);
    const a = run!("exp", x), b = run!("expNonPos", x);
    for (let i = 0; i < N; i++) assert.ok(ulps(b[i]!, a[i]!) <= 1, `expNonPos(${x[i]}) = ${b[i]}, exp = ${a[i]}`);
    const special = [NaN, -Infinity, 0, -0, -1e-30, -87.5, -87.7, -88, -89, -103.9, -1e30];
    const want = [NaN, 0, 1, 1, 1, Math.fround(Math.exp(-87.5)), 0, 0, 0, 0, 0];
    const got = run!("expNonPos", special);
    special.forEach((v, i) => {
      if (Number.isNaN(want[i]!)) assert.ok(Number.isNaN(got[i]!), `expNonPos(${v}) = ${got[i]}`);
      else assert.ok(Math.abs(got[i]! - want[i]!) <= 2 ** -140, `expNonPos(${v}) = ${got[i]}, want ${want[i]}`);
    });
  });

  test(`VMath (${name}): exp/tanh/sigmoid special values`, { skip: !on }, () => {
    const xs = [NaN, Infinity, -Infinity, 0, -0, 88.8, 89, 1000, -104, -1000, 4e-4, 3.9e-4, 7.9, 7.91, 9.1, -9.1, 20, -20];
    const refs: Record<string, (v: number) => number> = { exp: Math.exp, tanh: Math.tanh, sigmoid: (v) => 1 / (1 + Math.exp(-v)) };
    for (const [op, ref] of Object.entries(refs)) {
      const y = run!(op as Op, xs);
      xs.forEach((v, i) => {
        const want = Math.fround(ref(v));
        if (Number.isNaN(want)) assert.ok(Number.isNaN(y[i]!), `${op}(${v}) = ${y[i]}`);
        else if (!Number.isFinite(want) || want === 0 || Math.abs(want) === 1) assert.equal(y[i], want, `${op}(${v})`);
        else assert.ok(ulps(y[i]!, ref(v)) <= 8, `${op}(${v}) = ${y[i]}, want ${want}`);
      });
    }
  });
  test(`VMath (${name}): erf within 2 ulp of float64 erf over [-6, 6], the tails and the special values`, { skip: !on }, () => {
    // a dense sweep (spacing ~4.6e-5, every ulp near the split at 0.875 and the clamp at 4 too),
    // then tiny, denormal and huge arguments
    const xs: number[][] = [Array.from(sweep(-6, 6)), Array.from(sweep(0.86, 0.89)), Array.from(sweep(-0.89, -0.86)), Array.from(sweep(3.8, 4.2))];
    const tails: number[] = [];
    for (let e = -149; e <= 127; e++) for (const m of [1, 1.3, 1.75]) tails.push(m * 2 ** e, -m * 2 ** e);
    xs.push(tails.map(Math.fround));
    let worst = 0;
    for (const x of xs) {
      const y = run!("erf", x);
      x.forEach((v, i) => {
        const want = erf64(v);
        const u = Math.abs(want) < MIN_NORMAL ? Math.abs(y[i]! - want) / 2 ** -149 : ulps(y[i]!, want);
        worst = Math.max(worst, u);
        assert.ok(u <= 2, `erf(${v}) = ${y[i]}, want ${want} (${u} ulp)`);
      });
    }
    assert.ok(worst > 0.5, "the sweep exercised rounding");
    const special = [NaN, Infinity, -Infinity, 0, -0, 4, -4, 6, 1e30, -3.4e38];
    // -0 -> -0 as torch (C's erf) gives; the JS series in math.ts returns +0 there
    const want = special.map((v) => (Object.is(v, -0) ? -0 : Math.fround(erf64(v))));
    const got = run!("erf", special);
    special.forEach((v, i) => assert.ok(Object.is(got[i], want[i]), `erf(${v}) = ${got[i]}, want ${want[i]}`));
  });
}

test("erf / GELU: strict (wasm erf kernel) and fused (wasm epilogue, matmul + GELU and its backward) are bit-identical", { skip: !on }, async () => {
  const F = torch.nn.functional;
  async function run() {
    torch.manualSeed(3);
    const x = torch.randn(8, 64, 48).mul(3);
    const w = torch.randn(48, 96).mul(0.2).requiresGrad_();
    const z = torch.tensor([NaN, Infinity, -Infinity, 0, -0, 1e-40, 5, -5, 0.875 * Math.SQRT2, -20], { dtype: "float32" });
    const h = F.gelu(x.matmul(w));
    h.sum().backward();
    return {
      h: Array.from((await h.data()) as Float32Array),
      g: Array.from((await w.grad!.data()) as Float32Array),
      e: Array.from((await torch.erf(x).data()) as Float32Array),
      z: Array.from((await torch.erf(z).data()) as Float32Array),
      gz: Array.from((await F.gelu(z).data()) as Float32Array),
    };
  }
  const strict = await torch.withEagerMode("strict", run);
  const fused = await torch.withEagerMode("fused", run);
  for (const k of Object.keys(strict) as (keyof typeof strict)[]) {
    assert.equal(strict[k].length, fused[k].length);
    strict[k].forEach((v, i) => assert.ok(Object.is(v, fused[k][i]), `${k}[${i}]: strict ${v}, fused ${fused[k][i]}`));
  }
  // and the wasm values are erf's: float32 erf of the inputs to 2 ulp
  const xs = Array.from((await torch.withEagerMode("strict", async () => { torch.manualSeed(3); return torch.randn(8, 64, 48).mul(3).data(); })) as Float32Array);
  xs.forEach((v, i) => assert.ok(ulps(strict.e[i]!, erf64(v)) <= 2 || Math.abs(erf64(v)) < MIN_NORMAL, `erf(${v}) = ${strict.e[i]}`));
  assert.deepEqual(strict.z.slice(0, 3), [NaN, 1, -1]);
  assert.ok(Object.is(strict.z[4], -0) && Object.is(strict.z[3], 0));
});

test("softmax / logSoftmax rows: NaN, -inf and +inf rows as torch, every row length's vector/tail split", { skip: !on }, async () => {
  const rows = [
    [1, NaN, 2], [0, -Infinity, 1], [-Infinity, -Infinity, -Infinity], [1, Infinity, 0], [0, -1000, -87.5],
    [5, 5, 5, 5, NaN, 5, 5, 5, 5], [-Infinity, 3, -Infinity, -Infinity, 2, -Infinity, 1, 0, -Infinity],
  ];
  // torch 1.13 (float32)
  const softmax = [
    [NaN, NaN, NaN], [0.2689414322376251, 0, 0.7310585975646973], [NaN, NaN, NaN], [NaN, NaN, NaN], [1, 0, 9.982351397596697e-39],
    Array(9).fill(NaN), [0, 0.6439142823219299, 0, 0, 0.23688283562660217, 0, 0.08714432269334793, 0.032058604061603546, 0],
  ];
  const log = [
    [NaN, NaN, NaN], [-1.31326162815094, -Infinity, -0.31326165795326233], [NaN, NaN, NaN], [NaN, NaN, NaN], [0, -1000, -87.5],
    Array(9).fill(NaN), [-Infinity, -0.4401896893978119, -Infinity, -Infinity, -1.4401897192001343, -Infinity, -2.4401895999908447, -3.4401895999908447, -Infinity],
  ];
  for (const [k, r] of rows.entries()) {
    const x = torch.tensor([r], { dtype: "float32" });
    const s = (await torch.softmax(x, -1).data()) as Float32Array;
    const l = (await torch.nn.functional.logSoftmax(x, -1).data()) as Float32Array;
    r.forEach((_, j) => {
      for (const [got, want, what] of [[s[j]!, softmax[k]![j]!, "softmax"], [l[j]!, log[k]![j]!, "logSoftmax"]] as const) {
        if (Number.isNaN(want)) assert.ok(Number.isNaN(got), `${what} row ${k} [${j}] = ${got}`);
        else if (!Number.isFinite(want) || want === 0) assert.equal(got, want, `${what} row ${k} [${j}]`);
        else assert.ok(Math.abs(got - want) <= 1e-6 * Math.abs(want) + 1e-44, `${what} row ${k} [${j}] = ${got}, want ${want}`);
      }
    });
  }
  // lengths 1..19 cover the pair / single-vector / scalar-tail combinations of the row loops
  for (let n = 1; n < 20; n++) {
    const rowsN = 3;
    const x = new Float32Array(rowsN * n + 1);
    for (let i = 0; i < x.length; i++) x[i] = Math.sin(i * 12.9898 + n) * 30;
    const out = new Float32Array(rowsN * n);
    assert.ok(softmaxRowsF32(x, 1, rowsN, n, out));
    const t = torch.tensor(Array.from(x.subarray(1)), { dtype: "float32" }).reshape([rowsN, n]);
    const l = (await torch.nn.functional.logSoftmax(t, -1).data()) as Float32Array;
    for (let r = 0; r < rowsN; r++) {
      const row = Array.from(x.subarray(1 + r * n, 1 + (r + 1) * n));
      const m = Math.max(...row);
      const z = row.reduce((a, v) => a + Math.exp(v - m), 0);
      row.forEach((v, j) => {
        const want = Math.exp(v - m) / z;
        // x - max rounds in float32 (as in torch): relative error up to |x - max| * 2^-24
        assert.ok(Math.abs(out[r * n + j]! - want) <= (1e-6 + 1.2e-7 * (m - v)) * want + 1e-38, `softmax n=${n} [${r},${j}] = ${out[r * n + j]}, want ${want}`);
        const lw = v - m - Math.log(z);
        assert.ok(Math.abs(l[r * n + j]! - lw) <= 1e-6 * Math.abs(lw) + 1e-6, `logSoftmax n=${n} [${r},${j}] = ${l[r * n + j]}, want ${lw}`);
      });
    }
  }
});
