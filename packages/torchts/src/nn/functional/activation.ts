// Activations and softmax family. Each is a composition of differentiable ops chosen so
// that neither the value nor the gradient overflows (no exp of a branch `where` discards).
// `inplace=True` computes out of place and lands the result in the input (inplaceSet), which
// PyTorch's autograd rules for in-place writes then govern (a leaf that requires grad throws).
import type { DType } from "../../ir/dtype.js";
import { normDim, shapeStr } from "../../ir/shape.js";
import { compositeScope, type Tensor } from "../../tensor.js";
import { isGradEnabled, noGrad } from "../../autograd/grad_mode.js";
import { getEagerMode } from "../../runtime/mode.js";
import { attach, cast, compositePrim } from "../../ops/core.js";
import { op, type Sig } from "../../ops/registry.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { maybeInplace, requireFloat } from "./util.js";

export { sigmoid, tanh } from "../../ops/math.js";

/** PyTorch's _get_softmax_dim: F.softmax(x) without dim (deprecated there) picks 0 or 1. */
function implicitDim(ndim: number): number {
  return ndim === 0 || ndim === 1 || ndim === 3 ? 0 : 1;
}

function prep(x: Tensor, dtype: DType | null): Tensor {
  const y = dtype ? cast(x, dtype) : x;
  requireFloat(y);
  return y;
}

/** softmax: exp(x - max) / sum, so large logits don't overflow. */
function softmaxImpl(x: Tensor, dim: number, dtype: DType | null): Tensor {
  const xf = prep(x, dtype);
  const d = normDim(dim, xf.ndim);
  // a 0-dim softmax is exp(x - x): 1 (nan at +-inf, as PyTorch), with a zero gradient
  if (xf.ndim === 0) return M.exp(M.sub(xf, xf));
  const y = lastDimComposite("softmax", xf, d);
  // d/dx softmax: y * (g - sum(g * y))
  if (y) return attach(y, "SoftmaxBackward0", [xf], [y], ([g], [ys]) => [M.mul(ys!, M.sub(g!, R.sum(M.mul(g!, ys!), d, true)))]);
  const m = S.detach(R.amax(xf, d, true));
  const e = M.exp(M.sub(xf, m));
  return M.div(e, R.sum(e, d, true));
}

/** log_softmax: x - logsumexp(x), stable for any logit magnitude. */
function logSoftmaxImpl(x: Tensor, dim: number, dtype: DType | null): Tensor {
  const xf = prep(x, dtype);
  const d = normDim(dim, xf.ndim);
  if (xf.ndim === 0) return M.sub(xf, xf);
  const y = lastDimComposite("logSoftmax", xf, d);
  // d/dx log_softmax: g - exp(y) * sum(g)
  if (y) return attach(y, "LogSoftmaxBackward0", [xf], [y], ([g], [ys]) => [M.sub(g!, M.mul(M.exp(ys!), R.sum(g!, d, true)))]);
  // (x - max) - log(sum(exp(x - max))): never re-adds max, which would round away
  // the small result at large |x| in float32
  const z = M.sub(xf, S.detach(R.amax(xf, d, true)));
  return M.sub(z, M.log(R.sum(M.exp(z), d, true)));
}

/** The device's own row kernel when the dim is the last, contiguous one (else null: decompose). */
function lastDimComposite(name: "softmax" | "logSoftmax", x: Tensor, d: number): Tensor | null {
  if (d !== x.ndim - 1 || !x.isContiguous() || (x.dtype !== "float32" && x.dtype !== "float64")) return null;
  return compositePrim(name, { dim: d }, [x], x.shape, x.dtype);
}

export interface SoftmaxOpts {
  dim?: number | null;
  dtype?: DType | null;
}
type TorchSoftmaxSig = Sig<[input: Tensor, dim: number, dtype?: DType | null], SoftmaxOpts, Tensor>;
type FSoftmaxSig = Sig<[input: Tensor, dim?: number | null], SoftmaxOpts, Tensor>;

/** torch.softmax / Tensor.softmax: dim is required, dtype may be positional. */
export const torchSoftmax = op<TorchSoftmaxSig>("softmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", softmaxImpl);
/** torch.log_softmax / Tensor.log_softmax. */
export const torchLogSoftmax = op<TorchSoftmaxSig>("logSoftmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", logSoftmaxImpl);

