// GPT2LMHeadModel (transformers' modeling_gpt2.py). Conv1D layers store W as [in, out] and
// compute x @ W + b. Accepts both the `transformer.`-prefixed keys that save_pretrained writes
// and the hub layout (no prefix, with attn.bias / attn.masked_bias mask buffers, which are ignored).
//   B batch, L new tokens, S attended positions, C n_embd, nh heads, hd = C / nh.
import * as torch from "../../index.js";
import type { Tensor } from "../../index.js";
import type { PretrainedConfig } from "../config.js";
import {
  Embedding, LayerNorm, Linear, PreTrainedModel, placeholder, runLayers,
  type CausalLMOutput, type ForwardOptions, type InitOpts,
} from "../modeling_utils.js";
import type { KVCache } from "../kv_cache.js";
import type { PagedBatch, PagedKVCache } from "../paged_kv_cache.js";
const { nn } = torch;
const F = nn.functional;

/** transformers.pytorch_utils.Conv1D: weight [nx, nf], y = x @ W + b. */
export class Conv1D extends nn.Module {
  declare weight: InstanceType<typeof nn.Parameter>;
  declare bias: InstanceType<typeof nn.Parameter>;
  constructor(readonly nf: number, readonly nx: number, o: InitOpts) {
    super();
    this.weight = placeholder([nx, nf], o);
    this.bias = placeholder([nf], o);
  }
  override forward(x: Tensor): Tensor {
    return x.matmul(this.weight).add(this.bias);
  }
}

/** gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
function geluNew(x: Tensor): Tensor {
  return F.gelu(x, { approximate: "tanh" });
}

class GPT2Attention extends nn.Module {
  c_attn: Conv1D;
  c_proj: Conv1D;
  constructor(readonly cfg: PretrainedConfig, o: InitOpts, readonly layerIdx: number) {
    super();
    this.c_attn = new Conv1D(3 * cfg.hiddenSize, cfg.hiddenSize, o);
    this.c_proj = new Conv1D(cfg.hiddenSize, cfg.hiddenSize, o);
  }
  override forward(h: Tensor, mask: Tensor, cache?: KVCache, cachePos?: Tensor): Tensor {
    const [B, L, C] = h.shape as [number, number, number];
    const nh = this.cfg.numAttentionHeads;
    const hd = C / nh;
    const heads = (t: Tensor) => t.view(B, L, nh, hd).permute(0, 2, 1, 3); // [B, nh, L, hd]
    const [q0, k0, v0] = this.c_attn.forward(h).split(C, 2);
    const q = heads(q0!);
    let k = heads(k0!);
    let v = heads(v0!);
    if (cache) [k, v] = cache.update(this.layerIdx, k, v, cachePos); // [B, nh, S, hd]
    // scores divided (not multiplied) by sqrt(hd), as scale_attn_weights does
    let w = q.matmul(k.transpose(-1, -2)).div(Math.sqrt(hd)).add(mask); // [B, nh, L, S]
    w = F.softmax(w, -1).to(v.dtype);
    const y = w.matmul(v).permute(0, 2, 1, 3).reshape(B, L, C);
    return this.c_proj.forward(y);
  }
  /** A serving step over packed tokens h [T, C] (see LlamaAttention.forwardPaged). */
  forwardPaged(h: Tensor, batch: PagedBatch, cache: PagedKVCache): Tensor {
    const [T, C] = h.shape as [number, number];
    const nh = this.cfg.numAttentionHeads;
    const [q, k, v] = this.c_attn.forward(h).split(C, 1).map((t) => t.view(T, nh, C / nh)) as [Tensor, Tensor, Tensor];
    const o = F.pagedAttention(q, k, v, cache.keys[this.layerIdx]!, cache.values[this.layerIdx]!, batch.blockTable, batch.cuSeqlensQ, batch.cacheSeqlens);
    cache.write(this.layerIdx, k, v, batch.slotMappingHost ?? batch.slotMapping);
    return this.c_proj.forward(o.reshape(T, C));
  }
}

class GPT2MLP extends nn.Module {
  c_fc: Conv1D;
  c_proj: Conv1D;
  constructor(cfg: PretrainedConfig, o: InitOpts) {
    super();
    if (cfg.hiddenAct !== "gelu_new")
      throw new Error(`gpt2: activation_function '${cfg.hiddenAct}' is not supported (only gelu_new)`);
    this.c_fc = new Conv1D(cfg.intermediateSize, cfg.hiddenSize, o);
    this.c_proj = new Conv1D(cfg.hiddenSize, cfg.intermediateSize, o);
  }
  override forward(x: Tensor): Tensor {
    return this.c_proj.forward(geluNew(this.c_fc.forward(x)));
  }
}

