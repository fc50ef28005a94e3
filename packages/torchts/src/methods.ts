// Tensor methods: PyTorch's tensor.x(...) for the ops in ops/math, shape_ops, reduce,
// linalg, random and in-place updates. Files that define further ops (indexing,
// nn/functional) attach their own methods the same way.
import type { DType } from "./ir/dtype.js";
import { Tensor, type TensorLike } from "./tensor.js";
import * as M from "./ops/math.js";
import * as S from "./ops/shape_ops.js";
import * as R from "./ops/reduce.js";
import * as L from "./ops/linalg.js";
import * as RNG from "./ops/random.js";
import { inplaceSet, copy_ as copyInplace } from "./ops/inplace.js";
import { backward, type BackwardOptions } from "./autograd/engine.js";
import { opOf } from "./ops/registry.js";

type T = Tensor;
/** backward()'s keyword arguments (PyTorch's gradient, retain_graph, create_graph, inputs) */
type BackwardArgs = BackwardOptions & { gradient?: T | null; inputs?: T[] | null };
type VI = R.ValuesIndices;
declare module "./tensor.js" {
  interface Tensor {
    add(o: TensorLike, opts?: { alpha?: number }): T;
    sub(o: TensorLike, opts?: { alpha?: number }): T;
    mul(o: TensorLike): T;
    div(o: TensorLike, opts?: { roundingMode?: "trunc" | "floor" | null }): T;
    pow(o: TensorLike): T;
    rsub(o: TensorLike): T;
    remainder(o: TensorLike): T;
    fmod(o: TensorLike): T;
    floorDivide(o: TensorLike): T;
    maximum(o: TensorLike): T;
    minimum(o: TensorLike): T;
    atan2(o: TensorLike): T;
    eq(o: TensorLike): T;
    ne(o: TensorLike): T;
    lt(o: TensorLike): T;
    le(o: TensorLike): T;
    gt(o: TensorLike): T;
    ge(o: TensorLike): T;
    logicalAnd(o: TensorLike): T;
    logicalOr(o: TensorLike): T;
    logicalXor(o: TensorLike): T;
    logicalNot(): T;
    bitwiseAnd(o: TensorLike): T;
    bitwiseOr(o: TensorLike): T;
    bitwiseXor(o: TensorLike): T;
    bitwiseNot(): T;
    neg(): T;
    abs(): T;
    sign(): T;
    exp(): T;
    log(): T;
    log2(): T;
    log10(): T;
    sqrt(): T;
    rsqrt(): T;
    sin(): T;
    cos(): T;
    tan(): T;
    tanh(): T;
    sigmoid(): T;
    erf(): T;
    expm1(): T;
    log1p(): T;
    reciprocal(): T;
    floor(): T;
    ceil(): T;
    round(opts?: { decimals?: number }): T;
    trunc(): T;
    frac(): T;
    square(): T;
    relu(): T;
    isnan(): T;
    isinf(): T;
    isfinite(): T;
    clamp(min?: TensorLike | null, max?: TensorLike | null): T;
    clip(min?: TensorLike | null, max?: TensorLike | null): T;
    lerp(end: T, w: TensorLike): T;
    where(cond: T, other: TensorLike): T;
    // shape
    contiguous(): T;
    clone(): T;
    detach(): T;
    view(...shape: (number | number[])[]): T;
    viewAs(o: T): T;
    reshape(...shape: (number | number[])[]): T;
    reshapeAs(o: T): T;
    permute(...dims: (number | number[])[]): T;
    transpose(d0: number, d1: number): T;
    swapaxes(d0: number, d1: number): T;
    t(): T;
    readonly T: T;
    readonly mT: T;
    movedim(src: number | number[], dst: number | number[]): T;
    expand(...shape: (number | number[])[]): T;
    expandAs(o: T): T;
    narrow(dim: number, start: number, length: number): T;
    select(dim: number, index: number): T;
    slice(dim: number, start?: number | null, end?: number | null, step?: number): T;
    squeeze(dim?: number | number[]): T;
    unsqueeze(dim: number): T;
    flatten(startDim?: number, endDim?: number): T;
    unflatten(dim: number, sizes: number[]): T;
    ravel(): T;
    split(sizes: number | number[], dim?: number): T[];
    chunk(chunks: number, dim?: number): T[];
    unbind(dim?: number): T[];
    diagonal(offset?: number, dim1?: number, dim2?: number): T;
    flip(dims: number | number[]): T;
    roll(shifts: number | number[], dims?: number | number[]): T;
    tril(diagonal?: number): T;
    triu(diagonal?: number): T;
    repeat(...reps: (number | number[])[]): T;
    tile(reps: number[]): T;
    repeatInterleave(repeats: number, dim?: number): T;
    unfold(dim: number, size: number, step: number): T;
    to(a: string | { dtype?: DType; device?: string }, dtype?: DType): T;
    type(dtype: DType): T;
    cpu(): T;
    float(): T;
    double(): T;
    half(): T;
    bfloat16(): T;
    long(): T;
    int(): T;
    bool(): T;
    byte(): T;
    // reductions
    sum(dim?: number | number[] | null | R.ReduceOpts, keepdim?: boolean): T;
    mean(dim?: number | number[] | null | R.ReduceOpts, keepdim?: boolean): T;
    prod(dim?: number | R.ReduceOpts, keepdim?: boolean): T;
    max(): T;
    max(dim: number | { dim: number; keepdim?: boolean }, keepdim?: boolean): VI;
    max(other: T): T;
    min(): T;
    min(dim: number | { dim: number; keepdim?: boolean }, keepdim?: boolean): VI;
    min(other: T): T;
    amax(dim?: number | number[] | null, keepdim?: boolean): T;
    amin(dim?: number | number[] | null, keepdim?: boolean): T;
    argmax(dim?: number | null | { dim?: number; keepdim?: boolean }, keepdim?: boolean): T;
    argmin(dim?: number | null | { dim?: number; keepdim?: boolean }, keepdim?: boolean): T;
    var(dim?: number | number[] | null | R.VarOpts, opts?: boolean | R.VarOpts, keepdim?: boolean): T;
    std(dim?: number | number[] | null | R.VarOpts, opts?: boolean | R.VarOpts, keepdim?: boolean): T;
    logsumexp(dim: number | number[], keepdim?: boolean): T;
    norm(p?: number | "fro" | "inf" | null, dim?: number | number[] | null, keepdim?: boolean): T;
    any(dim?: number, keepdim?: boolean): T;
    all(dim?: number, keepdim?: boolean): T;
    cumsum(dim: number, opts?: { dtype?: DType }): T;
    cumprod(dim: number, opts?: { dtype?: DType }): T;
    sort(dim?: number | { dim?: number; descending?: boolean }, descending?: boolean): VI;
    argsort(dim?: number | { dim?: number; descending?: boolean }, descending?: boolean): T;
    topk(k: number, opts?: { dim?: number; largest?: boolean; sorted?: boolean }): VI;
    // linalg
    matmul(o: T): T;
    mm(o: T): T;
    bmm(o: T): T;
    mv(o: T): T;
    dot(o: T): T;
    outer(o: T): T;
    // in-place
    add_(o: TensorLike, opts?: { alpha?: number }): T;
    sub_(o: TensorLike, opts?: { alpha?: number }): T;
    mul_(o: TensorLike): T;
    div_(o: TensorLike, opts?: { roundingMode?: "trunc" | "floor" | null }): T;
    pow_(o: TensorLike): T;
    neg_(): T;
    exp_(): T;
    sqrt_(): T;
    abs_(): T;
    relu_(): T;
    sigmoid_(): T;
    tanh_(): T;
    clamp_(min?: TensorLike | null, max?: TensorLike | null): T;
    lerp_(end: T, w: TensorLike): T;
    addcmul_(a: T, b: T, opts?: { value?: number }): T;
    addcdiv_(a: T, b: T, opts?: { value?: number }): T;
    copy_(src: T): T;
    zero_(): T;
    fill_(v: TensorLike): T;
    uniform_(from?: number, to?: number, gen?: RNG.Generator): T;
    normal_(mean?: number, std?: number, gen?: RNG.Generator): T;
    requiresGrad_(v?: boolean): T;
    // autograd
    backward(
      gradient?: T | null | BackwardArgs,
      retainGraph?: boolean | null | BackwardArgs,
      createGraph?: boolean | BackwardArgs,
      inputs?: T[] | null | BackwardArgs,
      opts?: BackwardArgs,
    ): void;
  }
}

