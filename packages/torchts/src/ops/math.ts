// Elementwise ops: arithmetic with PyTorch's type promotion, comparisons, logic and math.
// Every public op is an op-table entry (registry.ts) with PyTorch's schema; the implementations
// below (`*I`) take the bound arguments and call each other directly, so a composite
// (lerp, addcmul, round with decimals, an alpha) binds its arguments once.
import { category, getDefaultDtype, isFloating, resultType, scalarDtype, type DType, type PromoOperand } from "../ir/dtype.js";
import type { BinaryOp, UnaryOp } from "../ir/prims.js";
import { Tensor, unscoped, type Scalar, type TensorLike } from "../tensor.js";
import { traceState } from "../runtime/dispatch.js";
import { recordHooks } from "../runtime/scheduler.js";
import { binary, cast, scalarTensor, unary, where as wherePrim } from "./core.js";
import { full, zerosLike, onesLike } from "./creation.js";
import { installMethods, op, type Sig } from "./registry.js";

/** zeros of a given dtype/device, for gradient formulas (internal). */
export function _zerosOf(shape: number[], dtype: DType, device: string): Tensor {
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
// device -> dtype -> value: no key string per op (building one for a float such as
// 0.7071067811865476 cost microseconds, on every scalar operand of every step). -0 is keyed
// apart: a Map equates the number -0 with 0
type ByValue = Map<number | "-0", Tensor>;
const scalarCache = new Map<string, Map<DType, ByValue>>();
let scalarCount = 0;

/** Forget the cached number constants of a device (its buffers are gone: torch.webgpu.shutdown()). */
export function _dropScalarConstants(device: string): void {
  for (const byValue of scalarCache.get(device)?.values() ?? []) scalarCount -= byValue.size;
  scalarCache.delete(device);
}
function cachedValues(device: string, dtype: DType): ByValue {
  let byDtype = scalarCache.get(device);
  if (!byDtype) scalarCache.set(device, (byDtype = new Map()));
  let byValue = byDtype.get(dtype);
  if (!byValue) byDtype.set(dtype, (byValue = new Map()));
  return byValue;
}
function scalarOperand(x: number | boolean, dtype: DType, device: string): Tensor {
  if (traceState.fn !== null || recordHooks.prim !== null) return scalarTensor(x, dtype, device);
  const v = Number(x);
  const key = Object.is(v, -0) ? "-0" : v;
  let byValue = cachedValues(device, dtype);
  let t = byValue.get(key);
  if (t && !t.isDisposed) return t;
  if (t) {
    byValue.delete(key);
    scalarCount--;
  }
  // bounded: past the limit the cache starts afresh (a loop's constants come back at once; the
  // dropped tensors' buffers go with the collector)
  if (scalarCount >= SCALAR_CACHE_MAX) {
    scalarCache.clear();
    scalarCount = 0;
    byValue = cachedValues(device, dtype);
  }
  t = unscoped(() => scalarTensor(x, dtype, device));
  byValue.set(key, t);
  scalarCount++;
  return t;
}
/** A number as a shared, never-written 0-dim constant (for other ops' formulas: maskedFill's value, where's zeros). */
export { scalarOperand as _scalarConstant };

function deviceOf2(a: TensorLike, b: TensorLike): string {
  if (a instanceof Tensor && a.ndim > 0) return a.device;
  if (b instanceof Tensor && b.ndim > 0) return b.device;
  if (a instanceof Tensor) return a.device;
  if (b instanceof Tensor) return b.device;
  return "cpu";
}

/** PyTorch's result type of a binary op (numbers count as Python scalars). */
function promote2(a: TensorLike, b: TensorLike): DType {
  return resultType([operand(a), operand(b)]);
}

/** Apply a binary primitive with promotion; `compute` picks the dtype the op computes in. */
function bin(op: BinaryOp, a: TensorLike, b: TensorLike, compute?: (d: DType) => DType): Tensor {
  let d = promote2(a, b);
  if (compute) d = compute(d);
  const dev = deviceOf2(a, b);
  return binary(op, asTensor(a, d, dev), asTensor(b, d, dev));
}

const toFloat = (d: DType): DType => (isFloating(d) ? d : getDefaultDtype());

// ---- signatures ----
type T = Tensor;
type TL = TensorLike;
type Unary = Sig<[input: T], { input?: T }, T>;
type BinOpts = { input?: TL; other?: TL };
type Binary = Sig<[input: T, other: TL], BinOpts, T>;
type BinaryAny = Sig<[input: TL, other: TL], BinOpts, T>;
type AlphaOpts = BinOpts & { alpha?: Scalar };
type DivOpts = BinOpts & { roundingMode?: "trunc" | "floor" | null };
type ClampOpts = { input?: T; min?: TL | null; max?: TL | null };
type ValueOpts = { input?: T; tensor1?: T; tensor2?: T; value?: Scalar };

// ---- arithmetic ----
function checkAlpha(a: TL, b: TL, alpha: Scalar): void {
  const d = promote2(a, b);
  if (typeof alpha === "boolean") {
    if (d !== "bool") throw new Error("Boolean alpha only supported for Boolean results.");
  } else if (!isFloating(d) && !Number.isInteger(alpha))
    throw new Error("For integral input tensors, argument alpha must not be a floating point number.");
}
function addI(a: TL, b: TL, alpha: Scalar = 1): T {
  if (alpha !== 1) {
    checkAlpha(a, b, alpha);
    b = mulI(b, alpha);
  }
  return bin("add", a, b);
}
function subI(a: TL, b: TL, alpha: Scalar = 1): T {
  const da = a instanceof Tensor ? a.dtype : scalarDtype(a);
  const db = b instanceof Tensor ? b.dtype : scalarDtype(b);
  if (da === "bool" || db === "bool") {
    if (da === db)
      throw new Error("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.");
    throw new Error(
      "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
    );
  }
  if (alpha !== 1) {
    checkAlpha(a, b, alpha);
    b = mulI(b, alpha);
  }
  return bin("sub", a, b);
}
function mulI(a: TL, b: TL): T {
  return bin("mul", a, b);
}
function divI(a: TL, b: TL, m: "trunc" | "floor" | null = null): T {
  if (m === "floor") return floorDivideI(a, b);
  if (m === "trunc") {
    const d = promote2(a, b);
    if (isFloating(d)) return truncI(bin("div", a, b));
    return bin("truncdiv", a, b);
  }
  return bin("div", a, b, toFloat);
}
function floorDivideI(a: TL, b: TL): T {
  const d = promote2(a, b);
  if (isFloating(d)) return floorI(bin("div", a, b));
  return bin("floordiv", a, b);
}
function powI(a: TL, b: TL): T {
  if (a instanceof Tensor && !isFloating(a.dtype) && typeof b === "number" && Number.isInteger(b) && b < 0)
    throw new Error("Integers to negative integer powers are not allowed.");
  if (typeof b === "number" && a instanceof Tensor) {
    // fast paths keep gradients exact and avoid log() of negative bases
    if (b === 1) return cast(a, promote2(a, b)).clone();
    if (b === 2) {
      const x = cast(a, promote2(a, b));
      return mulI(x, x);
    }
  }
  return bin("pow", a, b);
}

export const add = op<Sig<[input: TL, other: TL], AlphaOpts, T>>(
  "add(TensorLike input, TensorLike other, *, Scalar alpha=1) -> Tensor",
  addI,
);
export const sub = op<Sig<[input: TL, other: TL], AlphaOpts, T>>(
  "sub(TensorLike input, TensorLike other, *, Scalar alpha=1) -> Tensor",
  subI,
);
/** other - alpha * input (Tensor.__rsub__) */
export const rsub = op<Sig<[input: T, other: TL, alpha?: Scalar], BinOpts & { alpha?: Scalar }, T>>(
  ["rsub(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor", "rsub(Tensor input, Scalar other, Scalar alpha=1) -> Tensor"],
  (a: T, b: TL, alpha: Scalar) => subI(b, a, alpha),
);
export const mul = op<BinaryAny>("mul(TensorLike input, TensorLike other) -> Tensor", mulI);
export const div = op<Sig<[input: TL, other: TL], DivOpts, T>>(
  "div(TensorLike input, TensorLike other, *, str{trunc,floor}? roundingMode=None) -> Tensor",
  divI,
);
export const trueDivide = op<BinaryAny>("trueDivide(TensorLike input, TensorLike other) -> Tensor", (a: TL, b: TL) => divI(a, b));
export const floorDivide = op<BinaryAny>("floorDivide(TensorLike input, TensorLike other) -> Tensor", floorDivideI);
export const remainder = op<BinaryAny>(
  ["remainder(Tensor input, TensorLike other) -> Tensor", "remainder(Scalar input, Tensor other) -> Tensor"],
  (a: TL, b: TL) => bin("remainder", a, b),
);
export const fmod = op<Binary>("fmod(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("fmod", a, b));
export const pow = op<Sig<[input: TL, exponent: TL], { input?: TL; exponent?: TL }, T>>(
  ["pow(Tensor input, TensorLike exponent) -> Tensor", "pow(Scalar input, Tensor exponent) -> Tensor"],
  powI,
);
export const maximum = op<Binary>("maximum(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("maximum", a, b));
export const minimum = op<Binary>("minimum(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("minimum", a, b));
export const atan2 = op<Binary>("atan2(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("atan2", a, b, toFloat));

// ---- comparisons and logic ----
const eqI = (a: TL, b: TL): T => bin("eq", a, b);
const ltI = (a: TL, b: TL): T => bin("lt", a, b);
const leI = (a: TL, b: TL): T => bin("le", a, b);
const gtI = (a: TL, b: TL): T => bin("gt", a, b);
const logicalOrI = (a: TL, b: TL): T => bin("or", a, b);
const logicalNotI = (a: T): T => unary("not", a);
export const eq = op<Binary>("eq(Tensor input, TensorLike other) -> Tensor", eqI);
export const ne = op<Binary>("ne(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("ne", a, b));
export const lt = op<Binary>("lt(Tensor input, TensorLike other) -> Tensor", ltI);
export const le = op<Binary>("le(Tensor input, TensorLike other) -> Tensor", leI);
export const gt = op<Binary>("gt(Tensor input, TensorLike other) -> Tensor", gtI);
export const ge = op<Binary>("ge(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("ge", a, b));
export const logicalAnd = op<Binary>("logicalAnd(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("and", a, b));
export const logicalOr = op<Binary>("logicalOr(Tensor input, TensorLike other) -> Tensor", logicalOrI);
export const logicalXor = op<Binary>("logicalXor(Tensor input, TensorLike other) -> Tensor", (a: T, b: TL) => bin("xor", a, b));
export const logicalNot = op<Unary>("logicalNot(Tensor input) -> Tensor", logicalNotI);

function bitwise(op: BinaryOp, name: string, boolOp: BinaryOp) {
  return (a: TL, b: TL): T => {
    const d = promote2(a, b);
    if (isFloating(d)) throw new Error(`"${name}_cpu" not implemented for '${d}'`);
    return bin(d === "bool" ? boolOp : op, a, b);
  };
}
const bitwiseSchemas = (name: string) => [`${name}(Tensor input, TensorLike other) -> Tensor`, `${name}(Scalar input, Tensor other) -> Tensor`];
export const bitwiseAnd = op<BinaryAny>(bitwiseSchemas("bitwiseAnd"), bitwise("bitand", "bitwise_and", "and"));
export const bitwiseOr = op<BinaryAny>(bitwiseSchemas("bitwiseOr"), bitwise("bitor", "bitwise_or", "or"));
export const bitwiseXor = op<BinaryAny>(bitwiseSchemas("bitwiseXor"), bitwise("bitxor", "bitwise_xor", "xor"));
export const bitwiseNot = op<Unary>("bitwiseNot(Tensor input) -> Tensor", (a: T): T => {
  if (isFloating(a.dtype)) throw new Error(`"bitwise_not_cpu" not implemented for '${a.dtype}'`);
  return unary(a.dtype === "bool" ? "not" : "bitnot", a);
});

// ---- unary ----
/** computes in floating point: an integer or bool input is cast to the default dtype */
function fun(op: UnaryOp) {
  return (x: T): T => unary(op, isFloating(x.dtype) ? x : cast(x, getDefaultDtype()));
}
const unaryOp = (name: string, impl: (x: T) => T) => op<Unary>(`${name}(Tensor input) -> Tensor`, impl);

const expI = fun("exp");
const logI = fun("log");
const sqrtI = fun("sqrt");
const sigmoidI = fun("sigmoid");
const tanhI = fun("tanh");
export const exp = unaryOp("exp", expI);
export const log = unaryOp("log", logI);
export const sqrt = unaryOp("sqrt", sqrtI);
export const rsqrt = unaryOp("rsqrt", fun("rsqrt"));
export const sin = unaryOp("sin", fun("sin"));
export const cos = unaryOp("cos", fun("cos"));
export const tan = unaryOp("tan", fun("tan"));
export const tanh = unaryOp("tanh", tanhI);
export const sigmoid = unaryOp("sigmoid", sigmoidI);
export const erf = unaryOp("erf", fun("erf"));
export const expm1 = unaryOp("expm1", fun("expm1"));
export const log1p = unaryOp("log1p", fun("log1p"));
export const reciprocal = unaryOp("reciprocal", fun("reciprocal"));
export const atan = unaryOp("atan", fun("atan"));
export const asin = unaryOp("asin", fun("asin"));
export const acos = unaryOp("acos", fun("acos"));
export const sinh = unaryOp("sinh", fun("sinh"));
export const cosh = unaryOp("cosh", fun("cosh"));
export const asinh = unaryOp("asinh", fun("asinh"));
export const acosh = unaryOp("acosh", fun("acosh"));
export const atanh = unaryOp("atanh", fun("atanh"));
export const log2 = unaryOp("log2", fun("log2"));
export const exp2 = unaryOp("exp2", fun("exp2"));
export const frac = unaryOp("frac", fun("frac"));
export const log10 = unaryOp("log10", (x: T) => mulI(logI(x), 1 / Math.LN10));

const negI = (x: T): T => {
  if (x.dtype === "bool")
    throw new Error(
      "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.",
    );
  return unary("neg", x);
};
const absI = (x: T): T => {
  if (x.dtype === "bool") throw new Error(`"abs_cpu" not implemented for 'bool'`);
  return unary("abs", x);
};
export const neg = unaryOp("neg", negI);
export const abs = unaryOp("abs", absI);
export const sign = unaryOp("sign", (x: T) => unary("sign", x));

function floorI(x: T): T {
  return isFloating(x.dtype) ? unary("floor", x) : x.clone();
}
function truncI(x: T): T {
  return isFloating(x.dtype) ? unary("trunc", x) : x.clone();
}
export const floor = unaryOp("floor", floorI);
export const ceil = unaryOp("ceil", (x: T) => (isFloating(x.dtype) ? unary("ceil", x) : x.clone()));
export const round = op<Sig<[input: T], { input?: T; decimals?: number }, T>>(
  "round(Tensor input, *, int decimals=0) -> Tensor",
  (x: T, dec: number): T => {
    if (!isFloating(x.dtype)) {
      if (dec !== 0) throw new Error(`"round_cpu" not implemented for '${x.dtype}'`);
      return x.clone();
    }
    if (dec === 0) return unary("round", x);
    const s = 10 ** dec;
    return divI(unary("round", mulI(x, s)), s);
  },
);
export const trunc = unaryOp("trunc", truncI);
/** alias of trunc */
export const fix = unaryOp("fix", truncI);

const isnanI = (x: T): T => unary("isnan", x);
const isinfI = (x: T): T => unary("isinf", x);
export const isnan = unaryOp("isnan", isnanI);
export const isinf = unaryOp("isinf", isinfI);
export const isfinite = unaryOp("isfinite", (x: T) => logicalNotI(logicalOrI(isnanI(x), isinfI(x))));
export const square = unaryOp("square", (x: T) => mulI(x, x));
// select on x <= 0 (not x > 0) so that NaN propagates, as PyTorch's relu(nan) = nan
const reluI = (x: T): T => whereI(leI(x, 0), 0, x);
export const relu = unaryOp("relu", reluI);

// ---- selection ----
/** where(cond, a, b) with tensors or numbers for a and b; a uint8 condition is read as bool. */
function whereI(cond: T, a: TL, b: TL): T {
  if (cond.dtype !== "bool") {
    if (cond.dtype !== "uint8") throw new Error(`where expected condition to be a boolean tensor, but got a tensor with dtype ${cond.dtype}`);
    cond = cast(cond, "bool");
  }
  const d = promote2(a instanceof Tensor || b instanceof Tensor ? a : cond, b);
  const dev = cond.ndim > 0 ? cond.device : a instanceof Tensor && a.ndim > 0 ? a.device : b instanceof Tensor && b.ndim > 0 ? b.device : cond.device;
  return wherePrim(cond, asTensor(a, d, dev), asTensor(b, d, dev));
}
export const where = op<Sig<[condition: T, input: TL, other: TL], { condition?: T; input?: TL; other?: TL }, T>>(
  "where(Tensor condition, TensorLike input, TensorLike other) -> Tensor",
  whereI,
);

function clampI(x: T, min: TL | null, max: TL | null): T {
  if (min === null && max === null) throw new Error("At least one of 'min' or 'max' must not be None");
  let r = x;
  // gradient passes where min <= x <= max, as PyTorch
  if (min !== null) r = whereI(ltI(r, min), min, r);
  if (max !== null) r = whereI(gtI(r, max), max, r);
  return r;
}
type Clamp = Sig<[input: T, min?: TL | null, max?: TL | null], ClampOpts, T>;
export const clamp = op<Clamp>("clamp(Tensor input, TensorLike? min=None, TensorLike? max=None) -> Tensor", clampI);
/** alias of clamp */
export const clip = op<Clamp>("clip(Tensor input, TensorLike? min=None, TensorLike? max=None) -> Tensor", clampI);

function lerpI(a: T, b: T, w: TL): T {
  if (!isFloating(a.dtype)) throw new Error(`"lerp_kernel_${w instanceof Tensor ? "tensor" : "scalar"}" not implemented for '${a.dtype}'`);
  if (b.dtype !== a.dtype) throw new Error(`expected dtype ${a.dtype} for \`end\` but got dtype ${b.dtype}`);
  if (w instanceof Tensor && w.dtype !== a.dtype) throw new Error(`expected dtype ${a.dtype} for \`weight\` but got dtype ${w.dtype}`);
  return addI(a, mulI(w, subI(b, a)));
}
export const lerp = op<Sig<[input: T, end: T, weight: TL], { input?: T; end?: T; weight?: TL }, T>>(
  "lerp(Tensor input, Tensor end, TensorLike weight) -> Tensor",
  lerpI,
);
function addcmulI(t: T, a: T, b: T, value: Scalar): T {
  return addI(t, mulI(mulI(a, b), value));
}
function addcdivI(t: T, a: T, b: T, value: Scalar): T {
  if (category(a.dtype) < 2 && category(b.dtype) < 2)
    throw new Error(
      "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.",
    );
  return addI(t, mulI(divI(a, b), value));
}
export const addcmul = op<Sig<[input: T, tensor1: T, tensor2: T], ValueOpts, T>>(
  "addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
  addcmulI,
);
export const addcdiv = op<Sig<[input: T, tensor1: T, tensor2: T], ValueOpts, T>>(
  "addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
  addcdivI,
);

/** The implementations, for the in-place methods (inplace_methods.ts): no second binding. */
export const _impl = {
  add: addI, sub: subI, mul: mulI, div: divI, pow: powI, neg: negI, exp: expI, sqrt: sqrtI, abs: absI, relu: reluI,
  sigmoid: sigmoidI, tanh: tanhI, clamp: clampI, lerp: lerpI, addcmul: addcmulI, addcdiv: addcdivI, where: whereI,
};

// x.add(...): `this` is the op's input
installMethods({
  add, sub, rsub, mul, div, trueDivide, floorDivide, remainder, fmod, pow, maximum, minimum, atan2,
  eq, ne, lt, le, gt, ge, logicalAnd, logicalOr, logicalXor, logicalNot, bitwiseAnd, bitwiseOr, bitwiseXor, bitwiseNot,
  exp, log, sqrt, rsqrt, sin, cos, tan, tanh, sigmoid, erf, expm1, log1p, reciprocal, atan, asin, acos, sinh, cosh,
  asinh, acosh, atanh, log2, exp2, frac, log10, neg, abs, sign, floor, ceil, round, trunc, fix, isnan, isinf, isfinite,
  square, relu, clamp, clip, lerp, addcmul, addcdiv,
});
