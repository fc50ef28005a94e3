// How each public op becomes core ops (core.ts) while a forward is traced: the decomposition
// table of torch.export. Entries receive the op's bound arguments by parameter name and emit
// core ops through `C`; host ints they compute from shapes (reshape targets, slice bounds) are
// recorded as numbers and become expressions over the dynamic dims when symbolic.ts merges the
// traces. An op missing here is traced through (what it calls is captured) and must return
// tensors the graph knows, or export names it as unsupported.
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import type { Tensor } from "../tensor.js";
import { CORE_OPS, UNARY_CORE, type CoreOp } from "./core.js";
import { ExportError } from "./errors.js";
import { tracer, type Capture } from "./tracer.js";

type Emitters = { [K in CoreOp]: (...a: Parameters<(typeof CORE_OPS)[K]>) => Tensor };
/** Core ops as the decompositions call them: each call is computed and recorded. */
export const C = Object.fromEntries(Object.keys(CORE_OPS).map((k) => [k, (...a: unknown[]) => tracer().emit(k as CoreOp, a)])) as unknown as Emitters;

const fail = (msg: string): never => {
  const t = tracer();
  throw new ExportError(`torch.export: ${t.op} at ${t.site}: ${msg}`);
};

const nd = (d: number, n: number) => (d < 0 ? d + n : d);
const cast = (x: Tensor, d: DType | null | undefined) => (d && d !== x.dtype ? C.cast(x, d) : x);
const range = (n: number) => Array.from({ length: n }, (_, i) => i);
type A = Record<string, unknown>;
const t = (a: A, k = "input") => a[k] as Tensor;
const T_ = (v: unknown) => v as Tensor;

/** Forms that write into their input when `inplace` is set: the forward keeps using the input. */
function maybeInplace(a: A, out: Tensor): Tensor {
  if (a.inplace === true) {
    tracer().rebind(t(a), out);
    return t(a);
  }
  return out;
}

function swap(x: Tensor, d0: number, d1: number): Tensor {
  const n = x.ndim;
  const a = nd(d0, n);
  const b = nd(d1, n);
  if (a === b) return x;
  const p = range(n);
  p[a] = b;
  p[b] = a;
  return C.permute(x, p);
}

function sliceOf(x: Tensor, dim: number, start: number | null, end: number | null, step: number): Tensor {
  const d = nd(dim, x.ndim);
  const n = x.shape[d]!;
  const norm = (v: number | null, dflt: number) => {
    if (v === null) return dflt;
    const w = v < 0 ? v + n : v;
    return Math.min(Math.max(w, 0), n);
  };
  const s = norm(start, 0);
  const e = Math.max(norm(end, n), s);
  if (s === 0 && e === n && step === 1) return x;
  return C.slice(x, d, s, e, step);
}

function splitSizes(n: number, size: number | number[]): number[] {
  if (Array.isArray(size)) return size;
  const out: number[] = [];
  for (let s = 0; s < n; s += size) out.push(Math.min(size, n - s));
  return out.length ? out : [0];
}

function splitBy(x: Tensor, sizes: number[], dim: number): Tensor[] {
  const d = nd(dim, x.ndim);
  let s = 0;
  return sizes.map((k) => {
    const r = sliceOf(x, d, s, s + k, 1);
    s += k;
    return r;
  });
}

function reduceDims(x: Tensor, dim: unknown): number[] {
  if (dim === null || dim === undefined || (Array.isArray(dim) && dim.length === 0)) return range(x.ndim);
  return (Array.isArray(dim) ? (dim as number[]) : [dim as number]).map((d) => nd(d, x.ndim));
}

function gelu(x: Tensor, approximate: string): Tensor {
  return C.gelu(x, approximate);
}

function normalizeLast(x: Tensor, k: number, eps: number): { xc: Tensor; inv: Tensor } {
  const dims = range(k).map((i) => -1 - i).reverse();
  const mu = C.mean(x, dims, true);
  const xc = C.sub(x, mu);
  const v = C.mean(C.mul(xc, xc), dims, true);
  return { xc, inv: C.rsqrt(C.add(v, eps)) };
}

