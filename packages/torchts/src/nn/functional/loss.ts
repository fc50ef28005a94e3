// Loss functions: cross_entropy (class indices or probabilities, label smoothing, class
// weights, ignore_index, [N, C, d1, ...] layouts), nll_loss, regression and binary losses.
import { isFloating } from "../../ir/dtype.js";
import { shapeStr, sameShape } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import type { Tensor } from "../../tensor.js";
import { cast, gather } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { logSoftmax } from "./activation.js";
import { reduceLoss, requireFloat, requireIndex, unsqueezeAny, type Reduction } from "./util.js";

export interface NllLossOpts {
  weight?: Tensor | null;
  ignoreIndex?: number;
  reduction?: Reduction;
}
export interface CrossEntropyOpts extends NllLossOpts {
  labelSmoothing?: number;
}

function checkReduction(r: Reduction | undefined, op: string): Reduction {
  const v = r ?? "mean";
  if (v !== "none" && v !== "mean" && v !== "sum") throw new RangeError(`${op}: ${String(v)} is not a valid value for reduction`);
  return v;
}

function classDim(input: Tensor, op: string): number {
  if (input.ndim < 1) throw new RangeError(`${op}: input tensor should be 1D or more, but got input of size ${shapeStr(input.shape)}`);
  return input.ndim === 1 ? 0 : 1;
}

/** Weight [C] viewed to broadcast along the class dim of `input`. */
function weightAtClassDim(w: Tensor, input: Tensor, cd: number): Tensor {
  const shape = input.shape.map((_, i) => (i === cd ? w.numel() : 1));
  return S.reshape(w, shape);
}

function checkIndexTarget(input: Tensor, target: Tensor, cd: number, op: string): void {
  requireIndex(target, op);
  const want = input.shape.filter((_, i) => i !== cd);
  if (!sameShape(want, target.shape)) {
    if (input.ndim >= 2 && target.ndim >= 1 && input.shape[0] !== target.shape[0])
      throw new RangeError(`${op}: Expected input batch_size (${input.shape[0]}) to match target batch_size (${target.shape[0]}). (input ${shapeStr(input.shape)}, target ${shapeStr(target.shape)})`);
    throw new RangeError(`${op}: expected target of size ${shapeStr(want)} for input of size ${shapeStr(input.shape)}, but got ${shapeStr(target.shape)}`);
  }
}

function checkWeight(w: Tensor | null | undefined, C: number, op: string): void {
  if (w && (w.ndim !== 1 || w.shape[0] !== C))
    throw new RangeError(`${op}: weight tensor should be defined either for all ${C} classes or no classes but got weight tensor of shape: ${shapeStr(w.shape)}`);
}

/** Per-element NLL, the mask of kept targets, and the per-element class weight (0 where ignored). */
function nllParts(logp: Tensor, target: Tensor, cd: number, weight: Tensor | null | undefined, ignoreIndex: number) {
  const keep = M.ne(target, ignoreIndex);
  const safe = M.where(keep, cast(target, "int64"), 0);
  const picked = S.squeeze(gather(logp, cd, unsqueezeAny(safe, cd)), cd);
  let wt = cast(keep, logp.dtype);
  if (weight) wt = M.mul(wt, S.reshape(gather(weight, 0, S.reshape(safe, [safe.numel()])), safe.shape));
  return { loss: M.mul(M.neg(picked), wt), wt, keep };
}

export function nllLoss(input: Tensor, target: Tensor, opts: NllLossOpts = {}): Tensor {
  return withOp("nll_loss", () => {
    const reduction = checkReduction(opts.reduction, "nll_loss");
    const cd = classDim(input, "nll_loss");
    requireFloat(input, "nll_loss");
    checkIndexTarget(input, target, cd, "nll_loss");
    checkWeight(opts.weight, input.shape[cd]!, "nll_loss");
    const { loss, wt } = nllParts(input, target, cd, opts.weight, opts.ignoreIndex ?? -100);
    if (reduction === "none") return loss;
    if (reduction === "sum") return R.sum(loss);
    return M.div(R.sum(loss), R.sum(wt));
  });
}

export function crossEntropy(input: Tensor, target: Tensor, opts: CrossEntropyOpts = {}): Tensor {
  return withOp("cross_entropy", () => {
    const reduction = checkReduction(opts.reduction, "cross_entropy");
    const cd = classDim(input, "cross_entropy");
    requireFloat(input, "cross_entropy");
    const C = input.shape[cd]!;
    checkWeight(opts.weight, C, "cross_entropy");
    const ls = opts.labelSmoothing ?? 0;
    if (ls < 0 || ls > 1) throw new RangeError(`cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: ${ls}`);
    const logp = logSoftmax(input, cd);
    const w = opts.weight ? weightAtClassDim(opts.weight, input, cd) : null;
    if (isFloating(target.dtype)) {
      // class-probability targets
      if (!sameShape(input.shape, target.shape))
        throw new RangeError(`cross_entropy: expected target of the same size as input for class probabilities, got input ${shapeStr(input.shape)} and target ${shapeStr(target.shape)}`);
      const t = ls > 0 ? M.add(M.mul(target, 1 - ls), ls / C) : target;
      let prod = M.mul(logp, t);
      if (w) prod = M.mul(prod, w);
      if (reduction === "none") return M.neg(R.sum(prod, cd));
      if (reduction === "sum") return M.neg(R.sum(prod));
      return M.div(M.neg(R.sum(prod)), input.numel() / C);
    }
    checkIndexTarget(input, target, cd, "cross_entropy");
    const { loss, wt, keep } = nllParts(logp, target, cd, opts.weight, opts.ignoreIndex ?? -100);
    const nll = reduction === "none" ? loss : reduction === "sum" ? R.sum(loss) : M.div(R.sum(loss), R.sum(wt));
    if (ls === 0) return nll;
    // label smoothing: mix in the (weighted) mean of -log p over classes, as PyTorch
    let smooth = M.neg(R.sum(w ? M.mul(logp, w) : logp, cd));
    smooth = M.where(keep, smooth, 0);
    const sm =
      reduction === "none" ? smooth : reduction === "sum" ? R.sum(smooth) : M.div(R.sum(smooth), w ? R.sum(wt) : R.sum(cast(keep, logp.dtype)));
    return M.add(M.mul(nll, 1 - ls), M.mul(sm, ls / C));
  });
}

