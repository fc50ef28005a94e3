// The primitive layer of the op table: each primitive's tensor-level wrapper, its output
// dtype/shape rule and its gradient (vjp), written with ops so that backward goes through
// the same dispatcher (it fuses, compiles and double-differentiates like forward).
// Views (affine re-indexing of a storage) also live here: they are metadata, not kernels.
import { getDevice, type DevicePlugin } from "../device/plugin.js";
import { castScalar, isFloating, type DType } from "../ir/dtype.js";
import type { BinaryOp, CompositeAttrs, CompositeName, PrimName, PrimParams, ReduceOp, UnaryOp } from "../ir/prims.js";
import { broadcastShapes, contiguousStrides, numel, shapeStr, viewStrides, type Shape } from "../ir/shape.js";
import { runPrim } from "../runtime/dispatch.js";
import { currentOpName } from "../runtime/mode.js";
import { Storage } from "../runtime/storage.js";
import { isGradEnabled } from "../autograd/grad_mode.js";
import { Node, type Edge, type Vjp } from "../autograd/node.js";
import { Tensor } from "../tensor.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";

export function edgeOf(t: Tensor): Edge {
  return t.gradFn ? { node: t.gradFn, index: t._outputNr } : { node: t._accNode(), index: 0 };
}

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
// grad_fn names of the elementwise families ("MulBackward0"), made once per op instead of per call
const backwardNames = new Map<string, string>();
function backwardName(op: string): string {
  let n = backwardNames.get(op);
  if (n === undefined) backwardNames.set(op, (n = `${cap(op)}Backward0`));
  return n;
}

/** Attach an autograd node to `out` when grad mode is on and an input requires grad. */
export function attach(
  out: Tensor,
  name: string,
  inputs: (Tensor | null | undefined)[],
  saved: (Tensor | null)[],
  vjp: Vjp,
  ctx: Record<string, unknown> = {},
): Tensor {
  if (!isGradEnabled() || !inputs.some((t) => t?.requiresGrad)) return out;
  const next = inputs.map((t) => (t && t.requiresGrad ? edgeOf(t) : null));
  out.gradFn = new Node(name, next, saved, vjp, [{ shape: [...out.shape], dtype: out.dtype, device: out.device }], ctx);
  return out;
}

function dev(t: Tensor): DevicePlugin {
  return t._storage.device;
}

export function checkSameDevice(op: string, ts: (Tensor | null | undefined)[]): void {
  let d: string | null = null;
  for (const t of ts) {
    if (!t) continue;
    if (d === null) d = t.device;
    else if (t.device !== d)
      throw new Error(
        `${op}: Expected all tensors to be on the same device, but found at least two devices, ${d} and ${t.device}!`,
      );
  }
}

function prim<P extends PrimName>(
  p: P,
  params: PrimParams[P],
  inputs: Tensor[],
  shape: Shape,
  dtype: DType,
  device: DevicePlugin,
  scalars: number[] = [],
): Tensor {
  const st = runPrim(p, params, inputs.map(viewRef), { shape, dtype }, device, scalars);
  return new Tensor(st, shape);
}

function viewRef(t: Tensor) {
  return { storage: t._storage, shape: t.shape, strides: t._strides, offset: t._offset, dtype: t.dtype };
}

/** A 0-dim tensor holding a scalar operand (its value is data, not part of any cache key). */
export function scalarTensor(v: number | boolean, dtype: DType, device: DevicePlugin | string = "cpu"): Tensor {
  const d = typeof device === "string" ? getDevice(device) : device;
  return new Tensor(Storage.fromHost(d, dtype, [castScalar(Number(v), dtype)]), []);
}

export function fromHostData(data: ArrayLike<number>, shape: Shape, dtype: DType, device = "cpu"): Tensor {
  if (data.length !== numel(shape))
    throw new RangeError(`tensor: data has ${data.length} elements but shape ${shapeStr(shape)} needs ${numel(shape)}`);
  return new Tensor(Storage.fromHost(getDevice(device), dtype, data), shape);
}

