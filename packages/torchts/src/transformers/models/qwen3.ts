// Qwen3ForCausalLM: Llama with q_norm/k_norm (RMSNorm over head_dim, per head, before RoPE),
// an explicit head_dim (q_proj is [nh*head_dim, hidden]) and attention_bias on q/k/v/o.
import type { PretrainedConfig } from "../config.js";
import type { InitOpts } from "../modeling_utils.js";
import { LlamaForCausalLM } from "./llama.js";

export class Qwen3ForCausalLM extends LlamaForCausalLM {
  constructor(config: PretrainedConfig, o: InitOpts = {}) {
    super(config, o, { qkvBias: config.attentionBias, oBias: config.attentionBias, qkNorm: true });
  }
}
