// Shared argument handling for torch.nn.functional: int-tuple expansion, loss reduction (with
// PyTorch's legacy size_average/reduce), dtype checks, host checks of class targets, the
// in-place form of the activations, sliding windows and small constant tensors built on the
// host (static shapes only). Nothing here is public: torch.nn.functional exports only the ops.
// Messages carry no op name: the op (registry.ts) prefixes what escapes it with its own.
import { isFloating, type DType } from "../../ir/dtype.js";
import { sameShape, shapeStr } from "../../ir/shape.js";
import type { Tensor } from "../../tensor.js";
import { fromHostData } from "../../ops/core.js";
import { isGradEnabled } from "../../autograd/grad_mode.js";
import { inplaceSet } from "../../ops/inplace.js";
import { _hostValues } from "../../ops/indexing.js";
import { OutOfMemoryError } from "../../runtime/errors.js";
import * as M from "../../ops/math.js";
import * as R from "../../ops/reduce.js";
import * as S from "../../ops/shape_ops.js";

export type Reduction = "none" | "mean" | "sum";
export type IntOrTuple = number | readonly number[];

/** Expand `[k]` or `[k1, k2]` (already a list: the binder wraps a single int) to n values. */
export function ntuple(v: IntOrTuple, n: number, name: string): number[] {
  if (typeof v === "number") return new Array<number>(n).fill(v);
  if (v.length === 1) return new Array<number>(n).fill(v[0]!);
  if (v.length !== n)
    throw new RangeError(
      `expected ${name} to be a single integer value or a list of ${n} values to match the convolution dimensions, but got ${name}=[${v.join(", ")}]`,
    );
  return [...v];
}

/**
 * The reduction a loss applies: PyTorch's deprecated size_average / reduce win when either is
 * given (_Reduction.legacy_get_string); otherwise `reduction`, which must be mean, sum or none.
 */
export function lossReduction(sizeAverage: boolean | null, reduce: boolean | null, reduction: string, extra: readonly string[] = []): string {
  if (sizeAverage !== null || reduce !== null) {
    const sa = sizeAverage ?? true;
    const rd = reduce ?? true;
    return sa && rd ? "mean" : rd ? "sum" : "none";
  }
  if (reduction !== "mean" && reduction !== "sum" && reduction !== "none" && !extra.includes(reduction))
    throw new RangeError(`${reduction} is not a valid value for reduction`);
  return reduction;
}

export function reduceLoss(loss: Tensor, reduction: string): Tensor {
  if (reduction === "none") return loss;
  if (reduction === "mean") return R.mean(loss);
  return R.sum(loss);
}

export function requireFloat(x: Tensor, what = "input"): void {
  if (!isFloating(x.dtype))
    throw new TypeError(`expected ${what} to have a floating point dtype, but got ${x.dtype} (shape ${shapeStr(x.shape)})`);
}

export function requireIndex(t: Tensor, what = "target"): void {
  if (t.dtype !== "int64" && t.dtype !== "int32" && t.dtype !== "uint8" && t.dtype !== "int8")
    throw new TypeError(`expected ${what} to have an integer dtype (int64), but got ${t.dtype} (shape ${shapeStr(t.shape)})`);
}

/**
 * The values of `t` read on the host, or null where that is not cheap and synchronous: a device
 * without synchronous reads (webgpu: a read would stall the queue, and callers skip the check
 * there as PyTorch's CUDA kernels assert asynchronously) or while torch.compile traces (the
 * replay would not repeat the check, and the read would end the trace). The one reader the
 * index checks of ops/indexing.ts use too.
 */
export const hostValues = _hostValues;

/** PyTorch's nll_loss check: every target is a class in [0, C) or ignoreIndex (an IndexError). */
export function checkClassTargets(target: Tensor, C: number, ignoreIndex: number): void {
  const d = hostValues(target);
  if (d === null) return;
  for (let i = 0; i < d.length; i++) {
    const v = Number(d[i]);
    if ((v < 0 || v >= C) && v !== ignoreIndex) throw new RangeError(`Target ${v} is out of bounds.`);
  }
}