function repeatHeads(k: Tensor, n: number): Tensor {
  if (n === 1) return k;
  const s = k.shape;
  const h = k.ndim - 3;
  const e = C.expand(C.unsqueeze(k, h + 1), [...s.slice(0, h + 1), n, ...s.slice(h + 1)]);
  return C.reshape(e, [...s.slice(0, h), s[h]! * n, ...s.slice(h + 1)]);
}

function sdpa(a: A): Tensor {
  const q = t(a, "query");
  let k = t(a, "key");
  let v = t(a, "value");
  const mask = a.attnMask as Tensor | null;
  if ((a.dropoutP as number) > 0) fail("dropout inside attention cannot be exported (pass dropoutP = 0 in eval)");
  const L = q.shape[q.ndim - 2]!;
  const S = k.shape[k.ndim - 2]!;
  const E = q.shape[q.ndim - 1]!;
  const scale = (a.scale as number | null) ?? 1 / Math.sqrt(E);
  if (a.enableGqa && q.ndim >= 3) {
    const hq = q.shape[q.ndim - 3]!;
    const hk = k.shape[k.ndim - 3]!;
    if (hq !== hk) {
      k = repeatHeads(k, hq / hk);
      v = repeatHeads(v, hq / hk);
    }
  }
  const n = k.ndim;
  let w = C.mul(C.matmul(q, swap(k, n - 2, n - 1)), scale);
  if (a.isCausal) {
    const keep = C.ge(C.unsqueeze(C.arange(0, L, 1, "int64"), 1), C.unsqueeze(C.arange(0, S, 1, "int64"), 0));
    w = C.where(keep, w, -Infinity);
  }
  if (mask) w = mask.dtype === "bool" ? C.where(mask, w, -Infinity) : C.add(w, mask);
  return C.matmul(C.softmax(w, -1), v);
}

function dtypeOfArange(vals: number[], dtype: DType | null): DType {
  return dtype ?? (vals.every((v) => Number.isInteger(v)) ? "int64" : getDefaultDtype());
}

function fillDtype(v: unknown, dtype: DType | null): DType {
  if (dtype) return dtype;
  if (typeof v === "boolean") return "bool";
  return Number.isInteger(v) ? "int64" : getDefaultDtype();
}

const pair = (v: unknown) => (Array.isArray(v) ? (v as number[]) : [v as number, v as number]);

export const CAPTURES: Record<string, Capture> = {};
const def = (keys: string | string[], f: Capture) => {
  for (const k of Array.isArray(keys) ? keys : [keys]) CAPTURES[k] = f;
};

// ---- elementwise ----
for (const u of UNARY_CORE) def(u, (a) => (C[u] as (x: Tensor) => Tensor)(t(a)));
def("F.relu", (a) => maybeInplace(a, C.relu(t(a))));
def("square", (a) => C.mul(t(a), t(a)));
def(["add", "sub"], (a, _v, _k, d) => {
  const other = a.alpha === 1 ? (a.other as Tensor | number) : typeof a.other === "number" ? (a.other as number) * (a.alpha as number) : C.mul(T_(a.other), a.alpha as number);
  return d.name === "add" ? C.add(a.input as Tensor | number, other) : C.sub(a.input as Tensor | number, other);
});
def("rsub", (a) => C.sub(a.other as Tensor | number, a.alpha === 1 ? t(a) : C.mul(t(a), a.alpha as number)));
def("mul", (a) => C.mul(a.input as Tensor | number, a.other as Tensor | number));
def(["div", "trueDivide"], (a) => {
  if (a.roundingMode) fail(`div with roundingMode '${a.roundingMode}' has no export mapping`);
  return C.div(a.input as Tensor | number, a.other as Tensor | number);
});
def("pow", (a, _v, k) => (k === 0 ? C.pow(t(a), a.exponent as Tensor | number) : fail("pow with a scalar base has no export mapping")));
for (const b of ["maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logicalAnd", "logicalOr"] as const)
  def(b, (a) => (C[b] as (x: Tensor, y: Tensor | number) => Tensor)(t(a), a.other as Tensor | number));
