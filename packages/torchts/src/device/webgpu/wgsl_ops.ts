// Scalar WGSL for each unary/binary op, and conversions between the 32-bit compute types.
// Float math follows cpu/kernels.ts (PyTorch semantics: NaN propagation, round-half-even, ...);
// WGSL builtins with poor accuracy near 0 (expm1, log1p, sinh, asinh, atanh) get stable forms.
import { isFloating, type DType } from "../../ir/dtype.js";
import type { BinaryOp, UnaryOp } from "../../ir/prims.js";

export type VT = "f32" | "i32" | "bool";
export interface Val {
  e: string;
  t: VT;
}

/** Helpers every shader includes. NaN/Inf come from runtime words so nothing const-folds them. */
export const HELPERS = `
fn isnan_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isinf_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn nan_() -> f32 { return bitcast<f32>(uw(26u) | 0x7fc00000u); }
fn inf_(neg: bool) -> f32 { return bitcast<f32>(uw(26u) | select(0x7f800000u, 0xff800000u, neg)); }
fn fti(x: f32) -> i32 { if (isnan_(x) || isinf_(x)) { return 0; } return i32(clamp(trunc(x), -2147483648.0, 2147483520.0)); }
// sin/cos by Cody-Waite reduction to [-pi/4, pi/4] and Taylor polynomials: backend builtins vary
// (SwiftShader's are off by 2e-5), these are within a few float32 ulps everywhere
fn sincos_(x: f32, cosine: bool) -> f32 {
  if (isnan_(x) || isinf_(x)) { return nan_(); }
  let k = round(x * 0.6366197723675814);
  let r = (x - k * 1.5703125) - k * 0.00048382679489661923;
  let r2 = r * r;
  let s = r + r * r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0))));
  let c = 1.0 - 0.5 * r2 + r2 * r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0))));
  let q = (i32(k) + select(0, 1, cosine)) & 3;
  if (q == 0) { return s; } if (q == 1) { return c; } if (q == 2) { return -s; } return -c;
}
// log via frexp and the atanh series on [sqrt(1/2), sqrt(2)): builtins vary by backend
fn logf_(x: f32) -> f32 {
  if (isnan_(x) || x < 0.0) { return nan_(); }
  if (x == 0.0) { return inf_(true); }
  if (isinf_(x)) { return x; }
  let fr = frexp(x);
  var m = fr.fract; var e = f32(fr.exp);
  if (m < 0.70710678) { m = m * 2.0; e = e - 1.0; }
  let t = (m - 1.0) / (m + 1.0); let t2 = t * t;
  let lm = 2.0 * t * (1.0 + t2 * (1.0 / 3.0 + t2 * (0.2 + t2 * (1.0 / 7.0 + t2 * (1.0 / 9.0 + t2 / 11.0)))));
  return lm + e * 0.693359375 - e * 0.00021219444005469057;
}
fn rbf16(x: f32) -> f32 { if (isnan_(x)) { return x; } let b = bitcast<u32>(x); return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u); }
// exp by Cody-Waite reduction (x = k ln2 + r) and a degree-7 polynomial: some backends' builtin exp
// (SwiftShader) is only accurate to ~1e-5 relative
fn exp_(x: f32) -> f32 {
  if (isnan_(x)) { return x; }
  if (x > 88.72284) { return inf_(false); }
  if (x < -103.97208) { return 0.0; }
  let k = round(x * 1.4426950408889634);
  let r = (x - k * 0.693359375) + k * 0.00021219444005469057;
  let p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
  let ki = i32(k);
  if (ki < -125) { return ldexp(ldexp(p, ki + 60), -60); }
  return ldexp(p, ki);
}
fn expm1_(x: f32) -> f32 { let u = exp_(x); if (u == 1.0) { return x; } let um = u - 1.0; if (um == -1.0) { return -1.0; } if (isinf_(u)) { return u; } return um * x / logf_(u); }
fn log1p_(x: f32) -> f32 { let u = 1.0 + x; if (u == 1.0) { return x; } if (isinf_(u)) { return u; } return logf_(u) * x / (u - 1.0); }
fn sinh_(x: f32) -> f32 { if (abs(x) < 0.5) { let x2 = x * x; return x * (1.0 + x2 / 6.0 * (1.0 + x2 / 20.0 * (1.0 + x2 / 42.0))); } let e = exp_(abs(x)); return sign(x) * 0.5 * (e - 1.0 / e); }
fn cosh_(x: f32) -> f32 { let e = exp_(abs(x)); return 0.5 * (e + 1.0 / e); }
fn tanh_(x: f32) -> f32 { if (abs(x) > 10.0) { return sign(x); } if (abs(x) < 0.55) { let x2 = x * x; return x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0)))))); } let e = exp_(2.0 * x); return (e - 1.0) / (e + 1.0); }
fn asinh_(x: f32) -> f32 { let a = abs(x); return sign(x) * log1p_(a + a * a / (1.0 + sqrt(1.0 + a * a))); }
fn atanh_(x: f32) -> f32 { return 0.5 * log1p_(2.0 * x / (1.0 - x)); }
fn erf_(x: f32) -> f32 {
  if (isnan_(x)) { return x; }
  let ax = abs(x);
  if (ax < 0.5) {
    let x2 = x * x;
    return 1.1283791670955126 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0))))));
  }
  if (ax > 6.0) { return sign(x); }
  // erfc with relative error < 1.2e-7 (Numerical Recipes' Chebyshev fit), so 1 - erf keeps its digits
  let t = 1.0 / (1.0 + 0.5 * ax);
  let erfc = t * exp_(-ax * ax - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(erfc - 1.0, 1.0 - erfc, x > 0.0);
}
fn powf_(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (isnan_(a) || isnan_(b)) { return nan_(); }
  if (b == 1.0) { return a; }
  if (b == 2.0) { return a * a; }
  if (b == 3.0) { return a * a * a; }
  if (b == 0.5) { return sqrt(a); }
  if (b == -1.0) { return 1.0 / a; }
  if (a == 0.0) { return select(select(0.0, inf_(false), b < 0.0), 0.0, b > 0.0); }
  let isInt = trunc(b) == b;
  if (a < 0.0 && !isInt) { return nan_(); }
  let r = exp2(b * log2(abs(a)));
  if (a < 0.0 && abs(b) < 16777216.0 && (fti(b) & 1) == 1) { return -r; }
  return r;
}
fn powi_(a: i32, b: i32) -> i32 {
  if (b < 0) { if (a == 1) { return 1; } if (a == -1) { return select(-1, 1, (b & 1) == 0); } return 0; }
  var r = 1; var base = a; var e = b;
  for (var k = 0; k < 32 && e > 0; k++) { if ((e & 1) == 1) { r *= base; } base *= base; e = e >> 1u; }
  return r;
}
fn signf_(x: f32) -> f32 { if (isnan_(x)) { return x; } return sign(x); }
fn maxf_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return select(b, a, a > b); }
fn minf_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return select(b, a, a < b); }
fn remf_(a: f32, b: f32) -> f32 { return a - floor(a / b) * b; }
fn remi_(a: i32, b: i32) -> i32 { if (b == 0) { return 0; } let r = a % b; return select(r, r + b, r != 0 && ((r < 0) != (b < 0))); }
fn floordivi_(a: i32, b: i32) -> i32 { if (b == 0) { return 0; } let q = a / b; return select(q, q - 1, (a % b != 0) && ((a < 0) != (b < 0))); }
fn atan2_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return atan2(a, b); }
`;