/** F.softmax(input, dim=None, *, dtype=None): without dim, PyTorch's implicit choice (0 for 0-, 1- and 3-d inputs, else 1). */
export const softmax = op<FSoftmaxSig>(
  "softmax(Tensor input, int? dim=None, *, ScalarType? dtype=None) -> Tensor",
  (x: Tensor, dim: number | null, dtype: DType | null) => softmaxImpl(x, dim ?? implicitDim(x.ndim), dtype),
  { key: "F.softmax" },
);
export const logSoftmax = op<FSoftmaxSig>(
  "logSoftmax(Tensor input, int? dim=None, *, ScalarType? dtype=None) -> Tensor",
  (x: Tensor, dim: number | null, dtype: DType | null) => logSoftmaxImpl(x, dim ?? implicitDim(x.ndim), dtype),
  { key: "F.logSoftmax" },
);
/** F.softmin: softmax(-x) (negated before the dtype cast, as PyTorch). */
export const softmin = op<FSoftmaxSig>(
  "softmin(Tensor input, int? dim=None, *, ScalarType? dtype=None) -> Tensor",
  (x: Tensor, dim: number | null, dtype: DType | null) => softmaxImpl(M.neg(x), dim ?? implicitDim(x.ndim), dtype),
);

type InplaceOpts = { inplace?: boolean };
type InplaceSig = Sig<[input: Tensor, inplace?: boolean], InplaceOpts, Tensor>;

/** F.relu(input, inplace=False); torch.relu is the math op of the same name. */
export const relu = op<InplaceSig>(
  "relu(Tensor input, bool inplace=False) -> Tensor",
  (x: Tensor, inplace: boolean) => maybeInplace(x, M.relu(x), inplace, "relu"),
  { key: "F.relu" },
);

function hardtanhImpl(x: Tensor, minVal: number, maxVal: number): Tensor {
  // PyTorch's clamp, min(max(x, lo), hi), is hi everywhere (but at nan) when lo > hi
  if (minVal > maxVal) return M.where(M.ne(x, x), x, maxVal);
  // gradient is zero at and beyond the limits, as PyTorch
  return M.where(M.le(x, minVal), minVal, M.where(M.ge(x, maxVal), maxVal, x));
}
/** F.hardtanh (PyTorch 1.13 accepts minVal > maxVal: the result is maxVal). */
export const hardtanh = op<
  Sig<[input: Tensor, minVal?: number, maxVal?: number, inplace?: boolean], { minVal?: number; maxVal?: number; inplace?: boolean }, Tensor>
>("hardtanh(Tensor input, float minVal=-1., float maxVal=1., bool inplace=False) -> Tensor", (x: Tensor, lo: number, hi: number, inplace: boolean) =>
  maybeInplace(x, hardtanhImpl(x, lo, hi), inplace, "hardtanh"),
);

export const relu6 = op<InplaceSig>("relu6(Tensor input, bool inplace=False) -> Tensor", (x: Tensor, inplace: boolean) =>
  maybeInplace(x, hardtanhImpl(x, 0, 6), inplace, "relu6"),
);

export const leakyRelu = op<Sig<[input: Tensor, negativeSlope?: number, inplace?: boolean], { negativeSlope?: number; inplace?: boolean }, Tensor>>(
  "leakyRelu(Tensor input, float negativeSlope=0.01, bool inplace=False) -> Tensor",
  (x: Tensor, slope: number, inplace: boolean) => maybeInplace(x, M.where(M.gt(x, 0), x, M.mul(x, slope)), inplace, "leakyRelu"),
);

function eluImpl(x: Tensor, alpha: number): Tensor {
  const pos = M.gt(x, 0);
  // expm1 only of the non-positive part: the discarded branch must not overflow
  const neg = M.mul(M.expm1(M.where(pos, 0, x)), alpha);
  return M.where(pos, x, neg);
}
type AlphaSig = Sig<[input: Tensor, alpha?: number, inplace?: boolean], { alpha?: number; inplace?: boolean }, Tensor>;
export const elu = op<AlphaSig>("elu(Tensor input, float alpha=1., bool inplace=False) -> Tensor", (x: Tensor, alpha: number, inplace: boolean) =>
  maybeInplace(x, eluImpl(x, alpha), inplace, "elu"),
);

export const celu = op<AlphaSig>("celu(Tensor input, float alpha=1., bool inplace=False) -> Tensor", (x: Tensor, alpha: number, inplace: boolean) => {
  if (alpha === 0) throw new Error("ZeroDivisionError: alpha cannot be 0 for CELU");
  const pos = M.gt(x, 0);
  const neg = M.mul(M.expm1(M.div(M.where(pos, 0, x), alpha)), alpha);
  return maybeInplace(x, M.where(pos, x, neg), inplace, "celu");
});

const SELU_ALPHA = 1.6732632423543772848170429916717;
const SELU_SCALE = 1.0507009873554804934193349852946;
export const selu = op<InplaceSig>("selu(Tensor input, bool inplace=False) -> Tensor", (x: Tensor, inplace: boolean) =>
  maybeInplace(x, M.mul(eluImpl(x, SELU_ALPHA), SELU_SCALE), inplace, "selu"),
);