// ---------------- views ----------------

function makeView(x: Tensor, shape: Shape, strides: Shape, offset: number): Tensor {
  const v = new Tensor(x._storage, shape, strides, offset, x.dtype);
  v._base = x._base ?? x;
  v._viewParent = x;
  return v;
}

/**
 * An affine view: output dim j advances x's index by coef[j] (a vector over x's dims);
 * start is x's index of element 0. Covers permute, slicing with steps, select, diagonal,
 * flip, unsqueeze and sliding windows. Its gradient scatters back through the same map.
 */
export function affineView(x: Tensor, name: string, shape: Shape, coef: number[][], start: number[]): Tensor {
  // a permutation's gradient is the inverse permutation of g: a view, no zero-filled scatter
  const perm = permutationOf(coef, start, shape, x.shape);
  if (perm) return permuteView(x, name, perm);
  const nd = x.ndim;
  const cs = contiguousStrides(x.shape);
  const strides = coef.map((c) => c.reduce((s, v, k) => s + v * x._strides[k]!, 0));
  const rel = coef.map((c) => c.reduce((s, v, k) => s + v * cs[k]!, 0));
  let offset = x._offset;
  let relOffset = 0;
  for (let k = 0; k < nd; k++) {
    offset += start[k]! * x._strides[k]!;
    relOffset += start[k]! * cs[k]!;
  }
  const out = makeView(x, shape, strides, offset);
  return attach(out, name, [x], [], ([g]) => [stridedScatter(g!, x.shape, shape, rel, relOffset)], {});
}

/**
 * The view of x with its dims permuted (output dim j is x's dim d[j]); its gradient is g's inverse
 * permutation, a view. Built directly, not through affineView's identity matrices and row sums
 * (~3 us a transpose, and a training step makes dozens).
 */
export function permuteView(x: Tensor, name: string, d: readonly number[]): Tensor {
  const nd = d.length;
  const shape = new Array<number>(nd);
  const strides = new Array<number>(nd);
  const inv = new Array<number>(nd);
  for (let j = 0; j < nd; j++) {
    const k = d[j]!;
    shape[j] = x.shape[k]!;
    strides[j] = x._strides[k]!;
    inv[k] = j;
  }
  const out = makeView(x, shape, strides, x._offset);
  return attach(out, name, [x], [], ([g]) => [permuteView(g!, name, inv)], {});
}

/**
 * affineView for x[..., start : start + len * step : step, ...] along dim d, built directly (as
 * permuteView). A slice that keeps the whole dim is affineView's identity permutation.
 */
export function sliceView(x: Tensor, name: string, d: number, start: number, len: number, step: number): Tensor {
  const nd = x.ndim;
  if (start === 0 && step === 1 && len === x.shape[d]) {
    const id = new Array<number>(nd);
    for (let k = 0; k < nd; k++) id[k] = k;
    return permuteView(x, name, id);
  }
  const cs = contiguousStrides(x.shape);
  const shape = x.shape.slice();
  const strides = x._strides.slice();
  const rel = cs.slice();
  shape[d] = len;
  strides[d] = x._strides[d]! * step;
  rel[d] = cs[d]! * step;
  const out = makeView(x, shape, strides, x._offset + start * x._strides[d]!);
  const relOffset = start * cs[d]!;
  return attach(out, name, [x], [], ([g]) => [stridedScatter(g!, x.shape, shape, rel, relOffset)], {});
}

/** perm[j] = the input dim output dim j reads when the affine map only permutes dims, else null. */
function permutationOf(coef: number[][], start: number[], shape: Shape, inShape: Shape): number[] | null {
  if (coef.length !== inShape.length || start.some((v) => v !== 0)) return null;
  const perm: number[] = [];
  for (let j = 0; j < coef.length; j++) {
    const c = coef[j]!;
    const k = c.indexOf(1);
    if (k < 0 || c.some((v, i) => v !== (i === k ? 1 : 0)) || perm.includes(k) || shape[j] !== inShape[k]) return null;
    perm.push(k);
  }
  return perm;
}