def("where", (a) => C.where(t(a, "condition"), a.input as Tensor | number, a.other as Tensor | number));
def("maskedFill", (a) => C.where(t(a, "mask"), a.value as Tensor | number, t(a)));
def(["clamp", "clip"], (a) => {
  let x = t(a);
  if (a.min !== null && a.min !== undefined) x = C.maximum(x, a.min as Tensor | number);
  if (a.max !== null && a.max !== undefined) x = C.minimum(x, a.max as Tensor | number);
  return x;
});
def("relu6", (a) => maybeInplace(a, C.minimum(C.relu(t(a)), 6)));
def("hardtanh", (a) => maybeInplace(a, C.minimum(C.maximum(t(a), a.minVal as number), a.maxVal as number)));
def("silu", (a) => maybeInplace(a, C.mul(t(a), C.sigmoid(t(a)))));
def("gelu", (a) => gelu(t(a), a.approximate as string));
def("leakyRelu", (a) => maybeInplace(a, C.where(C.gt(t(a), 0), t(a), C.mul(t(a), a.negativeSlope as number))));
def("tril", (a) => triangle(t(a), a.diagonal as number, true));
def("triu", (a) => triangle(t(a), a.diagonal as number, false));

function triangle(x: Tensor, k: number, lower: boolean): Tensor {
  const [H, W] = x.shape.slice(-2) as [number, number];
  const j = C.unsqueeze(C.arange(0, W, 1, "int64"), 0);
  const i = C.unsqueeze(C.arange(0, H, 1, "int64"), 1);
  const d = C.sub(j, i); // column - row
  const keep = lower ? C.le(d, k) : C.ge(d, k);
  return C.where(keep, x, x.dtype === "bool" ? C.fullLike(x, 0, "bool") : 0);
}

// ---- dtype and identity ----
const casts: Record<string, DType> = { float: "float32", double: "float64", half: "float16", bfloat16: "bfloat16", long: "int64", int: "int32", bool: "bool", byte: "uint8" };
for (const [m, d] of Object.entries(casts)) def(`Tensor.${m}`, (a) => cast(t(a), d));
def("to", (a, _v, k) => {
  const x = t(a);
  if (k === 2) return cast(x, t(a, "tensor").dtype);
  if (k === 1 && a.device !== null && a.device !== undefined && String(a.device) !== x.device) fail(`moving a tensor to '${String(a.device)}' inside the forward cannot be exported`);
  return cast(x, a.dtype as DType | null);
});
// these may alias in PyTorch too; clone may not (a later in-place write must not reach its input)
def(["contiguous", "detach", "Tensor.cpu", "Tensor.contiguous"], (a) => t(a));
def("clone", (a) => C.clone(t(a)));
def("dropout", (a) => ((a.training as boolean) && (a.p as number) > 0 ? fail("dropout in training mode draws random numbers: call model.eval() before export") : t(a)));

