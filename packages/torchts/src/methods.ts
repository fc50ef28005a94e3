// Tensor methods: PyTorch's tensor.x(...) for the ops in ops/math, shape_ops, reduce,
// linalg, random and in-place updates. Files that define further ops (indexing,
// nn/functional) attach their own methods the same way.
import { Tensor } from "./tensor.js";
import * as M from "./ops/math.js";
import * as S from "./ops/shape_ops.js";
import * as R from "./ops/reduce.js";
import * as L from "./ops/linalg.js";
import * as RNG from "./ops/random.js";
import type { InplaceSigs as IM } from "./ops/inplace_methods.js";
import "./ops/inplace_methods.js"; // in-place variants, x.where(cond, other), dtype casts (x.float())
import { backward, type BackwardOptions } from "./autograd/engine.js";
import type { Method } from "./ops/registry.js";

type T = Tensor;
/** backward()'s keyword arguments (PyTorch's gradient, retain_graph, create_graph, inputs) */
type BackwardArgs = BackwardOptions & { gradient?: T | null; inputs?: T[] | null };
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
    contiguous: Method<typeof S.contiguous>;
    clone: Method<typeof S.clone>;
    detach: Method<typeof S.detach>;
    view: Method<typeof S.view>;
    viewAs: Method<typeof S.viewAs>;
    reshape: Method<typeof S.reshape>;
    reshapeAs: Method<typeof S.reshapeAs>;
    permute: Method<typeof S.permute>;
    transpose: Method<typeof S.transpose>;
    swapaxes: Method<typeof S.swapaxes>;
    swapdims: Method<typeof S.swapdims>;
    t: Method<typeof S.t>;
    readonly T: T;
    readonly mT: T;
    movedim: Method<typeof S.movedim>;
    expand: Method<typeof S.expand>;
    expandAs: Method<typeof S.expandAs>;
    broadcastTo: Method<typeof S.broadcastTo>;
    narrow: Method<typeof S.narrow>;
    select: Method<typeof S.select>;
    slice: Method<typeof S.slice>;
    squeeze: Method<typeof S.squeeze>;
    unsqueeze: Method<typeof S.unsqueeze>;
    flatten: Method<typeof S.flatten>;
    unflatten: Method<typeof S.unflatten>;
    ravel: Method<typeof S.ravel>;
    split: Method<S.SplitMethodSig>;
    chunk: Method<typeof S.chunk>;
    unbind: Method<typeof S.unbind>;
    diagonal: Method<typeof S.diagonal>;
    flip: Method<typeof S.flip>;
    roll: Method<typeof S.roll>;
    tril: Method<typeof S.tril>;
    triu: Method<typeof S.triu>;
    repeat: Method<typeof S.repeat>;
    tile: Method<typeof S.tile>;
    repeatInterleave: Method<typeof S.repeatInterleave>;
    unfold: Method<typeof S.unfold>;
    to: Method<typeof S.to>;
    type: S.TypeMethodSig;
    cpu: S.CpuMethodSig;
    float: IM["cast"];
    double: IM["cast"];
    half: IM["cast"];
    bfloat16: IM["cast"];
    long: IM["cast"];
    int: IM["cast"];
    bool: IM["cast"];
    byte: IM["cast"];
    // reductions
    sum: Method<typeof R.sum>;
    mean: Method<typeof R.mean>;
    prod: Method<typeof R.prod>;
    max: R.MaxMinMethod;
    min: R.MaxMinMethod;
    amax: Method<typeof R.amax>;
    amin: Method<typeof R.amin>;
    argmax: Method<typeof R.argmax>;
    argmin: Method<typeof R.argmin>;
    var: Method<typeof R.var_>;
    std: Method<typeof R.std>;
    logsumexp: Method<typeof R.logsumexp>;
    norm: Method<typeof R.norm>;
    any: Method<typeof R.any>;
    all: Method<typeof R.all>;
    countNonzero: Method<typeof R.countNonzero>;
    cumsum: Method<typeof R.cumsum>;
    cumprod: Method<typeof R.cumprod>;
    sort: Method<typeof R.sort>;
    argsort: Method<typeof R.argsort>;
    topk: Method<typeof R.topk>;
    kthvalue: Method<typeof R.kthvalue>;
    median: R.MedianMethod;
    // linalg
    matmul: Method<typeof L.matmul>;
    mm: Method<typeof L.mm>;
    bmm: Method<typeof L.bmm>;
    mv: Method<typeof L.mv>;
    dot: Method<typeof L.dot>;
    outer: Method<typeof L.outer>;
    addmm: Method<typeof L.addmm>;
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
    bernoulli: Method<typeof RNG.bernoulli>;
    multinomial: Method<typeof RNG.multinomial>;
    uniform_: RNG.UniformMethod;
    normal_: RNG.NormalMethod;
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

// The base of x.backward(): every other method is installed by the op table (each family file's
// installMethods); tensor_basics.ts puts the table's binder in front of this one.
(Tensor.prototype as unknown as Record<string, unknown>).backward = function (this: T, g?: T | null, o?: BackwardOptions) {
  return backward(this, g, o);
};

Object.defineProperty(Tensor.prototype, "T", {
  get(this: T) {
    return S._permute(this, this.shape.map((_, i) => this.ndim - 1 - i));
  },
});
Object.defineProperty(Tensor.prototype, "mT", {
  get(this: T) {
    return S._transpose(this, -2, -1);
  },
});
