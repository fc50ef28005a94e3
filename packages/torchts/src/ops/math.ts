// Elementwise ops: arithmetic with PyTorch's type promotion, comparisons, logic and math.
import { getDefaultDtype, isFloating, resultType, scalarDtype, type DType, type PromoOperand } from "../ir/dtype.js";
import type { BinaryOp, UnaryOp } from "../ir/prims.js";
import { withOp } from "../runtime/mode.js";
import { Tensor, unscoped, type TensorLike } from "../tensor.js";
import { traceState } from "../runtime/dispatch.js";
import { recordHooks } from "../runtime/scheduler.js";
import { binary, cast, scalarTensor, unary, where as wherePrim } from "./core.js";
import { full, zerosLike, onesLike } from "./creation.js";

/** zeros of a given dtype/device, for gradient formulas. */
export function zerosOf(shape: number[], dtype: DType, device: string): Tensor {
  return full(shape, 0, { dtype, device });
}
export { zerosLike as _zerosLike, onesLike as _onesLike };

function operand(x: TensorLike): PromoOperand {
  if (x instanceof Tensor) return { dtype: x.dtype, kind: x.ndim === 0 ? "zerodim" : "tensor" };
  return { dtype: scalarDtype(x), kind: "scalar" };
}

function asTensor(x: TensorLike, dtype: DType, device: string): Tensor {
  if (x instanceof Tensor) return cast(x, dtype);
  return scalarOperand(x, dtype, device);
}

// A number operand of an op (x * 0.5) becomes a 0-dim tensor, as PyTorch wraps Python scalars.
// Recent ones are kept per (value, dtype, device) and shared: nobody else holds them, so they are
// never written, and an op with a constant then allocates and registers one buffer, not two.
// torch.compile's recorder binds declared host numbers to the scalar storages it sees and
// writes new values into them on replay: while it records, every operand is a fresh tensor.
const SCALAR_CACHE_MAX = 256;
const scalarCache = new Map<string, Tensor>();

/** Forget the cached number constants of a device (its buffers are gone: torch.webgpu.shutdown()). */
export function dropScalarConstants(device: string): void {
  for (const [k, t] of scalarCache) if (t.device === device) scalarCache.delete(k);
}
function scalarOperand(x: number | boolean, dtype: DType, device: string): Tensor {
  if (traceState.fn !== null || recordHooks.prim !== null) return scalarTensor(x, dtype, device);
  const v = Number(x);
  const key = `${dtype}|${device}|${Object.is(v, -0) ? "-0" : v}`;
  let t = scalarCache.get(key);
  if (t && !t.isDisposed) {
    scalarCache.delete(key); // most recent last
    scalarCache.set(key, t);
    return t;
  }
  t = unscoped(() => scalarTensor(x, dtype, device));
  scalarCache.set(key, t);
  if (scalarCache.size > SCALAR_CACHE_MAX) scalarCache.delete(scalarCache.keys().next().value!);
  return t;
}

function deviceOf(...xs: TensorLike[]): string {
  for (const x of xs) if (x instanceof Tensor && x.ndim > 0) return x.device;
  for (const x of xs) if (x instanceof Tensor) return x.device;
  return "cpu";
}

export function promote(op: string, ...xs: TensorLike[]): DType {
  if (!xs.some((x) => x instanceof Tensor)) throw new TypeError(`${op}: expected at least one Tensor argument`);
  return resultType(xs.map(operand));
}

/** Apply a binary primitive with promotion; `compute` picks the dtype the op computes in. */
function bin(op: BinaryOp, name: string, a: TensorLike, b: TensorLike, compute?: (d: DType) => DType): Tensor {
  return withOp(name, () => {
    let d = promote(name, a, b);
    if (compute) d = compute(d);
    const dev = deviceOf(a, b);
    return binary(op, asTensor(a, d, dev), asTensor(b, d, dev));
  });
}

const toFloat = (d: DType): DType => (isFloating(d) ? d : getDefaultDtype());