/** The f16 rounding helper: hardware conversion with shader-f16, pack/unpack otherwise. */
export function f16Helper(hasF16: boolean): string {
  const conv = hasF16 ? "f32(f16(x))" : "unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x";
  return `fn rf16(x: f32) -> f32 { if (isnan_(x)) { return x; } if (abs(x) >= 65520.0) { return inf_(x < 0.0); } return ${conv}; }\n`;
}

export function conv(v: Val, t: VT): string {
  if (v.t === t) return v.e;
  if (t === "f32") return v.t === "i32" ? `f32(${v.e})` : `select(0.0, 1.0, ${v.e})`;
  if (t === "i32") return v.t === "f32" ? `fti(${v.e})` : `select(0, 1, ${v.e})`;
  return v.t === "f32" ? `(${v.e} != 0.0 || isnan_(${v.e}))` : `(${v.e} != 0)`;
}

/** Expression of the storage word for dtype d holding value v (rounded/wrapped as the dtype stores it). */
export function storeVal(v: Val, d: DType): string {
  switch (d) {
    case "float32":
    case "float64":
      return conv(v, "f32");
    case "float16":
      return `rf16(${conv(v, "f32")})`;
    case "bfloat16":
      return `rbf16(${conv(v, "f32")})`;
    case "int8":
      return `((${conv(v, "i32")} << 24u) >> 24u)`;
    case "uint8":
      return `(${conv(v, "i32")} & 255)`;
    case "bool":
      return `select(0, 1, ${conv(v, "bool")})`;
    default:
      return conv(v, "i32");
  }
}

