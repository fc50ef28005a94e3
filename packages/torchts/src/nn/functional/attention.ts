// scaled_dot_product_attention written out: softmax(q k^T * scale + mask) v. The causal
// mask is bottom-right aligned (query i sees keys j <= i + S - L, as with a KV cache);
// grouped-query attention repeats each kv head (repeat_interleave on the head dim).
import { shapeStr } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import type { Tensor } from "../../tensor.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import { ones } from "../../ops/creation.js";
import { matmul } from "../../ops/linalg.js";
import { softmax } from "./activation.js";
import { dropout } from "./misc.js";
import { requireFloat } from "./util.js";

export interface SdpaOpts {
  attnMask?: Tensor | null;
  dropoutP?: number;
  isCausal?: boolean;
  scale?: number | null;
  enableGqa?: boolean;
}

export function scaledDotProductAttention(q: Tensor, k: Tensor, v: Tensor, opts: SdpaOpts = {}): Tensor {
  return withOp("scaled_dot_product_attention", () => {
    requireFloat(q, "scaled_dot_product_attention", "query");
    if (q.ndim < 2 || k.ndim < 2 || v.ndim < 2)
      throw new RangeError(`scaled_dot_product_attention: expected query, key and value with at least 2 dims, got ${shapeStr(q.shape)}, ${shapeStr(k.shape)}, ${shapeStr(v.shape)}`);
    const E = q.shape[q.ndim - 1]!;
    if (k.shape[k.ndim - 1] !== E)
      throw new RangeError(`scaled_dot_product_attention: query and key must have the same embedding dim, got query ${shapeStr(q.shape)} and key ${shapeStr(k.shape)}`);
    if (k.shape[k.ndim - 2] !== v.shape[v.ndim - 2])
      throw new RangeError(`scaled_dot_product_attention: key and value must have the same sequence length, got key ${shapeStr(k.shape)} and value ${shapeStr(v.shape)}`);
    if (opts.isCausal && opts.attnMask)
      throw new RangeError("scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    let kk = k;
    let vv = v;
    if (opts.enableGqa && q.ndim >= 3) {
      const hq = q.shape[q.ndim - 3]!;
      const hk = k.shape[k.ndim - 3]!;
      const hv = v.shape[v.ndim - 3]!;
      if (hq % hk !== 0 || hq % hv !== 0)
        throw new RangeError(`scaled_dot_product_attention: number of query heads (${hq}) must be divisible by the number of key/value heads (${hk}, ${hv}) when enable_gqa=True`);
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
    if (opts.dropoutP && opts.dropoutP > 0) p = dropout(p, { p: opts.dropoutP, training: true });
    return matmul(p, vv);
  });
}
