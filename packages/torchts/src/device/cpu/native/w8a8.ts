// The AVX-512 VNNI int8 GEMM of the native bridge (native/w8a8_avx512.c), run by the
// linearW8A8 composite's many-row (prefill) calls when the bridge's AVX-512 kernel runs float32
// products and the CPU has VNNI. It computes the one-row (decode) kernel's formula with the same
// integers and float32 steps, so a prompt's rows equal what one-row calls give, bit for bit.
import { blasBridge, bridgePoolFn } from "./blas.js";
import type { WasmRuntime } from "../wasm/runtime.js";

/** Int32 words of q8Rows' parameter block (offsets in bytes, ldx in floats, ldu in bytes). */
export const Q8_ROWS = { x: 0, ldx: 1, K: 2, xu: 3, ldu: 4, Kp: 5, sx: 6, M: 7, words: 8 } as const;
/** Int32 words of w8a8Slab's parameter block (offsets in bytes, ldu in bytes, ldo in floats). */
export const W8A8_SLAB = {
  xu: 0, ldu: 1, Kp: 2, M: 3, Mp: 4, N: 5, K: 6, gs: 7, q: 8, s: 9, hasBias: 10, bias: 11, out: 12, ldo: 13, sx: 14,
  share: 15, words: 16,
} as const;
/** Rows of the register tile (the quantized rows are padded to a multiple) and the largest group. */
export const W8A8_MR = 12;
export const W8A8_MAX_GROUP = 65536;

/** Calls the native kernel took (tests check which path ran). */
export const nativeW8A8Stats = { calls: 0 };

/** The pool functions (row quantization, column shares) on rt's memory, or null where they do not run. */
export function nativeW8A8Fns(rt: WasmRuntime): { q8: number; slab: number } | null {
  const blas = blasBridge();
  if (blas?.kernel !== "avx512" || !blas.vnni) return null;
  return { q8: bridgePoolFn(rt, blas.bridge, "q8Rows"), slab: bridgePoolFn(rt, blas.bridge, "w8a8Slab") };
}
