// Shared argument handling for torch.nn.functional: int-or-tuple expansion, loss reduction,
// dtype checks and small constant tensors built on the host (static shapes only).
import { isFloating, type DType } from "../../ir/dtype.js";
import { shapeStr } from "../../ir/shape.js";
import type { Tensor } from "../../tensor.js";
import { fromHostData } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as R from "../../ops/reduce.js";
import * as S from "../../ops/shape_ops.js";

export type Reduction = "none" | "mean" | "sum";
export type IntOrTuple = number | readonly number[];

/** Expand `k` or `[k1, k2]` to n values, as PyTorch's _pair/_single. */
export function ntuple(v: IntOrTuple, n: number, op: string, name: string): number[] {
  if (typeof v === "number") return new Array<number>(n).fill(v);
  if (v.length === 1) return new Array<number>(n).fill(v[0]!);
  if (v.length !== n) throw new RangeError(`${op}: expected ${name} to be a single integer or a tuple of ${n} integers, got [${v.join(", ")}]`);
  return [...v];
}

export function reduceLoss(loss: Tensor, reduction: Reduction | undefined, op: string): Tensor {
  const r = reduction ?? "mean";
  if (r === "none") return loss;
  if (r === "mean") return R.mean(loss);
  if (r === "sum") return R.sum(loss);
  throw new RangeError(`${op}: ${String(r)} is not a valid value for reduction`);
}

export function requireFloat(x: Tensor, op: string, what = "input"): void {
  if (!isFloating(x.dtype))
    throw new TypeError(`${op}: expected ${what} to have a floating point dtype, but got ${x.dtype} (shape ${shapeStr(x.shape)})`);
}

export function requireIndex(t: Tensor, op: string, what = "target"): void {
  if (t.dtype !== "int64" && t.dtype !== "int32" && t.dtype !== "uint8" && t.dtype !== "int8")
    throw new TypeError(`${op}: expected ${what} to have an integer dtype (int64), but got ${t.dtype} (shape ${shapeStr(t.shape)})`);
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
