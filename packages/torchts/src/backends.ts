// torch.backends: which cpu kernels run (wasm SIMD on worker threads, or the plain-JS fallback).
// TORCHTS_CPU_BACKEND=js|wasm|auto selects at startup; TORCHTS_NUM_THREADS sets the thread count.
import { setCompositeEnabled } from "./device/cpu/composites.js";
import { cpuInfo, getNumThreads, setCpuBackend, setNumThreads, type CpuInfo } from "./device/cpu/wasm/index.js";

export const cpu = {
  /** What the cpu device runs on: backend, SIMD/relaxed SIMD, threads, and why JS when it is. */
  info: (): CpuInfo => cpuInfo(),
  /** Kernels compiled after this call use the given backend (already-cached kernels keep theirs). */
  setBackend: (b: "js" | "wasm" | "auto"): void => setCpuBackend(b),
  setNumThreads,
  getNumThreads,
  /** Switch the cpu's own kernels for a composite (softmax, attention, ...) off to run its decomposition. */
  setCompositeEnabled,
};
export type { CpuInfo };
