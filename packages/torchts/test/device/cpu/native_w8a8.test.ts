// The native AVX-512 VNNI int8 GEMM of linearW8A8's prefill (src/device/cpu/native/w8a8.ts,
// native/w8a8_avx512.c): many-row calls take it and give, bit for bit, what the one-row (decode)
// kernel gives each row (per-channel and grouped scales, bias, K not a multiple of 4, M not a
// multiple of the 12-row tile, a NaN row, strided input); groups it cannot take and the other
// GEMM choices stay on the float path; equal outputs in every mode; and parameter blocks the
// bridge refuses without writing. Skipped where the CPU has no AVX-512 VNNI.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { quantizeWeight } from "../../../src/transformers/index.js";
import { linearW8A8 } from "../../../src/nn/functional/quantized.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { nativeW8A8Stats, Q8_ROWS, W8A8_SLAB } from "../../../src/device/cpu/native/w8a8.js";
import { addon, hasKernel } from "./addon.js";

const f32 = Math.fround;
const vnni = hasKernel("avx512") && !!addon?.vnni();

/** Every row of a many-row call, bit for bit, against the same rows one call each (the decode kernel). */
async function check(what: string, x: Tensor, q: Tensor, s: Tensor, bias: Tensor | null, native = true): Promise<void> {
  setCpuBlas("auto");
  const c0 = nativeW8A8Stats.calls;
  const all = (await linearW8A8(x, q, s, bias).data()) as Float32Array;
  assert.equal(nativeW8A8Stats.calls - c0, native ? 1 : 0, `${what}: native kernel ${native ? "ran" : "did not run"}`);
  const M = x.shape[0]!, N = q.shape[0]!;
  for (let i = 0; i < M; i++) {
    const row = (await linearW8A8(x.narrow(0, i, 1), q, s, bias).data()) as Float32Array;
    for (let n = 0; n < N; n++) {
      const a = all[i * N + n]!, b = row[n]!;
      if (!(Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)))) assert.fail(`${what} [${i}, ${n}]: ${a} vs one-row ${b}`);
    }
  }
}

test("native w8a8 prefill: bit for bit the one-row kernel's outputs", { skip: !vnni }, async () => {
  torch.manualSeed(11);
  for (const { K, N, gs, M } of [
    { K: 96, N: 70, gs: undefined, M: 40 }, // per-channel, N not a multiple of 32
    { K: 128, N: 64, gs: 32, M: 17 }, // groups, M just past the one-row cut
    { K: 130, N: 33, gs: undefined, M: 29 }, // K not a multiple of 4 (one group)
    { K: 256, N: 300, gs: 64, M: 100 },
  ]) {
    const { q, scale } = await quantizeWeight(torch.randn(N, K), 8, gs);
    for (const bias of [null, torch.randn(N)]) await check(`K ${K} N ${N} gs ${gs ?? "row"} M ${M} bias ${!!bias}`, torch.randn(M, K).mul(3), q, scale, bias);
  }
});

test("native w8a8 prefill: a NaN row, a zero row and a strided input", { skip: !vnni }, async () => {
  torch.manualSeed(12);
  const { q, scale } = await quantizeWeight(torch.randn(40, 64), 8);
  const xh = (await torch.randn(24, 64).data()) as Float32Array;
  xh[5 * 64 + 7] = NaN;
  xh.fill(0, 9 * 64, 10 * 64);
  await check("NaN and zero rows", torch.tensor(Array.from(xh)).reshape([24, 64]), q, scale, torch.randn(40));
  // a column slice: rows 80 floats apart, staged densely
  await check("strided rows", torch.randn(30, 80).narrow(1, 8, 64), q, scale, null);
});

test("native w8a8 prefill: groups of 4k only, and only with the AVX-512 GEMM", { skip: !vnni }, async () => {
  torch.manualSeed(13);
  const { q, scale } = await quantizeWeight(torch.randn(16, 60), 8, 30); // groups of 30: the float path
  const x = torch.randn(20, 60);
  const c0 = nativeW8A8Stats.calls;
  await linearW8A8(x, q, scale, null).data();
  assert.equal(nativeW8A8Stats.calls, c0, "groups of 30");
  const w = await quantizeWeight(torch.randn(16, 64), 8);
  for (const m of ["openblas", "off"] as const) {
    setCpuBlas(m);
    try {
      await linearW8A8(torch.randn(20, 64), w.q, w.scale, null).data();
      assert.equal(nativeW8A8Stats.calls, c0, `blas ${m}`);
    } finally {
      setCpuBlas("auto");
    }
  }
});

test("native w8a8 prefill: strict, fused and compiled give equal outputs", { skip: !vnni }, async () => {
  torch.manualSeed(14);
  const { q, scale } = await quantizeWeight(torch.randn(48, 64), 8);
  const b = torch.randn(48);
  const f = (x: Tensor) => linearW8A8(x.mul(2), q, scale, b).relu();
  const x = torch.randn(33, 64);
  const outs: Float32Array[] = [];
  for (const mode of ["strict", "fused"] as const) outs.push((await torch.withEagerMode(mode, () => f(x)).data()) as Float32Array);
  outs.push((await torch.compile(f)(x).data()) as Float32Array);
  assert.deepEqual(outs[1], outs[0]);
  assert.deepEqual(outs[2], outs[0]);
});

