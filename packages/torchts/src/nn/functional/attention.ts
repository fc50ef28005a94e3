// scaled_dot_product_attention written out: softmax(q k^T * scale + mask) v. The causal
// mask is bottom-right aligned (query i sees keys j <= i + S - L, as with a KV cache);
// grouped-query attention repeats each kv head (repeat_interleave on the head dim). Devices
// that override the `attention` composite (cpu: a fused online-softmax kernel) run float32
// cases without dropout in one kernel that never materializes the L x S scores.
import { shapeStr } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import type { Tensor } from "../../tensor.js";
import { op, type Sig } from "../../ops/registry.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import { ones } from "../../ops/creation.js";
import { matmul } from "../../ops/linalg.js";
import { torchSoftmax as softmax } from "./activation.js";
import { dropout } from "./misc.js";
import { requireFloat } from "./util.js";
import { attach, compositePrim } from "../../ops/core.js";
import { isGradEnabled } from "../../autograd/grad_mode.js";
import { sum } from "../../ops/reduce.js";

export interface SdpaOpts {
  attnMask?: Tensor | null;
  dropoutP?: number;
  isCausal?: boolean;
  scale?: number | null;
  enableGqa?: boolean;
}

function sdpa(q: Tensor, k: Tensor, v: Tensor, opts: SdpaOpts): Tensor {
  requireFloat(q, "query");
  if (q.ndim < 2 || k.ndim < 2 || v.ndim < 2)
    throw new RangeError(`expected query, key and value with at least 2 dims, got ${shapeStr(q.shape)}, ${shapeStr(k.shape)}, ${shapeStr(v.shape)}`);
  const E = q.shape[q.ndim - 1]!;
  if (k.shape[k.ndim - 1] !== E)
    throw new RangeError(`query and key must have the same embedding dim, got query ${shapeStr(q.shape)} and key ${shapeStr(k.shape)}`);
  if (k.shape[k.ndim - 2] !== v.shape[v.ndim - 2])
    throw new RangeError(`key and value must have the same sequence length, got key ${shapeStr(k.shape)} and value ${shapeStr(v.shape)}`);
  if (opts.isCausal && opts.attnMask) throw new RangeError("Explicit attn_mask should not be set when is_causal=True");
  const dp = opts.dropoutP ?? 0;
  if (!(dp >= 0 && dp <= 1)) throw new RangeError(`dropout probability has to be between 0 and 1, but got ${dp}`);
  const fused = fusedAttention(q, k, v, opts);
  if (fused) return fused;
  let kk = k;
  let vv = v;
  if (opts.enableGqa && q.ndim >= 3) {
    const hq = q.shape[q.ndim - 3]!;
    const hk = k.shape[k.ndim - 3]!;
    const hv = v.shape[v.ndim - 3]!;
    if (hq % hk !== 0 || hq % hv !== 0)
      throw new RangeError(`number of query heads (${hq}) must be divisible by the number of key/value heads (${hk}, ${hv}) when enable_gqa=True`);
    if (hk !== hq) kk = S.repeatInterleave(k, hq / hk, k.ndim - 3);
    if (hv !== hq) vv = S.repeatInterleave(v, hq / hv, v.ndim - 3);
  }
  const L = q.shape[q.ndim - 2]!;
  const Sk = kk.shape[kk.ndim - 2]!;
  const scale = opts.scale ?? 1 / Math.sqrt(E);
  let scores = M.mul(matmul(q, S.transpose(kk, -2, -1)), scale);
  if (opts.isCausal) {
    const keep = S.tril(ones([L, Sk], { dtype: "bool", device: q.device }), Sk - L);
    scores = M.where(keep, scores, -Infinity);
  } else if (opts.attnMask) {
    const m = opts.attnMask;
    scores = m.dtype === "bool" ? M.where(m, scores, -Infinity) : M.add(scores, m);
  }
  let p = softmax(scores, -1);
  if (dp > 0) p = dropout(p, dp, true);
  return matmul(p, vv);
}

/**
 * F.scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
 * *, scale=None, enable_gqa=False): softmax(q k^T * scale + mask) v.
 */
