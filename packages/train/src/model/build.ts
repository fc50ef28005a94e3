// Model from the job config: the torchts/transformers class of a flavor's (or a folder's) HF config,
// initialised as TorchTitan initialises Llama 3 (the transformers classes allocate zeros: loading a
// checkpoint replaces them), plus the parameter counts and FLOPs per token MFU is computed from.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "torchts";
import { LlamaForCausalLM, Qwen3ForCausalLM, parseConfig, type PretrainedConfig } from "torchts/transformers";
import { ConfigError } from "../config/parse.js";
import { flavorConfig } from "./flavors.js";

export type CausalLM = LlamaForCausalLM;

/** The HF config.json object of model.name / model.flavor (or hf_assets_path/config.json). */
export function hfConfigFor(name: "llama3" | "qwen3", flavor: string, hfAssetsPath: string): Record<string, unknown> {
  if (flavor !== "hf") {
    try {
      return flavorConfig(name, flavor);
    } catch (e) {
      throw new ConfigError((e as Error).message);
    }
  }
  const file = join(hfAssetsPath, "config.json");
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError(`model.hf_assets_path: cannot read ${file}: ${(e as Error).message}`);
  }
  const want = name === "llama3" ? "llama" : "qwen3";
  if (raw.model_type !== want) throw new ConfigError(`${file}: model_type is '${String(raw.model_type)}', but model.name = '${name}' needs '${want}'`);
  return raw;
}

/** A model with zero weights (call initWeights, or load a checkpoint). */
export function createModel(cfg: PretrainedConfig, device = "cpu"): CausalLM {
  const m = cfg.modelType === "qwen3" ? new Qwen3ForCausalLM(cfg, { device }) : new LlamaForCausalLM(cfg, { device });
  return m;
}

/**
 * TorchTitan's Llama init (depth-scaled): embeddings N(0, 1); q/k/v, gate (w1) trunc-normal std 0.02;
 * o_proj and down/up (wo, w2, w3) std 0.02 / sqrt(2 (layer + 1)); the output layer trunc-normal std
 * dim^-0.5 cut at 3 std; norms 1. Deterministic in `seed` (its own generator).
 */
export function initWeights(model: CausalLM, seed: number): void {
  const g = new torch.Generator().manualSeed(seed);
  const { init } = torch.nn;
  const dim = model.config.hiddenSize;
  torch.noGrad(() => {
    for (const [name, p] of model.namedParameters()) {
      const layer = /\.layers\.(\d+)\./.exec(name);
      const depthStd = layer ? 0.02 / Math.sqrt(2 * (Number(layer[1]) + 1)) : 0.02;
      if (name.endsWith("norm.weight")) init.ones_(p);
      else if (name.endsWith(".bias")) init.zeros_(p);
      else if (name === "model.embed_tokens.weight") init.normal_(p, 0, 1, { generator: g });
      else if (name === "lm_head.weight") {
        const std = dim ** -0.5;
        init.truncNormal_(p, 0, std, -3 * std, 3 * std, { generator: g });
      } else if (/\.(o_proj|down_proj|up_proj)\.weight$/.test(name)) init.truncNormal_(p, 0, depthStd, -2, 2, { generator: g });
      else init.truncNormal_(p, 0, 0.02, -2, 2, { generator: g });
    }
  });
  model.tieWeights();
  model.requiresGrad_(true);
}

export interface ModelCounts {
  /** Parameters (a tied embedding counted once). */
  params: number;
  /** Embedding-table parameters. */
  embedding: number;
}

/** Counts from the config alone (no allocation): what a 70B config would have. */
export function countParams(c: PretrainedConfig): ModelCounts {
  const C = c.hiddenSize;
  const q = c.numAttentionHeads * c.headDim;
  const kv = c.numKeyValueHeads * c.headDim;
  const qkv = C * (q + 2 * kv) + (c.attentionBias ? q + 2 * kv : 0);
  const o = q * C + (c.attentionBias ? C : 0);
  const qkNorm = c.modelType === "qwen3" ? 2 * c.headDim : 0;
  const mlp = 3 * C * c.intermediateSize + (c.mlpBias ? 2 * c.intermediateSize + C : 0);
  const layer = qkv + o + qkNorm + mlp + 2 * C;
  const embedding = c.vocabSize * C;
  const head = c.tieWordEmbeddings ? 0 : c.vocabSize * C;
  return { params: embedding + c.numHiddenLayers * layer + C + head, embedding };
}

/**
 * TorchTitan's FLOPs per token of a training step: 6 N + 12 L H Q T, N the parameters without the
 * embedding table (a tied table is also the output layer, a matmul, so it stays), L layers, H heads,
 * Q head dim, T sequence length (attention counted dense: the causal half and recomputation ignored).
 */
export function flopsPerToken(c: PretrainedConfig, counts: ModelCounts, seqLen: number): number {
  const n = counts.params - (c.tieWordEmbeddings ? 0 : counts.embedding);
  return 6 * n + 12 * c.numHiddenLayers * c.numAttentionHeads * c.headDim * seqLen;
}

export function buildConfig(hf: Record<string, unknown>): PretrainedConfig {
  return parseConfig(hf);
}