/**
 * F.gelu(input, *, approximate='none'). The forward's temporaries are freed at once and the
 * backward recomputes from x (its only saved tensor), as PyTorch's GeluBackward0 does: the
 * decomposition's autograd would keep five or six activation-sized intermediates per call alive.
 */
export const gelu = op<Sig<[input: Tensor], { approximate?: "none" | "tanh" }, Tensor>>(
  'gelu(Tensor input, *, str approximate="none") -> Tensor',
  (x: Tensor, approximate: string) => {
    if (approximate !== "none" && approximate !== "tanh") throw new Error("approximate argument must be either none or tanh.");
    requireFloat(x);
    const a = approximate;
    // fused eager and torch.compile: the backward reads the forward's erf(x / sqrt 2) + 1 (a value
    // left pending, never materialized for it) instead of recomputing it, so when forward and
    // backward land in one flush the kernel computes erf once per element, not twice. Strict eager
    // would have to keep it materialized until the backward: it recomputes from x, as PyTorch does.
    const share = a === "none" && x.requiresGrad && isGradEnabled() && getEagerMode() === "fused";
    const [y, e1] = noGrad(() => compositeScope(() => geluValue(x, a, share)));
    // without createGraph the backward is one formula: one fused kernel in strict eager too; with
    // it, the derivative is rebuilt from x so that it is differentiable (e1 carries no history); so
    // it is when a torch.scope around the forward disposed e1 before this backward
    return attach(y, "GeluBackward0", [x], [x], ([g], [xs]) =>
      isGradEnabled() ? [M.mul(g!, geluDerivative(xs!, a))] : compositeScope(() => [M.mul(g!, geluDerivative(xs!, a, e1 && !e1.isDisposed ? e1 : null))]),
    );
  },
);

const GELU_K = Math.sqrt(2 / Math.PI);

/**
 * Frees a formula's intermediates once their last reader ran, when nothing else can hold them:
 * no autograd recording (a backward without createGraph, a no-grad forward) and strict or debug
 * eager (fused eager never materializes them). Held to the end of the call, gelu's backward
 * would keep ~15 activation-sized tensors per call alive at once.
 */
function drop(...ts: Tensor[]): void {
  if (isGradEnabled() || getEagerMode() === "fused") return;
  for (const t of ts) t.dispose();
}

/** erf(x / sqrt 2) + 1: 2 Phi(x), the exact form's shared term. */
function erfPlusOne(x: Tensor): Tensor {
  const u = M.mul(x, Math.SQRT1_2);
  const e = M.erf(u);
  drop(u);
  const e1 = M.add(e, 1);
  drop(e);
  return e1;
}

/** tanh(k (x + c x^3)), the tanh form's shared term; x^2 too when the caller asks for it (else freed). */
function tanhTerm(x: Tensor, keepSquare: boolean): { t: Tensor; x2: Tensor | null } {
  const x2 = M.mul(x, x);
  const x3 = M.mul(x2, x);
  if (!keepSquare) drop(x2);
  const cx3 = M.mul(x3, 0.044715);
  drop(x3);
  const s = M.add(x, cx3);
  drop(cx3);
  const inner = M.mul(s, GELU_K);
  drop(s);
  const t = M.tanh(inner);
  drop(inner);
  return { t, x2: keepSquare ? x2 : null };
}

/** The value, and (`keepErf`, the exact form) its erf(x / sqrt 2) + 1 for the backward to reuse. */
function geluValue(x: Tensor, a: "none" | "tanh", keepErf: boolean): [Tensor, Tensor | null] {
  // x/2 (1 + erf(x / sqrt 2)), or x/2 (1 + tanh(k (x + c x^3)))
  const h = M.mul(x, 0.5);
  let e1: Tensor;
  if (a === "none") e1 = erfPlusOne(x);
  else {
    const { t } = tanhTerm(x, false);
    e1 = M.add(t, 1);
    drop(t);
  }
  const y = M.mul(h, e1);
  drop(h);
  if (keepErf) return [y, e1];
  drop(e1);
  return [y, null];
}

