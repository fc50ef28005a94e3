// The ~100M-parameter Llama of the decode benchmarks (llama.ts, profile_decode.ts,
// transformersjs.ts): one config and one seeded N(0, 0.02) initialization, so every script and
// every peer (llama.cpp through the GGUF torchts writes, transformers.js through the ONNX export)
// runs the very same weights.
import * as torch from "../../packages/torchts/src/index.js";
import { LlamaForCausalLM, parseConfig } from "../../packages/torchts/src/transformers/index.js";

export const config = parseConfig({
  model_type: "llama", architectures: ["LlamaForCausalLM"], vocab_size: 16000, hidden_size: 768, intermediate_size: 2048,
  num_hidden_layers: 12, num_attention_heads: 12, num_key_value_heads: 4, max_position_embeddings: 1024,
  rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false, bos_token_id: 1, eos_token_id: 2,
});

export function buildModel(): LlamaForCausalLM {
  torch.manualSeed(0);
  const m = new LlamaForCausalLM(config);
  torch.noGrad(() => {
    for (const [name, p] of m.namedParameters()) {
      if (name.endsWith("norm.weight")) p.fill_(1);
      else p.copy_(torch.randn(p.shape).mul(0.02));
    }
  });
  return m.eval();
}
