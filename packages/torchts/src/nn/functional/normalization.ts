// Normalization layers: layer_norm, rms_norm, batch_norm (with in-place running-stat
// updates), group_norm, instance_norm and F.normalize.
import { normDim, shapeStr } from "../../ir/shape.js";
import { compositeScope, type Tensor } from "../../tensor.js";
import { op, type Sig } from "../../ops/registry.js";
import { attach, compositePrim, reshape, sliceView } from "../../ops/core.js";
import { isGradEnabled, noGrad } from "../../autograd/grad_mode.js";
import { checkNoOverlap, inplaceSet } from "../../ops/inplace.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { affine, finfoEps, requireFloat, writeOut } from "./util.js";

function lastDims(x: Tensor, ns: readonly number[]): number[] {
  const k = ns.length;
  if (k === 0)
    throw new RangeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = []");
  const tail = x.shape.slice(x.ndim - k);
  if (k > x.ndim || tail.some((d, i) => d !== ns[i]))
    throw new RangeError(
      `Given normalized_shape=${shapeStr(ns)}, expected input with shape [*, ${ns.join(", ")}], but got input of size${shapeStr(x.shape)}`,
    );
  return ns.map((_, i) => x.ndim - k + i);
}

function checkParam(p: Tensor | null, want: readonly number[], name: string): void {
  if (p && (p.ndim !== want.length || p.shape.some((d, i) => d !== want[i])))
    throw new RangeError(`expected ${name} of shape ${shapeStr(want)}, but got ${shapeStr(p.shape)}`);
}

/** (x - mean) / sqrt(biased var + eps) over `axes`. */
function standardize(x: Tensor, axes: number[], eps: number): Tensor {
  const mu = R.mean(x, axes, true);
  const d = M.sub(x, mu);
  const v = R.mean(M.mul(d, d), axes, true);
  return M.mul(d, M.rsqrt(M.add(v, eps)));
}

export interface LayerNormOpts {
  normalizedShape?: number | readonly number[];
  weight?: Tensor | null;
  bias?: Tensor | null;
  eps?: number;
}
type Shape1 = number | readonly number[];
export const layerNorm = op<
  Sig<[input: Tensor, normalizedShape: Shape1, weight?: Tensor | null, bias?: Tensor | null, eps?: number], LayerNormOpts, Tensor>
>(
  "layerNorm(Tensor input, int[] normalizedShape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
  (x: Tensor, normalizedShape: number[], w: Tensor | null, b: Tensor | null, eps: number): Tensor => {
    requireFloat(x);
    const axes = lastDims(x, normalizedShape);
    const ns = axes.map((a) => x.shape[a]!);
    checkParam(w, ns, "weight");
    checkParam(b, ns, "bias");
    const fast = layerNormRows(x, w, b, eps, axes);
    if (fast) return fast;
    // like PyTorch's native_layer_norm: the forward's temporaries are freed at once and the
    // backward needs only x, the mean and 1/std (not the decomposition's intermediates)
    const { y, mu, rstd } = noGrad(() =>
      compositeScope(() => {
        const mu = R.mean(x, axes, true);
        const d = M.sub(x, mu);
        const rstd = M.rsqrt(M.add(R.mean(M.mul(d, d), axes, true), eps));
        return { y: affine(M.mul(d, rstd), w, b), mu, rstd };
      }),
    );
    const lead = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
    return attach(y, "NativeLayerNormBackward0", [x, w, b], [x, mu, rstd, w], ([g], [xs, ms, rs, ws]) => {
      const grads = () => layerNormGrads(x, w, b, g!, xs!, ms!, rs!, ws, axes, lead, eps);
      // without createGraph the backward is one formula: fused kernels in strict eager too
      return isGradEnabled() ? grads() : compositeScope(grads);
    });
  },
);

/**
 * LayerNorm over the last dim with the device's own row kernels (the layerNorm composite, its
 * backward the layerNormBackward one, both recomputing the statistics), where the device has them
 * and x, weight and bias are contiguous and of one float dtype; null: decompose.
 */