export function loadVal(e: string, d: DType): Val {
  return { e, t: isFloating(d) ? "f32" : "i32" };
}

const FU: Record<UnaryOp, (x: string) => string> = {
  identity: (x) => x,
  neg: (x) => `(-${x})`,
  exp: (x) => `exp_(${x})`,
  log: (x) => `logf_(${x})`,
  sqrt: (x) => `sqrt(${x})`,
  rsqrt: (x) => `(1.0 / sqrt(${x}))`,
  sin: (x) => `sincos_(${x}, false)`,
  cos: (x) => `sincos_(${x}, true)`,
  tan: (x) => `tan(${x})`,
  tanh: (x) => `tanh_(${x})`,
  sigmoid: (x) => `(1.0 / (1.0 + exp_(-${x})))`,
  abs: (x) => `abs(${x})`,
  sign: (x) => `signf_(${x})`,
  floor: (x) => `floor(${x})`,
  ceil: (x) => `ceil(${x})`,
  round: (x) => `round(${x})`,
  trunc: (x) => `trunc(${x})`,
  erf: (x) => `erf_(${x})`,
  expm1: (x) => `expm1_(${x})`,
  log1p: (x) => `log1p_(${x})`,
  reciprocal: (x) => `(1.0 / ${x})`,
  not: (x) => `(${x} == 0.0)`,
  bitnot: (x) => `(${x} == 0.0)`,
  isnan: (x) => `isnan_(${x})`,
  isinf: (x) => `isinf_(${x})`,
  atan: (x) => `atan(${x})`,
  asin: (x) => `asin(${x})`,
  acos: (x) => `acos(${x})`,
  sinh: (x) => `sinh_(${x})`,
  cosh: (x) => `cosh_(${x})`,
  asinh: (x) => `asinh_(${x})`,
  acosh: (x) => `logf_(${x} + sqrt(${x} * ${x} - 1.0))`,
  atanh: (x) => `atanh_(${x})`,
  log2: (x) => `(logf_(${x}) * 1.4426950408889634)`,
  exp2: (x) => `exp2(${x})`,
  frac: (x) => `(${x} - trunc(${x}))`,
};
const BOOL_UNARY = new Set<UnaryOp>(["not", "isnan", "isinf"]);

