// Public surface of the wasm cpu kernels, for the cpu device and the fusion scheduler.
export { wasmRuntime, setCpuBackend, setNumThreads, getNumThreads, cpuInfo, type CpuInfo, type WasmRuntime } from "./runtime.js";
export { matmulBatchedF32, matmulF32 } from "./matmul.js";
export { unaryF32, affineTanhF32, softmaxRowsF32, sumRowsF32, copyRowsF32, addRowsF32, isWasmUnary, arenaF32 } from "./ops.js";
export { fmaPeak, productPeak } from "./probe.js";
