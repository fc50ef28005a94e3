// The native weight-only int8 products of linearInt8's few-row (decode) calls
// (src/device/cpu/native/qgemv.ts, native/qgemv_avx2.c and qgemv_avx512.c): with the AVX2 GEMM
// selected, calls of 2-16 rows take the AVX2 kernel (one row stays on wasm); with the AVX-512 GEMM,
// calls of 1-16 rows take the AVX-512 kernel; both match a float64 reference and the wasm kernel
// (per-channel and grouped scales, groups with a tail, K not a multiple of 8 or 16, passes of 4 rows
// and the rest, bias, a NaN, strided and 3-d input); the outputs do not depend on the thread count;
// other GEMM choices keep the wasm kernel; strict, fused and compiled agree; and the bridge refuses
// wrong parameter blocks without writing. Skipped where the CPU has no AVX2 and FMA (the AVX-512
// cases where it has no AVX-512).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { quantizeWeight } from "../../../src/transformers/index.js";
import { dequantizeInt8, linearInt8 } from "../../../src/nn/functional/quantized.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { QGEMV, nativeQ8GemvStats } from "../../../src/device/cpu/native/qgemv.js";
import { linearF64 } from "../../transformers/helpers.js";
import { addon, hasKernel } from "./addon.js";

const avx2 = hasKernel("avx2");
const avx512 = avx2 && hasKernel("avx512");

/** linearInt8 under GEMM choice `blas`, and how many native calls it made. */
async function run(blas: "avx2" | "avx512" | "off" | "openblas", x: Tensor, q: Tensor, s: Tensor, b: Tensor | null): Promise<[Float32Array, number]> {
  setCpuBlas(blas);
  try {
    const c0 = nativeQ8GemvStats.calls;
    const out = (await linearInt8(x, q, s, b).data()) as Float32Array;
    return [out, nativeQ8GemvStats.calls - c0];
  } finally {
    setCpuBlas("auto");
  }
}

test("native int8 decode: decode-sized calls take it and match float64 and the wasm kernel", { skip: !avx2 }, async () => {
  torch.manualSeed(21);
  for (const { K, N, gs } of [
    { K: 96, N: 37, gs: undefined }, // per channel
    { K: 70, N: 9, gs: undefined }, // K not a multiple of 8
    { K: 200, N: 21, gs: undefined }, // four 16-wide chains and a tail of 8
    { K: 96, N: 16, gs: 32 },
    { K: 120, N: 40, gs: 40 }, // groups with a tail of 8
    { K: 72, N: 12, gs: 24 }, // groups starting off a multiple of 16
    { K: 256, N: 65, gs: 64 },
  ]) {
    const { q, scale } = await quantizeWeight(torch.randn(N, K), 8, gs);
    const wd = dequantizeInt8(q, scale);
    for (const M of [1, 2, 3, 4, 5, 8, 16])
      for (const bias of [null, torch.randn(N)]) {
        const x = torch.randn(M, K).mul(2);
        const what = `K ${K} N ${N} gs ${gs ?? "row"} M ${M} bias ${bias !== null}`;
        const [nat, calls] = await run("avx2", x, q, scale, bias);
        assert.equal(calls, M >= 2 ? 1 : 0, `${what}: the native kernel ran for 2 rows or more`);
        const [wasm, wcalls] = await run("off", x, q, scale, bias);
        assert.equal(wcalls, 0, `${what}: the wasm kernel ran`);
        const outs: [string, Float32Array][] = [["avx2", nat]];
        if (avx512) {
          const [n5, c5] = await run("avx512", x, q, scale, bias);
          assert.equal(c5, 1, `${what}: the AVX-512 kernel ran`);
          outs.push(["avx512", n5]);
        }
        const r = await linearF64(x, wd, bias);
        for (const [name, got] of outs)
          for (let i = 0; i < r.length; i++) {
            const tol = 2e-6 * Math.sqrt(K) * (1 + Math.abs(r[i]!));
            assert.ok(Math.abs(got[i]! - r[i]!) <= tol, `${what} [${i}]: ${name} ${got[i]} vs float64 ${r[i]}`);
            assert.ok(Math.abs(got[i]! - wasm[i]!) <= tol, `${what} [${i}]: ${name} ${got[i]} vs wasm ${wasm[i]}`);
          }
      }
  }
});

