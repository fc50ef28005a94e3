// MultiheadAttention and TransformerEncoderLayer. Submodule/parameter names follow PyTorch
// (in_proj_weight, out_proj, self_attn, linear1, norm1, ...) so state dicts interchange.
import type { Tensor } from "../../tensor.js";
import { zeros } from "../../ops/creation.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { linear, matmul } from "../../ops/linalg.js";
import { withOp } from "../../runtime/mode.js";
import { Module, Parameter } from "../module.js";
import * as init from "../init.js";
import * as F from "../functional.js";
import { Linear, param, type FactoryOpts } from "./basic.js";
import { Dropout } from "./activation.js";
import { LayerNorm } from "./norm.js";

export interface MHAOpts extends FactoryOpts {
  dropout?: number;
  bias?: boolean;
  kdim?: number;
  vdim?: number;
  batchFirst?: boolean;
}
export interface MHAForwardOpts {
  keyPaddingMask?: Tensor | null;
  needWeights?: boolean;
  attnMask?: Tensor | null;
  averageAttnWeights?: boolean;
  isCausal?: boolean;
}

/** bool masks mark positions NOT allowed to attend (True -> -inf); float masks are added. */
function maskToAdd(mask: Tensor, dtype: Tensor["dtype"]): Tensor {
  if (mask.dtype === "bool") return M.where(mask, -Infinity, zeros([], { dtype }));
  return mask.to(dtype);
}

export class MultiheadAttention extends Module {
  headDim: number;
  dropout: number;
  batchFirst: boolean;
  kdim: number;
  vdim: number;
  constructor(
    public embedDim: number,
    public numHeads: number,
    o: MHAOpts = {},
  ) {
    super();
    this.headDim = Math.floor(embedDim / numHeads);
    if (this.headDim * numHeads !== embedDim) throw new RangeError("embed_dim must be divisible by num_heads");
    this.dropout = o.dropout ?? 0;
    this.batchFirst = o.batchFirst ?? false;
    this.kdim = o.kdim ?? embedDim;
    this.vdim = o.vdim ?? embedDim;
    const bias = o.bias ?? true;
    if (this.kdim !== embedDim || this.vdim !== embedDim) {
      this.registerParameter("q_proj_weight", param([embedDim, embedDim], o));
      this.registerParameter("k_proj_weight", param([embedDim, this.kdim], o));
      this.registerParameter("v_proj_weight", param([embedDim, this.vdim], o));
      this.registerParameter("in_proj_weight", null);
    } else this.registerParameter("in_proj_weight", param([3 * embedDim, embedDim], o));
    this.registerParameter("in_proj_bias", bias ? param([3 * embedDim], o) : null);
    this.addModule("out_proj", new Linear(embedDim, embedDim, { ...o, bias }));
    for (const n of ["in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"]) {
      const p = this._parameters.get(n);
      if (p) init.xavierUniform_(p);
    }
    if (this.inProjBias) init.zeros_(this.inProjBias);
    if (this.outProj.bias) init.zeros_(this.outProj.bias);
  }
  get inProjWeight(): Parameter | null {
    return this._parameters.get("in_proj_weight") ?? null;
  }
  get inProjBias(): Parameter | null {
    return this._parameters.get("in_proj_bias") ?? null;
  }
  get outProj(): Linear {
    return this._modules.get("out_proj") as Linear;
  }