function layerNormRows(x: Tensor, w: Tensor | null, b: Tensor | null, eps: number, axes: number[]): Tensor | null {
  if (axes.length !== 1 || axes[0] !== x.ndim - 1 || (x.dtype !== "float32" && x.dtype !== "float64") || !x.isContiguous()) return null;
  if ([w, b].some((p) => p && (p.dtype !== x.dtype || !p.isContiguous()))) return null;
  const y = compositePrim("layerNorm", { weight: w !== null, bias: b !== null }, [x, ...(w ? [w] : []), ...(b ? [b] : [])], x.shape, x.dtype, [eps]);
  if (!y) return null;
  const n = x.shape[x.ndim - 1]!;
  const rows = n === 0 ? 0 : x.numel() / n;
  const lead = x.shape.map((_, i) => i).slice(0, -1);
  return attach(y, "NativeLayerNormBackward0", [x, w, b], [x, w], ([g], [xs, ws]) => {
    const packed =
      isGradEnabled() || !g!.isContiguous() || g!.dtype !== x.dtype
        ? null
        : compositePrim("layerNormBackward", { weight: ws !== null }, [xs!, g!, ...(ws ? [ws] : [])], [rows + 2, n], x.dtype, [eps]);
    if (!packed) {
      // double backward (the statistics' dependence on x) or an unusual gradient: the decomposition,
      // which recomputes the statistics it was not given
      const grads = () => layerNormGrads(x, w, b, g!, xs!, null, null, ws ?? undefined, axes, lead, eps);
      return isGradEnabled() ? grads() : compositeScope(grads);
    }
    const row = (i: number) => reshape(sliceView(packed, "select", 0, i, 1, 1), [n]);
    return [
      x.requiresGrad ? reshape(sliceView(packed, "narrow", 0, 0, rows, 1), x.shape) : null,
      w?.requiresGrad ? row(rows) : null,
      b?.requiresGrad ? row(rows + 1) : null,
    ];
  });
}

/**
 * LayerNorm's input, weight and bias gradients from the saved x, mean, 1/std and weight (null
 * statistics: recomputed from x, as the layerNorm composite's fallback does).
 */
function layerNormGrads(
  x: Tensor, w: Tensor | null, b: Tensor | null, g: Tensor, xs: Tensor, ms: Tensor | null, rs: Tensor | null, ws: Tensor | undefined,
  axes: number[], lead: number[], eps: number,
): (Tensor | null)[] {
  // under createGraph the statistics are recomputed from x, so that double backward sees
  // their dependence on x (the saved ones are constants)
  if (isGradEnabled() || !ms || !rs) {
    ms = R.mean(xs, axes, true);
    const d = M.sub(xs, ms);
    rs = M.rsqrt(M.add(R.mean(M.mul(d, d), axes, true), eps));
  }
  const xhat = M.mul(M.sub(xs, ms), rs);
  const gw = ws ? M.mul(g, ws) : g;
  // dx = rstd * (g w - mean(g w) - xhat * mean(g w xhat))
  const dx = x.requiresGrad
    ? M.mul(M.sub(M.sub(gw, R.mean(gw, axes, true)), M.mul(xhat, R.mean(M.mul(gw, xhat), axes, true))), rs)
    : null;
  const sumLead = (t: Tensor) => (lead.length ? R.sum(t, lead) : t);
  return [dx, w?.requiresGrad ? sumLead(M.mul(g, xhat)) : null, b?.requiresGrad ? sumLead(g) : null];
}

/** F.rms_norm: x * rsqrt(mean(x^2) + eps) * weight; eps defaults to finfo(x.dtype).eps. */
export const rmsNorm = op<
  Sig<
    [input: Tensor, normalizedShape: Shape1, weight?: Tensor | null, eps?: number | null],
    { normalizedShape?: Shape1; weight?: Tensor | null; eps?: number | null },
    Tensor
  >
>(
  "rmsNorm(Tensor input, int[] normalizedShape, Tensor? weight=None, float? eps=None) -> Tensor",
  (x: Tensor, normalizedShape: number[], weight: Tensor | null, eps0: number | null): Tensor => {
    requireFloat(x);
    const axes = lastDims(x, normalizedShape);
    checkParam(weight, axes.map((a) => x.shape[a]!), "weight");
    const eps = eps0 ?? finfoEps(x.dtype);
    const y = M.mul(x, M.rsqrt(M.add(R.mean(M.mul(x, x), axes, true), eps)));
    return weight ? M.mul(y, weight) : y;
  },
);

/** View a per-channel [C] tensor as [C, 1, ...] to broadcast against [N, C, *]. */
function perChannel(p: Tensor | null | undefined, x: Tensor): Tensor | null {
  if (!p) return null;
  return S.reshape(p, [p.numel(), ...new Array<number>(Math.max(x.ndim - 2, 0)).fill(1)]);
}

export interface BatchNormOpts {
  runningMean?: Tensor | null;
  runningVar?: Tensor | null;
  weight?: Tensor | null;
  bias?: Tensor | null;
  training?: boolean;
  momentum?: number;
  eps?: number;
}

/**
 * batch_norm. In training mode the batch statistics normalize x and, when given, the running
 * stats are updated in place (running_var with the unbiased variance) outside autograd.
 */
