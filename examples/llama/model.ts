// Llama / Qwen2 / Qwen3 decoder-only LMs with Hugging Face's module names, so `stateDict()` is
// exactly what `save_pretrained` writes (model.embed_tokens, model.layers.N.self_attn.q_proj,
// ..., model.norm, lm_head; no lm_head.weight when embeddings are tied).
// Differences between the three: Qwen2 has q/k/v biases; Qwen3 RMS-normalises q and k per head
// (q_norm/k_norm) and sets head_dim explicitly. RoPE is the "default" rotate-half type.
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
const { nn } = torch;
const F = nn.functional;

/** The config.json fields these models use (snake_case, as Hugging Face writes them). */
export interface HFConfig {
  architectures: string[];
  model_type: "llama" | "qwen2" | "qwen3";
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads?: number;
  head_dim?: number;
  hidden_act: "silu";
  max_position_embeddings: number;
  rms_norm_eps: number;
  rope_theta: number;
  tie_word_embeddings: boolean;
  attention_bias?: boolean;
  [k: string]: unknown;
}

const ARCH = { llama: "LlamaForCausalLM", qwen2: "Qwen2ForCausalLM", qwen3: "Qwen3ForCausalLM" } as const;

/** A small config of the given family, filled in the way `save_pretrained` writes it. */
export function makeConfig(
  type: HFConfig["model_type"],
  o: { vocabSize: number; hidden: number; layers: number; heads: number; kvHeads: number; intermediate: number; maxPos: number; headDim?: number },
): HFConfig {
  const c: HFConfig = {
    architectures: [ARCH[type]],
    model_type: type,
    vocab_size: o.vocabSize,
    hidden_size: o.hidden,
    intermediate_size: o.intermediate,
    num_hidden_layers: o.layers,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    hidden_act: "silu",
    max_position_embeddings: o.maxPos,
    initializer_range: 0.02,
    rms_norm_eps: type === "llama" ? 1e-5 : 1e-6,
    rope_theta: type === "llama" ? 10000 : 1000000,
    rope_scaling: null,
    tie_word_embeddings: type === "qwen2",
    attention_dropout: 0,
    bos_token_id: null,
    eos_token_id: null,
    pad_token_id: null,
    torch_dtype: "float32",
    use_cache: true,
  };
  if (type === "llama") Object.assign(c, { attention_bias: false, mlp_bias: false, head_dim: o.headDim ?? o.hidden / o.heads });
  if (type === "qwen3") Object.assign(c, { attention_bias: false, head_dim: o.headDim ?? o.hidden / o.heads });
  if (type !== "llama") Object.assign(c, { use_sliding_window: false, sliding_window: null, max_window_layers: o.layers });
  return c;
}

/** cos/sin [T, headDim] for positions 0..T-1, duplicated over the two halves. */
function rope(T: number, dim: number, theta: number, device: string): [Tensor, Tensor] {
  const invFreq = torch.tensor(Array.from({ length: dim / 2 }, (_, i) => 1 / theta ** ((2 * i) / dim)), { dtype: "float32", device });
  const pos = torch.arange(T, { dtype: "float32", device });
  const freqs = pos.unsqueeze(1).mul(invFreq.unsqueeze(0)); // [T, dim/2]
  const emb = torch.cat([freqs, freqs], -1);
  return [emb.cos(), emb.sin()];
}

function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.ndim - 1]! / 2;
  return torch.cat([x.narrow(-1, d, d).neg(), x.narrow(-1, 0, d)], -1);
}