/** View of a contiguous copy of t with explicit strides over its logical layout (inverse of stridedScatter). */
export function asStridedLogical(t: Tensor, shape: Shape, strides: Shape, offset: number): Tensor {
  const c = S._contiguous(t);
  const flat = reshape(c, [c.numel()]);
  return affineView(flat, "AsStridedBackward0", shape, strides.map((s) => [s]), [offset]);
}

/**
 * zeros(outShape) with src added at the view (shape, strides, offset) of it; with `base`
 * (outShape, src's dtype): base with that view replaced by src, one kernel for an in-place write
 * through a view. The gradient reads the view for src and, for base, zeroes it.
 */
export function stridedScatter(src: Tensor, outShape: Shape, shape: Shape, strides: Shape, offset: number, base?: Tensor): Tensor {
  const params = { shape: [...shape], strides: [...strides], offset };
  const out = prim("stridedScatter", params, base ? [src, base] : [src], outShape, src.dtype, dev(src));
  if (!base) return attach(out, "StridedScatterBackward0", [src], [], ([g]) => [asStridedLogical(g!, shape, strides, offset)]);
  return attach(out, "CopySlices", [src, base], [], ([g]) => [
    asStridedLogical(g!, shape, strides, offset),
    stridedScatter(M._zerosOf([...shape], src.dtype, src.device), outShape, shape, strides, offset, g!),
  ]);
}

export function reshape(x: Tensor, shape: Shape, op = "reshape"): Tensor {
  if (numel(shape) !== x.numel())
    throw new RangeError(`${op}: shape '${shapeStr(shape)}' is invalid for input of size ${x.numel()}`);
  let src = x;
  let st = viewStrides(x.shape, x._strides, shape);
  if (!st) {
    if (op === "view")
      throw new Error(
        "view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
      );
    src = S._contiguous(x);
    st = contiguousStrides(shape);
  }
  const out = makeView(src, shape, st, src._offset);
  return attach(out, op === "view" ? "ViewBackward0" : "ReshapeAliasBackward0", [src], [], ([g]) => [reshape(g!, src.shape)]);
}

export function expand(x: Tensor, shape: Shape): Tensor {
  const nd = shape.length;
  if (nd < x.ndim)
    throw new RangeError(
      `expand: the number of sizes provided (${nd}) must be greater or equal to the number of dimensions in the tensor (${x.ndim})`,
    );
  for (let i = nd - 1; i >= nd - x.ndim; i--) {
    const have = x.shape[i - (nd - x.ndim)]!;
    const w = shape[i] === -1 ? have : shape[i]!;
    if (have !== w && have !== 1)
      throw new RangeError(
        `expand: The expanded size of the tensor (${w}) must match the existing size (${have}) at non-singleton dimension ${i}.  Target sizes: ${shapeStr(shape)}.  Tensor sizes: ${shapeStr(x.shape)}`,
      );
  }
  const strides: number[] = [];
  const outShape: number[] = [];
  for (let i = 0; i < nd; i++) {
    const xi = i - (nd - x.ndim);
    const want = shape[i]!;
    if (xi < 0) {
      if (want < 0) throw new RangeError(`expand: the expanded size of the tensor (${want}) isn't allowed in a leading, non-existing dimension ${i}`);
      outShape.push(want);
      strides.push(0);
      continue;
    }
    const have = x.shape[xi]!;
    const w = want === -1 ? have : want;
    if (have !== w && have !== 1)
      throw new RangeError(
        `expand: The expanded size of the tensor (${w}) must match the existing size (${have}) at non-singleton dimension ${i}.  Target sizes: ${shapeStr(shape)}.  Tensor sizes: ${shapeStr(x.shape)}`,
      );
    outShape.push(w);
    strides.push(have === w ? x._strides[xi]! : 0);
  }
  if (outShape.length === x.ndim && outShape.every((d, i) => d === x.shape[i])) return x;
  const out = makeView(x, outShape, strides, x._offset);
  return attach(out, "ExpandBackward0", [x], [], ([g]) => [sumToShape(g!, x.shape)]);
}

