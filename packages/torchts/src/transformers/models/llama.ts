// LlamaForCausalLM (transformers' modeling_llama.py), also used for Mistral-style configs
// (sliding window from the config). Qwen2 and Qwen3 subclass it with their attention flags.
//   B batch, L new tokens, S attended positions, C hidden, nh/nkv heads, hd head dim.
import * as torch from "../../index.js";
import type { Tensor } from "../../index.js";
import type { PretrainedConfig } from "../config.js";
import {
  Embedding, Linear, PreTrainedModel, RMSNorm, applyRope, maskMin, ropeCosSin, ropeInvFreq, ropeTables, rotateHalf, rotateHalfMatrix, runLayers, type RopeTables,
  type CausalLMOutput, type ForwardOptions, type InitOpts,
} from "../modeling_utils.js";
import type { KVCache } from "../kv_cache.js";
import type { PagedBatch, PagedKVCache } from "../paged_kv_cache.js";
import { segmentedAttention } from "../../nn/functional/attention.js";
const { nn } = torch;
const F = nn.functional;

export interface AttentionFlags {
  /** bias on q/k/v (Qwen2: always; Llama/Qwen3: config.attention_bias) */
  qkvBias: boolean;
  /** bias on o_proj (Qwen2: never; Llama/Qwen3: config.attention_bias) */
  oBias: boolean;
  /** Qwen3: RMSNorm over head_dim on q and k, per head, before RoPE */
  qkNorm: boolean;
}

class LlamaAttention extends nn.Module {
  q_proj: Linear;
  k_proj: Linear;
  v_proj: Linear;
  o_proj: Linear;
  q_norm?: RMSNorm;
  k_norm?: RMSNorm;
  readonly nh: number;
  readonly nkv: number;
  readonly hd: number;
  constructor(cfg: PretrainedConfig, flags: AttentionFlags, o: InitOpts, readonly layerIdx: number) {
    super();
    this.nh = cfg.numAttentionHeads;
    this.nkv = cfg.numKeyValueHeads;
    this.hd = cfg.headDim;
    const C = cfg.hiddenSize;
    this.q_proj = new Linear(C, this.nh * this.hd, flags.qkvBias, o);
    this.k_proj = new Linear(C, this.nkv * this.hd, flags.qkvBias, o);
    this.v_proj = new Linear(C, this.nkv * this.hd, flags.qkvBias, o);
    this.o_proj = new Linear(this.nh * this.hd, C, flags.oBias, o);
    if (flags.qkNorm) {
      this.q_norm = new RMSNorm(this.hd, cfg.normEps, o);
      this.k_norm = new RMSNorm(this.hd, cfg.normEps, o);
    }
  }
  override forward(h: Tensor, rope: RopeTables, mask: Tensor | null, cache?: KVCache, cachePos?: Tensor): Tensor {
    const [B, L] = h.shape as [number, number];
    let q = this.q_proj.forward(h).view(B, L, -1, this.hd); // [B, L, nh, hd]
    let k = this.k_proj.forward(h).view(B, L, -1, this.hd); // [B, L, nkv, hd]
    const v0 = this.v_proj.forward(h).view(B, L, -1, this.hd).transpose(1, 2); // [B, nkv, L, hd]
    if (this.q_norm) q = this.q_norm.forward(q);
    if (this.k_norm) k = this.k_norm.forward(k);
    q = q.transpose(1, 2); // [B, nh, L, hd]
    k = k.transpose(1, 2); // [B, nkv, L, hd]
    q = applyRope(q, rope);
    k = applyRope(k, rope);
    // [B, nkv, S, hd] in one or two segments along S (a KV cache's completed blocks and tail)
    const { keys, values } = cache ? cache.updateSegments(this.layerIdx, k, v0, cachePos) : { keys: [k], values: [v0] };
    // (-1: under tensor parallelism this rank holds a slice of the heads)
    return this.o_proj.forward(attend(q, keys, values, mask, this.hd ** -0.5).transpose(1, 2).reshape(B, L, -1));
  }

