// Activations and softmax family. Each is a composition of differentiable ops chosen so
// that neither the value nor the gradient overflows (no exp of a branch `where` discards).
import type { DType } from "../../ir/dtype.js";
import { normDim, shapeStr } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import { scope, type Tensor } from "../../tensor.js";
import { noGrad } from "../../autograd/grad_mode.js";
import { attach, cast, compositePrim } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { requireFloat } from "./util.js";

export { sigmoid, tanh } from "../../ops/math.js";

function softmaxDim(x: Tensor, dim: number | undefined | null, op: string): number {
  if (dim === undefined || dim === null)
    throw new TypeError(`${op}: dim must be given (implicit dim choice is deprecated in PyTorch), input shape ${shapeStr(x.shape)}`);
  return normDim(dim, Math.max(x.ndim, 1), op);
}

function prep(x: Tensor, dtype: DType | undefined, op: string): Tensor {
  const y = dtype ? cast(x, dtype) : x;
  requireFloat(y, op);
  return y;
}

/** F.softmax(x, dim, {dtype}): exp(x - max) / sum, so large logits don't overflow. */
export function softmax(x: Tensor, dim: number, opts: { dtype?: DType } = {}): Tensor {
  return withOp("softmax", () => {
    const xf = prep(x, opts.dtype, "softmax");
    if (xf.ndim === 0) return M.div(xf, xf);
    const d = softmaxDim(xf, dim, "softmax");
    const y = lastDimComposite("softmax", xf, d);
    // d/dx softmax: y * (g - sum(g * y))
    if (y) return attach(y, "SoftmaxBackward0", [xf], [y], ([g], [ys]) => [M.mul(ys!, M.sub(g!, R.sum(M.mul(g!, ys!), d, true)))]);
    const m = S.detach(R.amax(xf, d, true));
    const e = M.exp(M.sub(xf, m));
    return M.div(e, R.sum(e, d, true));
  });
}

/** F.log_softmax: x - logsumexp(x), stable for any logit magnitude. */
export function logSoftmax(x: Tensor, dim: number, opts: { dtype?: DType } = {}): Tensor {
  return withOp("log_softmax", () => {
    const xf = prep(x, opts.dtype, "log_softmax");
    if (xf.ndim === 0) return M.sub(xf, xf);
    const d = softmaxDim(xf, dim, "log_softmax");
    const y = lastDimComposite("logSoftmax", xf, d);
    // d/dx log_softmax: g - exp(y) * sum(g)
    if (y) return attach(y, "LogSoftmaxBackward0", [xf], [y], ([g], [ys]) => [M.sub(g!, M.mul(M.exp(ys!), R.sum(g!, d, true)))]);
    // (x - max) - log(sum(exp(x - max))): never re-adds max, which would round away
    // the small result at large |x| in float32
    const z = M.sub(xf, S.detach(R.amax(xf, d, true)));
    return M.sub(z, M.log(R.sum(M.exp(z), d, true)));
  });
}

/** The device's own row kernel when the dim is the last, contiguous one (else null: decompose). */
function lastDimComposite(name: "softmax" | "logSoftmax", x: Tensor, d: number): Tensor | null {
  if (d !== x.ndim - 1 || !x.isContiguous() || (x.dtype !== "float32" && x.dtype !== "float64")) return null;
  return compositePrim(name, { dim: d }, [x], x.shape, x.dtype);
}

export function softmin(x: Tensor, dim: number, opts: { dtype?: DType } = {}): Tensor {
  return withOp("softmin", () => softmax(M.neg(prep(x, opts.dtype, "softmin")), dim));
}

export function relu(x: Tensor): Tensor {
  return M.relu(x);
}

/** F.hardtanh: gradient is zero at and beyond the limits, as PyTorch. */
export function hardtanh(x: Tensor, minVal = -1, maxVal = 1): Tensor {
  return withOp("hardtanh", () => {
    if (minVal > maxVal) throw new RangeError(`hardtanh: min_val (${minVal}) cannot be greater than max_val (${maxVal})`);
    return M.where(M.le(x, minVal), minVal, M.where(M.ge(x, maxVal), maxVal, x));
  });
}

export function relu6(x: Tensor): Tensor {
  return withOp("relu6", () => hardtanh(x, 0, 6));
}

export function leakyRelu(x: Tensor, negativeSlope = 0.01): Tensor {
  return withOp("leaky_relu", () => M.where(M.gt(x, 0), x, M.mul(x, negativeSlope)));
}

export function elu(x: Tensor, alpha = 1): Tensor {
  return withOp("elu", () => {
    const pos = M.gt(x, 0);
    // expm1 only of the non-positive part: the discarded branch must not overflow
    const neg = M.mul(M.expm1(M.where(pos, 0, x)), alpha);
    return M.where(pos, x, neg);
  });
}

export function celu(x: Tensor, alpha = 1): Tensor {
  if (alpha === 0) throw new RangeError("celu: ZeroDivisionError: alpha cannot be 0 for CELU");
  return withOp("celu", () => {
    const pos = M.gt(x, 0);
    const neg = M.mul(M.expm1(M.div(M.where(pos, 0, x), alpha)), alpha);
    return M.where(pos, x, neg);
  });
}

