// Reductions, scans and sorting: sum, mean, prod, max/min (with indices), amax/amin,
// argmax/argmin, var/std with correction, logsumexp, norm, any/all, cumsum/cumprod,
// sort/argsort/topk.
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import { normDim, normDims, shapeStr } from "../ir/shape.js";
import { withOp } from "../runtime/mode.js";
import type { Tensor } from "../tensor.js";
import { argreduce, argsort as argsortPrim, attach, cast, gather, reduce, reshape, scan } from "./core.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";

type Dims = number | number[] | null | undefined;

export interface ReduceOpts {
  dim?: Dims;
  keepdim?: boolean;
  dtype?: DType;
}

function sumDtype(d: DType): DType {
  return isFloating(d) ? d : "int64"; // integer and bool sums accumulate in int64, as PyTorch
}

function parse(x: Tensor, dimOrOpts: Dims | ReduceOpts, keepdim?: boolean, op = ""): [number[], boolean, DType | undefined] {
  if (dimOrOpts !== null && typeof dimOrOpts === "object" && !Array.isArray(dimOrOpts)) {
    const o = dimOrOpts as ReduceOpts;
    return [normDims(o.dim, x.ndim, op), o.keepdim ?? false, o.dtype];
  }
  return [normDims(dimOrOpts as Dims, x.ndim, op), keepdim ?? false, undefined];
}

export function sum(x: Tensor, dim?: Dims | ReduceOpts, keepdim?: boolean): Tensor {
  return withOp("sum", () => {
    const [axes, kd, dt] = parse(x, dim, keepdim, "sum");
    return reduce("sum", cast(x, dt ?? sumDtype(x.dtype)), axes, kd);
  });
}

export function mean(x: Tensor, dim?: Dims | ReduceOpts, keepdim?: boolean): Tensor {
  return withOp("mean", () => {
    const [axes, kd, dt] = parse(x, dim, keepdim, "mean");
    const d = dt ?? x.dtype;
    if (!isFloating(d))
      throw new TypeError(`mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ${x.dtype}`);
    const n = axes.reduce((p, a) => p * x.shape[a]!, 1);
    return M.div(reduce("sum", cast(x, d), axes, kd), n);
  });
}

export function prod(x: Tensor, dim?: number | ReduceOpts, keepdim?: boolean): Tensor {
  return withOp("prod", () => {
    const [axes, kd, dt] = parse(x, dim, keepdim, "prod");
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
  });
}

function checkNonEmpty(x: Tensor, axes: number[], op: string): void {
  for (const a of axes)
    if (x.shape[a] === 0)
      throw new RangeError(`${op}(): Expected reduction dim ${a} to have non-zero size (input shape ${shapeStr(x.shape)}).`);
  if (x.numel() === 0 && axes.length === x.ndim)
    throw new RangeError(`${op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.`);
}

export function amax(x: Tensor, dim: Dims = null, keepdim = false): Tensor {
  return withOp("amax", () => {
    const axes = normDims(dim === null || (Array.isArray(dim) && dim.length === 0) ? undefined : dim, x.ndim, "amax");
    checkNonEmpty(x, axes, "amax");
    return reduce("max", x, axes, keepdim);
  });
}
export function amin(x: Tensor, dim: Dims = null, keepdim = false): Tensor {
  return withOp("amin", () => {
    const axes = normDims(dim === null || (Array.isArray(dim) && dim.length === 0) ? undefined : dim, x.ndim, "amin");
    checkNonEmpty(x, axes, "amin");
    return reduce("min", x, axes, keepdim);
  });
}

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

function maxMin(op: "max" | "min", x: Tensor, dim?: number | { dim: number; keepdim?: boolean } | Tensor, keepdim = false): Tensor | ValuesIndices {
  if (dim === undefined) {
    checkNonEmpty(x, x.shape.map((_, i) => i), op);
    return withOp(op, () => reduce(op, x, x.shape.map((_, i) => i), false));
  }
  if (typeof dim === "object" && "shape" in dim) return op === "max" ? M.maximum(x, dim) : M.minimum(x, dim);
  const d = typeof dim === "number" ? dim : dim.dim;
  const kd = typeof dim === "number" ? keepdim : (dim.keepdim ?? false);
  return withOp(op, () => {
    const a = normDim(d, x.ndim, op);
    checkNonEmpty(x, [a], op);
    const idx = argreduce(op === "max" ? "argmax" : "argmin", x, a, true);
    // values via gather so the gradient goes to the selected index only, as PyTorch
    let values = gather(x, a, idx);
    let indices = idx;
    if (!kd) {
      values = S.squeeze(values, a);
      indices = S.squeeze(indices, a);
    }
    return vi(values, indices);
  });
}
export function max(x: Tensor): Tensor;
export function max(x: Tensor, dim: number | { dim: number; keepdim?: boolean }, keepdim?: boolean): ValuesIndices;
export function max(x: Tensor, other: Tensor): Tensor;
export function max(x: Tensor, dim?: number | { dim: number; keepdim?: boolean } | Tensor, keepdim = false): Tensor | ValuesIndices {
  return maxMin("max", x, dim, keepdim);
}
export function min(x: Tensor): Tensor;
export function min(x: Tensor, dim: number | { dim: number; keepdim?: boolean }, keepdim?: boolean): ValuesIndices;
export function min(x: Tensor, other: Tensor): Tensor;
export function min(x: Tensor, dim?: number | { dim: number; keepdim?: boolean } | Tensor, keepdim = false): Tensor | ValuesIndices {
  return maxMin("min", x, dim, keepdim);
}

