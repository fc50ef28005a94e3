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
import type { InplaceSigs as IM } from "./ops/inplace_methods.js";
import "./ops/inplace_methods.js"; // in-place variants, x.where(cond, other), dtype casts (x.float())
import { backward, type BackwardOptions } from "./autograd/engine.js";
import { opOf, type Method } from "./ops/registry.js";

type T = Tensor;
/** backward()'s keyword arguments (PyTorch's gradient, retain_graph, create_graph, inputs) */
type BackwardArgs = BackwardOptions & { gradient?: T | null; inputs?: T[] | null };
type VI = R.ValuesIndices;
declare module "./tensor.js" {
  interface Tensor {
    add: Method<typeof M.add>;
    sub: Method<typeof M.sub>;
    mul: Method<typeof M.mul>;
    div: Method<typeof M.div>;
    pow: Method<typeof M.pow>;
    rsub: Method<typeof M.rsub>;
    remainder: Method<typeof M.remainder>;
    fmod: Method<typeof M.fmod>;
    floorDivide: Method<typeof M.floorDivide>;
    trueDivide: Method<typeof M.trueDivide>;
    maximum: Method<typeof M.maximum>;
    minimum: Method<typeof M.minimum>;
    atan2: Method<typeof M.atan2>;
    eq: Method<typeof M.eq>;
    ne: Method<typeof M.ne>;
    lt: Method<typeof M.lt>;
    le: Method<typeof M.le>;
    gt: Method<typeof M.gt>;
    ge: Method<typeof M.ge>;
    logicalAnd: Method<typeof M.logicalAnd>;
    logicalOr: Method<typeof M.logicalOr>;
    logicalXor: Method<typeof M.logicalXor>;
    logicalNot: Method<typeof M.logicalNot>;
    bitwiseAnd: Method<typeof M.bitwiseAnd>;
    bitwiseOr: Method<typeof M.bitwiseOr>;
    bitwiseXor: Method<typeof M.bitwiseXor>;
    bitwiseNot: Method<typeof M.bitwiseNot>;
    neg: Method<typeof M.neg>;
    abs: Method<typeof M.abs>;
    sign: Method<typeof M.sign>;
    exp: Method<typeof M.exp>;
    log: Method<typeof M.log>;
    log2: Method<typeof M.log2>;
    log10: Method<typeof M.log10>;
    sqrt: Method<typeof M.sqrt>;
    rsqrt: Method<typeof M.rsqrt>;
    sin: Method<typeof M.sin>;
    cos: Method<typeof M.cos>;
    tan: Method<typeof M.tan>;
    tanh: Method<typeof M.tanh>;
    sigmoid: Method<typeof M.sigmoid>;
    erf: Method<typeof M.erf>;
    expm1: Method<typeof M.expm1>;
    log1p: Method<typeof M.log1p>;
    reciprocal: Method<typeof M.reciprocal>;
    atan: Method<typeof M.atan>;
    asin: Method<typeof M.asin>;
    acos: Method<typeof M.acos>;
    sinh: Method<typeof M.sinh>;
    cosh: Method<typeof M.cosh>;
    asinh: Method<typeof M.asinh>;
    acosh: Method<typeof M.acosh>;
    atanh: Method<typeof M.atanh>;
    exp2: Method<typeof M.exp2>;
    floor: Method<typeof M.floor>;
    ceil: Method<typeof M.ceil>;
    round: Method<typeof M.round>;
    trunc: Method<typeof M.trunc>;
    fix: Method<typeof M.fix>;
    frac: Method<typeof M.frac>;
    square: Method<typeof M.square>;
    relu: Method<typeof M.relu>;
    isnan: Method<typeof M.isnan>;
    isinf: Method<typeof M.isinf>;
    isfinite: Method<typeof M.isfinite>;
    clamp: Method<typeof M.clamp>;
    clip: Method<typeof M.clip>;
    lerp: Method<typeof M.lerp>;
    addcmul: Method<typeof M.addcmul>;
    addcdiv: Method<typeof M.addcdiv>;
    where: IM["where"];
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
    float: IM["cast"];
    double: IM["cast"];
    half: IM["cast"];
    bfloat16: IM["cast"];
    long: IM["cast"];
    int: IM["cast"];
    bool: IM["cast"];
    byte: IM["cast"];
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
    add_: IM["add_"];
    sub_: IM["sub_"];
    mul_: IM["mul_"];
    div_: IM["div_"];
    pow_: IM["pow_"];
    neg_: IM["unary"];
    exp_: IM["unary"];
    sqrt_: IM["unary"];
    abs_: IM["unary"];
    relu_: IM["unary"];
    sigmoid_: IM["unary"];
    tanh_: IM["unary"];
    clamp_: IM["clamp_"];
    lerp_: IM["lerp_"];
    addcmul_: IM["addc_"];
    addcdiv_: IM["addc_"];
    copy_: IM["copy_"];
    zero_: IM["unary"];
    fill_: IM["fill_"];
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
  uniform_: RNG.uniform_,
  normal_: RNG.normal_,
  backward: (t: T, g?: T | null, o?: BackwardOptions) => backward(t, g, o),
};
for (const [k, f] of Object.entries(direct)) bind(k, f);

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