class Attention extends nn.Module {
  q_proj: InstanceType<typeof nn.Linear>;
  k_proj: InstanceType<typeof nn.Linear>;
  v_proj: InstanceType<typeof nn.Linear>;
  o_proj: InstanceType<typeof nn.Linear>;
  q_norm?: InstanceType<typeof nn.RMSNorm>;
  k_norm?: InstanceType<typeof nn.RMSNorm>;
  readonly nh: number;
  readonly nkv: number;
  readonly hd: number;
  constructor(c: HFConfig) {
    super();
    this.nh = c.num_attention_heads;
    this.nkv = c.num_key_value_heads ?? this.nh;
    this.hd = c.head_dim ?? c.hidden_size / this.nh;
    const qkvBias = c.model_type === "qwen2" ? true : Boolean(c.attention_bias);
    const oBias = c.model_type === "qwen2" ? false : Boolean(c.attention_bias);
    this.q_proj = new nn.Linear(c.hidden_size, this.nh * this.hd, { bias: qkvBias });
    this.k_proj = new nn.Linear(c.hidden_size, this.nkv * this.hd, { bias: qkvBias });
    this.v_proj = new nn.Linear(c.hidden_size, this.nkv * this.hd, { bias: qkvBias });
    this.o_proj = new nn.Linear(this.nh * this.hd, c.hidden_size, { bias: oBias });
    if (c.model_type === "qwen3") {
      this.q_norm = new nn.RMSNorm(this.hd, { eps: c.rms_norm_eps });
      this.k_norm = new nn.RMSNorm(this.hd, { eps: c.rms_norm_eps });
    }
  }
  override forward(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
    const [B, T] = x.shape as [number, number];
    let q = this.q_proj.forward(x).view(B, T, this.nh, this.hd);
    let k = this.k_proj.forward(x).view(B, T, this.nkv, this.hd);
    const v0 = this.v_proj.forward(x).view(B, T, this.nkv, this.hd).transpose(1, 2);
    if (this.q_norm) q = this.q_norm.forward(q);
    if (this.k_norm) k = this.k_norm.forward(k);
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    q = q.mul(cos).add(rotateHalf(q).mul(sin));
    k = k.mul(cos).add(rotateHalf(k).mul(sin));
    // repeat_kv: query head h reads kv head h / (nh / nkv)
    const rep = this.nh / this.nkv;
    const expand = (t: Tensor) => (rep === 1 ? t : t.unsqueeze(2).expand(B, this.nkv, rep, T, this.hd).reshape(B, this.nh, T, this.hd));
    const y = F.scaledDotProductAttention(q, expand(k), expand(v0), { isCausal: true });
    return this.o_proj.forward(y.transpose(1, 2).reshape(B, T, this.nh * this.hd));
  }
}

class MLP extends nn.Module {
  gate_proj: InstanceType<typeof nn.Linear>;
  up_proj: InstanceType<typeof nn.Linear>;
  down_proj: InstanceType<typeof nn.Linear>;
  constructor(c: HFConfig) {
    super();
    const bias = Boolean(c.mlp_bias);
    this.gate_proj = new nn.Linear(c.hidden_size, c.intermediate_size, { bias });
    this.up_proj = new nn.Linear(c.hidden_size, c.intermediate_size, { bias });
    this.down_proj = new nn.Linear(c.intermediate_size, c.hidden_size, { bias });
  }
  override forward(x: Tensor): Tensor {
    return this.down_proj.forward(F.silu(this.gate_proj.forward(x)).mul(this.up_proj.forward(x)));
  }
}

class DecoderLayer extends nn.Module {
  self_attn: Attention;
  mlp: MLP;
  input_layernorm: InstanceType<typeof nn.RMSNorm>;
  post_attention_layernorm: InstanceType<typeof nn.RMSNorm>;
  constructor(c: HFConfig) {
    super();
    this.self_attn = new Attention(c);
    this.mlp = new MLP(c);
    this.input_layernorm = new nn.RMSNorm(c.hidden_size, { eps: c.rms_norm_eps });
    this.post_attention_layernorm = new nn.RMSNorm(c.hidden_size, { eps: c.rms_norm_eps });
  }
  override forward(h: Tensor, cos: Tensor, sin: Tensor): Tensor {
    h = h.add(this.self_attn.forward(this.input_layernorm.forward(h), cos, sin));
    return h.add(this.mlp.forward(this.post_attention_layernorm.forward(h)));
  }
}

