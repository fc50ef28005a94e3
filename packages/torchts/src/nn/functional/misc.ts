// Assorted functional ops: pad (constant/reflect/replicate/circular), embedding, one_hot,
// dropout, interpolate / upsample (nearest, (bi/tri)linear, area), cosine_similarity,
// pairwise_distance, and linear (the linalg op itself).
import { shapeStr } from "../../ir/shape.js";
import type { Tensor } from "../../tensor.js";
import { noGrad } from "../../autograd/grad_mode.js";
import { cast, gather, scatterAdd } from "../../ops/core.js";
import { op, type Sig } from "../../ops/registry.js";
import { inplaceSet } from "../../ops/inplace.js";
import { _checkIndexRange } from "../../ops/indexing.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { arange, full } from "../../ops/creation.js";
import { rand } from "../../ops/random.js";
import { matmul } from "../../ops/linalg.js";
import { adaptiveAvgNd } from "./pooling.js";
import { constTensor, hostArray, hostValues, maybeInplace, requireIndex } from "./util.js";

export { linear } from "../../ops/linalg.js";

export type PadMode = "constant" | "reflect" | "replicate" | "circular";

/** F.pad(input, pad, mode='constant', value=None): `pad` lists (before, after) pairs starting from the last dim. */
export const pad = op<
  Sig<[input: Tensor, pad: readonly number[], mode?: PadMode, value?: number | null], { pad?: readonly number[]; mode?: PadMode; value?: number | null }, Tensor>
>('pad(Tensor input, int[] pad, str mode="constant", float? value=None) -> Tensor', (x: Tensor, padding: number[], mode: string, value: number | null): Tensor => {
  if (padding.length % 2 !== 0) throw new Error("Padding length must be divisible by 2");
  const nd = padding.length / 2;
  if (nd > x.ndim) throw new Error("Padding length too large");
  if (mode === "constant") return S._constantPad(x, padding, value ?? 0);
  if (mode !== "reflect" && mode !== "replicate" && mode !== "circular") throw new Error(`Unrecognised padding mode ${mode}`);
  if (value !== null && value !== 0) throw new Error(`Padding mode "${mode}" doesn't take in value argument`);
  // PyTorch's non-constant modes pad the last 1, 2 or 3 dims of a (batched) input with a channel dim
  if (nd < 1 || nd > 3 || (x.ndim !== nd + 1 && x.ndim !== nd + 2))
    throw new Error("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now");
  if (mode === "circular" && x.ndim !== nd + 2) throw new Error(`Invalid padding size, expected ${2 * (x.ndim - 2)} but got ${padding.length}`);
  if (mode !== "circular")
    for (let d = x.ndim === nd + 2 ? 1 : 0; d < x.ndim; d++)
      if (x.shape[d] === 0)
        throw new Error(
          `Expected ${nd + 1}D or ${nd + 2}D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ${shapeStr(x.shape)}`,
        );
  let r = x;
  for (let i = 0; i < nd; i++) {
    const d = x.ndim - 1 - i;
    const lo = padding[2 * i]!;
    const hi = padding[2 * i + 1]!;
    const n = r.shape[d]!;
    if (mode === "reflect" && (lo >= n || hi >= n))
      throw new Error(
        `Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (${lo}, ${hi}) at dimension ${d} of input ${shapeStr(x.shape)}`,
      );
    if (mode === "circular" && (lo > n || hi > n)) throw new Error("Padding value causes wrapping around more than once.");
    const keep = n - Math.max(-lo, 0) - Math.max(-hi, 0);
    if (keep < 0 || keep + Math.max(lo, 0) + Math.max(hi, 0) < 1)
      throw new Error(`input (size ${n} at dimension ${d}) is too small for the padding (${lo}, ${hi}): the output would be empty`);
    // negative padding crops; reflected and replicated values come from the uncropped input,
    // wrapped (circular) ones from the cropped one, as PyTorch's kernels
    const core = S.narrow(r, d, Math.max(-lo, 0), keep);
    const src = mode === "circular" ? core : r;
    const parts: Tensor[] = [];
    if (lo > 0) parts.push(side(src, d, lo, true, mode));
    parts.push(core);
    if (hi > 0) parts.push(side(src, d, hi, false, mode));
    r = parts.length === 1 ? core : S.cat(parts, d);
  }
  return r;
});

function side(r: Tensor, d: number, k: number, before: boolean, mode: PadMode): Tensor {
  const n = r.shape[d]!;
  if (mode === "reflect") return S.flip(S.narrow(r, d, before ? 1 : n - 1 - k, k), d);
  if (mode === "circular") return S.narrow(r, d, before ? n - k : 0, k);
  const edge = S.narrow(r, d, before ? 0 : n - 1, 1);
  const shape = [...edge.shape];
  shape[d] = k;
  return S.expand(edge, shape);
}