/** Sum a broadcast gradient back down to `shape`. */
export function sumToShape(g: Tensor, shape: Shape): Tensor {
  if (g.ndim === shape.length && g.shape.every((d, i) => d === shape[i])) return g;
  const lead = g.ndim - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < g.ndim; i++) if (i < lead || (shape[i - lead] === 1 && g.shape[i] !== 1)) axes.push(i);
  let r = axes.length ? reduce("sum", g, axes, true) : g;
  if (lead > 0 || r.ndim !== shape.length) r = reshape(r, shape);
  return r;
}

// ---------------- elementwise primitives ----------------

const SAVE_Y = new Set<UnaryOp>(["exp", "sqrt", "rsqrt", "tan", "tanh", "sigmoid", "expm1", "reciprocal", "exp2"]);
const NO_SAVE = new Set<UnaryOp>(["identity", "neg", "frac", "sign", "floor", "ceil", "round", "trunc"]);

type UVjp = (g: Tensor, x: Tensor, y: Tensor) => Tensor;
const LN2 = Math.LN2;
// piecewise-constant ops: as in PyTorch, backward through them works and yields zeros (not g * 0, which keeps NaN)
const stepGrad: UVjp = (g) => M._zerosLike(g);
const UNARY_GRAD: Record<UnaryOp, UVjp | null> = {
  identity: (g) => g,
  neg: (g) => M.neg(g),
  exp: (g, _x, y) => M.mul(g, y),
  log: (g, x) => M.div(g, x),
  sqrt: (g, _x, y) => M.div(g, M.mul(y, 2)),
  rsqrt: (g, _x, y) => M.mul(g, M.mul(M.mul(M.mul(y, y), y), -0.5)),
  sin: (g, x) => M.mul(g, M.cos(x)),
  cos: (g, x) => M.mul(g, M.neg(M.sin(x))),
  tan: (g, _x, y) => M.mul(g, M.add(M.mul(y, y), 1)),
  tanh: (g, _x, y) => M.mul(g, M.rsub(M.mul(y, y), 1)),
  sigmoid: (g, _x, y) => M.mul(g, M.mul(y, M.rsub(y, 1))),
  abs: (g, x) => M.mul(g, M.sign(x)),
  sign: stepGrad,
  floor: stepGrad,
  ceil: stepGrad,
  round: stepGrad,
  trunc: stepGrad,
  erf: (g, x) => M.mul(g, M.mul(M.exp(M.neg(M.mul(x, x))), 2 / Math.sqrt(Math.PI))),
  expm1: (g, _x, y) => M.mul(g, M.add(y, 1)),
  log1p: (g, x) => M.div(g, M.add(x, 1)),
  reciprocal: (g, _x, y) => M.mul(g, M.neg(M.mul(y, y))),
  not: null,
  bitnot: null,
  isnan: null,
  isinf: null,
  atan: (g, x) => M.div(g, M.add(M.mul(x, x), 1)),
  asin: (g, x) => M.div(g, M.sqrt(M.rsub(M.mul(x, x), 1))),
  acos: (g, x) => M.neg(M.div(g, M.sqrt(M.rsub(M.mul(x, x), 1)))),
  sinh: (g, x) => M.mul(g, M.cosh(x)),
  cosh: (g, x) => M.mul(g, M.sinh(x)),
  asinh: (g, x) => M.div(g, M.sqrt(M.add(M.mul(x, x), 1))),
  acosh: (g, x) => M.div(g, M.sqrt(M.sub(M.mul(x, x), 1))),
  atanh: (g, x) => M.div(g, M.rsub(M.mul(x, x), 1)),
  log2: (g, x) => M.div(g, M.mul(x, LN2)),
  exp2: (g, _x, y) => M.mul(g, M.mul(y, LN2)),
  frac: (g) => g,
};

