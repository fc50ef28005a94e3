// Samples for Tensor's own methods (src/ops/tensor_basics.ts).
import type { OpInfos } from "./types.js";

export const OPINFO: OpInfos = {
  "Tensor.dim": (mk) => [{ self: mk.randn([2, 3]) }],
  "Tensor.ndimension": (mk) => [{ self: mk.randn([2, 3, 1]) }],
  "Tensor.size": (mk) => [{ self: mk.randn([2, 3]) }, { self: mk.randn([2, 3]), dim: -1 }],
  "Tensor.stride": (mk) => [{ self: mk.randn([2, 3]), dim: 0 }, { self: mk.randn([4]) }],
  "Tensor.numel": (mk) => [{ self: mk.randn([2, 3]) }],
  "Tensor.nelement": (mk) => [{ self: mk.randn([3]) }],
  "Tensor.storageOffset": (mk) => [{ self: mk.randn([2, 3]) }],
  "Tensor.isContiguous": (mk) => [{ self: mk.randn([2, 3]) }, { self: mk.randn([2, 3]), memoryFormat: "contiguous_format" }],
  "Tensor.requiresGrad_": (mk) => [{ self: mk.randn([2]) }, { self: mk.randn([2]), requiresGrad: false }],
  "Tensor.retainGrad": (mk) => [{ self: mk.randn([2], { requiresGrad: true }).mul(2) }],
  "Tensor.registerHook": (mk) => [{ self: mk.randn([2], { requiresGrad: true }), hook: (g: unknown) => g }],
  "Tensor.registerPostAccumulateGradHook": (mk) => [{ self: mk.randn([2], { requiresGrad: true }), hook: () => {} }],
  "Tensor.data": (mk) => [{ self: mk.randn([2, 2]) }],
  "Tensor.tolist": (mk) => [{ self: mk.randn([2, 2]) }],
  "Tensor.item": (mk) => [{ self: mk.randn([1]) }],
  "Tensor.dispose": (mk) => [{ self: mk.randn([2]) }],
  "Tensor.backward": (mk) => [
    { self: mk.randn([3], { requiresGrad: true }).pow(2).sum() },
    { self: mk.randn([3], { requiresGrad: true }).mul(3), gradient: mk.randn([3]), retainGraph: true, createGraph: false },
  ],
};

/** The runtime switches (src/ops/runtime_controls.ts): the fuzzer restores the global state after each op. */
export const RUNTIME_OPINFO: OpInfos = {
  setEagerMode: () => [{ mode: "strict" }],
  getEagerMode: () => [{}],
  setDetectAnomaly: () => [{ mode: false }],
  isAnomalyEnabled: () => [{}],
  setGradEnabled: () => [{ mode: true }],
  isGradEnabled: () => [{}],
  isInferenceMode: () => [{}],
  setCpuFallback: () => [{ enabled: false }],
  sync: () => [{}],
  keep: (mk) => [{ t: mk.randn([2]) }],
  getDevice: () => [{ name: "cpu" }],
};
Object.assign(OPINFO, RUNTIME_OPINFO);
