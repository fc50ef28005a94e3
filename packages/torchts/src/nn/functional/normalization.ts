// Normalization layers: layer_norm, rms_norm, batch_norm (with in-place running-stat
// updates), group_norm, instance_norm and F.normalize.
import { shapeStr } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import { scope, type Tensor } from "../../tensor.js";
import { attach } from "../../ops/core.js";
import { isGradEnabled, noGrad } from "../../autograd/grad_mode.js";
import { inplaceSet } from "../../ops/inplace.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { affine, finfoEps, requireFloat } from "./util.js";

function lastDims(x: Tensor, normalizedShape: number | readonly number[], op: string): number[] {
  const ns = typeof normalizedShape === "number" ? [normalizedShape] : [...normalizedShape];
  const k = ns.length;
  const tail = x.shape.slice(x.ndim - k);
  if (k === 0 || k > x.ndim || tail.some((d, i) => d !== ns[i]))
    throw new RangeError(
      `${op}: Given normalized_shape=${shapeStr(ns)}, expected input with shape [*, ${ns.join(", ")}], but got input of size${shapeStr(x.shape)}`,
    );
  return ns.map((_, i) => x.ndim - k + i);
}

function checkParam(p: Tensor | null | undefined, want: readonly number[], op: string, name: string): void {
  if (p && (p.ndim !== want.length || p.shape.some((d, i) => d !== want[i])))
    throw new RangeError(`${op}: expected ${name} of shape ${shapeStr(want)}, but got ${shapeStr(p.shape)}`);
}

/** (x - mean) / sqrt(biased var + eps) over `axes`. */
function standardize(x: Tensor, axes: number[], eps: number): Tensor {
  const mu = R.mean(x, axes, true);
  const d = M.sub(x, mu);
  const v = R.mean(M.mul(d, d), axes, true);
  return M.mul(d, M.rsqrt(M.add(v, eps)));
}

export interface LayerNormOpts {
  weight?: Tensor | null;
  bias?: Tensor | null;
  eps?: number;
}
export function layerNorm(x: Tensor, normalizedShape: number | readonly number[], opts: LayerNormOpts = {}): Tensor {
  return withOp("layer_norm", () => {
    requireFloat(x, "layer_norm");
    const axes = lastDims(x, normalizedShape, "layer_norm");
    const ns = axes.map((a) => x.shape[a]!);
    checkParam(opts.weight, ns, "layer_norm", "weight");
    checkParam(opts.bias, ns, "layer_norm", "bias");
    const eps = opts.eps ?? 1e-5;
    const w = opts.weight ?? null;
    const b = opts.bias ?? null;
    // like PyTorch's native_layer_norm: the forward's temporaries are freed at once and the
    // backward needs only x, the mean and 1/std (not the decomposition's intermediates)
    const { y, mu, rstd } = noGrad(() =>
      scope(() => {
        const mu = R.mean(x, axes, true);
        const d = M.sub(x, mu);
        const rstd = M.rsqrt(M.add(R.mean(M.mul(d, d), axes, true), eps));
        return { y: affine(M.mul(d, rstd), w, b), mu, rstd };
      }),
    );
    const lead = x.shape.map((_, i) => i).filter((i) => !axes.includes(i));
    return attach(y, "NativeLayerNormBackward0", [x, w, b], [x, mu, rstd, w], ([g], [xs, ms, rs, ws]) => {
      // under createGraph the statistics are recomputed from x, so that double backward sees
      // their dependence on x (the saved ones are constants)
      if (isGradEnabled()) {
        ms = R.mean(xs!, axes, true);
        const d = M.sub(xs!, ms);
        rs = M.rsqrt(M.add(R.mean(M.mul(d, d), axes, true), eps));
      }
      const xhat = M.mul(M.sub(xs!, ms!), rs!);
      const gw = ws ? M.mul(g!, ws) : g!;
      // dx = rstd * (g w - mean(g w) - xhat * mean(g w xhat))
      const dx = x.requiresGrad
        ? M.mul(M.sub(M.sub(gw, R.mean(gw, axes, true)), M.mul(xhat, R.mean(M.mul(gw, xhat), axes, true))), rs!)
        : null;
      const sumLead = (t: Tensor) => (lead.length ? R.sum(t, lead) : t);
      return [dx, w?.requiresGrad ? sumLead(M.mul(g!, xhat)) : null, b?.requiresGrad ? sumLead(g!) : null];
    });
  });
}

/** F.rms_norm: x * rsqrt(mean(x^2) + eps) * weight; eps defaults to finfo(x.dtype).eps. */
export function rmsNorm(x: Tensor, normalizedShape: number | readonly number[], opts: { weight?: Tensor | null; eps?: number | null } = {}): Tensor {
  return withOp("rms_norm", () => {
    requireFloat(x, "rms_norm");
    const axes = lastDims(x, normalizedShape, "rms_norm");
    checkParam(opts.weight, axes.map((a) => x.shape[a]!), "rms_norm", "weight");
    const eps = opts.eps ?? finfoEps(x.dtype);
    const y = M.mul(x, M.rsqrt(M.add(R.mean(M.mul(x, x), axes, true), eps)));
    return opts.weight ? M.mul(y, opts.weight) : y;
  });
}

/** View a per-channel [C] tensor as [C, 1, ...] to broadcast against [N, C, *]. */
function perChannel(p: Tensor | null | undefined, x: Tensor): Tensor | null {
  if (!p) return null;
  return S.reshape(p, [p.numel(), ...new Array<number>(Math.max(x.ndim - 2, 0)).fill(1)]);
}

