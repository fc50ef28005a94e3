// Which models `torchts serve --tensor-parallel-size N` can split, and the split itself: every rank
// loads the checkpoint, then parallelizeModule keeps its 1/N of the attention heads (q/k/v column-wise,
// o row-wise) and of the MLP's hidden units (gate/up column-wise, down row-wise); embeddings, norms
// and lm_head stay whole, so every rank computes the same logits after the last all-reduce.
import * as dist from "torchts/distributed";
import { LlamaForCausalLM, modelClassFor, type PreTrainedModel, type PretrainedConfig } from "torchts/transformers";

/** Why `config` cannot run at tensor parallel size `size` (null: it can). */
export function tensorParallelError(config: PretrainedConfig, size: number): string | null {
  if (!Number.isInteger(size) || size < 1) return `the tensor parallel size must be a positive integer, got ${size}`;
  if (size === 1) return null;
  let cls: unknown;
  try {
    cls = modelClassFor(config);
  } catch (e) {
    return (e as Error).message;
  }
  if (cls !== LlamaForCausalLM && !((cls as { prototype?: unknown }).prototype instanceof LlamaForCausalLM))
    return `tensor parallelism supports the Llama, Mistral, Qwen2 and Qwen3 architectures, not '${config.architectures[0] ?? config.modelType}'`;
  const sizes: [string, number][] = [
    ["attention heads (num_attention_heads)", config.numAttentionHeads],
    ["key/value heads (num_key_value_heads)", config.numKeyValueHeads],
    ["MLP units (intermediate_size)", config.intermediateSize],
  ];
  for (const [what, v] of sizes) if (v % size !== 0) return `the model's ${v} ${what} are not divisible by the tensor parallel size ${size}`;
  return null;
}

/** Split `model` over the default process group (every rank calls it, in the same order). */
export function shardModel(model: PreTrainedModel): void {
  const n = dist.getWorldSize();
  const why = tensorParallelError(model.config, n);
  if (why) throw new Error(why);
  const mesh = dist.initDeviceMesh("cpu", [n]);
  dist.tensor.parallel.parallelizeModule(model, mesh, dist.tensor.parallel.llamaTpPlan(model.config, n));
}
