// Shared by the transformers tests (and the quantized kernels' tests): the golden checkpoints (real
// transformers outputs) in fixtures/hf, and a float64 linear for checking the quantized products.
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

/** x [..., K] @ w[N, K]^T (+ b) in float64 on the host: the reference of the quantized linears' kernels. */
export async function linearF64(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | null): Promise<Float64Array> {
  const K = x.shape[x.ndim - 1]!;
  const N = w.shape[0]!;
  const xh = (await x.contiguous().data()) as Float32Array, wh = (await w.data()) as Float32Array;
  const bh = b ? ((await b.data()) as Float32Array) : null;
  const M = xh.length / K;
  const r = new Float64Array(M * N);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let s = bh ? bh[j]! : 0;
      for (let k = 0; k < K; k++) s += xh[i * K + k]! * wh[j * K + k]!;
      r[i * N + j] = s;
    }
  return r;
}