const SELU_ALPHA = 1.6732632423543772848170429916717;
const SELU_SCALE = 1.0507009873554804934193349852946;
export function selu(x: Tensor): Tensor {
  return withOp("selu", () => M.mul(elu(x, SELU_ALPHA), SELU_SCALE));
}

/**
 * F.gelu. The forward's temporaries are freed at once and the backward recomputes from x (its
 * only saved tensor), as PyTorch's GeluBackward0 does: the decomposition's autograd would keep
 * five or six activation-sized intermediates per call alive until backward.
 */
export function gelu(x: Tensor, opts: { approximate?: "none" | "tanh" } = {}): Tensor {
  return withOp("gelu", () => {
    requireFloat(x, "gelu");
    const a = opts.approximate ?? "none";
    if (a !== "none" && a !== "tanh") throw new RangeError(`gelu: approximate argument must be either none or tanh, got '${String(a)}'`);
    const y = noGrad(() => scope(() => geluValue(x, a)));
    return attach(y, "GeluBackward0", [x], [x], ([g], [xs]) => [M.mul(g!, geluDerivative(xs!, a))]);
  });
}

const GELU_K = Math.sqrt(2 / Math.PI);

function geluValue(x: Tensor, a: "none" | "tanh"): Tensor {
  if (a === "none") return M.mul(M.mul(x, 0.5), M.add(M.erf(M.mul(x, Math.SQRT1_2)), 1));
  const inner = M.mul(M.add(x, M.mul(M.mul(M.mul(x, x), x), 0.044715)), GELU_K);
  return M.mul(M.mul(x, 0.5), M.add(M.tanh(inner), 1));
}

/** d gelu / dx, written with differentiable ops (double backward works). */
function geluDerivative(x: Tensor, a: "none" | "tanh"): Tensor {
  if (a === "none") {
    // Phi(x) + x phi(x)
    const cdf = M.mul(M.add(M.erf(M.mul(x, Math.SQRT1_2)), 1), 0.5);
    const pdf = M.mul(M.exp(M.mul(M.mul(x, x), -0.5)), 1 / Math.sqrt(2 * Math.PI));
    return M.add(cdf, M.mul(x, pdf));
  }
  // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
  const x2 = M.mul(x, x);
  const t = M.tanh(M.mul(M.add(x, M.mul(M.mul(x2, x), 0.044715)), GELU_K));
  const dInner = M.mul(M.add(M.mul(x2, 3 * 0.044715), 1), GELU_K);
  const sech2 = M.sub(1, M.mul(t, t));
  return M.add(M.mul(M.add(t, 1), 0.5), M.mul(M.mul(M.mul(x, 0.5), sech2), dInner));
}

export function silu(x: Tensor): Tensor {
  return withOp("silu", () => M.mul(x, M.sigmoid(x)));
}

/** F.softplus: log(1 + exp(beta x)) / beta, and x itself where beta x > threshold. */
export function softplus(x: Tensor, opts: { beta?: number; threshold?: number } = {}): Tensor {
  return withOp("softplus", () => {
    const beta = opts.beta ?? 1;
    const threshold = opts.threshold ?? 20;
    const bx = M.mul(x, beta);
    const lin = M.gt(bx, threshold);
    const soft = M.div(M.log1p(M.exp(M.where(lin, 0, bx))), beta);
    return M.where(lin, x, soft);
  });
}

export function mish(x: Tensor): Tensor {
  return withOp("mish", () => M.mul(x, M.tanh(softplus(x))));
}

export function logsigmoid(x: Tensor): Tensor {
  return withOp("log_sigmoid", () => M.neg(softplus(M.neg(x))));
}

export function hardsigmoid(x: Tensor): Tensor {
  return withOp("hardsigmoid", () => M.where(M.le(x, -3), 0, M.where(M.ge(x, 3), 1, M.add(M.div(x, 6), 0.5))));
}

/** F.hardswish with PyTorch 1.13's gradient at the kinks: x/3 + 1/2 on [-3, 3), 1 from 3 on. */
export function hardswish(x: Tensor): Tensor {
  return withOp("hardswish", () =>
    M.where(M.lt(x, -3), 0, M.where(M.lt(x, 3), M.div(M.mul(x, M.add(x, 3)), 6), x)),
  );
}

export function softsign(x: Tensor): Tensor {
  return withOp("softsign", () => M.div(x, M.add(M.abs(x), 1)));
}

export function tanhshrink(x: Tensor): Tensor {
  return withOp("tanhshrink", () => M.sub(x, M.tanh(x)));
}

export function threshold(x: Tensor, thresholdValue: number, value: number): Tensor {
  return withOp("threshold", () => M.where(M.gt(x, thresholdValue), x, value));
}

export function glu(x: Tensor, dim = -1): Tensor {
  return withOp("glu", () => {
    const d = normDim(dim, x.ndim, "glu");
    const n = x.shape[d]!;
    if (n % 2 !== 0) throw new RangeError(`glu: Halving dimension must be even, but dimension ${d} is size ${n} (input shape ${shapeStr(x.shape)})`);
    const [a, b] = S.split(x, n / 2, d) as [Tensor, Tensor];
    return M.mul(a, M.sigmoid(b));
  });
}