for (const kern of ["avx2", "avx512"] as const)
test(`native int8 decode (${kern}): a NaN, a strided input, 3-d rows; the same sums at 1 and 2 threads`, { skip: kern === "avx2" ? !avx2 : !avx512 }, async () => {
  torch.manualSeed(22);
  const { q, scale } = await quantizeWeight(torch.randn(50, 64), 8, 32);
  const xh = (await torch.randn(3, 64).data()) as Float32Array;
  xh[64 + 9] = NaN;
  const [nan] = await run(kern, torch.tensor(Array.from(xh)).reshape([3, 64]), q, scale, null);
  for (let n = 0; n < 50; n++) {
    assert.ok(Number.isFinite(nan[n]!) && Number.isFinite(nan[100 + n]!), "rows without the NaN stay finite");
    assert.ok(Number.isNaN(nan[50 + n]!), "the NaN row is NaN");
  }
  const wide = torch.randn(4, 80);
  const [strided, c1] = await run(kern, wide.narrow(1, 8, 64), q, scale, null);
  const [dense] = await run(kern, wide.narrow(1, 8, 64).contiguous(), q, scale, null);
  assert.equal(c1, 1);
  assert.deepEqual(strided, dense);
  const x3 = torch.randn(2, 3, 64);
  setCpuBlas(kern);
  try {
    const y3 = (await linearInt8(x3, q, scale, null).data()) as Float32Array;
    const y2 = (await linearInt8(x3.reshape([6, 64]), q, scale, null).data()) as Float32Array;
    assert.deepEqual(y3, y2);
  } finally {
    setCpuBlas("auto");
  }
  const big = await quantizeWeight(torch.randn(600, 512), 8);
  const xb = torch.randn(2, 512);
  const before = torch.backends.cpu.getNumThreads();
  try {
    torch.backends.cpu.setNumThreads(1);
    const [one] = await run(kern, xb, big.q, big.scale, null);
    torch.backends.cpu.setNumThreads(2);
    const [two] = await run(kern, xb, big.q, big.scale, null);
    assert.deepEqual(two, one);
  } finally {
    torch.backends.cpu.setNumThreads(before);
  }
});

test("native int8 decode: only with torchts' AVX2 or AVX-512 GEMM, and strict, fused and compiled agree", { skip: !avx2 }, async () => {
  torch.manualSeed(23);
  const { q, scale } = await quantizeWeight(torch.randn(24, 64), 8);
  const x = torch.randn(2, 64);
  for (const m of ["off", "openblas"] as const) assert.equal((await run(m, x, q, scale, null))[1], 0, `blas ${m}`);
  // the AVX-512 GEMM's machines take the AVX-512 kernel, one row included
  if (avx512)
    for (const rows of [1, 2]) {
      const [viaAvx512, calls] = await run("avx512", x.narrow(0, 0, rows), q, scale, null);
      assert.equal(calls, 1, `blas avx512 takes the native kernel for ${rows} rows`);
      const [wasm] = await run("off", x.narrow(0, 0, rows), q, scale, null);
      for (let i = 0; i < wasm.length; i++) assert.ok(Math.abs(viaAvx512[i]! - wasm[i]!) <= 1e-4 * (1 + Math.abs(wasm[i]!)), `[${i}]`);
    }
  const b = torch.randn(24);
  const f = (t: Tensor) => linearInt8(t.mul(2), q, scale, b).relu();
  for (const kern of avx512 ? (["avx2", "avx512"] as const) : (["avx2"] as const)) {
    setCpuBlas(kern);
    try {
      const outs: Float32Array[] = [];
      for (const mode of ["strict", "fused"] as const) outs.push((await torch.withEagerMode(mode, () => f(x)).data()) as Float32Array);
      outs.push((await torch.compile(f)(x).data()) as Float32Array);
      assert.deepEqual(outs[1], outs[0], kern);
      assert.deepEqual(outs[2], outs[0], kern);
    } finally {
      setCpuBlas("auto");
    }
  }
});