export function unary(op: UnaryOp, x: Tensor): Tensor {
  const boolOut = op === "not" || op === "isnan" || op === "isinf";
  const out = prim("unary", { op }, [x], x.shape, boolOut ? "bool" : x.dtype, dev(x));
  const rule = UNARY_GRAD[op];
  if (!rule) return out;
  // save only what the gradient reads, so in-place updates of unneeded values stay legal
  const saved = NO_SAVE.has(op) ? [null, null] : SAVE_Y.has(op) ? [null, out] : [x, null];
  return attach(out, backwardName(op), [x], saved, ([g], [xs, ys]) => [rule(g!, xs!, ys!)]);
}

const COMPARE = new Set<BinaryOp>(["eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor"]);

type BVjp = (g: Tensor, a: Tensor, b: Tensor, y: Tensor) => [Tensor | null, Tensor | null];
const BINARY_GRAD: Record<BinaryOp, BVjp | null> = {
  add: (g) => [g, g],
  sub: (g) => [g, M.neg(g)],
  // a, b or y is null when no gradient reads it (binary() saves only what is needed)
  mul: (g, a, b) => [b ? M.mul(g, b) : null, a ? M.mul(g, a) : null],
  // PyTorch's div_tensor_other_backward: -grad * ((a / b) / b), from the inputs (not the output)
  div: (g, a, b) => [M.div(g, b), a ? M.neg(M.mul(g, M.div(M.div(a, b), b))) : null],
  pow: (g, a, b, y) => {
    const ga = M.where(M.eq(b, 0), 0, M.mul(g, M.mul(b, M.pow(a, M.sub(b, 1)))));
    const gb = y ? M.mul(g, M.where(M.logicalAnd(M.eq(a, 0), M.ge(b, 0)), 0, M.mul(y, M.log(a)))) : null;
    return [ga, gb];
  },
  maximum: (g, a, b) => {
    const wa = M.where(M.eq(a, b), 0.5, M.gt(a, b).to(g.dtype));
    return [M.mul(g, wa), M.mul(g, M.rsub(wa, 1))];
  },
  minimum: (g, a, b) => {
    const wa = M.where(M.eq(a, b), 0.5, M.lt(a, b).to(g.dtype));
    return [M.mul(g, wa), M.mul(g, M.rsub(wa, 1))];
  },
  atan2: (g, a, b) => {
    const den = M.add(M.mul(a, a), M.mul(b, b));
    return [M.div(M.mul(g, b), den), M.neg(M.div(M.mul(g, a), den))];
  },
  fmod: (g, a, b) => [g, M.neg(M.mul(g, M.trunc(M.div(a, b))))],
  remainder: (g, a, b) => [g, M.neg(M.mul(g, M.floor(M.div(a, b))))],
  eq: null,
  ne: null,
  lt: null,
  le: null,
  gt: null,
  ge: null,
  and: null,
  or: null,
  xor: null,
  bitand: null,
  bitor: null,
  bitxor: null,
  floordiv: null,
  truncdiv: null,
};

/** Binary primitive on same-dtype operands; broadcasting happens here, promotion in ops/math. */
export function binary(op: BinaryOp, a: Tensor, b: Tensor): Tensor {
  const name = currentOpName() ?? op;
  checkSameDevice(name, [a, b]);
  const shape = broadcastShapes(name, a.shape, b.shape);
  const ea = expandNoGrad(a, shape);
  const eb = expandNoGrad(b, shape);
  const out = prim("binary", { op }, [ea, eb], shape, COMPARE.has(op) ? "bool" : a.dtype, dev(a));
  const rule = BINARY_GRAD[op];
  if (!rule) return out;
  // save only what the gradients that will be needed read (PyTorch's rule), so that an in-place
  // update of a value no gradient reads stays legal: y = x.mul(2); y.mul_(3)
  // (no helper closure here: a named arrow made per call is one more allocation per op, and
  // esbuild's keepNames, which tsx applies, adds a defineProperty call to each)
  const bg = b.requiresGrad;
  const saved =
    op === "add" || op === "sub"
      ? [null, null, null]
      : op === "mul"
        ? [bg ? a : null, a.requiresGrad ? b : null, null]
        : op === "div"
          ? [bg ? a : null, b, null]
          : op === "pow"
            ? [a, b, bg ? out : null]
            : [a, b, null];
  return attach(out, backwardName(op), [a, b], saved, ([g], [as, bs, ys]) => {
    const [ga, gb] = rule(g!, as!, bs!, ys!);
    return [a.requiresGrad && ga ? sumToShape(ga, a.shape) : null, b.requiresGrad && gb ? sumToShape(gb, b.shape) : null];
  });
}

