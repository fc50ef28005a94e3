// The native float32 product for few rows (src/device/cpu/native/sgemv.ts, native/sgemv_avx512.c):
// with the AVX-512 GEMM selected, x @ W^T of 1-16 rows with rows contiguous in k takes it (decode's
// linear layers); it matches a float64 reference and the wasm kernel (K below, at and past 16, 64
// and their multiples; odd N; one output column; row strides); each row's output has the same bits
// whatever the other rows and the thread count (a sequence decoded alone or in a batch); other
// layouts, 17 rows and other GEMM choices keep the old paths; a NaN stays in its row; strict, fused
// and compiled agree; and the bridge refuses wrong parameter blocks without writing. Skipped where
// the CPU has no AVX-512 (the kernel does not exist there; gemv.test.ts covers the wasm kernel).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { SGEMV, SGEMV_MAX_M, nativeSgemvStats, setNativeSgemv } from "../../../src/device/cpu/native/sgemv.js";
import { addon, hasKernel } from "./addon.js";

const avx512 = hasKernel("avx512");

/** f(), its output's values and how many native calls it made, under GEMM choice `blas`. */
async function run(blas: "avx512" | "avx2" | "openblas" | "off", f: () => Tensor): Promise<[Float32Array, number]> {
  setCpuBlas(blas);
  try {
    const c0 = nativeSgemvStats.calls;
    const out = (await f().data()) as Float32Array;
    return [out, nativeSgemvStats.calls - c0];
  } finally {
    setCpuBlas("auto");
  }
}

async function f64Linear(x: Tensor, w: Tensor): Promise<Float64Array> {
  const [M, K] = x.shape as [number, number], N = w.shape[0]!;
  const xh = (await x.contiguous().data()) as Float32Array, wh = (await w.contiguous().data()) as Float32Array;
  const r = new Float64Array(M * N);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += xh[i * K + k]! * wh[j * K + k]!;
      r[i * N + j] = s;
    }
  return r;
}

test("native sgemv: decode-sized linear calls take it and match float64 and the wasm kernel", { skip: !avx512 }, async () => {
  assert.equal(SGEMV_MAX_M, 16);
  torch.manualSeed(31);
  // K: under one vector, a vector and a tail, the 64-float step and the 16s after it, large
  for (const K of [5, 16, 23, 64, 80, 117, 200, 768])
    for (const N of [1, 7, 66])
      for (const M of [1, 2, 3, 4, 5, 8, 9, 14, 16]) {
        if (M * N * K < 4096) continue; // smaller products run on plain JS loops (kernels.ts)
        const x = torch.randn(M, K).mul(2), w = torch.randn(N, K);
        const what = `M ${M} K ${K} N ${N}`;
        const [nat, calls] = await run("avx512", () => torch.nn.functional.linear(x, w));
        assert.equal(calls, 1, `${what}: the native kernel ran`);
        const [wasm, wcalls] = await run("off", () => torch.nn.functional.linear(x, w));
        assert.equal(wcalls, 0, `${what}: the wasm kernel ran`);
        const r = await f64Linear(x, w);
        for (let i = 0; i < r.length; i++) {
          const tol = 2e-6 * Math.sqrt(K) * (1 + Math.abs(r[i]!));
          assert.ok(Math.abs(nat[i]! - r[i]!) <= tol, `${what} [${i}]: ${nat[i]} vs float64 ${r[i]}`);
          assert.ok(Math.abs(nat[i]! - wasm[i]!) <= tol, `${what} [${i}]: ${nat[i]} vs wasm ${wasm[i]}`);
        }
      }
});

test("native sgemv: a row's output has the same bits alone, in any batch, at 1 and 2 threads", { skip: !avx512 }, async () => {
  torch.manualSeed(32);
  const K = 200, N = 301;
  // 16 rows run in blocks of weight rows, up to 8 one weight row at a time: the same sums
  const x = torch.randn(16, K), w = torch.randn(N, K);
  const [all] = await run("avx512", () => torch.nn.functional.linear(x, w));
  for (const [start, rows] of [[0, 1], [3, 1], [15, 1], [2, 3], [4, 4], [1, 6], [8, 8], [5, 11]] as const) {
    const [part, calls] = await run("avx512", () => torch.nn.functional.linear(x.narrow(0, start, rows).contiguous(), w));
    assert.equal(calls, 1);
    assert.deepEqual(part, all.subarray(start * N, (start + rows) * N), `rows ${start}..${start + rows}`);
  }
  const before = torch.backends.cpu.getNumThreads();
  try {
    torch.backends.cpu.setNumThreads(1);
    const [one] = await run("avx512", () => torch.nn.functional.linear(x, w));
    assert.deepEqual(one, all, "1 thread");
  } finally {
    torch.backends.cpu.setNumThreads(before);
  }
  // a row stride past K (rows of a wider buffer) and 3-d input give the same sums
  const wide = torch.randn(16, K + 24);
  const [strided, c1] = await run("avx512", () => torch.nn.functional.linear(wide.narrow(1, 8, K), w));
  const [dense] = await run("avx512", () => torch.nn.functional.linear(wide.narrow(1, 8, K).contiguous(), w));
  assert.equal(c1, 1, "rows at a stride past K take the kernel");
  assert.deepEqual(strided, dense);
  const [three] = await run("avx512", () => torch.nn.functional.linear(x.reshape([2, 8, K]), w));
  assert.deepEqual(three, all);
});

