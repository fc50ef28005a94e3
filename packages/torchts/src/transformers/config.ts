// config.json -> a normalized config, reading every field the way transformers' config classes
// do: per-architecture defaults, GPT-2's attribute_map aliases, head_dim fallback, the v4
// top-level rope_theta / rope_scaling and the v5 rope_parameters, and the Qwen sliding-window rules.

export type LayerType = "full_attention" | "sliding_attention";

export interface RopeParameters {
  ropeType: string; // "default" | "linear" | "llama3"
  ropeTheta: number;
  factor?: number;
  lowFreqFactor?: number;
  highFreqFactor?: number;
  originalMaxPositionEmbeddings?: number;
}

export interface PretrainedConfig {
  modelType: string;
  architectures: string[];
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  numKeyValueHeads: number;
  headDim: number;
  maxPositionEmbeddings: number;
  hiddenAct: string;
  /** RMSNorm eps (Llama family) or LayerNorm eps (GPT-2). */
  normEps: number;
  tieWordEmbeddings: boolean;
  attentionBias: boolean;
  mlpBias: boolean;
  rope: RopeParameters | null;
  /** null: no sliding window anywhere. */
  slidingWindow: number | null;
  layerTypes: LayerType[];
  bosTokenId: number | null;
  eosTokenId: number[];
  padTokenId: number | null;
  torchDtype: string | null;
  /** config.json as read. */
  raw: Record<string, unknown>;
}

type Raw = Record<string, unknown>;

// transformers' __init__ defaults for the fields we read (configuration_<arch>.py).
const DEFAULTS: Record<string, Raw> = {
  llama: {
    vocab_size: 32000, hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32, num_attention_heads: 32,
    hidden_act: "silu", max_position_embeddings: 2048, rms_norm_eps: 1e-6, tie_word_embeddings: false,
    rope_theta: 10000.0, attention_bias: false, mlp_bias: false, bos_token_id: 1, eos_token_id: 2, pad_token_id: null,
  },
  mistral: {
    vocab_size: 32000, hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32,
    num_key_value_heads: 8, hidden_act: "silu", max_position_embeddings: 4096 * 32, rms_norm_eps: 1e-6,
    tie_word_embeddings: false, rope_theta: 10000.0, sliding_window: 4096, bos_token_id: 1, eos_token_id: 2, pad_token_id: null,
  },
  qwen2: {
    vocab_size: 151936, hidden_size: 4096, intermediate_size: 22016, num_hidden_layers: 32, num_attention_heads: 32,
    num_key_value_heads: 32, hidden_act: "silu", max_position_embeddings: 32768, rms_norm_eps: 1e-6,
    tie_word_embeddings: false, rope_theta: 10000.0, use_sliding_window: false, sliding_window: 4096,
    max_window_layers: 28, bos_token_id: null, eos_token_id: null, pad_token_id: null,
  },
  qwen3: {
    vocab_size: 151936, hidden_size: 4096, intermediate_size: 22016, num_hidden_layers: 32, num_attention_heads: 32,
    num_key_value_heads: 32, head_dim: 128, hidden_act: "silu", max_position_embeddings: 32768, rms_norm_eps: 1e-6,
    tie_word_embeddings: false, rope_theta: 10000.0, attention_bias: false, use_sliding_window: false,
    sliding_window: 4096, max_window_layers: 28, bos_token_id: null, eos_token_id: null, pad_token_id: null,
  },
  gpt2: {
    vocab_size: 50257, n_positions: 1024, n_embd: 768, n_layer: 12, n_head: 12, n_inner: null,
    activation_function: "gelu_new", layer_norm_epsilon: 1e-5, tie_word_embeddings: true, bos_token_id: 50256,
    eos_token_id: 50256, pad_token_id: null,
  },
};

export const SUPPORTED_MODEL_TYPES = Object.keys(DEFAULTS);

function num(raw: Raw, key: string, modelType: string): number {
  const v = raw[key];
  if (typeof v !== "number" || !Number.isFinite(v))
    throw new Error(`config.json (${modelType}): field '${key}' must be a number, got ${JSON.stringify(v)}`);
  return v;
}
const idList = (v: unknown): number[] => (v === null || v === undefined ? [] : Array.isArray(v) ? v.map(Number) : [Number(v)]);

function parseRope(raw: Raw, modelType: string): RopeParameters {
  // v5 writes rope_parameters; v4 writes top-level rope_theta and an optional rope_scaling dict.
  const params = (raw.rope_parameters ?? raw.rope_scaling ?? null) as Raw | null;
  const theta = (params && typeof params.rope_theta === "number" ? params.rope_theta : raw.rope_theta) as number;
  const type = String(params?.rope_type ?? params?.type ?? "default");
  const rope: RopeParameters = { ropeType: type, ropeTheta: theta };
  if (typeof theta !== "number") throw new Error(`config.json (${modelType}): rope_theta must be a number, got ${JSON.stringify(theta)}`);
  if (type === "default") return rope;
  if (type === "linear") return { ...rope, factor: num(params!, "factor", modelType) };
  if (type === "llama3")
    return {
      ...rope,
      factor: num(params!, "factor", modelType),
      lowFreqFactor: num(params!, "low_freq_factor", modelType),
      highFreqFactor: num(params!, "high_freq_factor", modelType),
      originalMaxPositionEmbeddings: num(params!, "original_max_position_embeddings", modelType),
    };
  throw new Error(`config.json (${modelType}): rope type '${type}' is not supported (supported: default, linear, llama3)`);
}

