// Qwen2ForCausalLM: the Llama architecture with q/k/v bias hard-coded on and o_proj bias off
// (modeling_qwen2.py), and the sliding window per layer from config.layer_types (config.ts).
import type { PretrainedConfig } from "../config.js";
import type { InitOpts } from "../modeling_utils.js";
import { LlamaForCausalLM } from "./llama.js";

export class Qwen2ForCausalLM extends LlamaForCausalLM {
  constructor(config: PretrainedConfig, o: InitOpts = {}) {
    super(config, o, { qkvBias: true, oBias: false, qkNorm: false });
  }
}