export interface BatchNormOpts {
  weight?: Tensor | null;
  bias?: Tensor | null;
  training?: boolean;
  momentum?: number;
  eps?: number;
}
/**
 * F.batch_norm. In training mode the batch statistics normalize x and, when given, the
 * running stats are updated in place (running_var with the unbiased variance) outside autograd.
 */
export function batchNorm(x: Tensor, runningMean: Tensor | null, runningVar: Tensor | null, opts: BatchNormOpts = {}): Tensor {
  return withOp("batch_norm", () => {
    requireFloat(x, "batch_norm");
    if (x.ndim < 2) throw new RangeError(`batch_norm: expected input with at least 2 dims (N, C, ...), but got input of size ${shapeStr(x.shape)}`);
    const C = x.shape[1]!;
    for (const [p, n] of [[runningMean, "running_mean"], [runningVar, "running_var"], [opts.weight, "weight"], [opts.bias, "bias"]] as const)
      if (p && p.numel() !== C)
        throw new RangeError(`batch_norm: ${n} should contain ${C} elements not ${p.numel()} (input of size ${shapeStr(x.shape)})`);
    const training = opts.training ?? false;
    const eps = opts.eps ?? 1e-5;
    const momentum = opts.momentum ?? 0.1;
    const axes = x.shape.map((_, i) => i).filter((i) => i !== 1);
    let y: Tensor;
    if (training) {
      const n = x.numel() / C;
      if (n <= 1) throw new RangeError(`batch_norm: Expected more than 1 value per channel when training, got input size ${shapeStr(x.shape)}`);
      const mu = R.mean(x, axes, true);
      const d = M.sub(x, mu);
      const v = R.mean(M.mul(d, d), axes, true);
      y = M.mul(d, M.rsqrt(M.add(v, eps)));
      noGrad(() => {
        if (runningMean)
          inplaceSet(runningMean, M.add(M.mul(runningMean, 1 - momentum), M.mul(S.reshape(mu, runningMean.shape), momentum)), "batch_norm");
        if (runningVar)
          inplaceSet(runningVar, M.add(M.mul(runningVar, 1 - momentum), M.mul(S.reshape(v, runningVar.shape), (momentum * n) / (n - 1))), "batch_norm");
      });
    } else {
      if (!runningMean || !runningVar) throw new TypeError("batch_norm: running_mean and running_var must be defined in evaluation mode");
      y = M.mul(M.sub(x, perChannel(runningMean, x)!), M.rsqrt(M.add(perChannel(runningVar, x)!, eps)));
    }
    return affine(y, perChannel(opts.weight, x), perChannel(opts.bias, x));
  });
}

export function groupNorm(x: Tensor, numGroups: number, opts: LayerNormOpts = {}): Tensor {
  return withOp("group_norm", () => {
    requireFloat(x, "group_norm");
    if (x.ndim < 2) throw new RangeError(`group_norm: expected input with at least 2 dims (N, C, ...), but got input of size ${shapeStr(x.shape)}`);
    const [N, C] = x.shape as [number, number];
    if (C % numGroups !== 0)
      throw new RangeError(`group_norm: Expected number of channels in input to be divisible by num_groups, but got input of shape ${shapeStr(x.shape)} and num_groups=${numGroups}`);
    checkParam(opts.weight, [C], "group_norm", "weight");
    checkParam(opts.bias, [C], "group_norm", "bias");
    const g = S.reshape(x, [N, numGroups, -1]);
    const y = S.reshape(standardize(g, [2], opts.eps ?? 1e-5), x.shape);
    return affine(y, perChannel(opts.weight, x), perChannel(opts.bias, x));
  });
}

/** F.instance_norm without running stats: normalize each (n, c) over the spatial dims. */
export function instanceNorm(x: Tensor, opts: LayerNormOpts = {}): Tensor {
  return withOp("instance_norm", () => {
    requireFloat(x, "instance_norm");
    if (x.ndim < 3) throw new RangeError(`instance_norm: expected input with at least 3 dims (N, C, L...), but got input of size ${shapeStr(x.shape)}`);
    const axes = x.shape.map((_, i) => i).filter((i) => i >= 2);
    return affine(standardize(x, axes, opts.eps ?? 1e-5), perChannel(opts.weight, x), perChannel(opts.bias, x));
  });
}

/** F.normalize: x / max(||x||_p, eps) along dim; an all-zero slice gets a finite gradient, as PyTorch. */
export function normalize(x: Tensor, opts: { p?: number; dim?: number; eps?: number } = {}): Tensor {
  return withOp("normalize", () => {
    const p = opts.p ?? 2;
    const dim = opts.dim ?? 1;
    let n: Tensor;
    if (p === Infinity || p === 1) n = R.norm(x, p, dim, true);
    else {
      // ||x||_p = s^(1/p) has an infinite derivative at s = 0: evaluate it only where s > 0
      const s = R.sum(p === 2 ? M.mul(x, x) : M.pow(M.abs(x), p), dim, true);
      const pos = M.gt(s, 0);
      const safe = M.where(pos, s, 1);
      n = M.where(pos, p === 2 ? M.sqrt(safe) : M.pow(safe, 1 / p), 0);
    }
    return M.div(x, M.clamp(n, opts.eps ?? 1e-12));
  });
}
