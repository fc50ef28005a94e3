// Tensor parallel plans for the Hugging Face model families of torchts/transformers.
import { DistError } from "../../errors.js";
import { ColwiseParallel, RowwiseParallel, type ParallelStyle } from "./style.js";

/**
 * Llama / Qwen2 / Qwen3 (transformers' base_model_tp_plan): q/k/v and gate/up projections column-wise
 * (each rank computes a slice of the heads and of the MLP's hidden units), o and down row-wise (one
 * all-reduce each); embeddings, norms and lm_head stay whole on every rank. Pass the model's config
 * and the tensor parallel size to check the heads divide.
 */
export function llamaTpPlan(config?: { numAttentionHeads: number; numKeyValueHeads: number; intermediateSize: number }, tpSize?: number): Record<string, ParallelStyle> {
  if (config && tpSize)
    for (const [what, v] of [["numAttentionHeads", config.numAttentionHeads], ["numKeyValueHeads", config.numKeyValueHeads], ["intermediateSize", config.intermediateSize]] as const)
      if (v % tpSize !== 0) throw new DistError(`llamaTpPlan: ${what} (${v}) is not divisible by the tensor parallel size ${tpSize}`);
  const layer = "model.layers.*";
  return {
    [`${layer}.self_attn.q_proj`]: new ColwiseParallel(),
    [`${layer}.self_attn.k_proj`]: new ColwiseParallel(),
    [`${layer}.self_attn.v_proj`]: new ColwiseParallel(),
    [`${layer}.self_attn.o_proj`]: new RowwiseParallel(),
    [`${layer}.mlp.gate_proj`]: new ColwiseParallel(),
    [`${layer}.mlp.up_proj`]: new ColwiseParallel(),
    [`${layer}.mlp.down_proj`]: new RowwiseParallel(),
  };
}