function batchNormImpl(
  x: Tensor, runningMean: Tensor | null, runningVar: Tensor | null, weight: Tensor | null, bias: Tensor | null,
  training: boolean, momentum: number, eps: number, name: string,
): Tensor {
  requireFloat(x);
  if (x.ndim < 2) throw new RangeError(`expected input with at least 2 dims (N, C, ...), but got input of size ${shapeStr(x.shape)}`);
  const C = x.shape[1]!;
  for (const [p, n] of [[runningMean, "running_mean"], [runningVar, "running_var"], [weight, "weight"], [bias, "bias"]] as const)
    if (p && p.numel() !== C) throw new RangeError(`${n} should contain ${C} elements not ${p.numel()} (input of size ${shapeStr(x.shape)})`);
  // every check before the running stats are written in place: a call that throws changes nothing
  for (const p of [runningMean, runningVar, weight, bias])
    if (p && p.device !== x.device)
      throw new Error(`Expected all tensors to be on the same device, but found at least two devices, ${x.device} and ${p.device}!`);
  if (training) for (const p of [runningMean, runningVar]) if (p) checkNoOverlap(p, name);
  const axes = x.shape.map((_, i) => i).filter((i) => i !== 1);
  let y: Tensor;
  if (training) {
    const n = x.numel() / C;
    if (n <= 1) throw new RangeError(`Expected more than 1 value per channel when training, got input size ${shapeStr(x.shape)}`);
    const mu = R.mean(x, axes, true);
    const d = M.sub(x, mu);
    const v = R.mean(M.mul(d, d), axes, true);
    y = M.mul(d, M.rsqrt(M.add(v, eps)));
    const out = affine(y, perChannel(weight, x), perChannel(bias, x));
    const newMean = runningMean && noGrad(() => M.add(M.mul(runningMean, 1 - momentum), M.mul(S.reshape(mu, runningMean.shape), momentum)));
    const newVar = runningVar && noGrad(() => M.add(M.mul(runningVar, 1 - momentum), M.mul(S.reshape(v, runningVar.shape), (momentum * n) / (n - 1))));
    noGrad(() => {
      if (runningMean) inplaceSet(runningMean, newMean!, name);
      if (runningVar) inplaceSet(runningVar, newVar!, name);
    });
    return out;
  } else {
    if (!runningMean) throw new Error("running_mean must be defined in evaluation mode");
    if (!runningVar) throw new Error("running_var must be defined in evaluation mode");
    y = M.mul(M.sub(x, perChannel(runningMean, x)!), M.rsqrt(M.add(perChannel(runningVar, x)!, eps)));
  }
  return affine(y, perChannel(weight, x), perChannel(bias, x));
}

/**
 * F.batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05).
 * The running stats are required (they may be null), as PyTorch; the TypeScript type is looser.
 */
export const batchNorm = op<
  Sig<
    [input: Tensor, runningMean?: Tensor | null, runningVar?: Tensor | null, weight?: Tensor | null, bias?: Tensor | null, training?: boolean, momentum?: number, eps?: number],
    BatchNormOpts,
    Tensor
  >
>(
  "batchNorm(Tensor input, Tensor? runningMean, Tensor? runningVar, Tensor? weight=None, Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
  (x: Tensor, rm: Tensor | null, rv: Tensor | null, w: Tensor | null, b: Tensor | null, training: boolean, momentum: number, eps: number) =>
    batchNormImpl(x, rm, rv, w, b, training, momentum, eps, "batchNorm"),
);

export const groupNorm = op<
  Sig<
    [input: Tensor, numGroups: number, weight?: Tensor | null, bias?: Tensor | null, eps?: number],
    { numGroups?: number; weight?: Tensor | null; bias?: Tensor | null; eps?: number },
    Tensor
  >
>(
  "groupNorm(Tensor input, int numGroups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
  (x: Tensor, numGroups: number, w: Tensor | null, b: Tensor | null, eps: number): Tensor => {
    requireFloat(x);
    if (x.ndim < 2) throw new RangeError(`expected input with at least 2 dims (N, C, ...), but got input of size ${shapeStr(x.shape)}`);
    if (numGroups <= 0) throw new Error(`Expected num groups to be greater than 0, got ${numGroups}`);
    const [N, C] = x.shape as [number, number];
    if (C % numGroups !== 0)
      throw new RangeError(`Expected number of channels in input to be divisible by num_groups, but got input of shape ${shapeStr(x.shape)} and num_groups=${numGroups}`);
    checkParam(w, [C], "weight");
    checkParam(b, [C], "bias");
    const g = S.reshape(x, [N, numGroups, -1]);
    const y = S.reshape(standardize(g, [2], eps), x.shape);
    return affine(y, perChannel(w, x), perChannel(b, x));
  },
);

