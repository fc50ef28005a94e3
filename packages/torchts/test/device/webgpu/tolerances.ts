// The golden tolerance table as webgpu applies it, and the cases the documented int64/float64
// policy makes raise. Every entry names its reason.
import { DEFAULT_TOL, tolFor, type Tol } from "../../golden/tolerances.js";

/** float64 is demoted to float32 on webgpu (WGSL has no f64): float64 results get float32's tolerance. */
const F64_DEMOTED: Tol = DEFAULT_TOL;

/** Cases that raise on webgpu by design, with the error they must raise. */
export const WEBGPU_RAISES: Record<string, { error: RegExp; reason: string }> = {
  cast__int_to_float: {
    error: /does not fit the device's 32-bit integer storage for int64/,
    reason: "int64 policy: the input holds 2^40+1, beyond the int32 storage of int64 on webgpu",
  },
  adv_index__bool: {
    error: /cannot be read synchronously|reads a tensor value on the host/,
    reason: "a boolean mask index has a data-dependent shape: it needs a synchronous host read, which webgpu cannot do",
  },
  adv_index__bool_rows: {
    error: /cannot be read synchronously|reads a tensor value on the host/,
    reason: "a boolean mask index has a data-dependent shape: it needs a synchronous host read, which webgpu cannot do",
  },
};

export function webgpuTol(name: string, kind: "out" | "grad", dtype: string): Tol {
  const base = tolFor(name, kind);
  if (dtype === "float64") return { rtol: Math.max(base.rtol, F64_DEMOTED.rtol), atol: Math.max(base.atol, F64_DEMOTED.atol) };
  return base;
}
