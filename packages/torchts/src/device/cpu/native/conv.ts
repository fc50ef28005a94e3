// The native bridge's im2col (native/im2col.c): with a native GEMM kernel in use, conv2d builds
// each image's im2col matrix with it on the pool's threads and multiplies on that GEMM
// (wasm/conv.ts), instead of gathering the input into the wasm GEMM's panels.
import { blasBridge, bridgePoolFn } from "./blas.js";
import type { WasmRuntime } from "../wasm/runtime.js";

/** Int32 words of im2col's parameter block (offsets in floats). */
export const IM2COL = {
  x: 0, Cg: 1, H: 2, W: 3, KH: 4, KW: 5, OH: 6, OW: 7, sh: 8, sw: 9, ph: 10, pw: 11, dh: 12, dw: 13, cols: 14, ldc: 15, words: 16,
} as const;
/** The largest im2col matrix (floats) built for one image; larger convolutions keep the wasm path. */
export const IM2COL_MAX = 1 << 24;

/** Convolutions the native path ran (tests check which path ran). */
export const nativeConvStats = { calls: 0 };

/** The pool function running im2col on rt's memory, or null when no native GEMM kernel is in use. */
export function nativeIm2colFn(rt: WasmRuntime): number | null {
  const blas = blasBridge();
  return blas ? bridgePoolFn(rt, blas.bridge, "im2col") : null;
}