test("native sgemv: other layouts, 17 rows and other GEMM choices keep their paths; a NaN stays in its row", { skip: !avx512 }, async () => {
  torch.manualSeed(33);
  const x = torch.randn(4, 96), w = torch.randn(40, 96);
  for (const m of ["off", "openblas", "avx2"] as const) assert.equal((await run(m, () => torch.nn.functional.linear(x, w)))[1], 0, `blas ${m}`);
  assert.equal((await run("avx512", () => torch.nn.functional.linear(torch.randn(17, 96), w)))[1], 0, "17 rows: the GEMM");
  setNativeSgemv(false); // the benchmark's switch: the path before the kernel
  try {
    assert.equal((await run("avx512", () => torch.nn.functional.linear(x, w)))[1], 0, "switched off");
  } finally {
    setNativeSgemv(true);
  }
  assert.equal((await run("avx512", () => torch.matmul(x, w.t().contiguous())))[1], 0, "x @ B (B rows along n): the wasm gemv");
  assert.equal((await run("avx512", () => torch.nn.functional.linear(torch.randn(96, 4).t(), w)))[1], 0, "x's columns contiguous: not in place");
  const xh = (await x.data()) as Float32Array;
  xh[96 + 17] = NaN;
  const [nan, calls] = await run("avx512", () => torch.nn.functional.linear(torch.tensor(Array.from(xh)).reshape([4, 96]), w));
  assert.equal(calls, 1);
  for (let n = 0; n < 40; n++) {
    for (const r of [0, 2, 3]) assert.ok(Number.isFinite(nan[r * 40 + n]!), `row ${r} stays finite`);
    assert.ok(Number.isNaN(nan[40 + n]!), "the NaN row is NaN");
  }
});

test("native sgemv: strict, fused and compiled agree", { skip: !avx512 }, async () => {
  torch.manualSeed(34);
  const x = torch.randn(3, 130), w = torch.randn(70, 130), b = torch.randn(70);
  const f = (t: Tensor) => torch.nn.functional.linear(t.mul(2), w, b).relu();
  setCpuBlas("avx512");
  try {
    const c0 = nativeSgemvStats.calls;
    const outs: Float32Array[] = [];
    for (const mode of ["strict", "fused"] as const) outs.push((await torch.withEagerMode(mode, () => f(x)).data()) as Float32Array);
    outs.push((await torch.compile(f)(x).data()) as Float32Array);
    assert.ok(nativeSgemvStats.calls - c0 >= 3, "every mode took the native kernel");
    assert.deepEqual(outs[1], outs[0], "fused");
    assert.deepEqual(outs[2], outs[0], "compiled");
  } finally {
    setCpuBlas("auto");
  }
});

test("native sgemv: the bridge refuses wrong parameter blocks without writing", { skip: !avx512 }, () => {
  const b = addon!;
  const mem = new Float32Array(1024);
  const P = new Int32Array(mem.buffer);
  // x [2, 16] at byte 256, w [3, 16] at 512, out [2, 3] at 768
  const G = SGEMV;
  const block = (over: Record<number, number> = {}) => {
    P.fill(0, 0, 64);
    const v: number[] = [];
    v[G.x] = 256; v[G.ldx] = 16; v[G.M] = 2; v[G.K] = 16; v[G.w] = 512; v[G.ldw] = 16; v[G.out] = 768; v[G.ldo] = 3; v[G.N] = 3;
    P.set(v);
    for (const [i, x] of Object.entries(over)) P[Number(i)] = x;
    mem.fill(0.5, 64, 96);
    mem.fill(0.25, 128, 176);
    mem.fill(-7, 192, 198);
  };
  block();
  b.sgemv(mem, 0, 3, 0);
  assert.deepEqual([...mem.subarray(192, 198)], new Array(6).fill(16 * 0.5 * 0.25), "16 x 0.5 x 0.25");
  for (const over of <Record<number, number>[]>[
    { [G.K]: 0 }, { [G.ldx]: 8 }, { [G.ldw]: 15 }, { [G.ldo]: 2 }, { [G.x]: 4090 }, { [G.w]: 4090 }, { [G.out]: 4090 },
    { [G.x]: 258 }, { [G.w]: 514 }, { [G.out]: 770 }, { [G.M]: -1 }, { [G.M]: 0 }, { [G.N]: 0 }, { [G.K]: 1 << 30 },
    { [G.M]: 0x7fffffff, [G.ldx]: 0x7fffffff }, { [G.N]: 0x7fffffff, [G.ldw]: 0x7fffffff }, // extents past 2^64 bytes: refused (other checks refuse these too; the wrap the float-unit checks prevent needs operands near 4 GiB)
  ]) {
    block(over);
    assert.throws(() => b.sgemv(mem, 0, 1, 0), /sgemv: parameter block or rows out of range/, JSON.stringify(over));
    assert.ok(mem.subarray(192, 198).every((v) => v === -7), `${JSON.stringify(over)}: nothing written`);
  }
  block();
  assert.throws(() => b.sgemv(mem, 0, 4, 0), /out of range/, "rows past N");
  assert.throws(() => b.sgemv(mem, 2, 2, 0), /out of range/, "no rows");
  assert.throws(() => b.sgemv(mem, -1, 1, 0), /out of range/, "negative start");
  assert.throws(() => b.sgemv(mem, 0, 1, 4094), /out of range/, "block past the memory");
  assert.throws(() => b.sgemv(mem, 0, 1), /expected \(memory, lo, hi, block\)/);
  assert.ok(mem.subarray(192, 198).every((v) => v === -7), "nothing written");
});
