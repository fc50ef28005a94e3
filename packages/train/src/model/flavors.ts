// Named model sizes ("flavors", as TorchTitan calls them) as Hugging Face config.json objects, so a
// flavor builds the same torchts/transformers class a downloaded checkpoint does and a trained model
// saves as a folder transformers (and `torchts serve`) can load. The debug flavors are small enough to
// train on a laptop cpu; their vocabulary is the built-in debug tokenizer's.

export const DEBUG_VOCAB_SIZE = 2048;

type HF = Record<string, unknown>;

// Llama 3.1's long-context RoPE (rope_type "llama3"), shared by the 8B/70B/405B configs
const LLAMA31_ROPE = { rope_type: "llama3", factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192 };

function llama(hidden: number, layers: number, heads: number, kvHeads: number, intermediate: number, vocab: number, extra: HF = {}): HF {
  return {
    architectures: ["LlamaForCausalLM"], model_type: "llama", hidden_size: hidden, num_hidden_layers: layers,
    num_attention_heads: heads, num_key_value_heads: kvHeads, intermediate_size: intermediate, vocab_size: vocab,
    hidden_act: "silu", rms_norm_eps: 1e-5, rope_theta: 500000.0, tie_word_embeddings: false, attention_bias: false,
    mlp_bias: false, max_position_embeddings: 131072, rope_scaling: LLAMA31_ROPE, bos_token_id: 128000, eos_token_id: 128001,
    ...extra,
  };
}

function qwen3(hidden: number, layers: number, heads: number, kvHeads: number, intermediate: number, tied: boolean, extra: HF = {}): HF {
  return {
    architectures: ["Qwen3ForCausalLM"], model_type: "qwen3", hidden_size: hidden, num_hidden_layers: layers,
    num_attention_heads: heads, num_key_value_heads: kvHeads, head_dim: 128, intermediate_size: intermediate,
    vocab_size: 151936, hidden_act: "silu", rms_norm_eps: 1e-6, rope_theta: 1000000.0, tie_word_embeddings: tied,
    attention_bias: false, max_position_embeddings: 40960, bos_token_id: 151643, eos_token_id: 151645, ...extra,
  };
}

// debug sizes: token ids of the debug tokenizer; bos/eos are its specials (ids 0 and 1)
const DEBUG = { vocab_size: DEBUG_VOCAB_SIZE, bos_token_id: 0, eos_token_id: 1, max_position_embeddings: 4096 };

export const FLAVORS: Record<"llama3" | "qwen3", Record<string, HF>> = {
  llama3: {
    debugmodel: llama(256, 4, 8, 4, 768, DEBUG_VOCAB_SIZE, { ...DEBUG, rope_scaling: null }),
    // for tests and CI: seconds per hundred steps
    tiny: llama(64, 2, 4, 2, 192, DEBUG_VOCAB_SIZE, { ...DEBUG, rope_scaling: null }),
    "8B": llama(4096, 32, 32, 8, 14336, 128256),
    "70B": llama(8192, 80, 64, 8, 28672, 128256),
    "405B": llama(16384, 126, 128, 8, 53248, 128256),
  },
  qwen3: {
    debugmodel: qwen3(256, 4, 8, 4, 768, false, { ...DEBUG, head_dim: 32 }),
    tiny: qwen3(64, 2, 4, 2, 192, false, { ...DEBUG, head_dim: 16 }),
    "0.6B": qwen3(1024, 28, 16, 8, 3072, true),
    "1.7B": qwen3(2048, 28, 16, 8, 6144, true),
    "4B": qwen3(2560, 36, 32, 8, 9728, true),
    "8B": qwen3(4096, 36, 32, 8, 12288, false),
    "14B": qwen3(5120, 40, 40, 8, 17408, false),
    "32B": qwen3(5120, 64, 64, 8, 25600, false),
  },
};

/** The HF config of `name`'s `flavor`, or an error naming the flavors there are. */
export function flavorConfig(name: "llama3" | "qwen3", flavor: string): HF {
  const f = FLAVORS[name][flavor];
  if (!f) throw new Error(`model.flavor: '${flavor}' is not a ${name} flavor (${Object.keys(FLAVORS[name]).join(", ")}, or 'hf')`);
  return structuredClone(f);
}