function argExt(op: "argmax" | "argmin", x: Tensor, dim?: number | null | { dim?: number; keepdim?: boolean }, keepdim = false): Tensor {
  let d: number | null | undefined = dim as number | null | undefined;
  let kd = keepdim;
  if (dim !== null && typeof dim === "object") {
    d = dim.dim;
    kd = dim.keepdim ?? false;
  }
  return withOp(op, () => {
    if (d === undefined || d === null) {
      const flat = reshape(x, [x.numel()]);
      checkNonEmpty(flat, [0], op);
      const r = argreduce(op, flat, 0, false);
      return kd ? reshape(r, x.shape.map(() => 1)) : r;
    }
    const a = normDim(d, x.ndim, op);
    checkNonEmpty(x, [a], op);
    return argreduce(op, x, a, kd);
  });
}
export function argmax(x: Tensor, dim?: number | null | { dim?: number; keepdim?: boolean }, keepdim = false): Tensor {
  return argExt("argmax", x, dim, keepdim);
}
export function argmin(x: Tensor, dim?: number | null | { dim?: number; keepdim?: boolean }, keepdim = false): Tensor {
  return argExt("argmin", x, dim, keepdim);
}

export interface VarOpts {
  dim?: Dims;
  keepdim?: boolean;
  correction?: number;
  unbiased?: boolean;
}
function varParse(x: Tensor, a?: Dims | VarOpts, b?: boolean | VarOpts, c?: boolean): [number[], boolean, number] {
  let o: VarOpts = {};
  if (a !== null && typeof a === "object" && !Array.isArray(a)) o = a as VarOpts;
  else {
    o.dim = a as Dims;
    if (typeof b === "object") o = { ...b, dim: a as Dims };
    else if (typeof b === "boolean") {
      o.unbiased = b;
      o.keepdim = c;
    }
  }
  const corr = o.correction ?? (o.unbiased === false ? 0 : 1);
  return [normDims(o.dim, x.ndim, "var"), o.keepdim ?? false, corr];
}
export function var_(x: Tensor, dim?: Dims | VarOpts, opts?: boolean | VarOpts, keepdim?: boolean): Tensor {
  return withOp("var", () => {
    const [axes, kd, corr] = varParse(x, dim, opts, keepdim);
    const xf = isFloating(x.dtype) ? x : cast(x, getDefaultDtype());
    const n = axes.reduce((p, a) => p * x.shape[a]!, 1);
    const mu = M.div(reduce("sum", xf, axes, true), n);
    const d = M.sub(xf, mu);
    return M.div(reduce("sum", M.mul(d, d), axes, kd), Math.max(0, n - corr));
  });
}
export function std(x: Tensor, dim?: Dims | VarOpts, opts?: boolean | VarOpts, keepdim?: boolean): Tensor {
  return withOp("std", () => M.sqrt(var_(x, dim, opts, keepdim)));
}
export function varMean(x: Tensor, dim?: Dims | VarOpts, opts?: boolean | VarOpts, keepdim?: boolean): [Tensor, Tensor] {
  const [axes, kd] = varParse(x, dim, opts, keepdim);
  return [var_(x, dim, opts, keepdim), mean(x, { dim: axes, keepdim: kd })];
}

export function logsumexp(x: Tensor, dim: number | number[], keepdim = false): Tensor {
  return withOp("logsumexp", () => {
    const axes = normDims(dim, x.ndim, "logsumexp");
    const xf = isFloating(x.dtype) ? x : cast(x, getDefaultDtype());
    const m = S.detach(reduce("max", xf, axes, true));
    // an all -inf row keeps max -inf; shift by 0 there so the result is -inf, not nan
    const safe = M.where(M.isinf(m), 0, m);
    const s = M.add(M.log(reduce("sum", M.exp(M.sub(xf, safe)), axes, true)), safe);
    return kd(s, axes, keepdim);
  });
}
function kd(t: Tensor, axes: number[], keepdim: boolean): Tensor {
  return keepdim ? t : reshape(t, t.shape.filter((_, i) => !axes.includes(i)));
}