  /**
   * A serving step: h [T, C] packs the new tokens of several sequences (rope cos/sin [T, 1, hd]); the
   * cached positions are read from `cache` in place, and the new keys/values are written to their slots.
   */
  forwardPaged(h: Tensor, cos: Tensor, sin: Tensor, batch: PagedBatch, cache: PagedKVCache): Tensor {
    const T = h.shape[0]!;
    // -1 heads: under tensor parallelism this rank holds a slice of them (and a cache of its kv heads)
    let q = this.q_proj.forward(h).view(T, -1, this.hd);
    let k = this.k_proj.forward(h).view(T, -1, this.hd);
    const v = this.v_proj.forward(h).view(T, -1, this.hd);
    if (this.q_norm) q = this.q_norm.forward(q);
    if (this.k_norm) k = this.k_norm.forward(k);
    q = q.mul(cos).add(rotateHalf(q).mul(sin));
    k = k.mul(cos).add(rotateHalf(k).mul(sin));
    const { blockTable, cuSeqlensQ, cacheSeqlens, slotMapping } = batch;
    const o = F.pagedAttention(q, k, v, cache.keys[this.layerIdx]!, cache.values[this.layerIdx]!, blockTable, cuSeqlensQ, cacheSeqlens, { scale: this.hd ** -0.5 });
    cache.write(this.layerIdx, k, v, batch.slotMappingHost ?? slotMapping);
    return this.o_proj.forward(o.reshape(T, -1));
  }
}

/**
 * softmax(q k^T * scale + mask) v for q [B, nh, L, hd] and k, v [B, nkv, S, hd] (given as one
 * or two segments along S: a KV cache's completed blocks and tail), query head i reading kv head
 * i // (nh / nkv) in place (no repeat_kv copies). float32: one fused scaled_dot_product_attention
 * (a single kernel on cpu, reading both segments in place). Other dtypes keep transformers' float32
 * softmax: the nrep query heads of a group are stacked as rows [B, nkv, nrep * L, hd] (a view).
 */
function attend(q: Tensor, keys: Tensor[], values: Tensor[], mask: Tensor | null, scale: number): Tensor {
  if (q.dtype === "float32" && (mask !== null || keys.length === 1)) {
    const opts = mask === null ? { isCausal: true, scale, enableGqa: true } : { attnMask: mask, scale, enableGqa: true };
    if (keys.length === 2) return segmentedAttention(q, [keys[0]!, keys[1]!], [values[0]!, values[1]!], opts);
    return F.scaledDotProductAttention(q, keys[0]!, values[0]!, opts);
  }
  const [k, v] = keys.length === 1 ? [keys[0]!, values[0]!] : [torch.cat(keys, 2), torch.cat(values, 2)];
  const [B, nh, L, hd] = q.shape as [number, number, number, number];
  const [nkv, S] = [k.shape[1]!, k.shape[2]!];
  const nrep = nh / nkv;
  // no mask: causal over all S == L keys (an autocast query in a float32 model can get here)
  const m = mask ?? torch.ones([L, S], { dtype: "bool", device: q.device }).tril().logicalNot().to("float32").mul(maskMin("float32")).view(1, 1, L, S);
  let w = q.reshape(B, nkv, nrep * L, hd).matmul(k.transpose(2, 3)).view(B, nkv, nrep, L, S).mul(scale).add(m.unsqueeze(2));
  w = F.softmax(w, -1, { dtype: "float32" }).to(q.dtype);
  return w.view(B, nkv, nrep * L, S).matmul(v).view(B, nh, L, hd);
}

class LlamaMLP extends nn.Module {
  gate_proj: Linear;
  up_proj: Linear;
  down_proj: Linear;
  constructor(cfg: PretrainedConfig, o: InitOpts) {
    super();
    if (cfg.hiddenAct !== "silu") throw new Error(`${cfg.modelType}: hidden_act '${cfg.hiddenAct}' is not supported (only silu)`);
    this.gate_proj = new Linear(cfg.hiddenSize, cfg.intermediateSize, cfg.mlpBias, o);
    this.up_proj = new Linear(cfg.hiddenSize, cfg.intermediateSize, cfg.mlpBias, o);
    this.down_proj = new Linear(cfg.intermediateSize, cfg.hiddenSize, cfg.mlpBias, o);
  }
  override forward(x: Tensor): Tensor {
    return this.down_proj.forward(F.silu(this.gate_proj.forward(x)).mul(this.up_proj.forward(x)));
  }
}