/** Broadcast view for a kernel input; autograd is handled by the caller's sumToShape. */
function expandNoGrad(x: Tensor, shape: Shape): Tensor {
  if (x.ndim === shape.length && x.shape.every((d, i) => d === shape[i])) return x;
  const nd = shape.length;
  const strides = shape.map((d, i) => {
    const xi = i - (nd - x.ndim);
    return xi < 0 || x.shape[xi] !== d ? 0 : x._strides[xi]!;
  });
  return new Tensor(x._storage, shape, strides, x._offset, x.dtype);
}

export function where(cond: Tensor, a: Tensor, b: Tensor): Tensor {
  const name = currentOpName() ?? "where";
  checkSameDevice(name, [cond, a, b]);
  const shape = broadcastShapes(name, cond.shape, a.shape, b.shape);
  const out = prim(
    "where",
    {},
    [expandNoGrad(cond, shape), expandNoGrad(a, shape), expandNoGrad(b, shape)],
    shape,
    a.dtype,
    dev(a),
  );
  return attach(out, "WhereBackward0", [null, a, b], [cond], ([g], [c]) => {
    const z = M._scalarConstant(0, g!.dtype, g!.device); // broadcast by where: no zeros the size of g
    return [
      null,
      a.requiresGrad ? sumToShape(where(c!, g!, z), a.shape) : null,
      b.requiresGrad ? sumToShape(where(c!, z, g!), b.shape) : null,
    ];
  });
}

export function cast(x: Tensor, dtype: DType): Tensor {
  if (x.dtype === dtype) return x;
  const out = prim("cast", {}, [x], x.shape, dtype, dev(x));
  if (!isFloating(dtype) || !isFloating(x.dtype)) return out;
  return attach(out, "ToCopyBackward0", [x], [], ([g]) => [cast(g!, x.dtype)]);
}

// ---------------- reductions ----------------

export function reduce(op: ReduceOp, x: Tensor, axes: number[], keepdim: boolean): Tensor {
  const kshape = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const outDtype = op === "any" || op === "all" ? "bool" : x.dtype;
  const raw = prim("reduce", { op, axes: [...axes] }, [x], kshape, outDtype, dev(x));
  // dropping the reduced dims is free (same contiguous storage), so it is not a separate autograd node
  const out = keepdim ? raw : new Tensor(raw._storage, x.shape.filter((_, i) => !axes.includes(i)));
  if (op !== "sum" && op !== "prod" && op !== "max" && op !== "min") return out;
  const saved = op === "sum" ? [null, null] : [x, out];
  return attach(out, backwardName(op), [x], saved, ([g], [xs, ys]) => {
    const ge = expand(reshape(g!, kshape), x.shape);
    if (op === "sum") return [ge];
    const yk = expand(reshape(ys!, kshape), x.shape);
    if (op === "prod") return [M.div(M.mul(ge, yk), xs!)];
    // max/min: share the gradient evenly between tied extremes (amax/amin semantics)
    const mask = M.eq(xs!, yk).to(g!.dtype);
    const cnt = reduce("sum", mask, axes, true);
    return [M.div(M.mul(ge, mask), cnt)];
  });
}

