// Reductions, scans and sorting: sum, mean, prod, max/min (with indices), amax/amin,
// argmax/argmin, var/std with correction, logsumexp, norm, any/all, cumsum/cumprod,
// sort/argsort/topk, kthvalue, median. Every public op is an entry of the op table
// (registry.ts): its schema is PyTorch's Python signature, the binder turns any calling form
// into the implementation's arguments.
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import { normDim, normDims, shapeStr } from "../ir/shape.js";
import type { Tensor } from "../tensor.js";
import { argreduce, argsort as argsortPrim, attach, cast, fullPrim, gather, reduce, reshape, scan } from "./core.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";
import { installMethods, op, type Sig } from "./registry.js";
import { pyTypeName } from "./binder.js";

type Dims = number | number[];

/** Options of sum / mean (every keyword of their schema). */
export interface ReduceOpts {
  dim?: Dims | null;
  keepdim?: boolean;
  dtype?: DType | null;
}

function sumDtype(d: DType): DType {
  return isFloating(d) ? d : "int64"; // integer and bool sums accumulate in int64, as PyTorch
}

/** PyTorch 1.13: `dim=None` and `dim=[]` both reduce over every dimension. */
function allDims(dim: readonly number[] | null, ndim: number, op: string): number[] {
  const axes = normDims(dim === null || dim.length === 0 ? null : dim, ndim, op);
  return ndim === 0 ? [] : axes; // a 0-dim tensor's dim 0 / -1 is the tensor itself
}
/** One reduction dim (range-checked); none for a 0-dim tensor, whose dim 0 / -1 is the tensor itself. */
function oneDim(dim: number, ndim: number, op: string): number[] {
  const d = normDim(dim, ndim, op);
  return ndim === 0 ? [] : [d];
}

/** PyTorch's name of a dtype in messages ("Got Long instead"). */
const TYPE_NAMES: Record<DType, string> = {
  float32: "Float", float64: "Double", float16: "Half", bfloat16: "BFloat16", int64: "Long", int32: "Int", int8: "Char",
  uint8: "Byte", bool: "Bool",
};

function zerosIndex(x: Tensor): Tensor {
  return fullPrim(x.shape, 0, "int64", x.device);
}

export const sum = op<Sig<[input: Tensor, dim?: Dims | null, keepdim?: boolean], ReduceOpts, Tensor>>(
  "sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
  (x: Tensor, dim: number[] | null, keepdim: boolean, dtype: DType | null): Tensor =>
    reduce("sum", cast(x, dtype ?? sumDtype(x.dtype)), allDims(dim, x.ndim, "sum"), keepdim),
);

export const mean = op<Sig<[input: Tensor, dim?: Dims | null, keepdim?: boolean], ReduceOpts, Tensor>>(
  "mean(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
  (x: Tensor, dim: number[] | null, keepdim: boolean, dtype: DType | null): Tensor => {
    const axes = allDims(dim, x.ndim, "mean");
    const d = dtype ?? x.dtype;
    if (!isFloating(d))
      throw new Error(
        `mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ${TYPE_NAMES[x.dtype]}`,
      );
    const n = axes.reduce((p, a) => p * x.shape[a]!, 1);
    return M.div(reduce("sum", cast(x, d), axes, keepdim), n);
  },
);