class GPT2Block extends nn.Module {
  ln_1: LayerNorm;
  attn: GPT2Attention;
  ln_2: LayerNorm;
  mlp: GPT2MLP;
  constructor(cfg: PretrainedConfig, o: InitOpts, idx: number) {
    super();
    this.ln_1 = new LayerNorm(cfg.hiddenSize, cfg.normEps, o);
    this.attn = new GPT2Attention(cfg, o, idx);
    this.ln_2 = new LayerNorm(cfg.hiddenSize, cfg.normEps, o);
    this.mlp = new GPT2MLP(cfg, o);
  }
  override forward(h: Tensor, mask: Tensor, cache?: KVCache, cachePos?: Tensor): Tensor {
    h = this.attn.forward(this.ln_1.forward(h), mask, cache, cachePos).add(h);
    return h.add(this.mlp.forward(this.ln_2.forward(h)));
  }
  forwardPaged(h: Tensor, batch: PagedBatch, cache: PagedKVCache): Tensor {
    h = this.attn.forwardPaged(this.ln_1.forward(h), batch, cache).add(h);
    return h.add(this.mlp.forward(this.ln_2.forward(h)));
  }
}

class GPT2Model extends nn.Module {
  wte: Embedding;
  wpe: Embedding;
  h: InstanceType<typeof nn.ModuleList>;
  ln_f: LayerNorm;
  constructor(cfg: PretrainedConfig, o: InitOpts) {
    super();
    this.wte = new Embedding(cfg.vocabSize, cfg.hiddenSize, o);
    this.wpe = new Embedding(cfg.maxPositionEmbeddings, cfg.hiddenSize, o);
    this.h = new nn.ModuleList(Array.from({ length: cfg.numHiddenLayers }, (_, i) => new GPT2Block(cfg, o, i)));
    this.ln_f = new LayerNorm(cfg.hiddenSize, cfg.normEps, o);
  }
}

export class GPT2LMHeadModel extends PreTrainedModel {
  transformer: GPT2Model;
  lm_head: Linear;
  constructor(config: PretrainedConfig, o: InitOpts = {}) {
    super(config);
    this.transformer = new GPT2Model(config, o);
    this.lm_head = new Linear(config.hiddenSize, config.vocabSize, false, o);
    this.tieWeights();
  }
  override tieWeights(): void {
    if (this.config.tieWordEmbeddings) this.lm_head.weight = this.transformer.wte.weight;
  }
  override mapCheckpointKey(key: string): string | null {
    if (/(^|\.)h\.\d+\.attn\.(bias|masked_bias)$/.test(key)) return null; // causal-mask buffers
    if (key === "lm_head.weight") return this.config.tieWordEmbeddings ? null : key;
    return key.startsWith("transformer.") ? key : `transformer.${key}`;
  }
  override cacheShape() {
    return { layers: this.config.numHiddenLayers, kvHeads: this.config.numAttentionHeads, headDim: this.config.headDim };
  }

  override forward(inputIds: Tensor, opts: ForwardOptions = {}): CausalLMOutput {
    const t = this.transformer;
    const { L, cache, start, pos, maskFor } = this.forwardInputs(inputIds, opts, t.wte.weight.dtype);
    if (start + L > this.config.maxPositionEmbeddings)
      throw new RangeError(`GPT2LMHeadModel: sequence length ${start + L} exceeds n_positions ${this.config.maxPositionEmbeddings}`);
    let h = t.wte.forward(inputIds).add(t.wpe.forward(pos)); // [B, L, C]
    const mask = maskFor(null);
    const hidden: Tensor[] = [h];
    h = runLayers([...t.h.children()] as GPT2Block[], h, (block, x) => block.forward(x, mask, cache, opts.cachePosition), opts.outputHiddenStates ? hidden : undefined);
    return this.finishForward(h, hidden, L, opts, t.ln_f, this.lm_head);
  }

  override forwardPaged(batch: PagedBatch, cache: PagedKVCache): Tensor {
    const t = this.transformer;
    let h = t.wte.forward(batch.inputIds).add(t.wpe.forward(batch.positions)); // [T, C]
    h = runLayers([...t.h.children()] as GPT2Block[], h, (block, x) => block.forwardPaged(x, batch, cache));
    return this.lm_head.forward(t.ln_f.forward(h.indexSelect(0, batch.logitsIndices)));
  }
}