class LlamaDecoderLayer extends nn.Module {
  self_attn: LlamaAttention;
  mlp: LlamaMLP;
  input_layernorm: RMSNorm;
  post_attention_layernorm: RMSNorm;
  constructor(cfg: PretrainedConfig, flags: AttentionFlags, o: InitOpts, idx: number) {
    super();
    this.self_attn = new LlamaAttention(cfg, flags, o, idx);
    this.mlp = new LlamaMLP(cfg, o);
    this.input_layernorm = new RMSNorm(cfg.hiddenSize, cfg.normEps, o);
    this.post_attention_layernorm = new RMSNorm(cfg.hiddenSize, cfg.normEps, o);
  }
  override forward(h: Tensor, rope: RopeTables, mask: Tensor | null, cache?: KVCache, cachePos?: Tensor): Tensor {
    h = h.add(this.self_attn.forward(this.input_layernorm.forward(h), rope, mask, cache, cachePos));
    return h.add(this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }
  forwardPaged(h: Tensor, cos: Tensor, sin: Tensor, batch: PagedBatch, cache: PagedKVCache): Tensor {
    h = h.add(this.self_attn.forwardPaged(this.input_layernorm.forward(h), cos, sin, batch, cache));
    return h.add(this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }
}

class LlamaModel extends nn.Module {
  embed_tokens: Embedding;
  layers: InstanceType<typeof nn.ModuleList>;
  norm: RMSNorm;
  constructor(readonly cfg: PretrainedConfig, flags: AttentionFlags, o: InitOpts) {
    super();
    this.embed_tokens = new Embedding(cfg.vocabSize, cfg.hiddenSize, o);
    this.layers = new nn.ModuleList(Array.from({ length: cfg.numHiddenLayers }, (_, i) => new LlamaDecoderLayer(cfg, flags, o, i)));
    this.norm = new RMSNorm(cfg.hiddenSize, cfg.normEps, o);
  }
}

export class LlamaForCausalLM extends PreTrainedModel {
  model: LlamaModel;
  lm_head: Linear;
  invFreq: Tensor;
  /** eye and rotate_half as [headDim, headDim] matrices: single-token RoPE as a matmul */
  private readonly ropeEye: Tensor;
  private readonly ropePerm: Tensor;
  constructor(config: PretrainedConfig, o: InitOpts = {}, flags?: AttentionFlags) {
    super(config);
    const f = flags ?? { qkvBias: config.attentionBias, oBias: config.attentionBias, qkNorm: false };
    this.model = new LlamaModel(config, f, o);
    this.lm_head = new Linear(config.hiddenSize, config.vocabSize, false, o);
    this.invFreq = ropeInvFreq(config.rope!, config.headDim, o.device ?? "cpu");
    this.ropeEye = torch.eye(config.headDim, { device: o.device });
    this.ropePerm = rotateHalfMatrix(config.headDim, o.device ?? "cpu");
    this.tieWeights();
  }
  override tieWeights(): void {
    if (this.config.tieWordEmbeddings) this.lm_head.weight = this.model.embed_tokens.weight;
  }
  override mapCheckpointKey(key: string): string | null {
    // a tied model's lm_head is the embedding; a stored copy (if any) is redundant
    if (this.config.tieWordEmbeddings && key === "lm_head.weight") return null;
    return key;
  }
  override cacheShape() {
    return { layers: this.config.numHiddenLayers, kvHeads: this.config.numKeyValueHeads, headDim: this.config.headDim };
  }

  override forward(inputIds: Tensor, opts: ForwardOptions = {}): CausalLMOutput {
    let h = this.model.embed_tokens.forward(inputIds); // [B, L, C]
    const dtype = h.dtype;
    const { L, cache, pos, maskFor, causalOnly } = this.forwardInputs(inputIds, opts, dtype);
    const rope = ropeTables(this.invFreq, pos, dtype, this.ropeEye, this.ropePerm); // cos, sin [B, 1, L, hd]
    const hidden: Tensor[] = [h];
    const layers = [...this.model.layers.children()] as LlamaDecoderLayer[];
    // built before the layers' scopes (maskFor makes each window's mask once, for all layers)
    // (null: plain causal attention over all the keys, no mask needed)
    const masks = layers.map((_, i) => {
      const w = this.config.layerTypes[i] === "sliding_attention" ? this.config.slidingWindow : null;
      return causalOnly(w) ? null : maskFor(w);
    });
    h = runLayers(layers, h, (layer, x, i) => layer.forward(x, rope, masks[i]!, cache, opts.cachePosition), opts.outputHiddenStates ? hidden : undefined);
    return this.finishForward(h, hidden, L, opts, this.model.norm, this.lm_head);
  }

  override forwardPaged(batch: PagedBatch, cache: PagedKVCache): Tensor {
    if (this.config.layerTypes.some((t) => t === "sliding_attention"))
      throw new Error(`${this.constructor.name}.forwardPaged: sliding-window attention is not supported by the paged KV cache yet`);
    let h = this.model.embed_tokens.forward(batch.inputIds); // [T, C]
    const [cos, sin] = ropeCosSin(this.invFreq, batch.positions.unsqueeze(0), h.dtype).map((t) => t.squeeze(0).transpose(0, 1)); // [T, 1, hd]
    h = runLayers([...this.model.layers.children()] as LlamaDecoderLayer[], h, (layer, x) => layer.forwardPaged(x, cos!, sin!, batch, cache));
    return this.lm_head.forward(this.model.norm.forward(h.indexSelect(0, batch.logitsIndices)));
  }
}
