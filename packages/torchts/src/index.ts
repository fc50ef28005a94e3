// torchts: PyTorch for TypeScript. `import * as torch from "torchts"`.
import "./runtime/v8_tuning.js"; // first: before the sites it concerns allocate anything
import { registerDevice as _register } from "./device/plugin.js";
import { cpu as cpuDevice } from "./device/cpu/index.js";
import "./methods.js";
import "./ops/tensor_basics.js";

_register("cpu", cpuDevice);

export { Tensor, scope } from "./tensor.js";
export type { Scalar, TensorLike, NestedArray } from "./tensor.js";
export type { DType } from "./ir/dtype.js";
export { promoteTypes, getDefaultDtype, setDefaultDtype, numel, isTensor, device } from "./ops/utility.js";
export { registerDevice } from "./device/plugin.js";
export type { DevicePlugin, DeviceBuffer, Executable, KernelArg } from "./device/plugin.js";
export type { CompositeName } from "./ir/prims.js";
export type { IRGraph, IRNode, PrimName, PrimParams } from "./ir/prims.js";
export { withEagerMode } from "./runtime/mode.js";
export type { EagerMode } from "./runtime/mode.js";
export { noGrad, enableGrad, inferenceMode } from "./autograd/grad_mode.js";
// runtime switches as op-table entries (their arguments are checked like every op's)
export {
  setEagerMode, getEagerMode, setDetectAnomaly, isAnomalyEnabled, setGradEnabled, isGradEnabled, isInferenceMode, setCpuFallback,
  sync, keep, getDevice,
} from "./ops/runtime_controls.js";
export * from "./ops/creation.js";
export * from "./ops/math.js";
export * from "./ops/shape_ops.js";
export * from "./ops/reduce.js";
export * from "./ops/linalg.js";
export {
  Generator, manualSeed, seed, rand, randn, randLike, randnLike, randint, randperm, normal, bernoulli, multinomial,
  getRngState, setRngState, defaultGenerator,
} from "./ops/random.js";
export { var_ as var } from "./ops/reduce.js";
export { OutOfMemoryError } from "./runtime/errors.js";

import { cacheStats, resetCache } from "./runtime/cache.js";
import { compileStats, hostScalars, resetCompileStats } from "./compile/index.js";
import { memoryStats, resetPeakStats } from "./runtime/memory.js";
import { gradcheck } from "./autograd/gradcheck.js";

export const compiler = { cacheStats, resetCache, stats: compileStats, resetStats: resetCompileStats, hostScalars };
export { compile } from "./compile/index.js";
export type { CompileOptions, CompileStats } from "./compile/index.js";
export * as profiler from "./runtime/profiler_api.js";
export const memory = { stats: memoryStats, resetPeakStats };
export * as autograd from "./autograd/index.js";
export { gradcheck };
export const float32 = "float32" as const;
export const float = "float32" as const;
export const float64 = "float64" as const;
export const double = "float64" as const;
export const float16 = "float16" as const;
export const half = "float16" as const;
export const bfloat16 = "bfloat16" as const;
export const int64 = "int64" as const;
export const long = "int64" as const;
export const int32 = "int32" as const;
export const int = "int32" as const;
export const int8 = "int8" as const;
export const uint8 = "uint8" as const;
export const bool = "bool" as const;

// ---- op families and libraries above the core ----
import "./ops/indexing.js";
export * from "./ops/indexing.js";
export * as nn from "./nn/index.js";
export * as optim from "./optim/index.js";
export * as safetensors from "./io/safetensors.js";
import * as data from "./utils/data.js";
export const utils = { data };
export { torchSoftmax as softmax, torchLogSoftmax as logSoftmax } from "./nn/functional/activation.js";
export * as vision from "./vision/index.js";
export { save, load } from "./io/checkpoint.js";
export * as serialization from "./io/checkpoint.js";
export * as amp from "./amp/index.js";
export { autocast } from "./amp/autocast.js";
export * as webgpu from "./webgpu.js";
export * as backends from "./backends.js";
export * as distributed from "./distributed/index.js";
export { exportApi as export, onnx, litert } from "./export/index.js";
