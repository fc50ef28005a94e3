// The native weight-only int8 products of the bridge (native/qgemv_avx2.c, qgemv_avx512.c; one
// loop body, native/qgemv_rows.h), run by the linearInt8 composite's decode-sized calls (1-16 rows)
// when the bridge's own GEMM runs float32 products (TORCHTS_CPU_BLAS=auto, avx2 or avx512).
// Why: the wasm kernels (wasm/qgemv.ts) stream the weight once per 2 rows, these once per 4.
// - AVX2 (kernel 0, where the AVX2 GEMM is selected): 2-16 rows, 1.2-1.7x the wasm kernel on an
//   AVX2 EPYC; one row stays on wasm there (10-30% faster on that machine).
// - AVX-512 (kernel 1, where the AVX-512 GEMM is selected): 1-16 rows, 16 weights per step. On a
//   Zen 5 the wasm and AVX2 kernels were compute-bound at one row (25-31 GB/s on hot weights); this
//   one ran 2.1x the AVX2 kernel at one row and 1.7x at 8 (bench/transformers/int8_gemv.ts; the
//   bench Llama's int8 decode went from ~190 to 226-274 tok/s at batch 1 and from 380 to 556 at
//   batch 8, bench/RESULTS.md session 19).
import { blasBridge, bridgePoolFn } from "./blas.js";
import type { WasmRuntime } from "../wasm/runtime.js";

/** Int32 words of q8Gemv's parameter block (offsets in bytes, ldx and ldo in floats; kernel 0 AVX2, 1 AVX-512). */
export const QGEMV = { x: 0, ldx: 1, M: 2, K: 3, gs: 4, q: 5, s: 6, hasBias: 7, bias: 8, out: 9, ldo: 10, N: 11, kernel: 12, words: 13 } as const;

/** Calls the native kernel took (tests check which path ran). */
export const nativeQ8GemvStats = { calls: 0 };

/**
 * The pool function running q8Gemv on rt's memory and the kernel it runs (1: AVX-512, where the
 * bridge's AVX-512 GEMM is selected; 0: AVX2), or null where neither runs.
 */
export function nativeQ8GemvFn(rt: WasmRuntime): { fn: number; kernel: 0 | 1 } | null {
  const blas = blasBridge();
  if (blas?.kernel !== "avx2" && blas?.kernel !== "avx512") return null;
  return { fn: bridgePoolFn(rt, blas.bridge, "q8Gemv"), kernel: blas.kernel === "avx512" ? 1 : 0 };
}
