// Loss functions: cross_entropy (class indices or probabilities, label smoothing, class
// weights, ignore_index, [N, C, d1, ...] layouts), nll_loss, regression and binary losses.
import { isFloating } from "../../ir/dtype.js";
import { shapeStr, sameShape } from "../../ir/shape.js";
import type { Tensor } from "../../tensor.js";
import { cast, gather } from "../../ops/core.js";
import { op, type Sig } from "../../ops/registry.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { torchLogSoftmax as logSoftmax } from "./activation.js";
import { checkClassTargets, hostValues, lossReduction, reduceLoss, requireFloat, requireIndex, unsqueezeAny, type Reduction } from "./util.js";

/** The deprecated size_average / reduce, which (when given) override reduction, as PyTorch. */
export interface LegacyReductionOpts {
  sizeAverage?: boolean | null;
  reduce?: boolean | null;
  reduction?: Reduction;
}
export interface NllLossOpts extends LegacyReductionOpts {
  weight?: Tensor | null;
  ignoreIndex?: number;
}
export interface CrossEntropyOpts extends NllLossOpts {
  labelSmoothing?: number;
}

function classDim(input: Tensor): number {
  if (input.ndim < 1) throw new RangeError(`input tensor should be 1D or more, but got input of size ${shapeStr(input.shape)}`);
  return input.ndim === 1 ? 0 : 1;
}

/** Weight [C] viewed to broadcast along the class dim of `input`. */
function weightAtClassDim(w: Tensor, input: Tensor, cd: number): Tensor {
  const shape = input.shape.map((_, i) => (i === cd ? w.numel() : 1));
  return S.reshape(w, shape);
}

/** Class-index targets: integer, the input's shape without the class dim, each in [0, C) or ignoreIndex. */
function checkIndexTarget(input: Tensor, target: Tensor, cd: number, ignoreIndex: number): void {
  requireIndex(target);
  const want = input.shape.filter((_, i) => i !== cd);
  if (!sameShape(want, target.shape)) {
    if (input.ndim >= 2 && target.ndim >= 1 && input.shape[0] !== target.shape[0])
      throw new RangeError(`Expected input batch_size (${input.shape[0]}) to match target batch_size (${target.shape[0]}). (input ${shapeStr(input.shape)}, target ${shapeStr(target.shape)})`);
    throw new RangeError(`expected target of size ${shapeStr(want)} for input of size ${shapeStr(input.shape)}, but got ${shapeStr(target.shape)}`);
  }
  // a class out of range would gather garbage (NaN): PyTorch's IndexError, where a host read is cheap (cpu)
  checkClassTargets(target, input.shape[cd]!, ignoreIndex);
}