export function unaryVal(op: UnaryOp, x: Val, inDtype: DType): Val {
  if (x.t === "i32") {
    switch (op) {
      case "identity":
      case "floor":
      case "ceil":
      case "round":
      case "trunc":
        return x;
      case "neg":
        return { e: `(-${x.e})`, t: "i32" };
      case "abs":
        return { e: `abs(${x.e})`, t: "i32" };
      case "sign":
        return { e: `sign(${x.e})`, t: "i32" };
      case "not":
        return { e: `(${x.e} == 0)`, t: "bool" };
      case "bitnot":
        return inDtype === "bool" ? { e: `(${x.e} == 0)`, t: "bool" } : { e: `(~${x.e})`, t: "i32" };
      case "isnan":
      case "isinf":
        return { e: "false", t: "bool" };
      case "frac":
        return { e: "0", t: "i32" };
      default:
        return { e: FU[op](`f32(${x.e})`), t: "f32" };
    }
  }
  return { e: FU[op](x.e), t: BOOL_UNARY.has(op) || op === "bitnot" ? "bool" : "f32" };
}

const CMP: Partial<Record<BinaryOp, string>> = { eq: "==", ne: "!=", lt: "<", le: "<=", gt: ">", ge: ">=" };

export function binaryVal(op: BinaryOp, a: Val, b: Val): Val {
  const cmp = CMP[op];
  if (cmp) return { e: `(${a.e} ${cmp} ${b.e})`, t: "bool" };
  if (op === "and" || op === "or" || op === "xor") {
    const A = conv(a, "bool");
    const B = conv(b, "bool");
    return { e: op === "and" ? `(${A} && ${B})` : op === "or" ? `(${A} || ${B})` : `(${A} != ${B})`, t: "bool" };
  }
  if (a.t === "i32") {
    const [x, y] = [a.e, b.e];
    switch (op) {
      case "add":
        return { e: `(${x} + ${y})`, t: "i32" };
      case "sub":
        return { e: `(${x} - ${y})`, t: "i32" };
      case "mul":
        return { e: `(${x} * ${y})`, t: "i32" };
      case "maximum":
        return { e: `max(${x}, ${y})`, t: "i32" };
      case "minimum":
        return { e: `min(${x}, ${y})`, t: "i32" };
      case "bitand":
        return { e: `(${x} & ${y})`, t: "i32" };
      case "bitor":
        return { e: `(${x} | ${y})`, t: "i32" };
      case "bitxor":
        return { e: `(${x} ^ ${y})`, t: "i32" };
      case "fmod":
        return { e: `select(${x} % ${y}, 0, ${y} == 0)`, t: "i32" };
      case "remainder":
        return { e: `remi_(${x}, ${y})`, t: "i32" };
      case "floordiv":
        return { e: `floordivi_(${x}, ${y})`, t: "i32" };
      case "truncdiv":
        return { e: `select(${x} / ${y}, 0, ${y} == 0)`, t: "i32" };
      case "pow":
        return { e: `powi_(${x}, ${y})`, t: "i32" };
      default:
        return binaryVal(op, { e: `f32(${x})`, t: "f32" }, { e: `f32(${y})`, t: "f32" });
    }
  }
  const [x, y] = [conv(a, "f32"), conv(b, "f32")];
  switch (op) {
    case "add":
      return { e: `(${x} + ${y})`, t: "f32" };
    case "sub":
      return { e: `(${x} - ${y})`, t: "f32" };
    case "mul":
      return { e: `(${x} * ${y})`, t: "f32" };
    case "div":
      return { e: `(${x} / ${y})`, t: "f32" };
    case "pow":
      return { e: `powf_(${x}, ${y})`, t: "f32" };
    case "maximum":
      return { e: `maxf_(${x}, ${y})`, t: "f32" };
    case "minimum":
      return { e: `minf_(${x}, ${y})`, t: "f32" };
    case "atan2":
      return { e: `atan2_(${x}, ${y})`, t: "f32" };
    case "fmod":
      return { e: `(${x} - ${y} * trunc(${x} / ${y}))`, t: "f32" };
    case "remainder":
      return { e: `remf_(${x}, ${y})`, t: "f32" };
    case "floordiv":
      return { e: `floor(${x} / ${y})`, t: "f32" };
    case "truncdiv":
      return { e: `trunc(${x} / ${y})`, t: "f32" };
    default: // bitwise ops on floats do not exist in PyTorch
      throw new Error(`webgpu: ${op} is not defined for floating-point tensors`);
  }
}