// ---- linear algebra, conv, pooling ----
def(["matmul", "mm", "bmm"], (a) => C.matmul(t(a), a.other !== undefined ? t(a, "other") : t(a, "mat2")));
def("linear", (a) => {
  const w = t(a, "weight");
  const y = C.matmul(t(a), w.ndim === 2 ? C.permute(w, [1, 0]) : w);
  return a.bias ? C.add(y, t(a, "bias")) : y;
});
def("conv2d", (a, _v, k) => {
  const w = t(a, "weight");
  const dil = pair(a.dilation);
  let pad = k === 0 ? pair(a.padding) : [0, 0];
  if (k === 1 && a.padding === "same") {
    const ks = w.shape.slice(2).map((s, i) => dil[i]! * (s - 1));
    if (ks.some((s) => s % 2)) fail("padding='same' with an even kernel extent pads asymmetrically; pass explicit padding");
    pad = ks.map((s) => s / 2);
  }
  return C.conv2d(t(a), w, (a.bias as Tensor | null) ?? null, pair(a.stride), pad, dil, a.groups as number);
});
def("convTranspose2d", (a) =>
  C.convTranspose2d(t(a), t(a, "weight"), (a.bias as Tensor | null) ?? null, pair(a.stride), pair(a.padding), pair(a.outputPadding), a.groups as number, pair(a.dilation)),
);
def("maxPool2d", (a) => {
  if (a.returnIndices) fail("maxPool2d with returnIndices has no export mapping");
  const k = pair(a.kernelSize);
  return C.maxPool2d(t(a), k, a.stride === null || (Array.isArray(a.stride) && !a.stride.length) ? k : pair(a.stride), pair(a.padding), pair(a.dilation), a.ceilMode as boolean);
});
def("avgPool2d", (a) => {
  if (a.divisorOverride !== null) fail("avgPool2d with divisorOverride has no export mapping");
  const k = pair(a.kernelSize);
  return C.avgPool2d(t(a), k, a.stride === null || (Array.isArray(a.stride) && !a.stride.length) ? k : pair(a.stride), pair(a.padding), a.ceilMode as boolean, a.countIncludePad as boolean);
});
def("adaptiveAvgPool2d", (a) => {
  const x = t(a);
  const o = a.outputSize;
  const [oh, ow] = (Array.isArray(o) ? o : [o, o]) as (number | null)[];
  const [H, W] = x.shape.slice(-2) as [number, number];
  const h = oh ?? H;
  const w = ow ?? W;
  if (h === 1 && w === 1) return C.mean(x, [x.ndim - 2, x.ndim - 1], true);
  if (H % h || W % w) fail(`adaptiveAvgPool2d from ${H}x${W} to ${h}x${w} (not a whole-window pooling) has no export mapping`);
  return C.avgPool2d(x, [H / h, W / w], [H / h, W / w], [0, 0], false, true);
});

// ---- normalization and activations built from core ops ----
def("layerNorm", (a) => {
  const x = t(a);
  const { xc, inv } = normalizeLast(x, (a.normalizedShape as number[]).length, a.eps as number);
  let y = C.mul(xc, inv);
  if (a.weight) y = C.mul(y, t(a, "weight"));
  if (a.bias) y = C.add(y, t(a, "bias"));
  return y;
});
def("rmsNorm", (a) => {
  const x = t(a);
  const k = (a.normalizedShape as number[]).length;
  const eps = (a.eps as number | null) ?? (x.dtype === "float64" ? 2.220446049250313e-16 : 1.1920928955078125e-7);
  const dims = range(k).map((i) => -1 - i).reverse();
  let y = C.mul(x, C.rsqrt(C.add(C.mean(C.mul(x, x), dims, true), eps)));
  if (a.weight) y = C.mul(y, t(a, "weight"));
  return y;
});
def("groupNorm", (a) => {
  const x = t(a);
  const [N, Ch] = x.shape as [number, number];
  const g = a.numGroups as number;
  const { xc, inv } = normalizeLast(C.reshape(x, [N, g, -1]), 1, a.eps as number);
  let y = C.reshape(C.mul(xc, inv), [...x.shape]);
  const shp = [Ch, ...x.shape.slice(2).map(() => 1)];
  if (a.weight) y = C.mul(y, C.reshape(t(a, "weight"), shp));
  if (a.bias) y = C.add(y, C.reshape(t(a, "bias"), shp));
  return y;
});
def("batchNorm", (a) => {
  const x = t(a);
  if (a.training) fail("batchNorm in training mode updates its running statistics: call model.eval() before export");
  const rm = a.runningMean as Tensor | null;
  const rv = a.runningVar as Tensor | null;
  if (!rm || !rv) fail("batchNorm without running statistics normalizes with batch statistics; export needs eval mode with running stats");
  const inv = C.rsqrt(C.add(rv!, a.eps as number));
  const scale = a.weight ? C.mul(t(a, "weight"), inv) : inv;
  const shift = a.bias ? C.sub(t(a, "bias"), C.mul(rm!, scale)) : C.neg(C.mul(rm!, scale));
  const shp = [x.shape[1]!, ...x.shape.slice(2).map(() => 1)];
  return C.add(C.mul(x, C.reshape(scale, shp)), C.reshape(shift, shp));
});
def(["softmax", "F.softmax", "logSoftmax", "F.logSoftmax"], (a, _v, _k, d) => {
  if (a.dim === null || a.dim === undefined) fail(`${d.name} without dim is ambiguous; pass dim`);
  const x = cast(t(a), a.dtype as DType | null);
  return d.name === "softmax" ? C.softmax(x, a.dim as number) : C.logSoftmax(x, a.dim as number);
});
def("scaledDotProductAttention", (a) => sdpa(a));
def("embedding", (a) => C.take(t(a, "weight"), 0, t(a)));
def("indexSelect", (a) => C.take(t(a), a.dim as number, t(a, "index")));
def("gather", (a) => C.gatherElements(t(a), a.dim as number, t(a, "index")));

