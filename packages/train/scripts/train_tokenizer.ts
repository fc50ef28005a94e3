// Builds assets/tokenizer (the debug flavors' tokenizer): a byte-level BPE in Hugging Face's
// tokenizer.json format, learned from the shipped Tiny Shakespeare, with two specials
// (<|begin_of_text|> = 0, <|end_of_text|> = 1) and DEBUG_VOCAB_SIZE tokens in all. Words are split
// with GPT-2's pre-tokenizer pattern (the ByteLevel pre-tokenizer's), then the most frequent adjacent
// pair is merged until the vocabulary is full (ties: the pair first seen in the word list).
//   node --import tsx scripts/train_tokenizer.ts
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { DEBUG_VOCAB_SIZE } from "../src/model/flavors.js";

const SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>"];
const PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

// GPT-2's reversible byte -> printable-character table
function byteChars(): string[] {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++)
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  const out = new Array<string>(256);
  bs.forEach((b, i) => (out[b] = String.fromCodePoint(cs[i]!)));
  return out;
}

const text = readFileSync(new URL("../assets/tinyshakespeare.txt", import.meta.url), "utf8");
const chars = byteChars();
const enc = new TextEncoder();
const counts = new Map<string, number>();
for (const m of text.matchAll(PATTERN)) {
  const w = Array.from(enc.encode(m[0]), (b) => chars[b]!).join("");
  counts.set(w, (counts.get(w) ?? 0) + 1);
}
const words = [...counts].map(([w, c]) => ({ syms: [...w], count: c }));

const vocab: Record<string, number> = {};
SPECIALS.forEach((s, i) => (vocab[s] = i));
for (let b = 0; b < 256; b++) vocab[chars[b]!] = SPECIALS.length + b;
const merges: [string, string][] = [];
while (Object.keys(vocab).length < DEBUG_VOCAB_SIZE) {
  const pairs = new Map<string, number>();
  for (const w of words)
    for (let i = 0; i + 1 < w.syms.length; i++) {
      const k = `${w.syms[i]} ${w.syms[i + 1]}`;
      pairs.set(k, (pairs.get(k) ?? 0) + w.count);
    }
  let best = "";
  let bestC = 0;
  for (const [k, c] of pairs) if (c > bestC) [best, bestC] = [k, c];
  if (!bestC) break;
  const [a, b] = best.split(" ") as [string, string];
  merges.push([a, b]);
  vocab[a + b] = Object.keys(vocab).length;
  for (const w of words)
    for (let i = 0; i + 1 < w.syms.length; i++)
      if (w.syms[i] === a && w.syms[i + 1] === b) w.syms.splice(i, 2, a + b);
}

const tokenizer = {
  version: "1.0",
  truncation: null,
  padding: null,
  added_tokens: SPECIALS.map((s, i) => ({ id: i, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
  normalizer: null,
  pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: null,
  decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
};
const dir = new URL("../assets/tokenizer/", import.meta.url);
mkdirSync(dir, { recursive: true });
writeFileSync(new URL("tokenizer.json", dir), JSON.stringify(tokenizer) + "\n");
const config = { tokenizer_class: "PreTrainedTokenizerFast", bos_token: SPECIALS[0], eos_token: SPECIALS[1], pad_token: null, model_max_length: 4096, clean_up_tokenization_spaces: false };
writeFileSync(new URL("tokenizer_config.json", dir), JSON.stringify(config, null, 1) + "\n");
console.log(`${Object.keys(vocab).length} tokens (${merges.length} merges) from ${words.length} distinct words`);
