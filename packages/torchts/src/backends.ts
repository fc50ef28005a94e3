// torch.backends: which cpu kernels run (wasm SIMD on worker threads, or the plain-JS fallback).
// TORCHTS_CPU_BACKEND=js|wasm|auto selects at startup; TORCHTS_NUM_THREADS sets the thread count;
// TORCHTS_CPU_BLAS=auto|avx512|openblas|off picks the native GEMM (torchts' AVX-512 kernel or
// OpenBLAS) or the wasm GEMM for float32 products on Node.
import { setCompositeEnabled } from "./device/cpu/composites.js";
import { cpuInfo, getNumThreads, setCpuBackend, setNumThreads, type CpuInfo } from "./device/cpu/wasm/index.js";
import { setCpuBlas } from "./device/cpu/native/blas.js";

export const cpu = {
  /** What the cpu device runs on: backend, SIMD/relaxed SIMD, threads, and why JS when it is. */
  info: (): CpuInfo => cpuInfo(),
  /** Kernels compiled after this call use the given backend (already-cached kernels keep theirs). */
  setBackend: (b: "js" | "wasm" | "auto"): void => setCpuBackend(b),
  /**
   * Who runs float32 products on Node, through the native bridge: torchts' AVX-512 kernel
   * ("avx512") or AVX2 kernel ("avx2"), the system's OpenBLAS ("openblas"), the best of them the
   * CPU runs ("auto": AVX-512, else AVX2, else OpenBLAS), or the wasm GEMM ("off"). Naming a kernel requires it (throws, keeping the previous choice,
   * where it cannot run). TORCHTS_CPU_BLAS selects at startup.
   */
  setBlas: (b: "auto" | "avx512" | "avx2" | "openblas" | "off"): void => setCpuBlas(b),
  setNumThreads,
  getNumThreads,
  /** Switch the cpu's own kernels for a composite (softmax, attention, ...) off to run its decomposition. */
  setCompositeEnabled,
};
export type { CpuInfo };
