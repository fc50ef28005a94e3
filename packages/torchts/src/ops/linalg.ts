// matmul in all its forms, bmm, mm, mv, dot, outer, addmm, linear. Every public op is an
// op-table entry (registry.ts) with PyTorch's schema; the implementations (`*I`) call each other
// directly.
import type { DType } from "../ir/dtype.js";
import { shapeStr } from "../ir/shape.js";
import type { Tensor } from "../tensor.js";
import { matmulPrim, reshape } from "./core.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";
import { installMethods, op, type Sig } from "./registry.js";
import { autocastInputs } from "../amp/autocast.js";

type T = Tensor;

/** PyTorch's C++ scalar type names, as its dtype messages say them. */
const SCALAR_NAME: Record<DType, string> = {
  float32: "Float", float64: "Double", float16: "Half", bfloat16: "BFloat16", int64: "Long", int32: "Int", int8: "Char",
  uint8: "Byte", bool: "Bool",
};

function matmulI(a: T, b: T): T {
  [a, b] = autocastInputs(a, b);
  if (a.ndim === 0 || b.ndim === 0)
    throw new Error(`both arguments to matmul need to be at least 1D, but they are ${a.ndim}D and ${b.ndim}D`);
  if (a.dtype === "bool" && b.dtype === "bool") throw new Error(`"addmm_impl_cpu_" not implemented for 'Bool'`);
  const kA = a.shape[a.ndim - 1]!;
  const kB = b.ndim === 1 ? b.shape[0]! : b.shape[b.ndim - 2]!;
  if (kA !== kB) {
    if (a.ndim === 1 && b.ndim === 1)
      throw new Error(
        `inconsistent tensor size, expected tensor [${kA}] and src [${kB}] to have the same number of elements, but got ${kA} and ${kB} elements respectively`,
      );
    if (a.ndim <= 2 && b.ndim <= 2)
      throw new Error(
        `mat1 and mat2 shapes cannot be multiplied (${a.ndim === 1 ? `1x${kA}` : a.shape.join("x")} and ${b.ndim === 1 ? `${kB}x1` : b.shape.join("x")}) (shapes ${shapeStr(a.shape)} and ${shapeStr(b.shape)})`,
      );
    throw new Error(
      `Expected size for first two dimensions of batch2 tensor to be: [${b.shape.slice(0, -2).join(", ")}, ${kA}] but got: [${b.shape.slice(0, -2).join(", ")}, ${kB}] (shapes ${shapeStr(a.shape)} and ${shapeStr(b.shape)})`,
    );
  }
  const a2 = a.ndim === 1 ? S.unsqueeze(a, 0) : a;
  const b2 = b.ndim === 1 ? S.unsqueeze(b, 1) : b;
  let out = matmulPrim(a2, b2);
  if (a.ndim === 1) out = S.squeeze(out, -2);
  if (b.ndim === 1) out = S.squeeze(out, -1);
  return out;
}
/** a @ b without argument binding (internal callers). */
export const _matmul = matmulI;

function sameDtype(a: T, b: T): void {
  if (a.dtype !== b.dtype) throw new Error(`expected scalar type ${SCALAR_NAME[a.dtype]} but found ${SCALAR_NAME[b.dtype]}`);
}

function mmI(a: T, b: T): T {
  if (a.ndim !== 2) throw new Error("self must be a matrix");
  if (b.ndim !== 2) throw new Error("mat2 must be a matrix");
  if (a.shape[1] !== b.shape[0])
    throw new Error(`mat1 and mat2 shapes cannot be multiplied (${a.shape.join("x")} and ${b.shape.join("x")})`);
  return matmulI(a, b);
}
function bmmI(a: T, b: T): T {
  if (a.ndim !== 3) throw new Error("batch1 must be a 3D tensor");
  if (b.ndim !== 3) throw new Error("batch2 must be a 3D tensor");
  if (a.shape[0] !== b.shape[0] || a.shape[2] !== b.shape[1])
    throw new Error(
      `Expected size for first two dimensions of batch2 tensor to be: [${a.shape[0]}, ${a.shape[2]}] but got: [${b.shape[0]}, ${b.shape[1]}].`,
    );
  return matmulI(a, b);
}
function mvI(a: T, v: T): T {
  if (a.ndim !== 2 || v.ndim !== 1) throw new Error(`vector + matrix @ vector expected, got 1, ${a.ndim}, ${v.ndim}`);
  if (a.shape[1] !== v.shape[0]) throw new Error(`size mismatch, got ${a.shape[0]}, ${a.shape[0]}x${a.shape[1]},${v.shape[0]}`);
  return matmulI(a, v);
}
function dotI(a: T, b: T): T {
  if (a.ndim !== 1 || b.ndim !== 1) throw new Error(`1D tensors expected, but got ${a.ndim}D and ${b.ndim}D tensors`);
  if (a.dtype !== b.dtype)
    throw new Error(`dot : expected both vectors to have same dtype, but found ${SCALAR_NAME[a.dtype]} and ${SCALAR_NAME[b.dtype]}`);
  return matmulI(a, b);
}
function outerI(a: T, b: T): T {
  if (a.ndim !== 1) throw new Error(`outer: Expected 1-D argument self, but got ${a.ndim}-D`);
  if (b.ndim !== 1) throw new Error(`outer: Expected 1-D argument vec2, but got ${b.ndim}-D`);
  return M.mul(S.unsqueeze(a, 1), S.unsqueeze(b, 0));
}
function addmmI(input: T, a: T, b: T, beta: number | boolean, alpha: number | boolean): T {
  if (a.ndim !== 2) throw new Error(`mat1 must be a matrix, got ${a.ndim}-D tensor`);
  if (b.ndim !== 2) throw new Error(`mat2 must be a matrix, got ${b.ndim}-D tensor`);
  if (a.shape[1] !== b.shape[0])
    throw new Error(`mat1 and mat2 shapes cannot be multiplied (${a.shape.join("x")} and ${b.shape.join("x")})`);
  if (input.dtype !== b.dtype) throw new Error("self and mat2 must have the same dtype");
  // PyTorch's check: input broadcasts to the product's shape (an expand, no copy)
  S._expand(input, [a.shape[0]!, b.shape[1]!]);
  const be = Number(beta);
  const al = Number(alpha);
  let p = matmulI(a, b);
  if (al !== 1) p = M.mul(p, al);
  // beta = 0 ignores input: its NaN and infinities do not propagate (PyTorch)
  if (be === 0) return p;
  return M.add(be === 1 ? input : M.mul(input, be), p);
}