function prodImpl(x: Tensor, axes: number[], kd: boolean, dt: DType | null): Tensor {
  const xc = cast(x, dt ?? sumDtype(x.dtype));
  if (!xc.requiresGrad) return reduce("prod", xc, axes, kd);
  // The primitive's vjp (g * y / x) is NaN at zeros. d prod / d x_i is y / x_i when the slice has
  // no zero; at a zero it is the product of the other elements if that zero is the only one; else 0.
  const out = reduce("prod", S.detach(xc), axes, kd);
  const kshape = xc.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  return attach(out, "ProdBackward0", [xc], [xc], ([g], [xs]) => {
    const isZero = M.eq(xs!, 0);
    const safe = M.where(isZero, 1, xs!);
    const others = reduce("prod", safe, axes, true);
    const zeros = reduce("sum", cast(isZero, "int64"), axes, true);
    const atZero = M.where(M.eq(zeros, 1), others, 0);
    const atOther = M.where(M.eq(zeros, 0), M.div(others, safe), 0);
    return [M.mul(reshape(g!, kshape), M.where(isZero, atZero, atOther))];
  });
}
/** prod(input, *, dtype) / prod(input, dim, keepdim=False, *, dtype) */
export const prod = op<Sig<[input: Tensor, dim?: number, keepdim?: boolean], { dim?: number; keepdim?: boolean; dtype?: DType | null }, Tensor>>(
  [
    "prod(Tensor input, *, ScalarType? dtype=None) -> Tensor",
    "prod(Tensor input, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
  ],
  [
    (x: Tensor, dtype: DType | null): Tensor => prodImpl(x, normDims(null, x.ndim), false, dtype),
    (x: Tensor, dim: number, keepdim: boolean, dtype: DType | null): Tensor => prodImpl(x, oneDim(dim, x.ndim, "prod"), keepdim, dtype),
  ],
);

function checkNonEmpty(x: Tensor, axes: number[], op: string): void {
  if (x.numel() === 0 && axes.length === x.ndim)
    throw new RangeError(`${op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.`);
  for (const a of axes)
    if (x.shape[a] === 0)
      throw new RangeError(`${op}(): Expected reduction dim ${a} to have non-zero size (input shape ${shapeStr(x.shape)}).`);
}

type AmaxSig = Sig<[input: Tensor, dim?: Dims, keepdim?: boolean], { dim?: Dims; keepdim?: boolean }, Tensor>;
export const amax = op<AmaxSig>("amax(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", (x: Tensor, dim: number[], keepdim: boolean): Tensor => {
  const axes = allDims(dim, x.ndim, "amax");
  checkNonEmpty(x, axes, "amax");
  return reduce("max", x, axes, keepdim);
});
export const amin = op<AmaxSig>("amin(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", (x: Tensor, dim: number[], keepdim: boolean): Tensor => {
  const axes = allDims(dim, x.ndim, "amin");
  checkNonEmpty(x, axes, "amin");
  return reduce("min", x, axes, keepdim);
});

export interface ValuesIndices {
  values: Tensor;
  indices: Tensor;
  0: Tensor;
  1: Tensor;
  [Symbol.iterator](): Iterator<Tensor>;
}
function vi(values: Tensor, indices: Tensor): ValuesIndices {
  return {
    values,
    indices,
    0: values,
    1: indices,
    *[Symbol.iterator]() {
      yield values;
      yield indices;
    },
  };
}