test("native w8a8: the bridge refuses wrong parameter blocks without writing", { skip: !vnni }, () => {
  const b = addon!;
  const mem = new Float32Array(2048);
  const P = new Int32Array(mem.buffer), B8 = new Uint8Array(mem.buffer), I8 = new Int8Array(mem.buffer);
  // x [2, 8] f32 at byte 256, xu 12 rows of 8 at 512, sx at 640, q [4, 8] at 704, s [4] at 736, out [2, 4] at 768
  const Q = Q8_ROWS, W = W8A8_SLAB;
  const qrows = (over: Record<number, number> = {}) => {
    P.fill(0, 0, 64);
    mem.fill(0.5, 64, 80);
    const w: number[] = [];
    w[Q.x] = 256; w[Q.ldx] = 8; w[Q.K] = 8; w[Q.xu] = 512; w[Q.ldu] = 8; w[Q.Kp] = 8; w[Q.sx] = 640; w[Q.M] = 2;
    P.set(w);
    for (const [i, v] of Object.entries(over)) P[Number(i)] = v;
  };
  qrows();
  B8.fill(0, 512, 704);
  b.q8Rows(mem, 0, 2, 0);
  assert.deepEqual([...B8.subarray(512, 520)], new Array(8).fill(255), "0.5 / (0.5 / 127) = 127, stored as 255");
  assert.equal(mem[160], f32(0.5 / 127));
  for (const over of <Record<number, number>[]>[{ [Q.K]: 0 }, { [Q.Kp]: 12 }, { [Q.ldu]: 4 }, { [Q.x]: 8190 }, { [Q.xu]: 8190 }, { [Q.sx]: 8190 }, { [Q.ldx]: -1 }, { [Q.x]: 258 },
    { [Q.M]: 0x7fffffff, [Q.ldx]: 0x7fffffff }]) { // an extent past 2^64 bytes: refused (other checks refuse it too; the wrap the float-unit checks prevent needs operands near 4 GiB)
    qrows(over);
    B8.fill(7, 512, 704);
    assert.throws(() => b.q8Rows(mem, 0, 1, 0), /q8Rows: parameter block or units out of range/, JSON.stringify(over));
    assert.ok(B8.subarray(512, 704).every((v) => v === 7), `${JSON.stringify(over)}: nothing written`);
  }
  qrows();
  assert.throws(() => b.q8Rows(mem, 0, 3, 0), /out of range/, "rows past M");
  const slab = (over: Record<number, number> = {}) => {
    P.fill(0, 0, 64);
    const w: number[] = [];
    w[W.xu] = 512; w[W.ldu] = 8; w[W.Kp] = 8; w[W.M] = 2; w[W.Mp] = 12; w[W.N] = 4; w[W.K] = 8; w[W.gs] = 8; w[W.q] = 704;
    w[W.s] = 736; w[W.hasBias] = 0; w[W.bias] = 0; w[W.out] = 768; w[W.ldo] = 4; w[W.sx] = 640; w[W.share] = 32;
    P.set(w);
    for (const [i, v] of Object.entries(over)) P[Number(i)] = v;
    B8.fill(255, 512, 608); // 12 quantized rows of 127
    mem.fill(f32(0.5 / 127), 160, 162);
    I8.fill(1, 704, 736);
    mem.fill(1, 184, 188);
    mem.fill(-3, 192, 200);
  };
  slab();
  b.w8a8Slab(mem, 0, 1, 0);
  // xq = 127 everywhere: 8 * 127 * 1 * s 1 * sx (0.5 / 127) = 4
  assert.deepEqual([...mem.subarray(192, 200)], new Array(8).fill(f32(f32(8 * 127) * f32(0.5 / 127))));
  for (const over of <Record<number, number>[]>[
    { [W.gs]: 3 }, { [W.gs]: 6 }, { [W.Mp]: 2 }, { [W.share]: 16 }, { [W.ldo]: 3 }, { [W.hasBias]: 2 },
    { [W.q]: 8180 }, { [W.out]: 8190 }, { [W.s]: 737 }, { [W.xu]: 8120 }, { [W.hasBias]: 1, [W.bias]: 8190 }, { [W.N]: -4 },
    // extents past 2^64 bytes: refused (other checks refuse these too; the wrap the float-unit checks prevent needs operands near 4 GiB)
    { [W.M]: 0x7ffffff0, [W.Mp]: 0x7ffffff0, [W.ldo]: 0x7fffffff }, { [W.N]: 0x7fffffe0, [W.K]: 0x40000000, [W.gs]: 4, [W.Kp]: 0x40000000, [W.ldu]: 0x40000000, [W.ldo]: 0x7fffffe0 },
  ]) {
    slab(over);
    assert.throws(() => b.w8a8Slab(mem, 0, 1, 0), /w8a8Slab: parameter block or units out of range/, JSON.stringify(over));
    assert.ok(mem.subarray(192, 200).every((v) => v === -3), `${JSON.stringify(over)}: nothing written`);
  }
  slab();
  assert.throws(() => b.w8a8Slab(mem, 0, 2, 0), /out of range/, "shares past N");
  assert.throws(() => b.w8a8Slab(mem, 0, 1, 8192), /out of range/, "a block past the end");
  assert.throws(() => b.w8a8Slab(new Int8Array(8), 0, 1, 0), /expected a Float32Array/);
});

