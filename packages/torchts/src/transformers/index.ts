// torchts/transformers: Hugging Face causal LMs (Llama/Mistral, Qwen2, Qwen3, GPT-2) on torchts.
export { AutoConfig, parseConfig, type PretrainedConfig, type RopeParameters, type LayerType } from "./config.js";
export { AutoModelForCausalLM, MODEL_CLASSES, modelClassFor, type FromPretrainedOptions } from "./auto.js";
export { PreTrainedModel, type ForwardOptions, type CausalLMOutput, type InitOpts } from "./modeling_utils.js";
export { LlamaForCausalLM } from "./models/llama.js";
export { Qwen2ForCausalLM } from "./models/qwen2.js";
export { Qwen3ForCausalLM } from "./models/qwen3.js";
export { GPT2LMHeadModel, Conv1D } from "./models/gpt2.js";
export { KVCache, type KVCacheOptions } from "./kv_cache.js";
export { PagedKVCache, pagedBatch, type PagedKVCacheOptions, type PagedBatch, type PagedSequence } from "./paged_kv_cache.js";
// the seeded host PRNG generate() uses (a serving engine seeds one per request, so a seed gives generate({ seed })'s draws)
export { mulberry32 } from "../utils/prng.js";
export { generate, chooseToken, type GenerateOptions, type GenerateOutput, type StreamEvent } from "./generate.js";
export { Checkpoint } from "./weights.js";
export { AutoTokenizer, PreTrainedTokenizer, type ChatMessage, type ApplyChatTemplateOptions } from "./tokenizer.js";
export { quantize, quantizeWeight, Int8Linear, Int4Linear, type QuantizeOptions } from "./quantize.js";
export { toGGUF, saveGGUF, loadGGUF, parseGGUF, ggufConfig, decodeGGUFTensor, quantizeQ8_0, quantizeQ4_0, GGML_TYPE, type GGUFFile, type GGUFTensorInfo, type WriteGGUFOptions } from "./gguf.js";
