// The core op set of exported programs (torchts's counterpart of PyTorch's core ATen opset): every
// public op a traced forward calls is recorded as, or decomposed into (capture.ts), these ops.
// Each entry is the torchts implementation the interpreter (`ExportedProgram.module()`) runs;
// the ONNX and LiteRT writers lower exactly this set, so a new entry needs a lowering in both.
// Arguments are positional: tensors, JS numbers (ints may be symbolic in the graph), int lists,
// dtype names, booleans and null. Scalars in binary ops follow PyTorch's promotion (a JS number
// operand does not widen a tensor's dtype within its category).
import type { Tensor } from "../tensor.js";
import type { DType } from "../ir/dtype.js";
import * as T from "../index.js";

type Arg = Tensor | number;
// read at call time: this module is imported while index.ts is still loading
const F = () => T.nn.functional;

const unary = {
  neg: (x: Tensor) => T.neg(x),
  exp: (x: Tensor) => T.exp(x),
  log: (x: Tensor) => T.log(x),
  sqrt: (x: Tensor) => T.sqrt(x),
  rsqrt: (x: Tensor) => T.rsqrt(x),
  sin: (x: Tensor) => T.sin(x),
  cos: (x: Tensor) => T.cos(x),
  tanh: (x: Tensor) => T.tanh(x),
  sigmoid: (x: Tensor) => T.sigmoid(x),
  abs: (x: Tensor) => T.abs(x),
  erf: (x: Tensor) => T.erf(x),
  reciprocal: (x: Tensor) => T.reciprocal(x),
  floor: (x: Tensor) => T.floor(x),
  ceil: (x: Tensor) => T.ceil(x),
  relu: (x: Tensor) => T.relu(x),
  logicalNot: (x: Tensor) => T.logicalNot(x),
};

const binary = {
  add: (a: Arg, b: Arg) => T.add(a, b),
  sub: (a: Arg, b: Arg) => T.sub(a, b),
  mul: (a: Arg, b: Arg) => T.mul(a, b),
  div: (a: Arg, b: Arg) => T.div(a, b),
  pow: (a: Tensor, b: Arg) => T.pow(a, b),
  maximum: (a: Tensor, b: Arg) => T.maximum(a, b),
  minimum: (a: Tensor, b: Arg) => T.minimum(a, b),
  eq: (a: Tensor, b: Arg) => T.eq(a, b),
  ne: (a: Tensor, b: Arg) => T.ne(a, b),
  lt: (a: Tensor, b: Arg) => T.lt(a, b),
  le: (a: Tensor, b: Arg) => T.le(a, b),
  gt: (a: Tensor, b: Arg) => T.gt(a, b),
  ge: (a: Tensor, b: Arg) => T.ge(a, b),
  logicalAnd: (a: Tensor, b: Arg) => T.logicalAnd(a, b),
  logicalOr: (a: Tensor, b: Arg) => T.logicalOr(a, b),
};

export const UNARY_CORE = Object.keys(unary) as (keyof typeof unary)[];
export const BINARY_CORE = Object.keys(binary) as (keyof typeof binary)[];
export const COMPARISONS = new Set(["eq", "ne", "lt", "le", "gt", "ge"]);

export const CORE_OPS = {
  ...unary,
  ...binary,
  where: (c: Tensor, a: Arg, b: Arg) => T.where(c, a, b),
  cast: (x: Tensor, dtype: DType) => x.to(dtype),
  /** a copy (the converters alias it: their graphs have no in-place writes left) */
  clone: (x: Tensor) => x.clone(),
  matmul: (a: Tensor, b: Tensor) => T.matmul(a, b),
  conv2d: (x: Tensor, w: Tensor, b: Tensor | null, stride: number[], padding: number[], dilation: number[], groups: number) =>
    F().conv2d(x, w, b, stride, padding, dilation, groups),
  convTranspose2d: (x: Tensor, w: Tensor, b: Tensor | null, stride: number[], padding: number[], outputPadding: number[], groups: number, dilation: number[]) =>
    F().convTranspose2d(x, w, b, stride, padding, outputPadding, groups, dilation),
  maxPool2d: (x: Tensor, kernel: number[], stride: number[], padding: number[], dilation: number[], ceilMode: boolean) =>
    F().maxPool2d(x, kernel, stride, padding, dilation, ceilMode),
  avgPool2d: (x: Tensor, kernel: number[], stride: number[], padding: number[], ceilMode: boolean, countIncludePad: boolean) =>
    F().avgPool2d(x, kernel, stride, padding, ceilMode, countIncludePad),
  gelu: (x: Tensor, approximate: string) => F().gelu(x, { approximate: approximate as "none" | "tanh" }),
  softmax: (x: Tensor, dim: number) => F().softmax(x, dim),
  logSoftmax: (x: Tensor, dim: number) => F().logSoftmax(x, dim),
  sum: (x: Tensor, dims: number[], keepdim: boolean) => T.sum(x, dims, keepdim),
  mean: (x: Tensor, dims: number[], keepdim: boolean) => T.mean(x, dims, keepdim),
  amax: (x: Tensor, dims: number[], keepdim: boolean) => T.amax(x, dims, keepdim),
  amin: (x: Tensor, dims: number[], keepdim: boolean) => T.amin(x, dims, keepdim),
  argmax: (x: Tensor, dim: number, keepdim: boolean) => T.argmax(x, dim, keepdim),
  cumsum: (x: Tensor, dim: number) => T.cumsum(x, dim),
  reshape: (x: Tensor, shape: number[]) => T.reshape(x, shape),
  permute: (x: Tensor, dims: number[]) => T.permute(x, dims),
  expand: (x: Tensor, shape: number[]) => T.expand(x, shape),
  unsqueeze: (x: Tensor, dim: number) => T.unsqueeze(x, dim),
  squeeze: (x: Tensor, dim: number) => T.squeeze(x, dim),
  /** x[start:end:step] along dim; start/end already clamped to [0, size] */
  slice: (x: Tensor, dim: number, start: number, end: number, step: number) => T.slice(x, dim, start, end, step),
  select: (x: Tensor, dim: number, index: number) => T.select(x, dim, index),
  cat: (xs: Tensor[], dim: number) => T.cat(xs, dim),
  /** numpy's take along one axis (ONNX Gather): x.shape[:dim] + index.shape + x.shape[dim+1:] */
  take: (x: Tensor, dim: number, index: Tensor) => {
    const d = dim < 0 ? dim + x.ndim : dim;
    const flat = T.indexSelect(x, d, index.reshape([-1]));
    return flat.reshape([...x.shape.slice(0, d), ...index.shape, ...x.shape.slice(d + 1)]);
  },
  /** torch.gather (ONNX GatherElements) */
  gatherElements: (x: Tensor, dim: number, index: Tensor) => T.gather(x, dim, index),
  arange: (start: number, end: number, step: number, dtype: DType) => T.arange(start, end, step, { dtype }),
  full: (shape: number[], value: number, dtype: DType) => T.full(shape, value, { dtype }),
  fullLike: (x: Tensor, value: number, dtype: DType) => T.fullLike(x, value, { dtype }),
  /** constant padding, PyTorch's pad list (last dim first, (before, after) pairs) */
  pad: (x: Tensor, pads: number[], value: number) => T.constantPadNd(x, pads, value),
} satisfies Record<string, (...a: never[]) => Tensor>;

export type CoreOp = keyof typeof CORE_OPS;

export function isCoreOp(name: string): name is CoreOp {
  return Object.prototype.hasOwnProperty.call(CORE_OPS, name);
}
