// The AVX2 weight-only int8 product of the native bridge (native/qgemv_avx2.c), run by the
// linearInt8 composite's calls of 2-16 rows (batched decode, short prompts) when the bridge's own
// GEMM (AVX2 or AVX-512: those CPUs have AVX2 too) runs float32 products (TORCHTS_CPU_BLAS=auto,
// avx2 or avx512). Why: the wasm kernels (wasm/qgemv.ts) stream the weight once per 2 rows; this
// one once per 4, and ran 2-8 rows 1.2-1.7x faster on an AVX2 EPYC and 1.8-2.8x on an AVX-512
// Zen 5 (bench/transformers/int8_gemv.ts; the bench Llama's int8 decode at batch 8 went from 236
// to 380 tok/s there, bench/RESULTS.md session 18). One row stays on wasm (10-30% faster on the
// AVX2 EPYC, within 5% either way on the Zen 5).
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