/** max / min: max(input), max(input, other), max(input, dim, keepdim=False) -> (values, indices). */
export interface MaxMinFn {
  (input: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
  (input: Tensor, dim: number, opts: { keepdim?: boolean }): ValuesIndices;
  (input: Tensor, opts: { dim: number; keepdim?: boolean }): ValuesIndices;
  (input: Tensor, other: Tensor): Tensor;
  (input: Tensor, opts: { other: Tensor }): Tensor;
  (input: Tensor): Tensor;
}
/** The Tensor-method form of max / min. */
export interface MaxMinMethod {
  (dim: number, keepdim?: boolean): ValuesIndices;
  (dim: number, opts: { keepdim?: boolean }): ValuesIndices;
  (opts: { dim: number; keepdim?: boolean }): ValuesIndices;
  (other: Tensor): Tensor;
  (opts: { other: Tensor }): Tensor;
  (): Tensor;
}

function maxMinAll(opName: "max" | "min", x: Tensor): Tensor {
  const axes = x.shape.map((_, i) => i);
  checkNonEmpty(x, axes, opName);
  return reduce(opName, x, axes, false);
}
function maxMinDim(opName: "max" | "min", x: Tensor, dim: number, keepdim: boolean): ValuesIndices {
  const a = normDim(dim, x.ndim, opName);
  if (x.ndim === 0) return vi(x, zerosIndex(x));
  checkNonEmpty(x, [a], opName);
  const idx = argreduce(opName === "max" ? "argmax" : "argmin", x, a, true);
  // values via gather so the gradient goes to the selected index only, as PyTorch
  let values = gather(x, a, idx);
  let indices = idx;
  if (!keepdim) {
    values = S.squeeze(values, a);
    indices = S.squeeze(indices, a);
  }
  return vi(values, indices);
}
export const max = op<MaxMinFn>(
  ["max(Tensor input) -> Tensor", "max(Tensor input, Tensor other) -> Tensor", "max(Tensor input, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"],
  [
    (x: Tensor): Tensor => maxMinAll("max", x),
    (x: Tensor, other: Tensor): Tensor => M.maximum(x, other),
    (x: Tensor, dim: number, keepdim: boolean): ValuesIndices => maxMinDim("max", x, dim, keepdim),
  ],
);
export const min = op<MaxMinFn>(
  ["min(Tensor input) -> Tensor", "min(Tensor input, Tensor other) -> Tensor", "min(Tensor input, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"],
  [
    (x: Tensor): Tensor => maxMinAll("min", x),
    (x: Tensor, other: Tensor): Tensor => M.minimum(x, other),
    (x: Tensor, dim: number, keepdim: boolean): ValuesIndices => maxMinDim("min", x, dim, keepdim),
  ],
);

function argExt(opName: "argmax" | "argmin", x: Tensor, dim: number | null, keepdim: boolean): Tensor {
  if (dim === null) {
    const flat = reshape(x, [x.numel()]);
    if (x.numel() === 0) throw new RangeError(`${opName}(): Expected reduction dim to be specified for input.numel() == 0.`);
    const r = argreduce(opName, flat, 0, false);
    return keepdim ? reshape(r, x.shape.map(() => 1)) : r;
  }
  const a = normDim(dim, x.ndim, opName);
  if (x.ndim === 0) return zerosIndex(x);
  checkNonEmpty(x, [a], opName);
  return argreduce(opName, x, a, keepdim);
}
type ArgSig = Sig<[input: Tensor, dim?: number | null, keepdim?: boolean], { dim?: number | null; keepdim?: boolean }, Tensor>;
export const argmax = op<ArgSig>("argmax(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", (x: Tensor, dim: number | null, keepdim: boolean) =>
  argExt("argmax", x, dim, keepdim),
);
export const argmin = op<ArgSig>("argmin(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", (x: Tensor, dim: number | null, keepdim: boolean) =>
  argExt("argmin", x, dim, keepdim),
);

/** Options of var / std / varMean / stdMean (the keywords of their overloads). */
export interface VarOpts {
  dim?: Dims | null;
  keepdim?: boolean;
  correction?: number | null;
  unbiased?: boolean;
}
type VarSig<R> = Sig<[input: Tensor, dim?: Dims | null | boolean, unbiased?: boolean, keepdim?: boolean], VarOpts, R>;

function varImpl(name: string, x: Tensor, dim: number[] | null, corr: number, keepdim: boolean): Tensor {
  if (!isFloating(x.dtype)) throw new Error("std and var only support floating point and complex dtypes");
  const axes = allDims(dim, x.ndim, name);
  const n = axes.reduce((p, a) => p * x.shape[a]!, 1);
  const mu = M.div(reduce("sum", x, axes, true), n);
  const d = M.sub(x, mu);
  return M.div(reduce("sum", M.mul(d, d), axes, keepdim), Math.max(0, n - corr));
}
/**
 * PyTorch's three overloads of var/std/var_mean/std_mean, in its order:
 * (input, dim=None, *, correction=None, keepdim=False), (input, dim, unbiased=True, keepdim=False),
 * (input, unbiased=True). `f` gets (input, dims, correction, keepdim).
 */
function varOverloads<R>(name: string, f: (x: Tensor, dim: number[] | null, corr: number, keepdim: boolean) => R) {
  return op<VarSig<R>>(
    [
      `${name}(Tensor input, int[1]? dim=None, *, int? correction=None, bool keepdim=False) -> Tensor`,
      `${name}(Tensor input, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor`,
      `${name}(Tensor input, bool unbiased=True) -> Tensor`,
    ],
    [
      (x: Tensor, dim: number[] | null, correction: number | null, keepdim: boolean) => f(x, dim, correction ?? 1, keepdim),
      (x: Tensor, dim: number[] | null, unbiased: boolean, keepdim: boolean) => f(x, dim, unbiased ? 1 : 0, keepdim),
      (x: Tensor, unbiased: boolean) => f(x, null, unbiased ? 1 : 0, false),
    ],
  );
}
/** torch.var (`var` is a reserved word in JS: exported as var_, and as torch.var / Tensor.var) */
export const var_ = varOverloads("var", (x, dim, corr, keepdim) => varImpl("var", x, dim, corr, keepdim));
export const std = varOverloads("std", (x, dim, corr, keepdim) => M.sqrt(varImpl("std", x, dim, corr, keepdim)));
export const varMean = varOverloads("varMean", (x, dim, corr, keepdim): [Tensor, Tensor] => {
  const v = varImpl("varMean", x, dim, corr, keepdim);
  return [v, mean(x, dim, keepdim)];
});
export const stdMean = varOverloads("stdMean", (x, dim, corr, keepdim): [Tensor, Tensor] => {
  const v = varImpl("stdMean", x, dim, corr, keepdim);
  return [M.sqrt(v), mean(x, dim, keepdim)];
});

function kd(t: Tensor, axes: number[], keepdim: boolean): Tensor {
  return keepdim ? t : reshape(t, t.shape.filter((_, i) => !axes.includes(i)));
}
export const logsumexp = op<Sig<[input: Tensor, dim: Dims, keepdim?: boolean], { dim?: Dims; keepdim?: boolean }, Tensor>>(
  "logsumexp(Tensor input, int[1] dim, bool keepdim=False) -> Tensor",
  (x: Tensor, dim: number[], keepdim: boolean): Tensor => {
    const axes = allDims(dim, x.ndim, "logsumexp");
    const xf = isFloating(x.dtype) ? x : cast(x, getDefaultDtype());
    const m = S.detach(reduce("max", xf, axes, true));
    // an all -inf row keeps max -inf; shift by 0 there so the result is -inf, not nan
    const safe = M.where(M.isinf(m), 0, m);
    const s = M.add(M.log(reduce("sum", M.exp(M.sub(xf, safe)), axes, true)), safe);
    return kd(s, axes, keepdim);
  },
);

export type NormP = number | "fro" | "nuc" | null;
export const norm = op<
  Sig<[input: Tensor, p?: NormP, dim?: Dims | null, keepdim?: boolean], { p?: NormP; dim?: Dims | null; keepdim?: boolean; dtype?: DType | null }, Tensor>
>(
  'norm(Tensor input, Any p="fro", int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor',
  (x: Tensor, p: unknown, dim: number[] | null, keepdim: boolean, dtype: DType | null): Tensor => {
    if (typeof p === "string") {
      if (p !== "fro" && p !== "nuc") throw new Error(`only valid string values are 'fro' and 'nuc', found ${p}`);
      if (dtype !== null) throw new Error(`dtype argument is not supported in ${p === "fro" ? "frobenius" : "nuclear"} norm`);
      if (p === "nuc") throw new Error("p='nuc' (the nuclear norm) is not supported by torchts");
    } else if (p !== null && typeof p !== "number")
      throw new TypeError(`norm(): argument 'p' must be Number or str, not ${pyTypeName(p)}`);
    if (!isFloating(x.dtype) && !(dtype !== null && isFloating(dtype)))
      throw new Error(`norm(): input dtype should be either floating point or complex. Got ${TYPE_NAMES[x.dtype]} instead.`);
    if (dtype !== null && !isFloating(dtype))
      throw new Error(`norm(): the desired output dtype should be either floating point or complex. Got ${TYPE_NAMES[dtype]} instead.`);
    const xs = dtype !== null ? cast(x, dtype) : x;
    const axes = allDims(dim, x.ndim, "norm");
    const pp = typeof p === "number" ? p : 2;
    const a = M.abs(xs);
    if (pp === Infinity) return reduce("max", a, axes, keepdim);
    if (pp === -Infinity) return reduce("min", a, axes, keepdim);
    if (pp === 1) return reduce("sum", a, axes, keepdim);
    if (pp === 2) return M.sqrt(reduce("sum", M.mul(xs, xs), axes, keepdim));
    if (pp === 0) return reduce("sum", M.ne(xs, 0).to(xs.dtype), axes, keepdim);
    return M.pow(reduce("sum", M.pow(a, pp), axes, keepdim), 1 / pp);
  },
);

type AnySig = Sig<[input: Tensor, dim?: number, keepdim?: boolean], { dim?: number; keepdim?: boolean }, Tensor>;
export const any = op<AnySig>(
  ["any(Tensor input) -> Tensor", "any(Tensor input, int dim, bool keepdim=False) -> Tensor"],
  [
    (x: Tensor): Tensor => reduce("any", x, normDims(null, x.ndim), false),
    (x: Tensor, dim: number, keepdim: boolean): Tensor => reduce("any", x, oneDim(dim, x.ndim, "any"), keepdim),
  ],
);
export const all = op<AnySig>(
  ["all(Tensor input) -> Tensor", "all(Tensor input, int dim, bool keepdim=False) -> Tensor"],
  [
    (x: Tensor): Tensor => reduce("all", x, normDims(null, x.ndim), false),
    (x: Tensor, dim: number, keepdim: boolean): Tensor => reduce("all", x, oneDim(dim, x.ndim, "all"), keepdim),
  ],
);
export const countNonzero = op<Sig<[input: Tensor, dim?: Dims | null], { dim?: Dims | null }, Tensor>>(
  "countNonzero(Tensor input, int[1]? dim=None) -> Tensor",
  (x: Tensor, dim: number[] | null): Tensor => reduce("sum", cast(M.ne(x, 0), "int64"), allDims(dim, x.ndim, "countNonzero"), false),
);

type ScanSig = Sig<[input: Tensor, dim: number], { dim?: number; dtype?: DType | null }, Tensor>;
function scanImpl(opName: "sum" | "prod", x: Tensor, dim: number, dtype: DType | null): Tensor {
  const d = normDim(dim, x.ndim, opName === "sum" ? "cumsum" : "cumprod");
  const xc = cast(x, dtype ?? sumDtype(x.dtype));
  if (x.ndim === 0) return xc;
  return scan(opName, xc, d);
}
export const cumsum = op<ScanSig>("cumsum(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", (x: Tensor, dim: number, dtype: DType | null) =>
  scanImpl("sum", x, dim, dtype),
);
export const cumprod = op<ScanSig>("cumprod(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", (x: Tensor, dim: number, dtype: DType | null) =>
  scanImpl("prod", x, dim, dtype),
);

// sort / argsort: the sorting primitive is stable, so `stable` (PyTorch's keyword-only overload) changes nothing
type SortOpts = { dim?: number; descending?: boolean; stable?: boolean | null };
function argsortImpl(x: Tensor, dim: number, descending: boolean): Tensor {
  const d = normDim(dim, x.ndim, "argsort");
  if (x.ndim === 0) return zerosIndex(x);
  return argsortPrim(x, d, descending);
}
function sortImpl(x: Tensor, dim: number, descending: boolean): ValuesIndices {
  const d = normDim(dim, x.ndim, "sort");
  if (x.ndim === 0) return vi(x, zerosIndex(x));
  const idx = argsortPrim(x, d, descending);
  return vi(gather(x, d, idx), idx);
}
export const argsort = op<Sig<[input: Tensor, dim?: number, descending?: boolean], SortOpts, Tensor>>(
  ["argsort(Tensor input, int dim=-1, bool descending=False) -> Tensor", "argsort(Tensor input, *, bool stable, int dim=-1, bool descending=False) -> Tensor"],
  [argsortImpl, (x: Tensor, _stable: boolean, dim: number, descending: boolean) => argsortImpl(x, dim, descending)],
);
export const sort = op<Sig<[input: Tensor, dim?: number, descending?: boolean], SortOpts, ValuesIndices>>(
  [
    "sort(Tensor input, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
    "sort(Tensor input, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
  ],
  [sortImpl, (x: Tensor, _stable: boolean | null, dim: number, descending: boolean) => sortImpl(x, dim, descending)],
);

export const topk = op<
  Sig<
    [input: Tensor, k: number, dim?: number, largest?: boolean, sorted?: boolean],
    { k?: number; dim?: number; largest?: boolean; sorted?: boolean },
    ValuesIndices
  >
>(
  "topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
  // sorted=False allows any order: the result is sorted anyway
  (x: Tensor, k: number, dim: number, largest: boolean, _sorted: boolean): ValuesIndices => {
    const d = normDim(dim, x.ndim, "topk");
    const n = x.ndim === 0 ? 1 : x.shape[d]!;
    if (k < 0 || k > n) throw new Error(`selected index k out of range (k = ${k}, dimension ${d} has size ${n})`);
    if (x.ndim === 0) return vi(x, zerosIndex(x)); // PyTorch: k = 0 or 1 of a 0-dim tensor gives the tensor
    const idx = S.narrow(argsortPrim(x, d, largest), d, 0, k);
    return vi(gather(x, d, idx), idx);
  },
);

export const kthvalue = op<
  Sig<[input: Tensor, k: number, dim?: number, keepdim?: boolean], { k?: number; dim?: number; keepdim?: boolean }, ValuesIndices>
>("kthvalue(Tensor input, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)", (x: Tensor, k: number, dim: number, keepdim: boolean) => {
  const d = normDim(dim, x.ndim, "kthvalue");
  const n = x.ndim === 0 ? 1 : x.shape[d]!;
  if (k < 1 || k > n) throw new Error(`kthvalue(): selected number k out of range for dimension ${d}`);
  if (x.ndim === 0) return vi(x, zerosIndex(x));
  const idx = S.narrow(argsortPrim(x, d, false), d, k - 1, 1);
  const v = gather(x, d, idx);
  return keepdim ? vi(v, idx) : vi(S.squeeze(v, d), S.squeeze(idx, d));
});

/** median(input) -> the lower median of all elements; median(input, dim, keepdim=False) -> (values, indices). */
export interface MedianFn {
  (input: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
  (input: Tensor, dim: number, opts: { keepdim?: boolean }): ValuesIndices;
  (input: Tensor, opts: { dim: number; keepdim?: boolean }): ValuesIndices;
  (input: Tensor): Tensor;
}
export interface MedianMethod {
  (dim: number, keepdim?: boolean): ValuesIndices;
  (dim: number, opts: { keepdim?: boolean }): ValuesIndices;
  (opts: { dim: number; keepdim?: boolean }): ValuesIndices;
  (): Tensor;
}
export const median = op<MedianFn>(
  ["median(Tensor input) -> Tensor", "median(Tensor input, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"],
  [
    (x: Tensor): Tensor => {
      if (x.numel() === 0) {
        if (!isFloating(x.dtype)) throw new RangeError("median(): Expected reduction dim to be specified for input.numel() == 0.");
        return fullPrim([], NaN, x.dtype, x.device);
      }
      const flat = reshape(x, [x.numel()]);
      const idx = S.narrow(argsortPrim(flat, 0, false), 0, Math.floor((x.numel() - 1) / 2), 1);
      return reshape(gather(flat, 0, idx), []);
    },
    (x: Tensor, dim: number, keepdim: boolean): ValuesIndices => {
      const d = normDim(dim, x.ndim, "median");
      if (x.ndim === 0) return vi(x, zerosIndex(x));
      const n = x.shape[d]!;
      if (n === 0) throw new RangeError(`median(): Expected reduction dim ${d} to have non-zero size.`);
      const idx = S.narrow(argsortPrim(x, d, false), d, Math.floor((n - 1) / 2), 1);
      const v = gather(x, d, idx);
      return keepdim ? vi(v, idx) : vi(S.squeeze(v, d), S.squeeze(idx, d));
    },
  ],
);

// Tensor methods (x.sum(...)): `this` binds as parameter 0
installMethods({
  sum, mean, prod, max, min, amax, amin, argmax, argmin, var: var_, std, logsumexp, norm, any, all, countNonzero, cumsum,
  cumprod, sort, argsort, topk, kthvalue, median,
});
