// Tensor-only methods of the elementwise family: the in-place variants (x.add_(y)), x.where(cond,
// other), zero_/fill_/copy_ and the dtype casts (x.float()). Each is an op-table entry keyed
// "Tensor.<name>" (registry.ts `method`), with PyTorch's method schema.
import { category, type DType } from "../ir/dtype.js";
import { shapeStr } from "../ir/shape.js";
import { Storage } from "../runtime/storage.js";
import { Tensor, type Scalar, type TensorLike } from "../tensor.js";
import { cast } from "./core.js";
import { copy_ as copyInto, inplaceSet } from "./inplace.js";
import { _impl as I } from "./math.js";
import { method, type Method, type Sig } from "./registry.js";

type T = Tensor;
type TL = TensorLike;

/**
 * Computes `compute()` out of place and lands it in t, after PyTorch's checks of an in-place result
 * against its destination (the shape and the dtype cast). A result made by compute() (a storage
 * created since it started) is a temporary no one else holds: t takes it over instead of a copy.
 */
function landInplace(t: T, compute: () => T, name: string): T {
  const since = Storage.created;
  const r = compute();
  if (r.ndim !== t.ndim || r.shape.some((n, i) => n !== t.shape[i]))
    throw new Error(`${name}: output with shape ${shapeStr(t.shape)} doesn't match the broadcast shape ${shapeStr(r.shape)}`);
  if (category(r.dtype) > category(t.dtype))
    throw new Error(`${name}: result type ${r.dtype} can't be cast to the desired output type ${t.dtype}`);
  return inplaceSet(t, r, name, r._storage.serial > since);
}

const unaryInplace = (name: string, f: (x: T) => T) => method(name, `${name}(Tensor self) -> Tensor`, (t: T) => landInplace(t, () => f(t), name));

method("add_", "add_(Tensor self, TensorLike other, *, Scalar alpha=1) -> Tensor", (t: T, o: TL, alpha: Scalar) =>
  landInplace(t, () => I.add(t, o, alpha), "add_"),
);
method("sub_", "sub_(Tensor self, TensorLike other, *, Scalar alpha=1) -> Tensor", (t: T, o: TL, alpha: Scalar) =>
  landInplace(t, () => I.sub(t, o, alpha), "sub_"),
);
method("mul_", "mul_(Tensor self, TensorLike other) -> Tensor", (t: T, o: TL) => landInplace(t, () => I.mul(t, o), "mul_"));
method(
  "div_",
  "div_(Tensor self, TensorLike other, *, str{trunc,floor}? roundingMode=None) -> Tensor",
  (t: T, o: TL, m: "trunc" | "floor" | null) => landInplace(t, () => I.div(t, o, m), "div_"),
);
method("pow_", "pow_(Tensor self, TensorLike exponent) -> Tensor", (t: T, e: TL) => landInplace(t, () => I.pow(t, e), "pow_"));
unaryInplace("neg_", I.neg);
unaryInplace("exp_", I.exp);
unaryInplace("sqrt_", I.sqrt);
unaryInplace("abs_", I.abs);
unaryInplace("relu_", I.relu);
unaryInplace("sigmoid_", I.sigmoid);
unaryInplace("tanh_", I.tanh);
method("clamp_", "clamp_(Tensor self, TensorLike? min=None, TensorLike? max=None) -> Tensor", (t: T, lo: TL | null, hi: TL | null) =>
  landInplace(t, () => I.clamp(t, lo, hi), "clamp_"),
);
method("lerp_", "lerp_(Tensor self, Tensor end, TensorLike weight) -> Tensor", (t: T, e: T, w: TL) =>
  landInplace(t, () => I.lerp(t, e, w), "lerp_"),
);
method("addcmul_", "addcmul_(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", (t: T, a: T, b: T, v: Scalar) =>
  landInplace(t, () => I.addcmul(t, a, b, v), "addcmul_"),
);
method("addcdiv_", "addcdiv_(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", (t: T, a: T, b: T, v: Scalar) =>
  landInplace(t, () => I.addcdiv(t, a, b, v), "addcdiv_"),
);