export interface EmbeddingOpts {
  paddingIdx?: number | null;
  maxNorm?: number | null;
  normType?: number;
  scaleGradByFreq?: boolean;
  sparse?: boolean;
}
/**
 * F.embedding: rows of `weight`; the paddingIdx row gets no gradient. maxNorm renormalizes the
 * looked-up rows of weight in place first (outside autograd), as PyTorch's embedding_renorm_.
 */
export const embedding = op<
  Sig<
    [input: Tensor, weight: Tensor, paddingIdx?: number | null, maxNorm?: number | null, normType?: number, scaleGradByFreq?: boolean, sparse?: boolean],
    EmbeddingOpts,
    Tensor
  >
>(
  "embedding(Tensor input, Tensor weight, int? paddingIdx=None, float? maxNorm=None, float normType=2., bool scaleGradByFreq=False, bool sparse=False) -> Tensor",
  (input: Tensor, weight: Tensor, paddingIdx: number | null, maxNorm: number | null, normType: number, scaleGradByFreq: boolean, sparse: boolean) => {
    requireIndex(input, "indices");
    if (weight.ndim !== 2) throw new RangeError(`'weight' must be 2-D, got weight of size ${shapeStr(weight.shape)}`);
    if (scaleGradByFreq) throw new Error("scale_grad_by_freq=True is not supported by torchts");
    if (sparse) throw new Error("sparse=True (a sparse gradient) is not supported by torchts");
    const [V, D] = weight.shape as [number, number];
    // an index outside [0, V) would gather garbage: PyTorch's IndexError, where a host read is cheap (cpu)
    _checkIndexRange(input, V, "embedding");
    if (paddingIdx !== null && (paddingIdx >= V || paddingIdx < -V)) throw new RangeError("Padding_idx must be within num_embeddings");
    const flat = S.reshape(cast(input, "int64"), [input.numel(), 1]);
    // every check is done: the renorm is the only write to an input
    if (maxNorm !== null) noGrad(() => renorm(weight, S.reshape(flat, [input.numel()]), maxNorm, normType));
    let w = weight;
    if (paddingIdx !== null) {
      const p = paddingIdx < 0 ? paddingIdx + V : paddingIdx;
      const isPad = S.reshape(M.eq(arange(V, { device: weight.device }), p), [V, 1]);
      w = M.where(isPad, S.detach(weight), weight);
    }
    const rows = gather(w, 0, S.expand(flat, [input.numel(), D]));
    return S.reshape(rows, [...input.shape, D]);
  },
);

/** embedding_renorm_ (idx already range-checked: the primitive scatterAdd, no second host read): each row of weight that `idx` names and whose norm exceeds maxNorm is scaled to maxNorm / (norm + 1e-7). */
function renorm(weight: Tensor, idx: Tensor, maxNorm: number, normType: number): void {
  const V = weight.shape[0]!;
  const ones = full([idx.numel()], 1, { dtype: "float32", device: weight.device });
  const hit = S.reshape(M.gt(scatterAdd(full([V], 0, { dtype: "float32", device: weight.device }), 0, idx, ones), 0), [V, 1]);
  const norms = R.norm(weight, normType, 1, true);
  const scale = M.where(M.logicalAnd(hit, M.gt(norms, maxNorm)), M.div(maxNorm, M.add(norms, 1e-7)), 1);
  inplaceSet(weight, M.mul(weight, scale), "embedding");
}

/** F.one_hot (int64). numClasses = -1 reads max(input) + 1 on the host. */
export const oneHot = op<Sig<[input: Tensor, numClasses?: number], { numClasses?: number }, Tensor>>(
  "oneHot(Tensor input, int numClasses=-1) -> Tensor",
  (t: Tensor, numClasses: number) => {
    if (t.dtype !== "int64") throw new Error("one_hot is only applicable to index tensor.");
    const v = hostValues(t);
    let lo = Infinity;
    let hi = -Infinity;
    if (v !== null)
      for (let i = 0; i < v.length; i++) {
        lo = Math.min(lo, v[i]!);
        hi = Math.max(hi, v[i]!);
      }
    let C = numClasses;
    if (C === -1) {
      if (t.numel() === 0) throw new Error("Can not infer total number of classes from empty tensor.");
      if (v === null) throw new Error(`num_classes=-1 reads the input's maximum on the host, which a ${t.device} tensor cannot do synchronously: pass num_classes`);
      C = hi + 1;
    }
    if (v !== null && t.numel() > 0) {
      if (lo < 0) throw new Error("Class values must be non-negative.");
      if (hi >= C) throw new Error("Class values must be smaller than num_classes.");
    }
    if (C < 0) throw new Error("Class values must be smaller than num_classes.");
    // a 0-dim index broadcasts against arange(C) directly, giving [C]
    return cast(M.eq(t.ndim === 0 ? t : S.unsqueeze(t, -1), arange(C, { device: t.device })), "int64");
  },
);

