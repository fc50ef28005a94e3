// The sampler: @torchts/serve's LLMEngine in process, on its own copy of the policy. Each GRPO step
// submits every prompt n times (seeded per response, so a run is reproducible) and the engine batches
// them all; after each update the trainer's weights are copied into the engine's model. The engine's
// prefix cache is keyed by a salt per weight version, so no KV computed by older weights is reused.
import { LLMEngine } from "@torchts/serve";
import * as torch from "torchts";
import type { PreTrainedTokenizer } from "torchts/transformers";
import type { CausalLM } from "../model/build.js";

export interface Rollout {
  /** Index of the prompt in the step's batch (the group). */
  group: number;
  /** Generated ids (the stop token included, when it ended the response). */
  tokens: number[];
  text: string;
  finishReason: string | null;
}

export class Sampler {
  readonly engine: LLMEngine;
  private version = 0;

  constructor(readonly model: CausalLM, tokenizer: PreTrainedTokenizer, o: { maxNumSeqs: number; maxModelLen: number }) {
    this.engine = new LLMEngine({ model, tokenizer, maxNumSeqs: o.maxNumSeqs, maxModelLen: o.maxModelLen, maxNumBatchedTokens: Math.max(512, o.maxNumSeqs * 8) });
  }

  /** Copy the trainer's weights into the engine's model (in process: a state dict load). */
  syncWeights(policy: CausalLM): void {
    torch.noGrad(() => this.model.loadStateDict(policy.stateDict()));
    this.version++;
  }

  /** n responses to each prompt; results ordered prompt by prompt. */
  async generate(prompts: number[][], n: number, o: { temperature: number; topP: number; maxTokens: number; seed: number }): Promise<Rollout[]> {
    const jobs: Promise<Rollout>[] = [];
    prompts.forEach((ids, group) => {
      for (let j = 0; j < n; j++) {
        const seed = (o.seed + group * n + j) >>> 0;
        jobs.push(
          (async () => {
            const tokens: number[] = [];
            let text = "";
            let finishReason: string | null = null;
            const it = this.engine.generate(ids, { temperature: o.temperature, topP: o.topP, maxTokens: o.maxTokens, seed, cacheSalt: `policy-v${this.version}` });
            for await (const out of it) {
              tokens.push(...out.tokenIds);
              text += out.text;
              finishReason = out.finishReason;
            }
            return { group, tokens, text, finishReason };
          })(),
        );
      }
    });
    return Promise.all(jobs);
  }

  close(): Promise<void> {
    return this.engine.close({ abortAll: true });
  }
}
