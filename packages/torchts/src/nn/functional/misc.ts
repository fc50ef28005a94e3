// Assorted functional ops: pad (constant/reflect/replicate/circular), embedding, one_hot,
// dropout, interpolate (nearest, (bi)linear), cosine_similarity, pairwise_distance, linear.
import { shapeStr } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import type { Tensor } from "../../tensor.js";
import { cast, gather } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { arange } from "../../ops/creation.js";
import { rand } from "../../ops/random.js";
import { matmul } from "../../ops/linalg.js";
import { constTensor, requireIndex } from "./util.js";

export { linear } from "../../ops/linalg.js";

export type PadMode = "constant" | "reflect" | "replicate" | "circular";

/** F.pad: `pad` lists (before, after) pairs starting from the last dim. */
export function pad(x: Tensor, padding: readonly number[], opts: { mode?: PadMode; value?: number | null } = {}): Tensor {
  const mode = opts.mode ?? "constant";
  return withOp("pad", () => {
    if (padding.length % 2 !== 0) throw new RangeError(`pad: Padding length must be divisible by 2, got ${padding.length}`);
    const nd = padding.length / 2;
    if (nd > x.ndim)
      throw new RangeError(`pad: Padding length should be less than or equal to two times the input dimension but got padding length ${padding.length} and input of dimension ${x.ndim}`);
    if (mode === "constant") return S.constantPad(x, [...padding], opts.value ?? 0);
    if (opts.value !== undefined && opts.value !== null && opts.value !== 0)
      throw new RangeError(`pad: Padding mode "${mode}" doesn't take in value argument`);
    if (mode !== "reflect" && mode !== "replicate" && mode !== "circular")
      throw new RangeError(`pad: Unrecognised padding mode ${String(mode)}`);
    let r = x;
    for (let i = 0; i < nd; i++) {
      const d = x.ndim - 1 - i;
      const lo = padding[2 * i]!;
      const hi = padding[2 * i + 1]!;
      const n = r.shape[d]!;
      if (mode === "reflect" && (lo >= n || hi >= n))
        throw new RangeError(`pad: Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (${lo}, ${hi}) at dimension ${d} of input ${shapeStr(x.shape)}`);
      if (mode === "circular" && (lo > n || hi > n))
        throw new RangeError(`pad: Padding value causes wrapping around more than once (padding (${lo}, ${hi}) at dimension ${d} of input ${shapeStr(x.shape)})`);
      if (mode === "replicate" && n === 0) throw new RangeError(`pad: input of size ${shapeStr(x.shape)} is empty at dimension ${d}`);
      const parts: Tensor[] = [];
      if (lo < 0 || hi < 0) {
        if (mode !== "circular") throw new RangeError(`pad: negative padding is only supported for constant and circular modes (got (${lo}, ${hi}))`);
      }
      const core = S.narrow(r, d, Math.max(-lo, 0), n - Math.max(-lo, 0) - Math.max(-hi, 0));
      if (lo > 0) parts.push(side(r, d, lo, true, mode));
      parts.push(core);
      if (hi > 0) parts.push(side(r, d, hi, false, mode));
      r = parts.length === 1 ? core : S.cat(parts, d);
    }
    return r;
  });
}

function side(r: Tensor, d: number, k: number, before: boolean, mode: PadMode): Tensor {
  const n = r.shape[d]!;
  if (mode === "reflect") return S.flip(S.narrow(r, d, before ? 1 : n - 1 - k, k), d);
  if (mode === "circular") return S.narrow(r, d, before ? n - k : 0, k);
  const edge = S.narrow(r, d, before ? 0 : n - 1, 1);
  const shape = [...edge.shape];
  shape[d] = k;
  return S.expand(edge, shape);
}

/** F.embedding: rows of `weight`; the paddingIdx row gets no gradient. */
export function embedding(input: Tensor, weight: Tensor, opts: { paddingIdx?: number | null } = {}): Tensor {
  return withOp("embedding", () => {
    requireIndex(input, "embedding", "indices");
    if (weight.ndim !== 2) throw new RangeError(`embedding: 'weight' must be 2-D, got weight of size ${shapeStr(weight.shape)}`);
    const [V, D] = weight.shape as [number, number];
    let w = weight;
    if (opts.paddingIdx !== undefined && opts.paddingIdx !== null) {
      let p = opts.paddingIdx;
      if (p >= V || p < -V) throw new RangeError(`embedding: Padding_idx must be within num_embeddings (got ${p} for ${V} embeddings)`);
      if (p < 0) p += V;
      const isPad = S.reshape(M.eq(arange(V, { device: weight.device }), p), [V, 1]);
      w = M.where(isPad, S.detach(weight), weight);
    }
    const flat = S.reshape(cast(input, "int64"), [input.numel(), 1]);
    const rows = gather(w, 0, S.expand(flat, [input.numel(), D]));
    return S.reshape(rows, [...input.shape, D]);
  });
}

/** F.one_hot (int64). numClasses = -1 reads max(t) + 1 from the host. */
export function oneHot(t: Tensor, numClasses = -1): Tensor {
  return withOp("one_hot", () => {
    if (t.dtype !== "int64") throw new TypeError(`one_hot is only applicable to index tensor (int64), got ${t.dtype}`);
    let C = numClasses;
    if (C === -1) C = t.numel() === 0 ? 0 : Number(R.max(t)._tolistSync()) + 1;
    // a 0-dim index broadcasts against arange(C) directly, giving [C]
    return cast(M.eq(t.ndim === 0 ? t : S.unsqueeze(t, -1), arange(C, { device: t.device })), "int64");
  });
}