/** Normalize a parsed config.json. */
export function parseConfig(json: Raw): PretrainedConfig {
  const modelType = String(json.model_type ?? "");
  const defaults = DEFAULTS[modelType];
  if (!defaults)
    throw new Error(`Unrecognized model_type '${modelType}' in config.json: supported model types are ${SUPPORTED_MODEL_TYPES.join(", ")}`);
  const raw: Raw = { ...defaults };
  for (const [k, v] of Object.entries(json)) if (v !== undefined) raw[k] = v;
  const architectures = Array.isArray(json.architectures) ? json.architectures.map(String) : [];
  const common = {
    modelType,
    architectures,
    vocabSize: num(raw, "vocab_size", modelType),
    tieWordEmbeddings: raw.tie_word_embeddings !== false,
    bosTokenId: (raw.bos_token_id ?? null) as number | null,
    eosTokenId: idList(raw.eos_token_id),
    padTokenId: (raw.pad_token_id ?? null) as number | null,
    torchDtype: (raw.torch_dtype ?? raw.dtype ?? null) as string | null,
    raw: json,
  };
  if (modelType === "gpt2") {
    // attribute_map: hidden_size=n_embd, num_attention_heads=n_head, num_hidden_layers=n_layer, ...
    const hidden = num(raw, "n_embd", modelType);
    const heads = num(raw, "n_head", modelType);
    const layers = num(raw, "n_layer", modelType);
    return {
      ...common,
      hiddenSize: hidden,
      intermediateSize: (raw.n_inner as number | null) ?? 4 * hidden,
      numHiddenLayers: layers,
      numAttentionHeads: heads,
      numKeyValueHeads: heads,
      headDim: hidden / heads,
      maxPositionEmbeddings: num(raw, "n_positions", modelType),
      hiddenAct: String(raw.activation_function),
      normEps: num(raw, "layer_norm_epsilon", modelType),
      attentionBias: true,
      mlpBias: true,
      rope: null,
      slidingWindow: null,
      layerTypes: Array.from({ length: layers }, () => "full_attention" as const),
    };
  }
  const hidden = num(raw, "hidden_size", modelType);
  const heads = num(raw, "num_attention_heads", modelType);
  const layers = num(raw, "num_hidden_layers", modelType);
  // head_dim: `getattr(config, "head_dim", None) or hidden_size // num_attention_heads`
  const headDim = (raw.head_dim as number | null | undefined) || Math.floor(hidden / heads);
  let slidingWindow = (raw.sliding_window ?? null) as number | null;
  let layerTypes: LayerType[];
  if (modelType === "qwen2" || modelType === "qwen3") {
    // Qwen2Config/Qwen3Config: sliding_window only when use_sliding_window, and then only for layers >= max_window_layers.
    if (!raw.use_sliding_window) slidingWindow = null;
    const mwl = num(raw, "max_window_layers", modelType);
    layerTypes = Array.isArray(raw.layer_types)
      ? (raw.layer_types as LayerType[])
      : Array.from({ length: layers }, (_, i) => (slidingWindow !== null && i >= mwl ? "sliding_attention" : "full_attention"));
  } else {
    // Llama has no sliding window; Mistral applies config.sliding_window to every layer.
    if (modelType === "llama") slidingWindow = null;
    layerTypes = Array.from({ length: layers }, () => (slidingWindow !== null ? "sliding_attention" : "full_attention"));
  }
  if (layerTypes.length !== layers)
    throw new Error(`config.json (${modelType}): layer_types has ${layerTypes.length} entries but num_hidden_layers is ${layers}`);
  return {
    ...common,
    hiddenSize: hidden,
    intermediateSize: num(raw, "intermediate_size", modelType),
    numHiddenLayers: layers,
    numAttentionHeads: heads,
    numKeyValueHeads: (raw.num_key_value_heads as number | null | undefined) ?? heads,
    headDim,
    maxPositionEmbeddings: num(raw, "max_position_embeddings", modelType),
    hiddenAct: String(raw.hidden_act),
    normEps: num(raw, "rms_norm_eps", modelType),
    // Qwen2 hard-codes q/k/v bias=True (o_proj False); the model class applies that.
    attentionBias: raw.attention_bias === true,
    mlpBias: raw.mlp_bias === true,
    rope: parseRope(raw, modelType),
    slidingWindow,
    layerTypes,
  };
}

/** AutoConfig.fromPretrained(dir): reads dir/config.json. */
export const AutoConfig = {
  async fromPretrained(dir: string): Promise<PretrainedConfig> {
    const fs = await import("node:fs/promises");
    const path = await import("node:path");
    const file = path.join(dir, "config.json");
    let text: string;
    try {
      text = await fs.readFile(file, "utf8");
    } catch (e) {
      throw new Error(`AutoConfig.fromPretrained: cannot read ${file}: ${(e as Error).message}`, { cause: e });
    }
    return parseConfig(JSON.parse(text) as Raw);
  },
};