// ---- reductions ----
def(["sum", "mean"], (a, _v, _k, d) => {
  let x = cast(t(a), a.dtype as DType | null);
  if (d.name === "mean" && !isFloating(x.dtype)) fail("mean of an integer tensor: pass dtype");
  if (d.name === "sum" && !isFloating(x.dtype) && x.dtype !== "int64") x = C.cast(x, "int64");
  const dims = reduceDims(x, a.dim);
  return d.name === "sum" ? C.sum(x, dims, a.keepdim as boolean) : C.mean(x, dims, a.keepdim as boolean);
});
def(["amax", "amin"], (a, _v, _k, d) => (d.name === "amax" ? C.amax : C.amin)(t(a), reduceDims(t(a), a.dim), a.keepdim as boolean));
def("argmax", (a) => (a.dim === null ? C.argmax(C.reshape(t(a), [-1]), 0, false) : C.argmax(t(a), nd(a.dim as number, t(a).ndim), a.keepdim as boolean)));
def("cumsum", (a) => {
  let x = cast(t(a), a.dtype as DType | null);
  if (!isFloating(x.dtype) && x.dtype !== "int64") x = C.cast(x, "int64");
  return C.cumsum(x, nd(a.dim as number, x.ndim));
});

// ---- shapes and views ----
def("view", (a, _v, k) => (k === 0 ? fail("view as another dtype has no export mapping") : C.reshape(t(a), a.size as number[])));
def("reshape", (a) => C.reshape(t(a), a.shape as number[]));
def(["reshapeAs", "viewAs"], (a) => C.reshape(t(a), [...t(a, "other").shape]));
def("flatten", (a) => {
  const x = t(a);
  if (x.ndim === 0) return C.reshape(x, [1]);
  const s = nd(a.startDim as number, x.ndim);
  const e = nd(a.endDim as number, x.ndim);
  if (s === e) return x;
  return C.reshape(x, [...x.shape.slice(0, s), -1, ...x.shape.slice(e + 1)]);
});
def("unflatten", (a) => {
  const x = t(a);
  const d = nd(a.dim as number, x.ndim);
  return C.reshape(x, [...x.shape.slice(0, d), ...(a.sizes as number[]), ...x.shape.slice(d + 1)]);
});
def("permute", (a) => C.permute(t(a), (a.dims as number[]).map((d) => nd(d, t(a).ndim))));
def(["transpose", "swapaxes", "swapdims"], (a) => swap(t(a), (a.dim0 ?? a.axis0) as number, (a.dim1 ?? a.axis1) as number));
def("t", (a) => (t(a).ndim < 2 ? t(a) : C.permute(t(a), [1, 0])));
def("movedim", (a) => {
  const x = t(a);
  const n = x.ndim;
  const src = (Array.isArray(a.source) ? a.source : [a.source]).map((d) => nd(d as number, n));
  const dst = (Array.isArray(a.destination) ? a.destination : [a.destination]).map((d) => nd(d as number, n));
  const perm = new Array<number>(n).fill(-1);
  src.forEach((s, i) => (perm[dst[i]!] = s));
  const rest = range(n).filter((d) => !src.includes(d));
  for (let i = 0, j = 0; i < n; i++) if (perm[i] === -1) perm[i] = rest[j++]!;
  return C.permute(x, perm);
});
def("unsqueeze", (a) => C.unsqueeze(t(a), nd(a.dim as number, t(a).ndim + 1)));
def("squeeze", (a) => {
  let x = t(a);
  const dims = a.dim === null ? range(x.ndim).filter((d) => x.shape[d] === 1) : [nd(a.dim as number, x.ndim)].filter((d) => x.shape[d] === 1);
  for (const d of dims.reverse()) x = C.squeeze(x, d);
  return x;
});
def(["expand", "broadcastTo"], (a) => C.expand(t(a), a.size as number[]));
def("expandAs", (a) => C.expand(t(a), [...t(a, "other").shape]));
def("narrow", (a) => {
  const x = t(a);
  const d = nd(a.dim as number, x.ndim);
  const s = (a.start as number) < 0 ? (a.start as number) + x.shape[d]! : (a.start as number);
  return sliceOf(x, d, s, s + (a.length as number), 1);
});
def("slice", (a) => sliceOf(t(a), a.dim as number, a.start as number | null, a.end as number | null, a.step as number));
def("select", (a) => {
  const x = t(a);
  const d = nd(a.dim as number, x.ndim);
  const i = a.index as number;
  return C.select(x, d, i < 0 ? i + x.shape[d]! : i);
});
def(["split", "Tensor.split"], (a) => {
  const x = t(a);
  const d = nd(a.dim as number, x.ndim);
  return splitBy(x, splitSizes(x.shape[d]!, (a.splitSize ?? a.splitSizeOrSections) as number | number[]), d);
});
def("chunk", (a) => {
  const x = t(a);
  const d = nd(a.dim as number, x.ndim);
  const n = x.shape[d]!;
  return splitBy(x, splitSizes(n, Math.ceil(n / (a.chunks as number))), d);
});
def("unbind", (a) => {
  const x = t(a);
  const d = nd(a.dim as number, x.ndim);
  return range(x.shape[d]!).map((i) => C.select(x, d, i));
});
def(["cat", "concat", "concatenate"], (a) => {
  const xs = a.tensors as Tensor[];
  return xs.length === 1 ? xs[0]! : C.cat(xs, a.dim as number);
});
def("stack", (a) => {
  const xs = a.tensors as Tensor[];
  const d = nd(a.dim as number, xs[0]!.ndim + 1);
  return C.cat(xs.map((x) => C.unsqueeze(x, d)), d);
});
def("constantPadNd", (a) => C.pad(t(a), a.pad as number[], a.value as number));
def("pad", (a) => (a.mode === "constant" ? C.pad(t(a), a.pad as number[], (a.value as number | null) ?? 0) : fail(`pad mode '${String(a.mode)}' has no export mapping`)));

// ---- creation ----
def("arange", (a, _v, k) => {
  const [s, e, st] = k === 0 ? [0, a.end as number, 1] : [a.start as number, a.end as number, a.step as number];
  return C.arange(s, e, st, dtypeOfArange([s, e, st], a.dtype as DType | null));
});
def("full", (a) => C.full(a.size as number[], a.fillValue as number, fillDtype(a.fillValue, a.dtype as DType | null)));
def(["zeros", "ones"], (a, _v, _k, d) => C.full(a.size as number[], d.name === "ones" ? 1 : 0, (a.dtype as DType | null) ?? getDefaultDtype()));
def(["zerosLike", "onesLike"], (a, _v, _k, d) => C.fullLike(t(a), d.name === "onesLike" ? 1 : 0, (a.dtype as DType | null) ?? t(a).dtype));
def("fullLike", (a) => C.fullLike(t(a), a.fillValue as number, (a.dtype as DType | null) ?? t(a).dtype));