function checkWeight(w: Tensor | null, C: number): void {
  if (w && (w.ndim !== 1 || w.shape[0] !== C))
    throw new RangeError(`weight tensor should be defined either for all ${C} classes or no classes but got weight tensor of shape: ${shapeStr(w.shape)}`);
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

type NllSig = Sig<
  [input: Tensor, target: Tensor, weight?: Tensor | null, sizeAverage?: boolean | null, ignoreIndex?: number, reduce?: boolean | null, reduction?: Reduction],
  NllLossOpts,
  Tensor
>;
export const nllLoss = op<NllSig>(
  'nllLoss(Tensor input, Tensor target, Tensor? weight=None, bool? sizeAverage=None, int ignoreIndex=-100, bool? reduce=None, str reduction="mean") -> Tensor',
  (input: Tensor, target: Tensor, weight: Tensor | null, sizeAverage: boolean | null, ignoreIndex: number, reduce: boolean | null, reduction0: string) => {
    const reduction = lossReduction(sizeAverage, reduce, reduction0);
    const cd = classDim(input);
    requireFloat(input);
    checkWeight(weight, input.shape[cd]!);
    checkIndexTarget(input, target, cd, ignoreIndex);
    const { loss, wt } = nllParts(input, target, cd, weight, ignoreIndex);
    if (reduction === "none") return loss;
    if (reduction === "sum") return R.sum(loss);
    return M.div(R.sum(loss), R.sum(wt));
  },
);

type CrossEntropySig = Sig<
  [
    input: Tensor, target: Tensor, weight?: Tensor | null, sizeAverage?: boolean | null, ignoreIndex?: number, reduce?: boolean | null,
    reduction?: Reduction, labelSmoothing?: number,
  ],
  CrossEntropyOpts,
  Tensor
>;
export const crossEntropy = op<CrossEntropySig>(
  'crossEntropy(Tensor input, Tensor target, Tensor? weight=None, bool? sizeAverage=None, int ignoreIndex=-100, bool? reduce=None, str reduction="mean", float labelSmoothing=0.0) -> Tensor',
  (
    input: Tensor, target: Tensor, weight: Tensor | null, sizeAverage: boolean | null, ignoreIndex: number, reduce: boolean | null,
    reduction0: string, ls: number,
  ) => {
    const reduction = lossReduction(sizeAverage, reduce, reduction0);
    const cd = classDim(input);
    requireFloat(input);
    const C = input.shape[cd]!;
    checkWeight(weight, C);
    if (!(ls >= 0 && ls <= 1)) throw new Error(`label_smoothing must be between 0.0 and 1.0. Got: ${ls}`);
    if (isFloating(target.dtype)) {
      // class-probability targets
      if (!sameShape(input.shape, target.shape))
        throw new RangeError(`expected target of the same size as input for class probabilities, got input ${shapeStr(input.shape)} and target ${shapeStr(target.shape)}`);
      const logp = logSoftmax(input, cd);
      const w = weight ? weightAtClassDim(weight, input, cd) : null;
      const t = ls > 0 ? M.add(M.mul(target, 1 - ls), ls / C) : target;
      let prod = M.mul(logp, t);
      if (w) prod = M.mul(prod, w);
      if (reduction === "none") return M.neg(R.sum(prod, cd));
      if (reduction === "sum") return M.neg(R.sum(prod));
      return M.div(M.neg(R.sum(prod)), input.numel() / C);
    }
    checkIndexTarget(input, target, cd, ignoreIndex);
    const logp = logSoftmax(input, cd);
    const w = weight ? weightAtClassDim(weight, input, cd) : null;
    const { loss, wt, keep } = nllParts(logp, target, cd, weight, ignoreIndex);
    const nll = reduction === "none" ? loss : reduction === "sum" ? R.sum(loss) : M.div(R.sum(loss), R.sum(wt));
    if (ls === 0) return nll;
    // label smoothing: mix in the (weighted) mean of -log p over classes, as PyTorch
    let smooth = M.neg(R.sum(w ? M.mul(logp, w) : logp, cd));
    smooth = M.where(keep, smooth, 0);
    const sm =
      reduction === "none" ? smooth : reduction === "sum" ? R.sum(smooth) : M.div(R.sum(smooth), w ? R.sum(wt) : R.sum(cast(keep, logp.dtype)));
    return M.add(M.mul(nll, 1 - ls), M.mul(sm, ls / C));
  },
);

function checkSameSize(input: Tensor, target: Tensor): void {
  if (!sameShape(input.shape, target.shape))
    throw new RangeError(
      `Using a target size (${shapeStr(target.shape)}) that is different to the input size (${shapeStr(input.shape)}) is deprecated. Please ensure they have the same size.`,
    );
}

type LegacyLossSig = Sig<
  [input: Tensor, target: Tensor, sizeAverage?: boolean | null, reduce?: boolean | null, reduction?: Reduction],
  LegacyReductionOpts,
  Tensor
>;
export const mseLoss = op<LegacyLossSig>(
  'mseLoss(Tensor input, Tensor target, bool? sizeAverage=None, bool? reduce=None, str reduction="mean") -> Tensor',
  (input: Tensor, target: Tensor, sizeAverage: boolean | null, reduce: boolean | null, reduction: string) => {
    const r = lossReduction(sizeAverage, reduce, reduction);
    const d = M.sub(input, target);
    return reduceLoss(M.mul(d, d), r);
  },
);

export const l1Loss = op<LegacyLossSig>(
  'l1Loss(Tensor input, Tensor target, bool? sizeAverage=None, bool? reduce=None, str reduction="mean") -> Tensor',
  (input: Tensor, target: Tensor, sizeAverage: boolean | null, reduce: boolean | null, reduction: string) =>
    reduceLoss(M.abs(M.sub(input, target)), lossReduction(sizeAverage, reduce, reduction)),
);

export const smoothL1Loss = op<
  Sig<
    [input: Tensor, target: Tensor, sizeAverage?: boolean | null, reduce?: boolean | null, reduction?: Reduction, beta?: number],
    LegacyReductionOpts & { beta?: number },
    Tensor
  >
>(
  'smoothL1Loss(Tensor input, Tensor target, bool? sizeAverage=None, bool? reduce=None, str reduction="mean", float beta=1.0) -> Tensor',
  (input: Tensor, target: Tensor, sizeAverage: boolean | null, reduce: boolean | null, reduction: string, beta: number) => {
    const r = lossReduction(sizeAverage, reduce, reduction);
    if (beta < 0) throw new Error("smooth_l1_loss does not support negative values for beta.");
    const d = M.abs(M.sub(input, target));
    if (beta === 0) return reduceLoss(d, r);
    const l = M.where(M.lt(d, beta), M.div(M.mul(M.mul(d, d), 0.5), beta), M.sub(d, 0.5 * beta));
    return reduceLoss(l, r);
  },
);

export const huberLoss = op<
  Sig<[input: Tensor, target: Tensor, reduction?: Reduction, delta?: number], { reduction?: Reduction; delta?: number }, Tensor>
>('huberLoss(Tensor input, Tensor target, str reduction="mean", float delta=1.0) -> Tensor', (input: Tensor, target: Tensor, reduction: string, delta: number) => {
  const r = lossReduction(null, null, reduction);
  if (!(delta > 0)) throw new Error("huber_loss does not support non-positive values for delta.");
  const d = M.abs(M.sub(input, target));
  const l = M.where(M.lt(d, delta), M.mul(M.mul(d, d), 0.5), M.mul(M.sub(d, 0.5 * delta), delta));
  return reduceLoss(l, r);
});

/** F.binary_cross_entropy on probabilities; log terms are clamped at -100 like PyTorch. */
export const binaryCrossEntropy = op<
  Sig<
    [input: Tensor, target: Tensor, weight?: Tensor | null, sizeAverage?: boolean | null, reduce?: boolean | null, reduction?: Reduction],
    LegacyReductionOpts & { weight?: Tensor | null },
    Tensor
  >
>(
  'binaryCrossEntropy(Tensor input, Tensor target, Tensor? weight=None, bool? sizeAverage=None, bool? reduce=None, str reduction="mean") -> Tensor',
  (input: Tensor, target: Tensor, weight: Tensor | null, sizeAverage: boolean | null, reduce: boolean | null, reduction: string) => {
    const r = lossReduction(sizeAverage, reduce, reduction);
    checkSameSize(input, target);
    requireFloat(input);
    // a probability outside [0, 1] has no log: PyTorch's check, where a host read is cheap (cpu,
    // a value already computed: fused eager does not flush the graph for it)
    const v = hostValues(input, true);
    if (v !== null) for (let i = 0; i < v.length; i++) if (!(v[i]! >= 0 && v[i]! <= 1)) throw new Error("all elements of input should be between 0 and 1");
    const logx = M.clamp(M.log(input), -100);
    const log1mx = M.clamp(M.log(M.rsub(input, 1)), -100);
    let l = M.neg(M.add(M.mul(target, logx), M.mul(M.rsub(target, 1), log1mx)));
    if (weight) l = M.mul(l, weight);
    return reduceLoss(l, r);
  },
);

/** F.binary_cross_entropy_with_logits: (1 - t) x + (1 + (pw - 1) t) * softplus(-x), stably. */
export const binaryCrossEntropyWithLogits = op<
  Sig<
    [
      input: Tensor, target: Tensor, weight?: Tensor | null, sizeAverage?: boolean | null, reduce?: boolean | null, reduction?: Reduction,
      posWeight?: Tensor | null,
    ],
    LegacyReductionOpts & { weight?: Tensor | null; posWeight?: Tensor | null },
    Tensor
  >
>(
  'binaryCrossEntropyWithLogits(Tensor input, Tensor target, Tensor? weight=None, bool? sizeAverage=None, bool? reduce=None, str reduction="mean", Tensor? posWeight=None) -> Tensor',
  (input: Tensor, target: Tensor, weight: Tensor | null, sizeAverage: boolean | null, reduce: boolean | null, reduction: string, posWeight: Tensor | null) => {
    const r = lossReduction(sizeAverage, reduce, reduction);
    checkSameSize(input, target);
    requireFloat(input);
    // m's gradient cancels exactly, so it is detached
    const m = S.detach(M.clamp(M.neg(input), 0));
    const sp = M.add(M.log(M.add(M.exp(M.neg(m)), M.exp(M.sub(M.neg(input), m)))), m);
    const lw = posWeight ? M.add(M.mul(M.sub(posWeight, 1), target), 1) : null;
    let l = M.add(M.mul(M.rsub(target, 1), input), lw ? M.mul(lw, sp) : sp);
    if (weight) l = M.mul(l, weight);
    return reduceLoss(l, r);
  },
);

export const klDiv = op<
  Sig<
    [input: Tensor, target: Tensor, sizeAverage?: boolean | null, reduce?: boolean | null, reduction?: Reduction | "batchmean", logTarget?: boolean],
    { sizeAverage?: boolean | null; reduce?: boolean | null; reduction?: Reduction | "batchmean"; logTarget?: boolean },
    Tensor
  >
>(
  'klDiv(Tensor input, Tensor target, bool? sizeAverage=None, bool? reduce=None, str reduction="mean", bool logTarget=False) -> Tensor',
  (input: Tensor, target: Tensor, sizeAverage: boolean | null, reduce: boolean | null, reduction: string, logTarget: boolean) => {
    const r = lossReduction(sizeAverage, reduce, reduction, ["batchmean"]);
    const l = logTarget
      ? M.mul(M.exp(target), M.sub(target, input))
      : M.where(M.gt(target, 0), M.mul(target, M.sub(M.log(M.where(M.gt(target, 0), target, 1)), input)), 0);
    if (r === "batchmean") return input.ndim === 0 ? R.sum(l) : M.div(R.sum(l), input.shape[0]!);
    return reduceLoss(l, r);
  },
);