/** F.dropout: zero with probability p (mask from torch.rand, the default generator) and scale by 1/(1-p). */
export function dropout(x: Tensor, opts: { p?: number; training?: boolean } = {}): Tensor {
  const p = opts.p ?? 0.5;
  if (p < 0 || p > 1) throw new RangeError(`dropout probability has to be between 0 and 1, but got ${p}`);
  return withOp("dropout", () => {
    if (!(opts.training ?? true) || p === 0) return x;
    if (p === 1) return M.mul(x, 0);
    const keep = M.lt(rand(x.shape, { dtype: x.dtype, device: x.device }), 1 - p);
    return M.mul(M.where(keep, x, 0), 1 / (1 - p));
  });
}

export interface InterpolateOpts {
  size?: number | readonly number[] | null;
  scaleFactor?: number | readonly number[] | null;
  mode?: "nearest" | "linear" | "bilinear" | "trilinear" | "nearest-exact";
  alignCorners?: boolean | null;
}

/** [out, in] linear-interpolation matrix (align_corners semantics as PyTorch's upsample_linear). */
function linearMatrix(n: number, o: number, align: boolean, scale: number | null): number[] {
  const a = new Array<number>(o * n).fill(0);
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

/** F.interpolate / upsample over the trailing spatial dims of [N, C, *sp]. */
export function interpolate(x: Tensor, opts: InterpolateOpts = {}): Tensor {
  const mode = opts.mode ?? "nearest";
  return withOp("interpolate", () => {
    const nd = x.ndim - 2;
    if (nd < 1) throw new RangeError(`interpolate: expected input with at least 3 dims (N, C, *), got ${shapeStr(x.shape)}`);
    const want = mode === "linear" ? 1 : mode === "bilinear" ? 2 : mode === "trilinear" ? 3 : nd;
    if (want !== nd) throw new RangeError(`interpolate: mode '${mode}' expects ${want + 2}D input, but got input of size ${shapeStr(x.shape)}`);
    if ((opts.size ?? null) === null && (opts.scaleFactor ?? null) === null)
      throw new RangeError("interpolate: either size or scale_factor should be defined");
    if ((opts.size ?? null) !== null && (opts.scaleFactor ?? null) !== null)
      throw new RangeError("interpolate: only one of size or scale_factor should be defined");
    if (mode.startsWith("nearest") && opts.alignCorners !== undefined && opts.alignCorners !== null)
      throw new RangeError("interpolate: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear");
    const sp = x.shape.slice(2);
    const scales: (number | null)[] = [];
    const out: number[] = [];
    for (let i = 0; i < nd; i++) {
      if (opts.size !== undefined && opts.size !== null) {
        const s = typeof opts.size === "number" ? opts.size : opts.size[i]!;
        out.push(s);
        scales.push(null);
      } else {
        const f = typeof opts.scaleFactor === "number" ? opts.scaleFactor! : (opts.scaleFactor as readonly number[])[i]!;
        out.push(Math.floor(sp[i]! * f));
        scales.push(f);
      }
    }
    let y = x;
    for (let i = 0; i < nd; i++) {
      const d = 2 + i;
      const n = sp[i]!;
      const o = out[i]!;
      const sc = scales[i] ?? null;
      if (mode === "nearest" || mode === "nearest-exact") {
        const r = sc !== null ? 1 / sc : n / o;
        const idx = Array.from({ length: o }, (_, j) =>
          Math.min(mode === "nearest" ? Math.floor(j * r) : Math.floor((j + 0.5) * r), n - 1),
        );
        const shape = y.shape.map((_, k) => (k === d ? o : 1));
        const it = S.expand(constTensor(idx, shape, "int64", x.device), y.shape.map((v, k) => (k === d ? o : v)));
        y = gather(y, d, S.contiguous(it));
      } else {
        const A = constTensor(linearMatrix(n, o, opts.alignCorners ?? false, sc), [o, n], x.dtype, x.device);
        y = S.movedim(matmul(S.movedim(y, d, -1), S.t(A)), -1, d);
      }
    }
    return y;
  });
}
export const upsample = interpolate;

/** F.cosine_similarity: sum(x1 x2) / sqrt(clamp_min(|x1|^2 |x2|^2, eps^2)). */
export function cosineSimilarity(x1: Tensor, x2: Tensor, opts: { dim?: number; eps?: number } = {}): Tensor {
  return withOp("cosine_similarity", () => {
    const dim = opts.dim ?? 1;
    const eps = opts.eps ?? 1e-8;
    const w12 = R.sum(M.mul(x1, x2), dim);
    const w1 = R.sum(M.mul(x1, x1), dim);
    const w2 = R.sum(M.mul(x2, x2), dim);
    return M.div(w12, M.sqrt(M.clamp(M.mul(w1, w2), eps * eps)));
  });
}

export function pairwiseDistance(x1: Tensor, x2: Tensor, opts: { p?: number; eps?: number; keepdim?: boolean } = {}): Tensor {
  return withOp("pairwise_distance", () => R.norm(M.add(M.sub(x1, x2), opts.eps ?? 1e-6), opts.p ?? 2, -1, opts.keepdim ?? false));
}