export function argreduce(op: "argmax" | "argmin", x: Tensor, axis: number, keepdim: boolean): Tensor {
  const kshape = x.shape.map((d, i) => (i === axis ? 1 : d));
  const out = prim("argreduce", { op, axis }, [x], kshape, "int64", dev(x));
  return keepdim ? out : reshape(out, x.shape.filter((_, i) => i !== axis));
}

// ---------------- matmul ----------------

const TYPE_NAMES: Record<string, string> = {
  float32: "Float", float64: "Double", float16: "Half", bfloat16: "BFloat16", int64: "Long", int32: "Int", int8: "Char", uint8: "Byte", bool: "Bool",
};

/** Batched matmul on [..., M, K] x [..., K, N] with broadcast batch dims. */
export function matmulPrim(a: Tensor, b: Tensor): Tensor {
  const name = currentOpName() ?? "matmul";
  checkSameDevice(name, [a, b]);
  if (a.dtype !== b.dtype)
    throw new TypeError(`${name}: expected scalar type ${TYPE_NAMES[a.dtype] ?? a.dtype} but found ${TYPE_NAMES[b.dtype] ?? b.dtype}`);
  const K = a.shape[a.ndim - 1]!;
  if (b.shape[b.ndim - 2] !== K)
    throw new RangeError(
      `${name}: mat1 and mat2 shapes cannot be multiplied (${a.shape.slice(-2).join("x")} and ${b.shape.slice(-2).join("x")})`,
    );
  const batch = broadcastShapes(name, a.shape.slice(0, -2), b.shape.slice(0, -2));
  const M_ = a.shape[a.ndim - 2]!;
  const N = b.shape[b.ndim - 1]!;
  const ea = expandNoGrad(a, [...batch, M_, K]);
  const eb = expandNoGrad(b, [...batch, K, N]);
  const out = prim("matmul", {}, [ea, eb], [...batch, M_, N], a.dtype, dev(a));
  return attach(out, "BmmBackward0", [a, b], [a, b], ([g], [as, bs]) => [
    a.requiresGrad ? sumToShape(matmulPrim(g!, S._transpose(bs!, -1, -2)), a.shape) : null,
    b.requiresGrad ? matmulGradB(as!, bs!, g!) : null,
  ]);
}

/**
 * Gradient of b in a @ b. When b is a transposed matrix (a Linear weight's w.t(), strides
 * [1, K]) it is computed as (g^T a)^T, so it comes out in b's own layout and the transpose's
 * backward is a view of a contiguous gradient instead of a transposing copy (PyTorch's
 * mm_mat2_backward does the same).
 */
function matmulGradB(a: Tensor, b: Tensor, g: Tensor): Tensor {
  // b shared across a's batch (x [B, T, K] @ W [K, N], b's batch dims all 1): fold the batch into
  // one 2-D matmul, a.reshape(-1, K)^T @ g.reshape(-1, N), instead of a batched matmul and a sum
  // over the batch (PyTorch folds the batch the same way)
  if (a.ndim > 2 && b.shape.slice(0, -2).every((d) => d === 1)) {
    const K = a.shape[a.ndim - 1]!, N = g.shape[g.ndim - 1]!;
    const rows = a.shape.slice(0, -1).reduce((p, q) => p * q, 1);
    const a2 = reshape(a, [rows, K]), g2 = reshape(g, [rows, N]);
    if (b.ndim === 2) return matmulGradB(a2, b, g2);
    return reshape(matmulPrim(S._transpose(a2, 0, 1), g2), b.shape);
  }
  if (a.ndim === 2 && b.ndim === 2 && b._strides[0] === 1 && b._strides[1] === b.shape[0] && b.shape[1]! > 1)
    return S._transpose(matmulPrim(S._transpose(g, 0, 1), a), 0, 1);
  return sumToShape(matmulPrim(S._transpose(a, -1, -2), g), b.shape);
}

/**
 * One `composite` node when the inputs' device overrides `name` (its own kernel), else null and
 * the caller decomposes. Gradients are the caller's (attach), usually written with other ops.
 */