export function add(a: TensorLike, b: TensorLike, opts: { alpha?: number } = {}): Tensor {
  if (opts.alpha !== undefined && opts.alpha !== 1) b = mul(b, opts.alpha);
  return bin("add", "add", a, b);
}
export function sub(a: TensorLike, b: TensorLike, opts: { alpha?: number } = {}): Tensor {
  if (a instanceof Tensor && a.dtype === "bool" && b instanceof Tensor && b.dtype === "bool")
    throw new TypeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.");
  if (opts.alpha !== undefined && opts.alpha !== 1) b = mul(b, opts.alpha);
  return bin("sub", "sub", a, b);
}
/** other - self, as Tensor.__rsub__ */
export function rsub(a: TensorLike, b: TensorLike): Tensor {
  return sub(b, a);
}
export function mul(a: TensorLike, b: TensorLike): Tensor {
  return bin("mul", "mul", a, b);
}
export function div(a: TensorLike, b: TensorLike, opts: { roundingMode?: "trunc" | "floor" | null } = {}): Tensor {
  const m = opts.roundingMode;
  if (m === "floor") return floorDivide(a, b);
  if (m === "trunc") {
    const d = promote("div", a, b);
    if (isFloating(d)) return trunc(bin("div", "div", a, b));
    return bin("truncdiv", "div", a, b);
  }
  return bin("div", "div", a, b, toFloat);
}
export const trueDivide = (a: TensorLike, b: TensorLike) => div(a, b);
export function floorDivide(a: TensorLike, b: TensorLike): Tensor {
  const d = promote("floor_divide", a, b);
  if (isFloating(d)) return floor(bin("div", "floor_divide", a, b));
  return bin("floordiv", "floor_divide", a, b);
}
export function remainder(a: TensorLike, b: TensorLike): Tensor {
  return bin("remainder", "remainder", a, b);
}
export function fmod(a: TensorLike, b: TensorLike): Tensor {
  return bin("fmod", "fmod", a, b);
}
export function pow(a: TensorLike, b: TensorLike): Tensor {
  if (a instanceof Tensor && !isFloating(a.dtype) && typeof b === "number" && Number.isInteger(b) && b < 0)
    throw new RangeError("pow: Integers to negative integer powers are not allowed.");
  if (typeof b === "number" && a instanceof Tensor) {
    // fast paths keep gradients exact and avoid log() of negative bases
    if (b === 1) return withOp("pow", () => cast(a, promote("pow", a, b)).clone());
    if (b === 2) return withOp("pow", () => { const x = cast(a, promote("pow", a, b)); return mul(x, x); });
  }
  return bin("pow", "pow", a, b);
}
export function maximum(a: Tensor, b: TensorLike): Tensor {
  return bin("maximum", "maximum", a, b);
}
export function minimum(a: Tensor, b: TensorLike): Tensor {
  return bin("minimum", "minimum", a, b);
}
export function atan2(a: TensorLike, b: TensorLike): Tensor {
  return bin("atan2", "atan2", a, b, toFloat);
}

export const eq = (a: TensorLike, b: TensorLike) => bin("eq", "eq", a, b);
export const ne = (a: TensorLike, b: TensorLike) => bin("ne", "ne", a, b);
export const lt = (a: TensorLike, b: TensorLike) => bin("lt", "lt", a, b);
export const le = (a: TensorLike, b: TensorLike) => bin("le", "le", a, b);
export const gt = (a: TensorLike, b: TensorLike) => bin("gt", "gt", a, b);
export const ge = (a: TensorLike, b: TensorLike) => bin("ge", "ge", a, b);
export const logicalAnd = (a: TensorLike, b: TensorLike) => bin("and", "logical_and", a, b);
export const logicalOr = (a: TensorLike, b: TensorLike) => bin("or", "logical_or", a, b);
export const logicalXor = (a: TensorLike, b: TensorLike) => bin("xor", "logical_xor", a, b);
export function logicalNot(a: Tensor): Tensor {
  return withOp("logical_not", () => unary("not", a));
}

function bitwise(op: BinaryOp, name: string, boolOp: BinaryOp, a: TensorLike, b: TensorLike): Tensor {
  const d = promote(name, a, b);
  if (isFloating(d)) throw new TypeError(`"${name}_cpu" not implemented for '${d}'`);
  if (d === "bool") return bin(boolOp, name, a, b);
  return bin(op, name, a, b);
}
export const bitwiseAnd = (a: TensorLike, b: TensorLike) => bitwise("bitand", "bitwise_and", "and", a, b);
export const bitwiseOr = (a: TensorLike, b: TensorLike) => bitwise("bitor", "bitwise_or", "or", a, b);
export const bitwiseXor = (a: TensorLike, b: TensorLike) => bitwise("bitxor", "bitwise_xor", "xor", a, b);
export function bitwiseNot(a: Tensor): Tensor {
  if (isFloating(a.dtype)) throw new TypeError(`"bitwise_not_cpu" not implemented for '${a.dtype}'`);
  return withOp("bitwise_not", () => unary(a.dtype === "bool" ? "not" : "bitnot", a));
}