/** d gelu / dx, written with differentiable ops (double backward works); `e1`: the forward's erf(x / sqrt 2) + 1, when it kept it. */
function geluDerivative(x: Tensor, a: "none" | "tanh", e1In: Tensor | null = null): Tensor {
  if (a === "none") {
    // Phi(x) + x phi(x)
    const e1 = e1In ?? erfPlusOne(x);
    const cdf = M.mul(e1, 0.5);
    if (!e1In) drop(e1);
    const x2 = M.mul(x, x);
    const q = M.mul(x2, -0.5);
    drop(x2);
    const ex = M.exp(q);
    drop(q);
    const pdf = M.mul(ex, 1 / Math.sqrt(2 * Math.PI));
    drop(ex);
    const xp = M.mul(x, pdf);
    drop(pdf);
    const d = M.add(cdf, xp);
    drop(cdf, xp);
    return d;
  }
  // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
  const { t, x2 } = tanhTerm(x, true);
  const p = M.mul(x2!, 3 * 0.044715);
  drop(x2!);
  const p1 = M.add(p, 1);
  drop(p);
  const dInner = M.mul(p1, GELU_K);
  drop(p1);
  const tt = M.mul(t, t);
  const sech2 = M.sub(1, tt);
  drop(tt);
  const t1 = M.add(t, 1);
  drop(t);
  const left = M.mul(t1, 0.5);
  drop(t1);
  const h = M.mul(x, 0.5);
  const hs = M.mul(h, sech2);
  drop(h, sech2);
  const right = M.mul(hs, dInner);
  drop(hs, dInner);
  const d = M.add(left, right);
  drop(left, right);
  return d;
}

export const silu = op<InplaceSig>("silu(Tensor input, bool inplace=False) -> Tensor", (x: Tensor, inplace: boolean) =>
  maybeInplace(x, M.mul(x, M.sigmoid(x)), inplace, "silu"),
);

/** log(1 + exp(beta x)) / beta, and x itself where beta x > threshold. */
function softplusImpl(x: Tensor, beta: number, threshold: number): Tensor {
  const bx = M.mul(x, beta);
  const lin = M.gt(bx, threshold);
  const soft = M.div(M.log1p(M.exp(M.where(lin, 0, bx))), beta);
  return M.where(lin, x, soft);
}
export const softplus = op<
  Sig<[input: Tensor, beta?: number | boolean, threshold?: number | boolean], { beta?: number | boolean; threshold?: number | boolean }, Tensor>
>("softplus(Tensor input, Scalar beta=1, Scalar threshold=20) -> Tensor", (x: Tensor, beta: number | boolean, threshold: number | boolean) =>
  softplusImpl(x, Number(beta), Number(threshold)),
);

export const mish = op<InplaceSig>("mish(Tensor input, bool inplace=False) -> Tensor", (x: Tensor, inplace: boolean) =>
  maybeInplace(x, M.mul(x, M.tanh(softplusImpl(x, 1, 20))), inplace, "mish"),
);

type UnarySig = Sig<[input: Tensor], Record<never, never>, Tensor>;
export const logsigmoid = op<UnarySig>("logsigmoid(Tensor input) -> Tensor", (x: Tensor) => M.neg(softplusImpl(M.neg(x), 1, 20)));

export const hardsigmoid = op<InplaceSig>("hardsigmoid(Tensor input, bool inplace=False) -> Tensor", (x: Tensor, inplace: boolean) =>
  maybeInplace(x, M.where(M.le(x, -3), 0, M.where(M.ge(x, 3), 1, M.add(M.div(x, 6), 0.5))), inplace, "hardsigmoid"),
);

/** F.hardswish with PyTorch 1.13's gradient at the kinks: x/3 + 1/2 on [-3, 3), 1 from 3 on. */
export const hardswish = op<InplaceSig>("hardswish(Tensor input, bool inplace=False) -> Tensor", (x: Tensor, inplace: boolean) =>
  maybeInplace(x, M.where(M.lt(x, -3), 0, M.where(M.lt(x, 3), M.div(M.mul(x, M.add(x, 3)), 6), x)), inplace, "hardswish"),
);

export const softsign = op<UnarySig>("softsign(Tensor input) -> Tensor", (x: Tensor) => M.div(x, M.add(M.abs(x), 1)));

export const tanhshrink = op<UnarySig>("tanhshrink(Tensor input) -> Tensor", (x: Tensor) => M.sub(x, M.tanh(x)));

export const threshold = op<
  Sig<[input: Tensor, threshold: number, value: number, inplace?: boolean], { threshold?: number; value?: number; inplace?: boolean }, Tensor>
>("threshold(Tensor input, float threshold, float value, bool inplace=False) -> Tensor", (x: Tensor, th: number, value: number, inplace: boolean) =>
  maybeInplace(x, M.where(M.gt(x, th), x, value), inplace, "threshold"),
);

export const glu = op<Sig<[input: Tensor, dim?: number], { dim?: number }, Tensor>>("glu(Tensor input, int dim=-1) -> Tensor", (x: Tensor, dim: number) => {
  if (x.ndim === 0) throw new Error("glu does not support scalars because halving size must be even");
  const d = normDim(dim, x.ndim);
  const n = x.shape[d]!;
  if (n % 2 !== 0) throw new Error(`Halving dimension must be even, but dimension ${d} is size ${n} (input shape ${shapeStr(x.shape)})`);
  const [a, b] = S.split(x, n / 2, d) as [Tensor, Tensor];
  return M.mul(a, M.sigmoid(b));
});
