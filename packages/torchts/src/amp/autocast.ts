// torch.autocast: inside the region, matmul/linear/conv (PyTorch's "lower precision" op list)
// cast their floating inputs to the autocast dtype, so they run and return in bfloat16/float16,
// while parameters stay float32 and receive float32 gradients (the cast is differentiable).
// Every other op runs in its inputs' dtype, as PyTorch's autocast does for unlisted ops.
// Defaults follow PyTorch: bfloat16 on cpu, float16 on accelerators.
import type { DType } from "../ir/dtype.js";
import { isFloating } from "../ir/dtype.js";
import type { Tensor } from "../tensor.js";
import * as S from "../ops/shape_ops.js";

interface Region {
  deviceType: string;
  dtype: DType;
  enabled: boolean;
}

// Innermost region last; a region applies to tensors on its device type.
const regions: Region[] = [];

export interface AutocastOpts {
  dtype?: DType;
  enabled?: boolean;
  /** Accepted for PyTorch compatibility; torchts keeps no weight-cast cache. */
  cacheEnabled?: boolean;
}

function deviceTypeOf(device: string): string {
  const i = device.indexOf(":");
  return i < 0 ? device : device.slice(0, i);
}

/**
 * Run `fn` with autocast enabled for `deviceType` ("cpu", "webgpu", ...). Works with async
 * functions: the region ends when the returned promise settles (do not interleave other
 * autocast-sensitive work on the same thread meanwhile).
 */
export function autocast<T>(deviceType: string, fn: () => T, opts: AutocastOpts = {}): T {
  const dtype = opts.dtype ?? (deviceType === "cpu" ? "bfloat16" : "float16");
  if (dtype !== "bfloat16" && dtype !== "float16" && dtype !== "float32")
    throw new TypeError(`autocast: unsupported dtype ${dtype}; autocast supports bfloat16 and float16`);
  const region: Region = { deviceType: deviceTypeOf(deviceType), dtype, enabled: opts.enabled ?? true };
  regions.push(region);
  const end = () => {
    const i = regions.lastIndexOf(region);
    if (i >= 0) regions.splice(i, 1);
  };
  let async = false;
  try {
    const r = fn();
    if (r instanceof Promise) {
      async = true;
      return r.finally(end) as T;
    }
    return r;
  } finally {
    if (!async) end();
  }
}

/** The autocast dtype in effect for tensors on `device`, or null. */
export function getAutocastDtype(device: string): DType | null {
  const dt = deviceTypeOf(device);
  for (let i = regions.length - 1; i >= 0; i--) {
    const r = regions[i]!;
    if (r.deviceType === dt) return r.enabled ? r.dtype : null;
  }
  return null;
}

export function isAutocastEnabled(deviceType = "cpu"): boolean {
  return getAutocastDtype(deviceType) !== null;
}

/**
 * The hook matmul/linear/conv call first: the inputs cast to the autocast dtype when a region
 * is active for their device (non-floating tensors and null pass through).
 */
export function autocastInputs<T extends (Tensor | null | undefined)[]>(...ts: T): T {
  if (regions.length === 0) return ts;
  const first = ts.find((t) => t) as Tensor | undefined;
  if (!first) return ts;
  const dtype = getAutocastDtype(first.device);
  if (!dtype) return ts;
  return ts.map((t) => (t && isFloating(t.dtype) && t.dtype !== dtype ? S.to(t, dtype) : t)) as T;
}
