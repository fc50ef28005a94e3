// A Hugging Face causal LM as an exportable module: (input_ids, attention_mask) -> logits, the
// inputs and output of Hugging Face's own ONNX exports (the mask makes the causal mask and the
// position ids tensor ops, so batch and sequence can be dynamic).
import { Module } from "../nn/module.js";
import type { Tensor } from "../tensor.js";

interface CausalLM {
  forward(inputIds: Tensor, opts: { attentionMask: Tensor }): { logits: Tensor };
}

export class CausalLMLogits extends Module {
  constructor(readonly lm: Module) {
    super();
  }
  override forward(inputIds: Tensor, attentionMask: Tensor): Tensor {
    return (this.lm as unknown as CausalLM).forward(inputIds, { attentionMask }).logits;
  }
}
