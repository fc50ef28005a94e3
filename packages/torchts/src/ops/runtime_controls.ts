// The runtime controls torch exports (eager mode, anomaly detection, grad mode, cpu fallback,
// sync, keep, getDevice) as entries of the op table, so their arguments are bound and checked
// like every op's. They run outside any op's scope (transparent): they are switches, not
// computations. (Functions that take a callback or do file I/O — noGrad, scope, compile,
// save/load... — are listed as non-ops in test/ops/table.test.ts.)
import { getDevice as getDevicePlugin } from "../device/plugin.js";
import { setCpuFallback as setFallback } from "../device/webgpu/fallback.js";
import { isGradEnabled as gradOn, isInferenceMode as inferenceOn, setGradEnabled as setGrad } from "../autograd/grad_mode.js";
import { flushAll } from "../runtime/dispatch.js";
import { getEagerMode as getMode, isAnomalyEnabled as anomalyOn, setDetectAnomaly as setAnomaly, setEagerMode as setMode, type EagerMode } from "../runtime/mode.js";
import { keep as keepTensor, type Tensor } from "../tensor.js";
import { op, type Sig } from "./registry.js";

const T = { transparent: true };
export const setEagerMode = op<Sig<[mode: EagerMode], { mode?: EagerMode }, void>>(
  "setEagerMode(str{debug,strict,fused} mode) -> ()",
  (m: EagerMode) => setMode(m),
  T,
);
export const getEagerMode = op<() => EagerMode>("getEagerMode() -> str", () => getMode(), T);
export const setDetectAnomaly = op<Sig<[mode: boolean], { mode?: boolean }, void>>("setDetectAnomaly(bool mode) -> ()", (on: boolean) => setAnomaly(on), T);
export const isAnomalyEnabled = op<() => boolean>("isAnomalyEnabled() -> bool", () => anomalyOn(), T);
export const setGradEnabled = op<Sig<[mode: boolean], { mode?: boolean }, void>>("setGradEnabled(bool mode) -> ()", (on: boolean) => setGrad(on), T);
export const isGradEnabled = op<() => boolean>("isGradEnabled() -> bool", () => gradOn(), T);
export const isInferenceMode = op<() => boolean>("isInferenceMode() -> bool", () => inferenceOn(), T);
export const setCpuFallback = op<Sig<[enabled: boolean], { enabled?: boolean }, void>>(
  "setCpuFallback(bool enabled) -> ()",
  (on: boolean) => setFallback(on),
  T,
);
/** torch.sync(): run all pending (fused-mode) work. */
export const sync = op<() => void>("sync() -> ()", () => flushAll(), T);
export const keep = op<<X extends Tensor>(t: X) => X>("keep(Tensor t) -> Tensor", (t: Tensor) => keepTensor(t), T);
export const getDevice = op<Sig<[name: string], { name?: string }, ReturnType<typeof getDevicePlugin>>>(
  "getDevice(str name) -> Any",
  (name: string) => getDevicePlugin(name),
  T,
);