/** linear: x @ w^T + b */
function linearI(x: T, w: T, b: T | null): T {
  [x, w, b] = autocastInputs(x, w, b);
  if (x.ndim === 0) throw new Error(`both arguments to matmul need to be at least 1D, but they are 0D and ${w.ndim}D`);
  if (w.ndim > 2) throw new Error(`t() expects a tensor with <= 2 dimensions, but self is ${w.ndim}D`);
  if (w.ndim === 0) throw new Error(`both arguments to matmul need to be at least 1D, but they are ${x.ndim}D and 0D`);
  sameDtype(x, w);
  if (b && b.dtype !== x.dtype) throw new Error("self and mat2 must have the same dtype");
  if (x.shape[x.ndim - 1] !== w.shape[w.ndim - 1])
    throw new Error(
      `mat1 and mat2 shapes cannot be multiplied (${x.shape.slice(0, -1).reduce((p, q) => p * q, 1)}x${x.shape[x.ndim - 1]} and ${w.shape[w.ndim - 1]}x${w.ndim === 1 ? 1 : w.shape[0]})`,
    );
  const lead = x.shape.slice(0, -1);
  const x2 = x.ndim > 2 ? reshape(x, [lead.reduce((p, q) => p * q, 1), x.shape[x.ndim - 1]!]) : x;
  let y = matmulI(x2, w.ndim === 1 ? w : S._t(w));
  if (b) {
    // PyTorch's addmm check: the bias broadcasts to the 2-D product
    S._expand(b, y.shape);
    y = M.add(y, b);
  }
  return x.ndim > 2 ? reshape(y, [...lead, ...(w.ndim === 1 ? [] : [w.shape[0]!])]) : y;
}
/** linear without argument binding (internal callers: nn layers, quantized linear). */
export const _linear = (x: T, w: T, b: T | null = null): T => linearI(x, w, b);

export const matmul = op<Sig<[input: T, other?: T], { other?: T }, T>>("matmul(Tensor input, Tensor other) -> Tensor", matmulI);
export const mm = op<Sig<[input: T, mat2?: T], { mat2?: T }, T>>("mm(Tensor input, Tensor mat2) -> Tensor", mmI);
export const bmm = op<Sig<[input: T, mat2?: T], { mat2?: T }, T>>("bmm(Tensor input, Tensor mat2) -> Tensor", bmmI);
export const mv = op<Sig<[input: T, vec?: T], { vec?: T }, T>>("mv(Tensor input, Tensor vec) -> Tensor", mvI);
export const dot = op<Sig<[input: T, tensor?: T], { tensor?: T }, T>>("dot(Tensor input, Tensor tensor) -> Tensor", dotI);
export const outer = op<Sig<[input: T, vec2?: T], { vec2?: T }, T>>("outer(Tensor input, Tensor vec2) -> Tensor", outerI);
type AddmmOpts = { mat1?: T; mat2?: T; beta?: number | boolean; alpha?: number | boolean };
export const addmm = op<Sig<[input: T, mat1?: T, mat2?: T], AddmmOpts, T>>(
  "addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
  addmmI,
);
/** torch.linear (PyTorch's aten::linear; F.linear is the same computation) */
export const linear = op<Sig<[input: T, weight?: T, bias?: T | null], { weight?: T; bias?: T | null }, T>>(
  "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
  linearI,
);

installMethods({ matmul, mm, bmm, mv, dot, outer, addmm });
