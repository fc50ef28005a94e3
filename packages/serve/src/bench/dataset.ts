// vLLM's "random" dataset: every prompt is prefixLen shared tokens (one random draw for all prompts,
// so a prefix cache can reuse them) followed by inputLen tokens walking the vocabulary from a random
// offset: allowed[(offset + i + k) % allowed.length] for prompt i, position k. Special tokens are
// never drawn. /v1/completions gets the ids themselves as a token-id prompt, so the server sees
// exactly prefixLen + inputLen tokens; chat needs text, which is the ids decoded, re-encoded and
// trimmed or padded until it encodes back to that length (a decode/encode round trip can merge or
// split tokens).
import type { PreTrainedTokenizer } from "torchts/transformers";
import type { SeededRandom } from "./rng.js";

export interface SampleRequest {
  /** Token ids (for /v1/completions) or text (for chat). */
  prompt: number[] | string;
  /** The prompt's length in tokens, as this client's tokenizer counts it. */
  promptLen: number;
  /** max_tokens for this request. */
  outputLen: number;
}

export interface RandomDatasetOptions {
  numPrompts: number;
  inputLen: number;
  outputLen: number;
  prefixLen: number;
  /** Make text prompts (chat) rather than token ids. */
  text: boolean;
}

/** token -> id, added tokens included (typed here: the tokenizers package's types may not resolve from this package). */
const vocabOf = (tokenizer: PreTrainedTokenizer): Map<string, number> => tokenizer.tokenizer.get_vocab(true) as Map<string, number>;

/** The vocabulary's ids less the special tokens (sorted), the ones random prompts draw from. */
export function allowedTokenIds(tokenizer: PreTrainedTokenizer): number[] {
  const special = new Set<number>();
  const added = (tokenizer.tokenizerJson.added_tokens ?? []) as { id: number; special?: boolean }[];
  for (const t of added) if (t.special) special.add(t.id);
  for (const s of Object.values(tokenizer.specialTokens)) {
    const id = s === null ? undefined : tokenizer.tokenToId(s);
    if (id !== undefined) special.add(id);
  }
  const ids = [...new Set(vocabOf(tokenizer).values())].filter((id) => !special.has(id));
  return ids.sort((a, b) => a - b);
}

/** Text that encodes (without special tokens) to `target` tokens where ten rounds can reach it, and its length. */
function textOfLength(tokenizer: PreTrainedTokenizer, ids: number[], target: number, allowed: number[], rng: SeededRandom): { text: string; tokens: number } {
  let text = tokenizer.decode(ids);
  for (let round = 0; ; round++) {
    const enc = tokenizer.encode(text, { addSpecialTokens: false });
    if (enc.length === target || round === 10) return { text, tokens: enc.length };
    const next = enc.length > target ? enc.slice(0, target) : enc.concat(Array.from({ length: target - enc.length }, () => allowed[rng.int(0, allowed.length - 1)]!));
    text = tokenizer.decode(next);
  }
}

export function randomRequests(tokenizer: PreTrainedTokenizer, opts: RandomDatasetOptions, rng: SeededRandom): SampleRequest[] {
  const allowed = allowedTokenIds(tokenizer);
  if (allowed.length === 0) throw new Error("the tokenizer has no non-special tokens to draw prompts from");
  const prefix = Array.from({ length: opts.prefixLen }, () => allowed[rng.int(0, allowed.length - 1)]!);
  const vocab = vocabOf(tokenizer).size;
  const offsets = Array.from({ length: opts.numPrompts }, () => rng.int(0, vocab - 1));
  return offsets.map((offset, i) => {
    const ids = prefix.concat(Array.from({ length: opts.inputLen }, (_, k) => allowed[(offset + i + k) % allowed.length]!));
    if (!opts.text) return { prompt: ids, promptLen: ids.length, outputLen: opts.outputLen };
    const { text, tokens } = textOfLength(tokenizer, ids, ids.length, allowed, rng);
    return { prompt: text, promptLen: tokens, outputLen: opts.outputLen };
  });
}
