// The AVX-512 attention forward of the native bridge (native/attention_avx512.c), run by the
// `attention` composite's cpu kernel for long-query calls (prefill, training forward) when the
// bridge's AVX-512 kernel runs float32 products (TORCHTS_CPU_BLAS=auto or avx512 on such a CPU).
// Its decode kernel (native/attention_decode_avx512.c) takes the short-query calls: at most 16
// query rows per kv head (nrep * L), one or two key segments (a KV cache read in place).
// Probability-output (backward) and paged calls, and every call elsewhere, stay on the wasm flash kernel.
import { blasBridge, bridgePoolFn } from "./blas.js";
import type { WasmRuntime } from "../wasm/runtime.js";

/** Int32 words of attnFwd's parameter block (offsets and strides in floats; scale is a float32). */
export const NATIVE_ATTN = {
  q: 0, k: 1, v: 2, out: 3, B: 4, Hk: 5, nrep: 6, L: 7, S: 8, E: 9, Ev: 10, qsb: 11, qsh: 12, qsl: 13,
  ksb: 14, ksh: 15, kss: 16, vsb: 17, vsh: 18, vss: 19, outRow: 20, causal: 21, hasMask: 22, mask: 23, msb: 24, msh: 25,
  msl: 26, scale: 27, words: 28,
} as const;
/** Query rows per work unit, and the shortest query length worth a unit (decode stays on wasm). */
export const NATIVE_ATTN_ROWS = 32;
export const NATIVE_ATTN_MIN_L = 16;
/** Largest head dim the kernel's scratch holds. */
export const NATIVE_ATTN_MAX_DIM = 1024;

/** Calls the native kernel took (tests check which path ran). */
export const nativeAttnStats = { calls: 0 };

/** The pool function running attnFwd on rt's memory, or null when the AVX-512 kernel is not in use. */
export function nativeAttentionFn(rt: WasmRuntime): number | null {
  const blas = blasBridge();
  return blas?.kernel === "avx512" ? bridgePoolFn(rt, blas.bridge, "attnFwd") : null;
}

/** Int32 words of attnDecode's parameter block (offsets and strides in floats; scale is a float32). */
export const NATIVE_ATTN_DEC = {
  q: 0, k: 1, v: 2, k2: 3, v2: 4, out: 5, B: 6, Hk: 7, nrep: 8, L: 9, S: 10, split: 11, E: 12, Ev: 13, qsb: 14, qsh: 15,
  qsl: 16, ksb: 17, ksh: 18, kss: 19, vsb: 20, vsh: 21, vss: 22, ksb2: 23, ksh2: 24, kss2: 25, vsb2: 26, vsh2: 27, vss2: 28,
  outRow: 29, causal: 30, hasMask: 31, mask: 32, msb: 33, msh: 34, msl: 35, scale: 36, words: 37,
} as const;
/** Most query rows per kv head (nrep * L) the decode kernel holds, and its largest head dim. */
export const NATIVE_ATTN_DEC_MAX_ROWS = 16;
export const NATIVE_ATTN_DEC_MAX_DIM = 1024;

/** Calls the native decode kernel took (tests check which path ran). */
export const nativeAttnDecStats = { calls: 0 };

/** The pool function running attnDecode on rt's memory, or null when the AVX-512 kernel is not in use. */
export function nativeAttentionDecodeFn(rt: WasmRuntime): number | null {
  const blas = blasBridge();
  return blas?.kernel === "avx512" && typeof blas.bridge.attnDecode === "function" ? bridgePoolFn(rt, blas.bridge, "attnDecode") : null;
}