/** F.relu(x, inplace=True) and friends: land the out-of-place result in x and return x. */
export function maybeInplace(x: Tensor, y: Tensor, inplace: boolean, name: string): Tensor {
  return inplace ? inplaceSet(x, y, name) : y;
}

/** `out=` of a functional op: y written into out (same shape; PyTorch's cast and autograd rules). */
export function writeOut(out: Tensor, y: Tensor, name: string): Tensor {
  if (isGradEnabled() && (y.requiresGrad || out.requiresGrad))
    throw new Error(`${name}(): functions with out=... arguments don't support automatic differentiation, but one of the arguments requires grad.`);
  if (isFloating(y.dtype) && !isFloating(out.dtype))
    throw new TypeError(`result type ${y.dtype} can't be cast to the desired output type ${out.dtype}`);
  if (!sameShape(out.shape, y.shape))
    throw new RangeError(`out= must have the result's shape ${shapeStr(y.shape)}, but got ${shapeStr(out.shape)}`);
  return inplaceSet(out, y, name);
}

/** Most elements of a host-built constant (interpolation / averaging weights): 2^27 float64s, 1 GiB. */
const MAX_HOST_CONST = 2 ** 27;
/** A zeroed host array of n float64s for a constant tensor, refused (before allocating) past MAX_HOST_CONST. */
export function hostArray(n: number, what: string): Float64Array {
  if (!(n <= MAX_HOST_CONST))
    throw new OutOfMemoryError(`OutOfMemoryError: tried to allocate ${n * 8} bytes (${what} is built on the host: at most ${MAX_HOST_CONST} elements)`);
  return new Float64Array(n);
}

export function constTensor(data: ArrayLike<number>, shape: number[], dtype: DType, device: string): Tensor {
  return fromHostData(data, shape, dtype, device);
}

/** Machine epsilon (torch.finfo(dtype).eps). */
export function finfoEps(d: DType): number {
  if (d === "float64") return 2.220446049250313e-16;
  if (d === "float16") return 0.0009765625;
  if (d === "bfloat16") return 0.0078125;
  return 1.1920928955078125e-7;
}

/** x * w + b where w/b are optional and already broadcastable. */
export function affine(x: Tensor, w?: Tensor | null, b?: Tensor | null): Tensor {
  let y = x;
  if (w) y = M.mul(y, w);
  if (b) y = M.add(y, b);
  return y;
}

/**
 * unsqueeze that also works on 0-dim tensors (core's viewStrides rejects viewing shape []
 * as [1]; reshape falls back to a copy).
 */
export function unsqueezeAny(t: Tensor, dim: number): Tensor {
  return t.ndim === 0 ? S.reshape(t, [1]) : S.unsqueeze(t, dim);
}

/**
 * Sliding windows of x [N, C, *sp] after padding: returns [N, C, *out, *k] (a view).
 * pads: per spatial dim [before, after]; padValue fills the border (-inf for max pooling).
 */
export function windows(x: Tensor, k: number[], stride: number[], dil: number[], pads: [number, number][], padValue = 0): Tensor {
  const nd = k.length;
  const flat: number[] = [];
  for (let i = nd - 1; i >= 0; i--) flat.push(pads[i]![0], pads[i]![1]);
  let r = flat.some((p) => p !== 0) ? S._constantPad(x, flat, padValue) : x;
  for (let i = 0; i < nd; i++) r = S._unfold(r, 2 + i, (k[i]! - 1) * dil[i]! + 1, stride[i]!);
  for (let i = 0; i < nd; i++) if (dil[i] !== 1) r = S.slice(r, 2 + nd + i, null, null, dil[i]!);
  return r;
}