const P = Tensor.prototype as unknown as Record<string, unknown>;
// A name the op table already installed (its family file's installMethods) is left as it is.
const taken = (name: string) => opOf(P[name]) !== undefined;
const bind = (name: string, f: (...a: never[]) => unknown) => {
  if (taken(name)) return;
  const def = opOf(f);
  if (def) {
    P[name] = def.method; // a table op: `this` binds as its first parameter
    return;
  }
  P[name] = function (this: T, ...a: unknown[]) {
    return (f as (...x: unknown[]) => unknown)(this, ...a);
  };
};

const direct: Record<string, (...a: never[]) => unknown> = {
  add: M.add, sub: M.sub, mul: M.mul, div: M.div, pow: M.pow, rsub: M.rsub, remainder: M.remainder, fmod: M.fmod,
  floorDivide: M.floorDivide, maximum: M.maximum, minimum: M.minimum, atan2: M.atan2, eq: M.eq, ne: M.ne, lt: M.lt,
  le: M.le, gt: M.gt, ge: M.ge, logicalAnd: M.logicalAnd, logicalOr: M.logicalOr, logicalXor: M.logicalXor,
  logicalNot: M.logicalNot, bitwiseAnd: M.bitwiseAnd, bitwiseOr: M.bitwiseOr, bitwiseXor: M.bitwiseXor,
  bitwiseNot: M.bitwiseNot, neg: M.neg, abs: M.abs, sign: M.sign, exp: M.exp, log: M.log, log2: M.log2, log10: M.log10,
  sqrt: M.sqrt, rsqrt: M.rsqrt, sin: M.sin, cos: M.cos, tan: M.tan, tanh: M.tanh, sigmoid: M.sigmoid, erf: M.erf,
  expm1: M.expm1, log1p: M.log1p, reciprocal: M.reciprocal, floor: M.floor, ceil: M.ceil, round: M.round,
  trunc: M.trunc, frac: M.frac, square: M.square, relu: M.relu, isnan: M.isnan, isinf: M.isinf, isfinite: M.isfinite,
  clamp: M.clamp, clip: M.clamp, lerp: M.lerp,
  contiguous: S.contiguous, clone: S.clone, detach: S.detach, view: S.view, viewAs: S.viewAs, reshape: S.reshape,
  reshapeAs: S.reshapeAs, permute: S.permute, transpose: S.transpose, swapaxes: S.transpose, t: S.t, movedim: S.movedim,
  expand: S.expand, expandAs: S.expandAs, narrow: S.narrow, select: S.select, slice: S.slice, squeeze: S.squeeze,
  unsqueeze: S.unsqueeze, flatten: S.flatten, unflatten: S.unflatten, ravel: S.ravel, split: S.split, chunk: S.chunk,
  unbind: S.unbind, diagonal: S.diagonal, flip: S.flip, roll: S.roll, tril: S.tril, triu: S.triu, repeat: S.repeat,
  tile: S.tile, repeatInterleave: S.repeatInterleave, unfold: S.unfold, to: S.to, type: S.to,
  sum: R.sum, mean: R.mean, prod: R.prod, max: R.max, min: R.min, amax: R.amax, amin: R.amin, argmax: R.argmax,
  argmin: R.argmin, var: R.var_, std: R.std, logsumexp: R.logsumexp, norm: R.norm, any: R.any, all: R.all,
  cumsum: R.cumsum, cumprod: R.cumprod, sort: R.sort, argsort: R.argsort, topk: R.topk,
  matmul: L.matmul, mm: L.mm, bmm: L.bmm, mv: L.mv, dot: L.dot, outer: L.outer,
  copy_: copyInplace,
  zero_: (t: T) => inplaceSet(t, 0, "zero_"),
  fill_: (t: T, v: TensorLike) => inplaceSet(t, v, "fill_"),
  uniform_: RNG.uniform_,
  normal_: RNG.normal_,
  backward: (t: T, g?: T | null, o?: BackwardOptions) => backward(t, g, o),
};
for (const [k, f] of Object.entries(direct)) bind(k, f);

