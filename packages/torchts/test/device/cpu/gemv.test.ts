// The skinny float32 kernels (M <= 8 activation rows, weight streamed in place from the shared
// memory) against float64 references: both layouts (x @ W^T, x @ B), odd K and N, offsets and row
// strides, 1 and 2 threads; operands outside the shared memory are declined (the GEMM runs them).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { arenaF32, getNumThreads, setNumThreads } from "../../../src/device/cpu/wasm/index.js";
import { gemvF32 } from "../../../src/device/cpu/wasm/gemv.js";

const on = process.env.TORCHTS_CPU_BACKEND !== "js";

function rnd(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = (s / 4294967296) * 2 - 1;
  }
  return a;
}

function inArena(src: Float32Array): { data: Float32Array; release(): void } {
  const a = arenaF32(src.length)!;
  a.data.set(src);
  return a;
}

const SHAPES: [number, number, number][] = [
  [1, 1, 1], [1, 7, 5], [1, 1, 9], [2, 9, 1], [3, 33, 17], [4, 64, 9], [5, 13, 70], [6, 100, 31], [7, 5, 3], [8, 257, 45],
];

test("gemv matches float64: x @ W^T and x @ B, M = 1..8, odd K/N, offsets, 1 and 2 threads", { skip: !on }, () => {
  const before = getNumThreads();
  try {
    for (const threads of [1, 2]) {
      setNumThreads(threads);
      for (const [M, K, N] of SHAPES)
        for (const trans of [true, false]) {
          const lda = K + 2; // a row stride wider than K
          const Ah = rnd(M * lda + 3, M * 31 + K), Bh = rnd(K * N + 5, N * 7 + K);
          const A = inArena(Ah), B = inArena(Bh), O = inArena(new Float32Array(M * N + 2).fill(7));
          const [sbk, sbn] = trans ? [1, K] : [N, 1];
          try {
            assert.ok(gemvF32(M, K, N, A.data, 3, lda, 1, B.data, 5, sbk, sbn, O.data, 1), `${M}x${K}x${N} declined`);
            for (let i = 0; i < M; i++)
              for (let j = 0; j < N; j++) {
                let s = 0;
                for (let k = 0; k < K; k++) s += Ah[3 + i * lda + k]! * Bh[5 + k * sbk + j * sbn]!;
                const got = O.data[1 + i * N + j]!;
                assert.ok(Math.abs(got - s) <= 1e-5 * Math.sqrt(K) + 1e-6, `${M}x${K}x${N} trans=${trans} t${threads} [${i},${j}] ${got} vs ${s}`);
              }
            assert.equal(O.data[0], 7);
            assert.equal(O.data[M * N + 1], 7);
          } finally {
            A.release();
            B.release();
            O.release();
          }
        }
    }
  } finally {
    setNumThreads(before);
  }
});

test("gemv stages strided activations and plain outputs; declines B outside the shared memory or M > 8", { skip: !on }, () => {
  const [M, K, N] = [3, 19, 11];
  const Ah = rnd(K * M, 5), Bh = rnd(N * K, 6);
  const B = inArena(Bh);
  try {
    const out = new Float32Array(M * N);
    // A read transposed (sak = M) from a plain array, output to a plain array
    assert.ok(gemvF32(M, K, N, Ah, 0, 1, M, B.data, 0, 1, K, out, 0));
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += Ah[k * M + i]! * Bh[j * K + k]!;
        assert.ok(Math.abs(out[i * N + j]! - s) <= 1e-5, `[${i},${j}]`);
      }
    assert.equal(gemvF32(M, K, N, Ah, 0, 1, M, Bh, 0, 1, K, out, 0), false); // B not in the shared memory
    assert.equal(gemvF32(9, 1, N, Ah, 0, 1, 1, B.data, 0, 1, 1, new Float32Array(9 * N), 0), false);
    assert.equal(gemvF32(M, K, N, Ah, 0, 1, M, B.data, 0, 2, 2 * K, out, 0), false); // neither layout
  } finally {
    B.release();
  }
});

test("linear and matmul with few rows (decode shapes) match float64 through the op library", { skip: !on }, async () => {
  torch.manualSeed(3);
  for (const [M, K, N] of [[1, 768, 300], [4, 130, 257], [8, 64, 1000]] as const) {
    const x = torch.randn(M, K), w = torch.randn(N, K), b = torch.randn(N);
    const y = (await torch.nn.functional.linear(x, w, b).data()) as Float32Array;
    const y2 = (await torch.matmul(x, w.t().contiguous()).data()) as Float32Array; // x @ B layout
    const [xh, wh, bh] = [(await x.data()) as Float32Array, (await w.data()) as Float32Array, (await b.data()) as Float32Array];
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += xh[i * K + k]! * wh[j * K + k]!;
        const tol = 1e-5 * Math.sqrt(K);
        assert.ok(Math.abs(y[i * N + j]! - (s + bh[j]!)) <= tol, `linear ${M}x${K}x${N} [${i},${j}]`);
        assert.ok(Math.abs(y2[i * N + j]! - s) <= tol, `matmul ${M}x${K}x${N} [${i},${j}]`);
      }
  }
});