export const scaledDotProductAttention = op<
  Sig<[query: Tensor, key: Tensor, value: Tensor, attnMask?: Tensor | null, dropoutP?: number, isCausal?: boolean], SdpaOpts, Tensor>
>(
  "scaledDotProductAttention(Tensor query, Tensor key, Tensor value, Tensor? attnMask=None, float dropoutP=0.0, bool isCausal=False, *, float? scale=None, bool enableGqa=False) -> Tensor",
  (q: Tensor, k: Tensor, v: Tensor, attnMask: Tensor | null, dropoutP: number, isCausal: boolean, scale: number | null, enableGqa: boolean) =>
    sdpa(q, k, v, { attnMask, dropoutP, isCausal, scale, enableGqa }),
);

/**
 * scaledDotProductAttention(q, cat(k, -2), cat(v, -2), opts) for keys and values given as two
 * segments along the sequence (a KV cache's completed blocks and the block being filled). Where
 * the device's attention kernel reads both segments in place (cpu, float32, no gradient needed)
 * nothing is concatenated: a decode step then copies no O(context) keys per layer.
 * Internal (the transformers' KV cache), not torch.nn.functional API.
 */
export function segmentedAttention(q: Tensor, k: readonly [Tensor, Tensor], v: readonly [Tensor, Tensor], opts: SdpaOpts = {}): Tensor {
  return withOp("scaledDotProductAttention", () => {
    const needsGrad = isGradEnabled() && [q, ...k, ...v].some((t) => t.requiresGrad);
    if (!needsGrad && !opts.isCausal) {
      const out = fusedAttention(q, k[0], v[0], opts, [k[1], v[1]]);
      if (out) return out;
    }
    return sdpa(q, S.cat([...k], -2), S.cat([...v], -2), opts);
  });
}

/**
 * The `attention` composite (a fused kernel on devices that override it) for float32 3-d/4-d
 * inputs without dropout; null when the device decomposes or the case is not covered (a mask
 * that needs a gradient, broadcast query batch, 5-d inputs...), so the caller decomposes.
 * Key/value heads may be fewer (GQA: query head h reads kv head h / (Hq / Hk)) or broadcast.
 */