export function norm(x: Tensor, p: number | "fro" | "inf" | null = "fro", dim?: Dims, keepdim = false): Tensor {
  return withOp("norm", () => {
    const axes = normDims(dim, x.ndim, "norm");
    const pp = p === "fro" || p === null ? 2 : p === "inf" ? Infinity : p;
    const a = M.abs(x);
    if (pp === Infinity) return reduce("max", a, axes, keepdim);
    if (pp === -Infinity) return reduce("min", a, axes, keepdim);
    if (pp === 1) return reduce("sum", a, axes, keepdim);
    if (pp === 2) return M.sqrt(reduce("sum", M.mul(x, x), axes, keepdim));
    if (pp === 0) return reduce("sum", M.ne(x, 0).to(x.dtype), axes, keepdim);
    return M.pow(reduce("sum", M.pow(a, pp), axes, keepdim), 1 / pp);
  });
}

export function any(x: Tensor, dim?: number, keepdim = false): Tensor {
  return withOp("any", () => reduce("any", x, normDims(dim, x.ndim, "any"), keepdim));
}
export function all(x: Tensor, dim?: number, keepdim = false): Tensor {
  return withOp("all", () => reduce("all", x, normDims(dim, x.ndim, "all"), keepdim));
}
export function countNonzero(x: Tensor, dim?: number): Tensor {
  return sum(M.ne(x, 0), dim);
}

export function cumsum(x: Tensor, dim: number, opts: { dtype?: DType } = {}): Tensor {
  return withOp("cumsum", () => {
    if (x.ndim === 0) return cast(x, opts.dtype ?? sumDtype(x.dtype));
    return scan("sum", cast(x, opts.dtype ?? sumDtype(x.dtype)), normDim(dim, x.ndim, "cumsum"));
  });
}
export function cumprod(x: Tensor, dim: number, opts: { dtype?: DType } = {}): Tensor {
  return withOp("cumprod", () => {
    if (x.ndim === 0) return cast(x, opts.dtype ?? sumDtype(x.dtype));
    return scan("prod", cast(x, opts.dtype ?? sumDtype(x.dtype)), normDim(dim, x.ndim, "cumprod"));
  });
}

export function argsort(x: Tensor, dim: number | { dim?: number; descending?: boolean } = -1, descending = false): Tensor {
  const o = typeof dim === "object" ? dim : { dim, descending };
  return withOp("argsort", () => {
    if (x.ndim === 0) return M._zerosLike(x, { dtype: "int64" });
    return argsortPrim(x, normDim(o.dim ?? -1, x.ndim, "argsort"), o.descending ?? false);
  });
}
export function sort(x: Tensor, dim: number | { dim?: number; descending?: boolean } = -1, descending = false): ValuesIndices {
  const o = typeof dim === "object" ? dim : { dim, descending };
  return withOp("sort", () => {
    if (x.ndim === 0) return vi(x, M._zerosLike(x, { dtype: "int64" }));
    const d = normDim(o.dim ?? -1, x.ndim, "sort");
    const idx = argsortPrim(x, d, o.descending ?? false);
    return vi(gather(x, d, idx), idx);
  });
}
export function topk(x: Tensor, k: number, opts: { dim?: number; largest?: boolean; sorted?: boolean } = {}): ValuesIndices {
  return withOp("topk", () => {
    const d = normDim(opts.dim ?? -1, Math.max(x.ndim, 1), "topk");
    const n = x.ndim === 0 ? 1 : x.shape[d]!;
    if (k < 0 || k > n) throw new RangeError(`topk: selected index k (${k}) out of range (dimension ${d} has size ${n})`);
    const idx = S.narrow(argsortPrim(x, d, opts.largest ?? true), d, 0, k);
    return vi(gather(x, d, idx), idx);
  });
}
export function kthvalue(x: Tensor, k: number, dim = -1, keepdim = false): ValuesIndices {
  const d = normDim(dim, x.ndim, "kthvalue");
  const idx = S.narrow(argsortPrim(x, d, false), d, k - 1, 1);
  const v = gather(x, d, idx);
  return keepdim ? vi(v, idx) : vi(S.squeeze(v, d), S.squeeze(idx, d));
}
export function median(x: Tensor): Tensor {
  const flat = reshape(x, [x.numel()]);
  const idx = S.narrow(argsortPrim(flat, 0, false), 0, Math.floor((x.numel() - 1) / 2), 1);
  return reshape(gather(flat, 0, idx), []);
}