/** F.dropout: zero with probability p (mask from torch.rand, the default generator) and scale by 1/(1-p). */
export const dropout = op<
  Sig<[input: Tensor, p?: number, training?: boolean, inplace?: boolean], { p?: number; training?: boolean; inplace?: boolean }, Tensor>
>("dropout(Tensor input, float p=0.5, bool training=True, bool inplace=False) -> Tensor", (x: Tensor, p: number, training: boolean, inplace: boolean) => {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`dropout probability has to be between 0 and 1, but got ${p}`);
  if (!training || p === 0) return x;
  if (p === 1) return maybeInplace(x, M.mul(x, 0), inplace, "dropout");
  const keep = M.lt(rand(x.shape, { dtype: x.dtype, device: x.device }), 1 - p);
  return maybeInplace(x, M.mul(M.where(keep, x, 0), 1 / (1 - p)), inplace, "dropout");
});

export type InterpolateMode = "nearest" | "linear" | "bilinear" | "bicubic" | "trilinear" | "area" | "nearest-exact";
export interface InterpolateOpts {
  size?: number | readonly number[] | null;
  scaleFactor?: number | readonly number[] | null;
  mode?: InterpolateMode;
  alignCorners?: boolean | null;
  recomputeScaleFactor?: boolean | null;
  antialias?: boolean;
}

/** [out, in] linear-interpolation matrix (align_corners semantics as PyTorch's upsample_linear). */
function linearMatrix(n: number, o: number, align: boolean, scale: number | null): Float64Array {
  const a = hostArray(o * n, "the [out, in] interpolation matrix");
  for (let i = 0; i < o; i++) {
    let src: number;
    if (align) src = o > 1 ? (i * (n - 1)) / (o - 1) : 0;
    else {
      const r = scale !== null ? 1 / scale : n / o;
      src = Math.max((i + 0.5) * r - 0.5, 0);
    }
    const i0 = Math.min(Math.floor(src), n - 1);
    const i1 = Math.min(i0 + 1, n - 1);
    const l = src - i0;
    a[i * n + i0]! += 1 - l;
    a[i * n + i1]! += l;
  }
  return a;
}

const MODES = ["nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact"];

/** F.interpolate / upsample over the trailing spatial dims of [N, C, *sp], with PyTorch's argument checks in its order. */
function interpolateImpl(
  x: Tensor, size: number[] | null, scaleFactor: number[] | null, mode: string, alignCorners: boolean | null, recompute: boolean | null, antialias: boolean,
): Tensor {
  const nearestLike = mode === "nearest" || mode === "area" || mode === "nearest-exact";
  if (nearestLike && alignCorners !== null)
    throw new RangeError("align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear");
  const nd = x.ndim - 2;
  const spatial = `[${x.shape.slice(2).join(", ")}]`;
  // a single number (the binder makes it a 1-list) applies to every spatial dim
  const expand = <T>(v: T[]): T[] => (v.length === 1 && nd > 1 ? new Array<T>(nd).fill(v[0]!) : v);
  let out: number[] | null = null;
  let scales: number[] | null = null;
  if (size !== null && scaleFactor !== null) throw new RangeError("only one of size or scale_factor should be defined");
  else if (size !== null) {
    out = expand(size);
    if (out.length !== nd)
      throw new RangeError(
        `Input and output must have the same number of spatial dimensions, but got input with spatial dimensions of ${spatial} and output size of [${size.join(", ")}]. Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.`,
      );
  } else if (scaleFactor !== null) {
    scales = expand(scaleFactor);
    if (scales.length !== nd)
      throw new RangeError(
        `Input and scale_factor must have the same number of spatial dimensions, but got input with spatial dimensions of ${spatial} and scale_factor of shape [${scaleFactor.join(", ")}]. Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.`,
      );
  } else throw new RangeError("either size or scale_factor should be defined");
  if (recompute && size !== null) throw new RangeError("recompute_scale_factor is not meaningful with an explicit size.");
  if (mode === "area" && out === null) recompute = true;
  if (recompute && scales !== null) {
    out = scales.map((s, i) => Math.floor(x.shape[2 + i]! * s));
    scales = null;
  }
  if (antialias && mode !== "bilinear" && mode !== "bicubic") throw new RangeError("Anti-alias option is only supported for bilinear and bicubic modes");
  if (nd < 1 || nd > 3 || !MODES.includes(mode))
    throw new Error(
      `Input Error: Only 3D, 4D and 5D input Tensors supported (got ${x.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact (got ${mode})`,
    );
  const want = mode === "linear" ? 1 : mode === "bilinear" || mode === "bicubic" ? 2 : mode === "trilinear" ? 3 : nd;
  if (want !== nd) throw new Error(`Got ${nd + 2}D input, but ${mode} mode needs ${want + 2}D input`);
  if (mode === "bicubic") throw new Error("mode='bicubic' is not supported by torchts");
  if (antialias) throw new Error("antialias=True is not supported by torchts");
  const sp = x.shape.slice(2);
  const o = out ?? sp.map((n, i) => Math.floor(n * scales![i]!));
  const names = nd === 1 ? ["W"] : nd === 2 ? ["H", "W"] : ["D", "H", "W"];
  if (sp.some((n) => !(n > 0)) || o.some((v) => !(v > 0) || !Number.isFinite(v)))
    throw new Error(
      `Input and output sizes should be greater than 0, but got input (${sp.map((n, i) => `${names[i]}: ${n}`).join(", ")}) output (${o.map((v, i) => `${names[i]}: ${v}`).join(", ")})`,
    );
  if (mode === "area") return adaptiveAvgNd(nd, "interpolate", x, o);
  let y = x;
  for (let i = 0; i < nd; i++) {
    const d = 2 + i;
    const n = sp[i]!;
    const oi = o[i]!;
    const sc = scales?.[i] ?? null;
    if (mode === "nearest" || mode === "nearest-exact") {
      const r = sc !== null ? 1 / sc : n / oi;
      const idx = hostArray(oi, "the nearest-neighbour index");
      for (let j = 0; j < oi; j++) idx[j] = Math.min(mode === "nearest" ? Math.floor(j * r) : Math.floor((j + 0.5) * r), n - 1);
      const shape = y.shape.map((_, k) => (k === d ? oi : 1));
      const it = S.expand(constTensor(idx, shape, "int64", x.device), y.shape.map((v, k) => (k === d ? oi : v)));
      y = gather(y, d, S.contiguous(it));
    } else {
      const A = constTensor(linearMatrix(n, oi, alignCorners ?? false, sc), [oi, n], x.dtype, x.device);
      y = S.movedim(matmul(S.movedim(y, d, -1), S.t(A)), -1, d);
    }
  }
  return y;
}