function fusedAttention(q: Tensor, k: Tensor, v: Tensor, opts: SdpaOpts, seg?: readonly [Tensor, Tensor]): Tensor | null {
  if (!q._storage.device.overrides.has("attention")) return null;
  // a second key segment (segmentedAttention): same layout as the first but for its length;
  // blocks of the kernel's key loop must fit the first segment, so its length is a multiple of 4
  if (seg) {
    const [k2, v2] = seg;
    if (k2.dtype !== "float32" || v2.dtype !== "float32" || k2.ndim !== 4 || v2.ndim !== 4 || k.ndim !== 4 || v.ndim !== 4) return null;
    if (k.shape[2]! % 4 !== 0 || k2.shape[2] !== v2.shape[2]) return null;
    for (const d of [0, 1, 3]) if (k2.shape[d] !== k.shape[d] || v2.shape[d] !== v.shape[d]) return null;
  }
  if (q.dtype !== "float32" || k.dtype !== "float32" || v.dtype !== "float32") return null;
  if (opts.dropoutP && opts.dropoutP > 0) return null;
  const nd = q.ndim;
  if ((nd !== 3 && nd !== 4) || k.ndim !== nd || v.ndim !== nd) return null;
  const m0 = opts.attnMask ?? null;
  if (m0 && (m0.requiresGrad || (m0.dtype !== "bool" && m0.dtype !== "float32") || m0.ndim > 4)) return null;
  const q4 = nd === 3 ? S.unsqueeze(q, 0) : q;
  let k4 = nd === 3 ? S.unsqueeze(k, 0) : k;
  let v4 = nd === 3 ? S.unsqueeze(v, 0) : v;
  const [B, Hq, L, E] = q4.shape as [number, number, number, number];
  const S1 = k4.shape[2]!;
  const Sk = S1 + (seg ? seg[0].shape[2]! : 0);
  const Ev = v4.shape[3]!;
  if (B * Hq * L * E * Sk * Ev === 0) return null;
  for (const t of [k4, v4]) if (t.shape[0] !== B && t.shape[0] !== 1) return null;
  let Hk = k4.shape[1]!;
  if (Hk !== v4.shape[1]) {
    if (Hk !== 1 && v4.shape[1] !== 1) return null;
    Hk = Math.max(Hk, v4.shape[1]!);
  }
  if (Hk !== Hq && !(opts.enableGqa && Hq % Hk === 0)) {
    if (Hk !== 1) return null;
    Hk = Hq; // a single broadcast kv head
  }
  k4 = S.expand(k4, B, Hk, S1, E);
  v4 = S.expand(v4, B, Hk, S1, Ev);
  let mask: Tensor | null = null;
  if (m0) {
    const mf = m0.dtype === "bool" ? M.where(m0, 0, -Infinity) : m0;
    try {
      mask = S.expand(mf.dtype === "float32" ? mf : mf.to("float32"), B, Hq, L, Sk);
    } catch {
      return null; // not broadcastable: the decomposition raises the error
    }
  }
  const scale = opts.scale ?? 1 / Math.sqrt(E);
  const causal = !!opts.isCausal;
  if (seg) {
    const S2 = Sk - S1;
    const more = [S.expand(seg[0], B, Hk, S2, E), S.expand(seg[1], B, Hk, S2, Ev)];
    const ins = mask ? [q4, k4, v4, mask, ...more] : [q4, k4, v4, ...more];
    return compositePrim("attention", { causal, scale, mask: mask !== null, split: S1 }, ins, [B, Hq, L, Ev], "float32"); // no gradient (checked by the caller)
  }
  const attrs = { causal, scale, mask: mask !== null };
  const out = compositePrim("attention", attrs, mask ? [q4, k4, v4, mask] : [q4, k4, v4], [B, Hq, L, Ev], "float32");
  if (!out) return null;
  const res = attach(out, "ScaledDotProductAttentionBackward0", [q4, k4, v4], [q4, k4, v4, mask, out], ([g], [qs, ks, vs, ms, os]) =>
    attentionBackward(g!, qs!, ks!, vs!, ms ?? null, os!, causal, scale));
  return nd === 3 ? S.squeeze(res, 0) : res;
}

/**
 * Gradients of O = softmax(q k^T * scale + mask) v, recomputing the probabilities P with ops:
 * dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale, dK = dS^T Q * scale,
 * summed over the query heads that share a kv head.
 */
function attentionBackward(
  g: Tensor, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | null, out: Tensor, causal: boolean, scale: number,
): (Tensor | null)[] {
  const [B, Hq, L] = q.shape as [number, number, number, number];
  const [, Hk, Sk, E] = k.shape as [number, number, number, number];
  const Ev = v.shape[3]!;
  const nrep = Hq / Hk;
  const kk = nrep > 1 ? S.repeatInterleave(k, nrep, 1) : k;
  const vv = nrep > 1 ? S.repeatInterleave(v, nrep, 1) : v;
  const qs = M.mul(q, scale);
  // P from the kernel when no higher-order graph is recorded (it has no gradient of its own)
  const attrs = { causal, scale, mask: mask !== null, probs: true };
  let p = isGradEnabled() ? null : compositePrim("attention", attrs, mask ? [q, k, v, mask] : [q, k, v], [B, Hq, L, Sk], "float32");
  if (!p) {
    let scores = matmul(qs, S.transpose(kk, -2, -1));
    if (causal) scores = M.where(S.tril(ones([L, Sk], { dtype: "bool", device: q.device }), Sk - L), scores, -Infinity);
    else if (mask) scores = M.add(scores, mask);
    p = softmax(scores, -1);
  }
  const dp = matmul(g, S.transpose(vv, -2, -1));
  const ds = M.mul(p, M.sub(dp, sum(M.mul(g, out), -1, true)));
  const dq = M.mul(matmul(ds, kk), scale);
  let dk = matmul(S.transpose(ds, -2, -1), qs);
  let dv = matmul(S.transpose(p, -2, -1), g);
  if (nrep > 1) {
    dk = sum(S.reshape(dk, [B, Hk, nrep, Sk, E]), 2);
    dv = sum(S.reshape(dv, [B, Hk, nrep, Sk, Ev]), 2);
  }
  return [dq, dk, dv];
}