P.where = function (this: T, cond: T, other: TensorLike) {
  return M.where(cond, this, other);
};

// in-place variants: compute out of place, write back (version bump, autograd rebase)
const inplace: Record<string, (t: T, ...a: never[]) => T> = {
  add_: M.add, sub_: M.sub, mul_: M.mul, div_: M.div, pow_: M.pow, neg_: M.neg, exp_: M.exp, sqrt_: M.sqrt,
  abs_: M.abs, relu_: M.relu, sigmoid_: M.sigmoid, tanh_: M.tanh, clamp_: M.clamp, lerp_: M.lerp,
  addcmul_: M.addcmul, addcdiv_: M.addcdiv,
};
for (const [k, f] of Object.entries(inplace))
  if (!taken(k))
    P[k] = function (this: T, ...a: unknown[]) {
    return inplaceSet(this, (f as (...x: unknown[]) => T)(this, ...a), k);
  };

const casts: Record<string, DType> = {
  float: "float32", double: "float64", half: "float16", bfloat16: "bfloat16", long: "int64", int: "int32",
  bool: "bool", byte: "uint8",
};
for (const [k, d] of Object.entries(casts))
  if (!taken(k))
    P[k] = function (this: T) {
    return S.to(this, d);
  };
P.cpu = function (this: T) {
  return S.to(this, "cpu");
};
Object.defineProperty(Tensor.prototype, "T", {
  get(this: T) {
    return S.permute(this, this.shape.map((_, i) => this.ndim - 1 - i));
  },
});
Object.defineProperty(Tensor.prototype, "mT", {
  get(this: T) {
    return S.transpose(this, -2, -1);
  },
});