method("zero_", "zero_(Tensor self) -> Tensor", (t: T) => inplaceSet(t, 0, "zero_"));
method("fill_", "fill_(Tensor self, TensorLike value) -> Tensor", (t: T, v: TL) => {
  if (v instanceof Tensor && v.ndim !== 0)
    throw new Error(`fill_ only supports 0-dimension value tensor but got tensor with ${v.ndim} dimensions.`);
  return inplaceSet(t, v, "fill_");
});
method("copy_", "copy_(Tensor self, TensorLike src, bool nonBlocking=False) -> Tensor", (t: T, src: TL) => {
  if (src instanceof Tensor) {
    const k = t.ndim - src.ndim;
    if (k < 0 || src.shape.some((n, i) => n !== 1 && n !== t.shape[i + k]))
      throw new Error(`copy_: output with shape ${shapeStr(t.shape)} doesn't match the broadcast shape ${shapeStr(broadcast(t.shape, src.shape))}`);
    return copyInto(t, src);
  }
  return inplaceSet(t, src, "copy_");
});
function broadcast(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    out.push(x === 1 ? y : x);
  }
  return out;
}

// x.where(condition, other): x where condition holds, else other
method("where", "where(Tensor self, Tensor condition, TensorLike other) -> Tensor", (x: T, c: T, o: TL) => I.where(c, x, o));

// dtype casts: x.float() is x when it already is float32, as PyTorch
const CASTS: Record<string, DType> = {
  float: "float32", double: "float64", half: "float16", bfloat16: "bfloat16", long: "int64", int: "int32", bool: "bool",
  byte: "uint8",
};
for (const [name, d] of Object.entries(CASTS))
  method(name, `${name}(Tensor self, *, MemoryFormat memoryFormat=preserve_format) -> Tensor`, (x: T, mf: string) => {
    if (mf === "channels_last" && x.ndim !== 4) throw new Error(`${name}: required rank 4 tensor to use channels_last format`);
    if (mf === "channels_last_3d" && x.ndim !== 5) throw new Error(`${name}: required rank 5 tensor to use channels_last_3d format`);
    return cast(x, d);
  });

// ---- the methods' TypeScript signatures (declared in methods.ts) ----
type AlphaOpts = { other?: TL; alpha?: Scalar };
export type InplaceSigs = {
  add_: Method<Sig<[self: T, other: TL], AlphaOpts, T>>;
  sub_: Method<Sig<[self: T, other: TL], AlphaOpts, T>>;
  mul_: Method<Sig<[self: T, other: TL], { other?: TL }, T>>;
  div_: Method<Sig<[self: T, other: TL], { other?: TL; roundingMode?: "trunc" | "floor" | null }, T>>;
  pow_: Method<Sig<[self: T, exponent: TL], { exponent?: TL }, T>>;
  unary: Method<Sig<[self: T], Record<never, never>, T>>;
  clamp_: Method<Sig<[self: T, min?: TL | null, max?: TL | null], { min?: TL | null; max?: TL | null }, T>>;
  lerp_: Method<Sig<[self: T, end: T, weight: TL], { end?: T; weight?: TL }, T>>;
  addc_: Method<Sig<[self: T, tensor1: T, tensor2: T], { tensor1?: T; tensor2?: T; value?: Scalar }, T>>;
  fill_: Method<Sig<[self: T, value: TL], { value?: TL }, T>>;
  copy_: Method<Sig<[self: T, src: TL, nonBlocking?: boolean], { src?: TL; nonBlocking?: boolean }, T>>;
  where: Method<Sig<[self: T, condition: T, other: TL], { condition?: T; other?: TL }, T>>;
  cast: Method<Sig<[self: T], { memoryFormat?: "contiguous_format" | "preserve_format" | "channels_last" | "channels_last_3d" }, T>>;
};