  /** Returns [attnOutput, attnWeights | null] like PyTorch. */
  override forward(query: Tensor, key: Tensor, value: Tensor, o: MHAForwardOpts = {}): [Tensor, Tensor | null] {
    return withOp("multi_head_attention_forward", () => {
      const batched = query.ndim === 3;
      if (!batched) {
        query = S.unsqueeze(query, 1);
        key = S.unsqueeze(key, 1);
        value = S.unsqueeze(value, 1);
        if (o.keyPaddingMask) o = { ...o, keyPaddingMask: S.unsqueeze(o.keyPaddingMask, 0) };
      } else if (this.batchFirst) {
        query = S.transpose(query, 0, 1);
        key = S.transpose(key, 0, 1);
        value = S.transpose(value, 0, 1);
      }
      // (L, N, E) layout from here on
      const [L, N, E] = query.shape as [number, number, number];
      const Sk = key.shape[0]!;
      if (E !== this.embedDim) throw new RangeError(`was expecting embedding dimension of ${this.embedDim}, but got ${E}`);
      const H = this.numHeads;
      const D = this.headDim;
      const b = this.inProjBias;
      const bq = b ? S.narrow(b, 0, 0, E) : null;
      const bk = b ? S.narrow(b, 0, E, E) : null;
      const bv = b ? S.narrow(b, 0, 2 * E, E) : null;
      const w = this.inProjWeight;
      const wq = w ? S.narrow(w, 0, 0, E) : this._parameters.get("q_proj_weight")!;
      const wk = w ? S.narrow(w, 0, E, E) : this._parameters.get("k_proj_weight")!;
      const wv = w ? S.narrow(w, 0, 2 * E, E) : this._parameters.get("v_proj_weight")!;
      const heads = (t: Tensor, len: number) => S.permute(S.reshape(t, [len, N, H, D]), [1, 2, 0, 3]); // (N,H,len,D)
      const q = heads(linear(query, wq, bq), L);
      const k = heads(linear(key, wk, bk), Sk);
      const v = heads(linear(value, wv, bv), Sk);
      let scores = M.mul(matmul(q, S.transpose(k, -2, -1)), 1 / Math.sqrt(D)); // (N,H,L,S)
      let mask = o.attnMask ?? null;
      if (o.isCausal && !mask) mask = S.triu(zeros([L, Sk], { dtype: "bool" }).logicalNot(), 1);
      if (mask) {
        if (mask.ndim === 3) mask = S.reshape(mask, [N, H, L, Sk]);
        scores = M.add(scores, maskToAdd(mask, scores.dtype));
      }
      if (o.keyPaddingMask) {
        const kpm = S.reshape(o.keyPaddingMask, [N, 1, 1, Sk]);
        scores = M.add(scores, maskToAdd(kpm, scores.dtype));
      }
      let attn = F.softmax(scores, -1);
      if (this.dropout > 0 && this.training) attn = F.dropout(attn, { p: this.dropout, training: true });
      let out = matmul(attn, v); // (N,H,L,D)
      out = S.reshape(S.permute(out, [2, 0, 1, 3]), [L, N, E]);
      out = this.outProj.forward(out);
      let weights: Tensor | null = null;
      if (o.needWeights ?? true) weights = (o.averageAttnWeights ?? true) ? R.mean(attn, 1) : attn;
      if (!batched) {
        out = S.squeeze(out, 1);
        if (weights) weights = S.squeeze(weights, 0);
      } else if (this.batchFirst) out = S.transpose(out, 0, 1);
      return [out, weights];
    });
  }
}

export interface EncoderLayerOpts extends FactoryOpts {
  dimFeedforward?: number;
  dropout?: number;
  activation?: "relu" | "gelu" | ((x: Tensor) => Tensor);
  layerNormEps?: number;
  batchFirst?: boolean;
  normFirst?: boolean;
  bias?: boolean;
}

export class TransformerEncoderLayer extends Module {
  normFirst: boolean;
  activation: (x: Tensor) => Tensor;
  constructor(dModel: number, nhead: number, o: EncoderLayerOpts = {}) {
    super();
    const ff = o.dimFeedforward ?? 2048;
    const p = o.dropout ?? 0.1;
    const bias = o.bias ?? true;
    const eps = o.layerNormEps ?? 1e-5;
    const fo = { dtype: o.dtype, device: o.device };
    this.addModule("self_attn", new MultiheadAttention(dModel, nhead, { ...fo, dropout: p, bias, batchFirst: o.batchFirst }));
    this.addModule("linear1", new Linear(dModel, ff, { ...fo, bias }));
    this.addModule("dropout", new Dropout(p));
    this.addModule("linear2", new Linear(ff, dModel, { ...fo, bias }));
    this.normFirst = o.normFirst ?? false;
    this.addModule("norm1", new LayerNorm(dModel, { ...fo, eps, bias }));
    this.addModule("norm2", new LayerNorm(dModel, { ...fo, eps, bias }));
    this.addModule("dropout1", new Dropout(p));
    this.addModule("dropout2", new Dropout(p));
    const act = o.activation ?? "relu";
    this.activation = act === "relu" ? (x) => F.relu(x) : act === "gelu" ? (x) => F.gelu(x) : act;
  }
  _m<T extends Module>(n: string): T {
    return this._modules.get(n) as T;
  }
  get selfAttn(): MultiheadAttention {
    return this._m("self_attn");
  }
  override forward(src: Tensor, o: { srcMask?: Tensor | null; srcKeyPaddingMask?: Tensor | null; isCausal?: boolean } = {}): Tensor {
    const sa = (x: Tensor) =>
      this._m<Dropout>("dropout1").call(
        this.selfAttn.call(x, x, x, { attnMask: o.srcMask, keyPaddingMask: o.srcKeyPaddingMask, needWeights: false, isCausal: o.isCausal && !o.srcMask })[0],
      );
    const ffb = (x: Tensor) =>
      this._m<Dropout>("dropout2").call(
        this._m<Linear>("linear2").call(this._m<Dropout>("dropout").call(this.activation(this._m<Linear>("linear1").call(x)))),
      );
    const n1 = this._m<LayerNorm>("norm1");
    const n2 = this._m<LayerNorm>("norm2");
    let x = src;
    if (this.normFirst) {
      x = M.add(x, sa(n1.call(x)));
      x = M.add(x, ffb(n2.call(x)));
    } else {
      x = n1.call(M.add(x, sa(x)));
      x = n2.call(M.add(x, ffb(x)));
    }
    return x;
  }
}