function checkSameSize(input: Tensor, target: Tensor, op: string): void {
  if (!sameShape(input.shape, target.shape))
    throw new RangeError(`${op}: Using a target size (${shapeStr(target.shape)}) that is different to the input size (${shapeStr(input.shape)}) is not supported`);
}

export function mseLoss(input: Tensor, target: Tensor, opts: { reduction?: Reduction } = {}): Tensor {
  return withOp("mse_loss", () => {
    const d = M.sub(input, target);
    return reduceLoss(M.mul(d, d), opts.reduction, "mse_loss");
  });
}

export function l1Loss(input: Tensor, target: Tensor, opts: { reduction?: Reduction } = {}): Tensor {
  return withOp("l1_loss", () => reduceLoss(M.abs(M.sub(input, target)), opts.reduction, "l1_loss"));
}

export function smoothL1Loss(input: Tensor, target: Tensor, opts: { reduction?: Reduction; beta?: number } = {}): Tensor {
  return withOp("smooth_l1_loss", () => {
    const beta = opts.beta ?? 1;
    if (beta < 0) throw new RangeError("smooth_l1_loss does not support negative values for beta.");
    const d = M.abs(M.sub(input, target));
    if (beta === 0) return reduceLoss(d, opts.reduction, "smooth_l1_loss");
    const l = M.where(M.lt(d, beta), M.div(M.mul(M.mul(d, d), 0.5), beta), M.sub(d, 0.5 * beta));
    return reduceLoss(l, opts.reduction, "smooth_l1_loss");
  });
}

export function huberLoss(input: Tensor, target: Tensor, opts: { reduction?: Reduction; delta?: number } = {}): Tensor {
  return withOp("huber_loss", () => {
    const delta = opts.delta ?? 1;
    const d = M.abs(M.sub(input, target));
    const l = M.where(M.lt(d, delta), M.mul(M.mul(d, d), 0.5), M.mul(M.sub(d, 0.5 * delta), delta));
    return reduceLoss(l, opts.reduction, "huber_loss");
  });
}

/** F.binary_cross_entropy on probabilities; log terms are clamped at -100 like PyTorch. */
export function binaryCrossEntropy(input: Tensor, target: Tensor, opts: { weight?: Tensor | null; reduction?: Reduction } = {}): Tensor {
  return withOp("binary_cross_entropy", () => {
    checkSameSize(input, target, "binary_cross_entropy");
    requireFloat(input, "binary_cross_entropy");
    const logx = M.clamp(M.log(input), -100);
    const log1mx = M.clamp(M.log(M.rsub(input, 1)), -100);
    let l = M.neg(M.add(M.mul(target, logx), M.mul(M.rsub(target, 1), log1mx)));
    if (opts.weight) l = M.mul(l, opts.weight);
    return reduceLoss(l, opts.reduction, "binary_cross_entropy");
  });
}

/** F.binary_cross_entropy_with_logits: (1 - t) x + (1 + (pw - 1) t) * softplus(-x), stably. */
export function binaryCrossEntropyWithLogits(
  input: Tensor,
  target: Tensor,
  opts: { weight?: Tensor | null; posWeight?: Tensor | null; reduction?: Reduction } = {},
): Tensor {
  return withOp("binary_cross_entropy_with_logits", () => {
    checkSameSize(input, target, "binary_cross_entropy_with_logits");
    requireFloat(input, "binary_cross_entropy_with_logits");
    // m's gradient cancels exactly, so it is detached
    const m = S.detach(M.clamp(M.neg(input), 0));
    const sp = M.add(M.log(M.add(M.exp(M.neg(m)), M.exp(M.sub(M.neg(input), m)))), m);
    const lw = opts.posWeight ? M.add(M.mul(M.sub(opts.posWeight, 1), target), 1) : null;
    let l = M.add(M.mul(M.rsub(target, 1), input), lw ? M.mul(lw, sp) : sp);
    if (opts.weight) l = M.mul(l, opts.weight);
    return reduceLoss(l, opts.reduction, "binary_cross_entropy_with_logits");
  });
}

export function klDiv(input: Tensor, target: Tensor, opts: { reduction?: Reduction | "batchmean"; logTarget?: boolean } = {}): Tensor {
  return withOp("kl_div", () => {
    const l = opts.logTarget
      ? M.mul(M.exp(target), M.sub(target, input))
      : M.where(M.gt(target, 0), M.mul(target, M.sub(M.log(M.where(M.gt(target, 0), target, 1)), input)), 0);
    const r = opts.reduction ?? "mean";
    if (r === "batchmean") return input.ndim === 0 ? R.sum(l) : M.div(R.sum(l), input.shape[0]!);
    return reduceLoss(l, r, "kl_div");
  });
}