export interface InstanceNormOpts extends BatchNormOpts {
  useInputStats?: boolean;
}
/**
 * F.instance_norm: normalize each (n, c) over the spatial dims. With running stats, PyTorch's
 * definition: batch_norm of x viewed as [1, N*C, *] with the stats repeated N times, and the
 * running stats then the mean over the batch of the updated copies.
 */
export const instanceNorm = op<
  Sig<
    [input: Tensor, runningMean?: Tensor | null, runningVar?: Tensor | null, weight?: Tensor | null, bias?: Tensor | null, useInputStats?: boolean, momentum?: number, eps?: number],
    InstanceNormOpts,
    Tensor
  >
>(
  "instanceNorm(Tensor input, Tensor? runningMean=None, Tensor? runningVar=None, Tensor? weight=None, Tensor? bias=None, bool useInputStats=True, float momentum=0.1, float eps=1e-05) -> Tensor",
  (x: Tensor, rm: Tensor | null, rv: Tensor | null, w: Tensor | null, b: Tensor | null, useInputStats: boolean, momentum: number, eps: number): Tensor => {
    requireFloat(x);
    if (useInputStats) {
      const spatial = x.shape.slice(2).reduce((p, q) => p * q, 1);
      if (spatial <= 1) throw new RangeError(`Expected more than 1 spatial element when training, got input size ${shapeStr(x.shape)}`);
    } else if (!rm || !rv) throw new Error("Expected running_mean and running_var to be defined when use_input_stats is false");
    if (x.ndim < 3) throw new RangeError(`expected input with at least 3 dims (N, C, L...), but got input of size ${shapeStr(x.shape)}`);
    const [N, C] = x.shape as [number, number];
    for (const [p, n] of [[rm, "running_mean"], [rv, "running_var"], [w, "weight"], [b, "bias"]] as const)
      if (p && p.numel() !== C) throw new RangeError(`${n} should contain ${C} elements not ${p.numel()} (input of size ${shapeStr(x.shape)})`);
    // rm and rv are written after the batch norm of their copies: both checked before either is
    if (useInputStats) for (const p of [rm, rv]) if (p) checkNoOverlap(p, "instanceNorm");
    if (!rm && !rv) {
      const axes = x.shape.map((_, i) => i).filter((i) => i >= 2);
      return affine(standardize(x, axes, eps), perChannel(w, x), perChannel(b, x));
    }
    const rep = (t: Tensor | null): Tensor | null => (t ? S.reshape(S.contiguous(S.expand(S.reshape(t, [1, C]), [N, C])), [N * C]) : null);
    const rm2 = noGrad(() => rep(rm));
    const rv2 = noGrad(() => rep(rv));
    const y = batchNormImpl(S.reshape(x, [1, N * C, ...x.shape.slice(2)]), rm2, rv2, rep(w), rep(b), useInputStats, momentum, eps, "instanceNorm");
    if (useInputStats)
      noGrad(() => {
        if (rm) inplaceSet(rm, S.reshape(R.mean(S.reshape(rm2!, [N, C]), 0), rm.shape), "instanceNorm");
        if (rv) inplaceSet(rv, S.reshape(R.mean(S.reshape(rv2!, [N, C]), 0), rv.shape), "instanceNorm");
      });
    return S.reshape(y, x.shape);
  },
);

/** F.normalize: x / max(||x||_p, eps) along dim; an all-zero slice gets a finite gradient, as PyTorch. */
export const normalize = op<
  Sig<
    [input: Tensor, p?: number, dim?: number, eps?: number, out?: Tensor | null],
    { p?: number; dim?: number; eps?: number; out?: Tensor | null },
    Tensor
  >
>(
  "normalize(Tensor input, float p=2., int dim=1, float eps=1e-12, Tensor? out=None) -> Tensor",
  (x: Tensor, p: number, dim: number, eps: number, out: Tensor | null): Tensor => {
    normDim(dim, x.ndim);
    let n: Tensor;
    if (p === Infinity || p === 1 || !(p > 0)) n = R.norm(x, p, dim, true);
    else {
      // ||x||_p = s^(1/p) has an infinite derivative at s = 0: evaluate it only where s > 0
      const s = R.sum(p === 2 ? M.mul(x, x) : M.pow(M.abs(x), p), dim, true);
      const pos = M.gt(s, 0);
      const safe = M.where(pos, s, 1);
      n = M.where(pos, p === 2 ? M.sqrt(safe) : M.pow(safe, 1 / p), 0);
    }
    const y = M.div(x, M.clamp(n, eps));
    return out ? writeOut(out, y, "normalize") : y;
  },
);