class DecoderModel extends nn.Module {
  embed_tokens: InstanceType<typeof nn.Embedding>;
  layers: InstanceType<typeof nn.ModuleList>;
  norm: InstanceType<typeof nn.RMSNorm>;
  constructor(c: HFConfig) {
    super();
    this.embed_tokens = new nn.Embedding(c.vocab_size, c.hidden_size);
    this.layers = new nn.ModuleList(Array.from({ length: c.num_hidden_layers }, () => new DecoderLayer(c)));
    this.norm = new nn.RMSNorm(c.hidden_size, { eps: c.rms_norm_eps });
  }
}

export class CausalLM extends nn.Module {
  model: DecoderModel;
  lm_head?: InstanceType<typeof nn.Linear>;
  constructor(readonly config: HFConfig) {
    super();
    this.model = new DecoderModel(config);
    if (!config.tie_word_embeddings) this.lm_head = new nn.Linear(config.hidden_size, config.vocab_size, { bias: false });
    // HF's _init_weights: N(0, initializer_range) for Linear/Embedding weights, zero biases
    const std = (config.initializer_range as number | undefined) ?? 0.02;
    for (const [name, p] of this.namedParameters()) {
      if (name.endsWith("norm.weight")) continue;
      if (name.endsWith(".bias")) nn.init.zeros_(p);
      else nn.init.normal_(p, 0, std);
    }
  }

  /** Per-layer hidden states (after the embedding and after each layer) and the logits. */
  forwardHidden(ids: Tensor): { hidden: Tensor[]; logits: Tensor } {
    const T = ids.shape[1]!;
    const hd = (this.model.layers.get(0) as DecoderLayer).self_attn.hd;
    const [cos, sin] = rope(T, hd, this.config.rope_theta, ids.device);
    let h = this.model.embed_tokens.forward(ids);
    const hidden = [h];
    for (const layer of this.model.layers as unknown as Iterable<DecoderLayer>) {
      h = layer.forward(h, cos, sin);
      hidden.push(h);
    }
    h = this.model.norm.forward(h);
    const logits = this.lm_head ? this.lm_head.forward(h) : F.linear(h, this.model.embed_tokens.weight);
    return { hidden, logits };
  }

  /** ids [B, T] -> logits [B, T, V]; with targets also the mean cross-entropy. */
  override forward(ids: Tensor, targets?: Tensor): { logits: Tensor; loss?: Tensor } {
    const { logits } = this.forwardHidden(ids);
    if (!targets) return { logits };
    // the loss in float32 even when autocast produced half-precision logits (as HF does)
    return { logits, loss: F.crossEntropy(logits.float().reshape(-1, this.config.vocab_size), targets.reshape(-1)) };
  }
}

/** Write a Hugging Face model folder: config.json, generation_config.json, model.safetensors(+index). */
export async function savePretrained(model: CausalLM, dir: string, extra: Record<string, unknown> = {}): Promise<string[]> {
  const { mkdirSync, writeFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  mkdirSync(dir, { recursive: true });
  const sd: Record<string, Tensor> = {};
  for (const [k, v] of model.stateDict()) sd[k] = v;
  const { files } = await torch.safetensors.saveSharded(sd, dir, { metadata: { format: "pt" } });
  writeFileSync(join(dir, "config.json"), JSON.stringify({ ...model.config, ...extra, transformers_version: "4.57.6" }, null, 2) + "\n");
  const gen = { _from_model_config: true, bos_token_id: model.config.bos_token_id ?? null, eos_token_id: model.config.eos_token_id ?? null };
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify(gen, null, 2) + "\n");
  return ["config.json", "generation_config.json", ...files];
}

/** Build the model from a folder's config.json and load its weights (sharded or not). */
export async function fromPretrained(dir: string): Promise<CausalLM> {
  const { readFileSync } = await import("node:fs");
  const { join } = await import("node:path");
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as HFConfig;
  const m = new CausalLM(config);
  const sd = await torch.safetensors.loadSharded(dir);
  if (config.tie_word_embeddings) delete sd["lm_head.weight"];
  m.loadStateDict(sd);
  return m;
}