// ---- unary ----
function fun(op: UnaryOp, name = op) {
  return (x: Tensor): Tensor => withOp(name, () => unary(op, isFloating(x.dtype) ? x : cast(x, getDefaultDtype())));
}
function keepInt(op: UnaryOp, name = op) {
  return (x: Tensor): Tensor => withOp(name, () => unary(op, x));
}
export const exp = fun("exp");
export const log = fun("log");
export const sqrt = fun("sqrt");
export const rsqrt = fun("rsqrt");
export const sin = fun("sin");
export const cos = fun("cos");
export const tan = fun("tan");
export const tanh = fun("tanh");
export const sigmoid = fun("sigmoid");
export const erf = fun("erf");
export const expm1 = fun("expm1");
export const log1p = fun("log1p");
export const reciprocal = fun("reciprocal");
export const atan = fun("atan");
export const asin = fun("asin");
export const acos = fun("acos");
export const sinh = fun("sinh");
export const cosh = fun("cosh");
export const asinh = fun("asinh");
export const acosh = fun("acosh");
export const atanh = fun("atanh");
export const log2 = fun("log2");
export const exp2 = fun("exp2");
export const frac = fun("frac");
export function log10(x: Tensor): Tensor {
  return withOp("log10", () => mul(log(x), 1 / Math.LN10));
}
export const neg = keepInt("neg");
export const abs = keepInt("abs");
export const sign = keepInt("sign");
export function floor(x: Tensor): Tensor {
  return isFloating(x.dtype) ? withOp("floor", () => unary("floor", x)) : x.clone();
}
export function ceil(x: Tensor): Tensor {
  return isFloating(x.dtype) ? withOp("ceil", () => unary("ceil", x)) : x.clone();
}
export function round(x: Tensor, opts: { decimals?: number } = {}): Tensor {
  if (!isFloating(x.dtype)) return x.clone();
  const dec = opts.decimals ?? 0;
  if (dec === 0) return withOp("round", () => unary("round", x));
  const s = 10 ** dec;
  return div(unary("round", mul(x, s)), s);
}
export function trunc(x: Tensor): Tensor {
  return isFloating(x.dtype) ? withOp("trunc", () => unary("trunc", x)) : x.clone();
}
export const fix = trunc;
export function isnan(x: Tensor): Tensor {
  return withOp("isnan", () => unary("isnan", x));
}
export function isinf(x: Tensor): Tensor {
  return withOp("isinf", () => unary("isinf", x));
}
export function isfinite(x: Tensor): Tensor {
  return logicalNot(logicalOr(isnan(x), isinf(x)));
}
export function square(x: Tensor): Tensor {
  return withOp("square", () => mul(x, x));
}
export function relu(x: Tensor): Tensor {
  // select on x <= 0 (not x > 0) so that NaN propagates, as PyTorch's relu(nan) = nan
  return withOp("relu", () => where(le(x, 0), 0, x));
}

/** torch.where(cond, a, b) with tensors or scalars for a and b. */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  return withOp("where", () => {
    if (cond.dtype !== "bool") cond = cast(cond, "bool");
    const d = promote("where", a instanceof Tensor || b instanceof Tensor ? a : cond, b);
    const dev = deviceOf(cond, a, b);
    return wherePrim(cond, asTensor(a, d, dev), asTensor(b, d, dev));
  });
}

export function clamp(x: Tensor, min?: TensorLike | null, max?: TensorLike | null): Tensor {
  if ((min === undefined || min === null) && (max === undefined || max === null))
    throw new TypeError("clamp: At least one of 'min' or 'max' must not be None");
  return withOp("clamp", () => {
    let r = x;
    // gradient passes where min <= x <= max, as PyTorch
    if (min !== undefined && min !== null) r = where(lt(r, min), min, r);
    if (max !== undefined && max !== null) r = where(gt(r, max), max, r);
    return r;
  });
}
export const clip = clamp;

export function lerp(a: Tensor, b: Tensor, w: TensorLike): Tensor {
  return add(a, mul(w, sub(b, a)));
}
export function addcmul(t: Tensor, a: Tensor, b: Tensor, opts: { value?: number } = {}): Tensor {
  return add(t, mul(mul(a, b), opts.value ?? 1));
}
export function addcdiv(t: Tensor, a: Tensor, b: Tensor, opts: { value?: number } = {}): Tensor {
  return add(t, mul(div(a, b), opts.value ?? 1));
}
