// The primitive ops every device implements. Every torchts op decomposes into these.
// Each prim produces one fresh contiguous output; views are metadata (shape, strides,
// offset) on the inputs, so kernels fold them into index arithmetic.
import type { DType } from "./dtype.js";
import type { Shape } from "./shape.js";

export const UNARY_OPS = [
  "identity", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "abs", "sign",
  "floor", "ceil", "round", "trunc", "erf", "expm1", "log1p", "reciprocal", "not", "bitnot", "isnan", "atan", "asin", "acos",
  "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "exp2", "frac", "isinf",
] as const;
export type UnaryOp = (typeof UNARY_OPS)[number];

export const BINARY_OPS = [
  "add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "eq", "ne", "lt", "le", "gt", "ge",
  "and", "or", "xor", "bitand", "bitor", "bitxor", "fmod", "remainder", "floordiv", "truncdiv",
] as const;
export type BinaryOp = (typeof BINARY_OPS)[number];

export type ReduceOp = "sum" | "prod" | "max" | "min" | "any" | "all";

/**
 * Composites a device may run with its own kernel instead of their decomposition into the
 * other primitives (the op library asks `device.overrides` and decomposes otherwise).
 */
export type CompositeName = "softmax" | "logSoftmax" | "layerNorm" | "layerNormBackward" | "attention" | "pagedAttention" | "conv2d" | "linearInt8" | "linearInt4" | "linearW8A8";
/** Static attributes of a composite node (part of its cache key; never tensor values). */
export type CompositeAttrs = Record<string, number | boolean | string | number[]>;

/** Parameters of each primitive. Values that vary between calls (scalars) are runtime arguments, not params. */
export interface PrimParams {
  unary: { op: UnaryOp };
  binary: { op: BinaryOp };
  where: Record<string, never>;
  cast: Record<string, never>;
  reduce: { op: ReduceOp; axes: number[] }; // output keeps reduced dims as size 1
  argreduce: { op: "argmax" | "argmin"; axis: number }; // keepdim form
  matmul: Record<string, never>; // [B, M, K] x [B, K, N] -> [B, M, N] (batch dims already broadcast)
  gather: { dim: number }; // torch.gather
  scatterAdd: { dim: number }; // self.scatter_add(dim, index, src)
  // zeros(out) then out.as_strided(..) += src; with a second input `base`: base with the
  // region out.as_strided(..) replaced by src (an in-place write through a view, in one pass)
  stridedScatter: { shape: number[]; strides: number[]; offset: number };
  scan: { op: "sum" | "prod"; dim: number };
  argsort: { dim: number; descending: boolean }; // stable
  rand: { dist: "uniform" | "normal" }; // runtime args: seed lo/hi, counter offset
  full: Record<string, never>; // runtime arg: fill value
  arange: Record<string, never>; // runtime args: start, step
  cat: { dim: number };
  pad: { pads: number[] }; // constant pad, (before, after) per dim, non-negative; runtime arg: value
  composite: { name: CompositeName; attrs: CompositeAttrs }; // only on devices that override `name`
}
export type PrimName = keyof PrimParams;

export const PRIM_NAMES: readonly PrimName[] = [
  "unary", "binary", "where", "cast", "reduce", "argreduce", "matmul", "gather", "scatterAdd", "stridedScatter",
  "scan", "argsort", "rand", "full", "arange", "cat", "pad", "composite",
];

/** A strided view of a buffer, as a kernel sees an input. */
export interface ViewMeta {
  shape: Shape;
  strides: Shape;
  dtype: DType;
}

/** One IR node: a primitive applied to views of earlier nodes' buffers. */
export interface IRNode<P extends PrimName = PrimName> {
  prim: P;
  params: PrimParams[P];
  inputs: ViewMeta[];
  out: { shape: Shape; dtype: DType };
}

/** A graph of IR nodes; the unit a device compiles. Strict eager compiles one-node graphs. */
export interface IRGraph {
  nodes: IRNode[];
}

/** Canonical cache key: structure, shapes, strides, dtypes and params; never values or offsets. */
export function nodeKey(n: IRNode): string {
  const ins = n.inputs.map((v) => `${v.dtype}[${v.shape.join(",")}]{${v.strides.join(",")}}`).join(";");
  return `${n.prim}(${JSON.stringify(n.params)})<${ins}>->${n.out.dtype}[${n.out.shape.join(",")}]`;
}
