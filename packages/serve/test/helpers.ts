// Shared by the engine and server tests: a model folder built from torchts's tiny HF fixtures
// (the random-weight llama_gqa checkpoint: 4 layers, GQA, vocab 256) and the byte-level tokenizer,
// whose tokenizer_config.json carries a small chat template.
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AutoModelForCausalLM, AutoTokenizer, type PreTrainedModel, type PreTrainedTokenizer } from "torchts/transformers";

const HF = new URL("../../torchts/test/fixtures/hf/", import.meta.url).pathname;

/** A model folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json) in a temp dir. */
export function modelDir(opts: { maxPositionEmbeddings?: number; chatTemplate?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "torchts-serve-"));
  const cfg = JSON.parse(readFileSync(join(HF, "llama_gqa/config.json"), "utf8")) as Record<string, unknown>;
  if (opts.maxPositionEmbeddings) cfg.max_position_embeddings = opts.maxPositionEmbeddings;
  writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
  copyFileSync(join(HF, "llama_gqa/model.safetensors"), join(dir, "model.safetensors"));
  copyFileSync(join(HF, "byte_tokenizer/tokenizer.json"), join(dir, "tokenizer.json"));
  const tc = JSON.parse(readFileSync(join(HF, "byte_tokenizer/tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  if (opts.chatTemplate === false) delete tc.chat_template;
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(tc));
  return dir;
}

export async function load(dir: string): Promise<{ model: PreTrainedModel; tokenizer: PreTrainedTokenizer }> {
  const model = await AutoModelForCausalLM.fromPretrained(dir, { deviceMap: "cpu" });
  const tokenizer = await AutoTokenizer.fromPretrained(dir);
  return { model, tokenizer };
}

/** Greedy new tokens of torchts's in-process generate(), the stop token dropped, and their text. */
export async function reference(model: PreTrainedModel, tokenizer: PreTrainedTokenizer, ids: number[], maxTokens: number): Promise<{ tokens: number[]; text: string }> {
  const out = await model.generate(ids, { maxNewTokens: maxTokens });
  const tokens = out.newTokens[0]!;
  const eos = new Set(model.config.eosTokenId);
  const textIds = tokens.length && eos.has(tokens[tokens.length - 1]!) ? tokens.slice(0, -1) : tokens;
  return { tokens, text: tokenizer.decode(textIds, { skipSpecialTokens: true, cleanUpTokenizationSpaces: false }) };
}