test("native int8 decode: the bridge refuses wrong parameter blocks without writing", { skip: !avx2 }, () => {
  const b = addon!;
  const mem = new Float32Array(1024);
  const P = new Int32Array(mem.buffer), I8 = new Int8Array(mem.buffer);
  // x [2, 16] at byte 256, q [3, 16] at 512, s [3, 1] at 576, bias [3] at 600, out [2, 3] at 640
  const G = QGEMV;
  const block = (over: Record<number, number> = {}) => {
    P.fill(0, 0, 64);
    const w: number[] = [];
    w[G.x] = 256; w[G.ldx] = 16; w[G.M] = 2; w[G.K] = 16; w[G.gs] = 16; w[G.q] = 512; w[G.s] = 576; w[G.hasBias] = 1;
    w[G.bias] = 600; w[G.out] = 640; w[G.ldo] = 3; w[G.N] = 3; w[G.kernel] = 0;
    P.set(w);
    for (const [i, v] of Object.entries(over)) P[Number(i)] = v;
    mem.fill(0.5, 64, 96);
    I8.fill(2, 512, 560);
    mem.fill(0.25, 144, 147);
    mem.fill(1, 150, 153);
    mem.fill(-7, 160, 166);
  };
  for (const kernel of avx512 ? [0, 1] : [0]) {
    block({ [G.kernel]: kernel });
    b.q8Gemv(mem, 0, 3, 0);
    assert.deepEqual([...mem.subarray(160, 166)], new Array(6).fill(16 * 0.5 * 2 * 0.25 + 1), `kernel ${kernel}: 16 x 0.5 x 2 x 0.25 + 1`);
  }
  for (const over of <Record<number, number>[]>[
    { [G.K]: 0 }, { [G.gs]: 5 }, { [G.ldx]: 8 }, { [G.ldo]: 2 }, { [G.x]: 4090 }, { [G.q]: 4090 }, { [G.s]: 4090 },
    { [G.bias]: 4090 }, { [G.out]: 4090 }, { [G.x]: 258 }, { [G.hasBias]: 2 }, { [G.M]: -1 }, { [G.N]: 0 }, { [G.kernel]: 2 },
    { [G.M]: 0x7fffffff, [G.ldx]: 0x7fffffff }, { [G.M]: 0x7fffffff, [G.ldo]: 0x7fffffff }, // extents past 2^64 bytes: refused (other checks refuse these too; the wrap the float-unit checks prevent needs operands near 4 GiB)
    ...(avx512 ? [] : [{ [G.kernel]: 1 }]), // the AVX-512 kernel where the CPU lacks it
  ]) {
    block(over);
    assert.throws(() => b.q8Gemv(mem, 0, 1, 0), /q8Gemv: parameter block or rows out of range/, JSON.stringify(over));
    assert.ok(mem.subarray(160, 166).every((v) => v === -7), `${JSON.stringify(over)}: nothing written`);
  }
  block();
  assert.throws(() => b.q8Gemv(mem, 0, 4, 0), /out of range/, "rows past N");
  assert.throws(() => b.q8Gemv(mem, 2, 2, 0), /out of range/, "no rows");
  assert.throws(() => b.q8Gemv(mem, 0, 1, 4094), /out of range/, "block past the memory");
  assert.throws(() => b.q8Gemv(mem, 0, 1), /expected \(memory, lo, hi, block\)/);
  assert.ok(mem.subarray(160, 166).every((v) => v === -7), "nothing written");
});
