// Shared by the transformers tests: the golden checkpoints (real transformers outputs) in fixtures/hf.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";

export const GOLDEN = ["llama_gqa", "qwen2_tied", "qwen3_qknorm", "gpt2"] as const;
export type GoldenName = (typeof GOLDEN)[number];

export interface GoldenPrompt {
  input_ids: number[];
  greedy_continuation: number[];
  full_sequence: number[];
}

export const fixtureDir = (name: string): string => fileURLToPath(new URL(`../fixtures/hf/${name}`, import.meta.url));

export function expected(name: string): { prompts: GoldenPrompt[] } {
  return JSON.parse(readFileSync(`${fixtureDir(name)}/expected.json`, "utf8"));
}

export function referenceTensors(name: string): Promise<Record<string, torch.Tensor>> {
  return torch.safetensors.loadFile(`${fixtureDir(name)}/expected_logits.safetensors`);
}

export async function maxAbsDiff(a: torch.Tensor, b: torch.Tensor): Promise<number> {
  if (a.shape.join() !== b.shape.join()) throw new Error(`shape [${a.shape}] vs [${b.shape}]`);
  return a.float().sub(b.float()).abs().max().item();
}
