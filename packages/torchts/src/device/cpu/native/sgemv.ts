// The native float32 product for few activation rows (native/sgemv_avx512.c), run by matmulF32 for
// x @ W^T with 1-16 rows of x when the bridge's AVX-512 GEMM runs float32 products
// (TORCHTS_CPU_BLAS=auto or avx512) and every operand is in the shared memory with rows contiguous
// in k: decode's linear layers. Why: the wasm kernel (wasm/gemv.ts) streams the weight once per 4
// rows with 128-bit vectors; the bench Llama's f32 decode at batch 8 read its weights at ~9 GB/s
// through it. Every output is one summation order
// whatever the row count or the thread split, so a sequence decoded alone or in a batch agrees.
import { blasBridge, bridgeBlock, bridgePoolFn } from "./blas.js";
import type { WasmRuntime } from "../wasm/runtime.js";

/** Int32 words of sgemv's parameter block (offsets in bytes, strides in floats). */
export const SGEMV = { x: 0, ldx: 1, M: 2, K: 3, w: 4, ldw: 5, out: 6, ldo: 7, N: 8, words: 9 } as const;

/**
 * The most rows of x the native kernel takes. 40 products x [M, 768] @ [2048, 768]^T (252 MB of
 * weights, 2 threads; bench/transformers/f32_gemv.ts, every path in one process, two runs), the
 * paths before it over this kernel: M 1 1.14x / 0.97x (memory-bound either way), 2 1.46 / 1.64,
 * 4 2.12 / 2.31, 8 2.40 / 2.73 (the wasm few-row kernel); 12 1.03 / 1.03, 16 1.44 / 1.24 (the
 * AVX-512 GEMM). Past 8 rows the kernel works on blocks of 8 weight rows so x's rows stay in L1.
 */
export const SGEMV_MAX_M = 16;
const MIN_MACS_PER_THREAD = 1 << 16;

/** Calls the native kernel took (tests check which path ran). */
export const nativeSgemvStats = { calls: 0 };

let enabled = true;
/**
 * Benchmark and test seam: false sends these products to the paths they took before this kernel
 * (the wasm few-row kernel, or the GEMM from 9 rows), so bench/transformers/f32_gemv.ts times both
 * in one process.
 */
export function setNativeSgemv(on: boolean): void {
  enabled = on;
}

/**
 * out[optr + (r*ldo + n)*4] = sum_k x[xptr + (r*ldx + k)*4] * w[wptr + (n*ldw + k)*4] for r < M,
 * n < N, on the AVX-512 kernel across the pool's threads. False (nothing run) where that kernel
 * does not run: no bridge, another kernel selected, or more than SGEMV_MAX_M rows.
 */
export function nativeSgemv(
  rt: WasmRuntime, M: number, K: number, N: number,
  xptr: number, ldx: number, wptr: number, ldw: number, optr: number, ldo: number,
): boolean {
  if (!enabled || M < 1 || M > SGEMV_MAX_M || K < 1 || N < 1) return false;
  const blas = blasBridge();
  if (blas?.kernel !== "avx512") return false;
  const fn = bridgePoolFn(rt, blas.bridge, "sgemv");
  const b = bridgeBlock(rt, "sgemv", SGEMV.words);
  const g = b.words;
  g[SGEMV.x] = xptr; g[SGEMV.ldx] = ldx; g[SGEMV.M] = M; g[SGEMV.K] = K; g[SGEMV.w] = wptr; g[SGEMV.ldw] = ldw;
  g[SGEMV.out] = optr; g[SGEMV.ldo] = ldo; g[SGEMV.N] = N;
  nativeSgemvStats.calls++;
  rt.pool.run(fn, N, [b.ptr], 1, Math.ceil(MIN_MACS_PER_THREAD / (K * M)));
  return true;
}