export function compositePrim(
  name: CompositeName,
  attrs: CompositeAttrs,
  inputs: Tensor[],
  shape: Shape,
  dtype: DType,
  scalars: number[] = [],
): Tensor | null {
  const d = dev(inputs[0]!);
  if (!d.overrides.has(name) || inputs.some((t) => t._storage.device !== d)) return null;
  return prim("composite", { name, attrs }, inputs, shape, dtype, d, scalars);
}

// ---------------- gather / scatter ----------------

export function gather(x: Tensor, dim: number, index: Tensor): Tensor {
  const out = prim("gather", { dim }, [x, index], index.shape, x.dtype, dev(x));
  return attach(out, "GatherBackward0", [x], [index], ([g], [idx]) => [
    scatterAdd(M._zerosOf(x.shape, x.dtype, x.device), dim, idx!, g!),
  ]);
}

export function scatterAdd(self: Tensor, dim: number, index: Tensor, src: Tensor): Tensor {
  const out = prim("scatterAdd", { dim }, [self, index, src], self.shape, self.dtype, dev(self));
  return attach(out, "ScatterAddBackward0", [self, null, src], [index], ([g], [idx]) => [
    g!,
    null,
    src.requiresGrad ? gather(g!, dim, idx!) : null,
  ]);
}

// ---------------- scans, sorting, generation ----------------

export function scan(op: "sum" | "prod", x: Tensor, dim: number): Tensor {
  const out = prim("scan", { op, dim }, [x], x.shape, x.dtype, dev(x));
  return attach(out, op === "sum" ? "CumsumBackward0" : "CumprodBackward0", [x], [x, out], ([g], [xs, ys]) => {
    if (op === "sum") return [S._flip(scan("sum", S._flip(g!, [dim]), dim), [dim])];
    const r = S._flip(scan("sum", S._flip(M.mul(g!, ys!), [dim]), dim), [dim]);
    return [M.div(r, xs!)];
  });
}

export function argsort(x: Tensor, dim: number, descending: boolean): Tensor {
  return prim("argsort", { dim, descending }, [x], x.shape, "int64", dev(x));
}

export function randPrim(shape: Shape, dist: "uniform" | "normal", dtype: DType, device: string, seed: [number, number], offset: number): Tensor {
  const hi = Math.floor(offset / 4294967296);
  return prim("rand", { dist }, [], shape, dtype, getDevice(device), [seed[0], seed[1], offset >>> 0, hi]);
}

export function fullPrim(shape: Shape, value: number, dtype: DType, device: string): Tensor {
  return prim("full", {}, [], shape, dtype, getDevice(device), [value]);
}

export function arangePrim(n: number, start: number, step: number, dtype: DType, device: string): Tensor {
  return prim("arange", {}, [], [n], dtype, getDevice(device), [start, step]);
}

export function catPrim(ts: Tensor[], dim: number): Tensor {
  const shape = [...ts[0]!.shape];
  shape[dim] = ts.reduce((s, t) => s + t.shape[dim]!, 0);
  const out = prim("cat", { dim }, ts, shape, ts[0]!.dtype, dev(ts[0]!));
  const sizes = ts.map((t) => t.shape[dim]!);
  return attach(out, "CatBackward0", ts, [], ([g]) => {
    let s = 0;
    return sizes.map((n, i) => {
      const r = ts[i]!.requiresGrad ? S._narrow(g!, dim, s, n) : null;
      s += n;
      return r;
    });
  });
}

/** Constant pad with non-negative (before, after) per dim. */
export function padPrim(x: Tensor, pads: number[], value: number): Tensor {
  const shape = x.shape.map((d, i) => d + pads[2 * i]! + pads[2 * i + 1]!);
  const out = prim("pad", { pads }, [x], shape, x.dtype, dev(x), [value]);
  return attach(out, "ConstantPadNdBackward0", [x], [], ([g]) => {
    let r = g!;
    x.shape.forEach((d, i) => (r = S._narrow(r, i, pads[2 * i]!, d)));
    return [r];
  });
}