type Sizes = number | readonly number[] | null;
export const interpolate = op<
  Sig<
    [
      input: Tensor, size?: Sizes, scaleFactor?: Sizes, mode?: InterpolateMode, alignCorners?: boolean | null, recomputeScaleFactor?: boolean | null,
      antialias?: boolean,
    ],
    InterpolateOpts,
    Tensor
  >
>(
  'interpolate(Tensor input, int[1]? size=None, float[]? scaleFactor=None, str mode="nearest", bool? alignCorners=None, bool? recomputeScaleFactor=None, bool antialias=False) -> Tensor',
  interpolateImpl,
);
/** F.upsample (deprecated in PyTorch for interpolate, which it calls). */
export const upsample = op<
  Sig<
    [input: Tensor, size?: Sizes, scaleFactor?: Sizes, mode?: InterpolateMode, alignCorners?: boolean | null],
    Omit<InterpolateOpts, "recomputeScaleFactor" | "antialias">,
    Tensor
  >
>(
  'upsample(Tensor input, int[1]? size=None, float[]? scaleFactor=None, str mode="nearest", bool? alignCorners=None) -> Tensor',
  (x: Tensor, size: number[] | null, scaleFactor: number[] | null, mode: string, alignCorners: boolean | null) =>
    interpolateImpl(x, size, scaleFactor, mode, alignCorners, null, false),
);

/** F.cosine_similarity: sum(x1 x2) / sqrt(clamp_min(|x1|^2 |x2|^2, eps^2)). */
export const cosineSimilarity = op<Sig<[x1: Tensor, x2: Tensor, dim?: number, eps?: number], { dim?: number; eps?: number }, Tensor>>(
  "cosineSimilarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor",
  (x1: Tensor, x2: Tensor, dim: number, eps: number) => {
    const w12 = R.sum(M.mul(x1, x2), dim);
    const w1 = R.sum(M.mul(x1, x1), dim);
    const w2 = R.sum(M.mul(x2, x2), dim);
    return M.div(w12, M.sqrt(M.clamp(M.mul(w1, w2), eps * eps)));
  },
);

export const pairwiseDistance = op<
  Sig<[x1: Tensor, x2: Tensor, p?: number, eps?: number, keepdim?: boolean], { p?: number; eps?: number; keepdim?: boolean }, Tensor>
>("pairwiseDistance(Tensor x1, Tensor x2, float p=2., float eps=1e-06, bool keepdim=False) -> Tensor", (x1: Tensor, x2: Tensor, p: number, eps: number, keepdim: boolean) =>
  R.norm(M.add(M.sub(x1, x2), eps), p, -1, keepdim),
);
