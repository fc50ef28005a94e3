// How long structured output's mask() takes per decoding step over a 150k-token vocabulary (the
// size of Qwen2's), and how long the vocabulary index takes to build once per tokenizer.
//
//   cd packages/serve && node --import tsx bench/structured_mask.ts [vocabSize=150000] [steps=300]   (from here, so "torchts" maps to its sources)
//
// The vocabulary is synthetic but shaped like a byte-level BPE one: all 256 bytes, then words with
// and without a leading space, capitalised, digit runs, punctuation runs (JSON's among them),
// whitespace runs with newlines, whole CJK characters and CJK characters cut inside their UTF-8
// bytes. Each schema is decoded from random scores; the table gives mask() per step by the kind of
// state it was in (the string fast path or the trie walk).
import { schemaGrammar, jsonObjectGrammar } from "../src/structured/grammar.js";
import { JsonConstraint } from "../src/structured/json_constraint.js";
import { plainStringTops } from "../src/structured/automaton.js";
import { buildVocab } from "../src/structured/vocab.js";
import { mulberry32 } from "torchts/transformers";

const V = Number(process.argv[2] ?? 150_000);
const STEPS = Number(process.argv[3] ?? 300);

const rng = mulberry32; // torchts's seeded host PRNG

function syntheticVocab(size: number): (Uint8Array | null)[] {
  const r = rng(1);
  const enc = new TextEncoder();
  const letters = "etaoinshrdlcumwfgypbvkjxqz";
  const punct = `{}[]":,.;!?()-_'/\\<>=+*&%$#@`;
  const seen = new Set<string>();
  const out: (Uint8Array | null)[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  const add = (s: Uint8Array) => {
    const k = Buffer.from(s).toString("latin1");
    if (!seen.has(k) && s.length > 1) {
      seen.add(k);
      out.push(s);
    }
  };
  while (out.length < size - 20) {
    const kind = r();
    if (kind < 0.6) {
      let w = "";
      const n = 2 + Math.floor(r() * r() * 12);
      for (let i = 0; i < n; i++) w += letters[Math.floor(r() * r() * letters.length)];
      if (r() < 0.3) w = w[0]!.toUpperCase() + w.slice(1);
      add(enc.encode(r() < 0.6 ? " " + w : w));
    } else if (kind < 0.7) add(enc.encode(String(Math.floor(r() * 1000))));
    else if (kind < 0.8) {
      let p = "";
      const n = 2 + Math.floor(r() * 3);
      for (let i = 0; i < n; i++) p += punct[Math.floor(r() * punct.length)];
      add(enc.encode(r() < 0.3 ? " " + p : p));
    } else if (kind < 0.85) add(enc.encode((r() < 0.5 ? "\n" : "") + " ".repeat(1 + Math.floor(r() * 12))));
    else {
      const ch = enc.encode(String.fromCodePoint(0x4e00 + Math.floor(r() * 20000)));
      const cut = r();
      add(cut < 0.6 ? ch : cut < 0.8 ? ch.subarray(0, 2) : ch.subarray(1));
    }
  }
  for (let i = out.length; i < size; i++) out.push(null); // special tokens
  return out;
}

const t0 = performance.now();
const bytes = syntheticVocab(V);
const t1 = performance.now();
const vocab = buildVocab(bytes);
const t2 = performance.now();
console.log(`vocabulary: ${V} tokens (made in ${(t1 - t0).toFixed(0)} ms); index built in ${(t2 - t1).toFixed(0)} ms; ${vocab.full.byte.length} trie nodes, ${vocab.plainIds.length} plain-string tokens`);

const SCHEMAS: [string, unknown][] = [
  ["json_object", null],
  ["person", { type: "object", properties: { name: { type: "string" }, age: { type: "integer" }, email: { type: "string", maxLength: 40 }, tags: { type: "array", items: { type: "string" } } }, required: ["name", "age", "tags"] }],
  ["enums+numbers", { type: "array", items: { type: "object", properties: { kind: { enum: ["alpha", "beta", "gamma"] }, x: { type: "number" }, ok: { type: "boolean" } }, required: ["kind", "x"] }, maxItems: 8 }],
  ["anyOf", { type: "object", properties: { v: { anyOf: [{ type: "string", maxLength: 30 }, { type: "integer" }, { type: "object", properties: { w: { type: "null" } } }] } }, required: ["v"] }],
  // two string options undecided: the fast path serves both threads
  ["two strings", { anyOf: [{ type: "string", maxLength: 50 }, { type: "string", minLength: 3 }] }],
];

const pct = (xs: number[], p: number) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN;
console.log("| schema | state | steps | median ms | p90 ms | max ms |\n|---|---|---|---|---|---|");
for (const [name, schema] of SCHEMAS) {
  const g = schema === null ? jsonObjectGrammar() : schemaGrammar(schema);
  const times: Record<string, number[]> = { "string (fast path)": [], "trie walk": [] };
  const r = rng(7);
  const scores = new Float64Array(V);
  let c = new JsonConstraint(g, vocab, [V - 1]);
  let left = 400;
  for (let step = 0; step < STEPS; step++) {
    if (c.isComplete() || left === 0) {
      c = new JsonConstraint(g, vocab, [V - 1]);
      left = 400;
    }
    for (let i = 0; i < V; i++) scores[i] = r();
    const kind = plainStringTops((c as unknown as { state: Parameters<typeof plainStringTops>[0] }).state) ? "string (fast path)" : "trie walk";
    const a = performance.now();
    c.mask(scores, left);
    times[kind]!.push(performance.now() - a);
    let best = 0;
    for (let i = 1; i < V; i++) if (scores[i]! > scores[best]!) best = i;
    c.accept(best);
    left--;
  }
  for (const [kind, xs] of Object.entries(times))
    if (xs.length) console.log(`| ${name} | ${kind} | ${xs.length} | ${pct(xs, 0.5).toFixed(2)} | ${pct(xs, 0.9).toFixed(2)} | ${Math.max(...xs).toFixed(2)} |`);
}
