// generate(): batched left-padded generation equals generating each prompt alone, the sampling
// processors (HF order and formulas), seeds, stop tokens and strings, streaming, and the block KV
// cache (no recompiles between decode steps inside a block).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, AutoTokenizer, KVCache, chooseToken } from "../../src/transformers/index.js";
import { GOLDEN, expected, fixtureDir } from "./helpers.js";

for (const mode of ["strict", "fused"] as const)
  test(`batched generation with left padding gives each prompt's own tokens (${mode})`, async () => {
    await torch.withEagerMode(mode, async () => {
      for (const name of GOLDEN) {
        const m = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
        const [p0, p1] = expected(name).prompts as [ReturnType<typeof expected>["prompts"][0], ReturnType<typeof expected>["prompts"][0]];
        const short = p1.input_ids.slice(0, 3);
        const alone = await m.generate(short, { maxNewTokens: 16, stopTokenIds: [] });
        const batch = await m.generate([p0.input_ids, short, p1.input_ids], { maxNewTokens: 16, stopTokenIds: [] });
        assert.deepEqual(batch.newTokens[0], p0.greedy_continuation, `${name}: row 0`);
        assert.deepEqual(batch.newTokens[1], alone.newTokens[0], `${name}: short row`);
        assert.deepEqual(batch.newTokens[2], p1.greedy_continuation, `${name}: row 2`);
        assert.deepEqual(batch.sequences[1], [...short, ...alone.newTokens[0]!]);
      }
    });
  });

test("logits processors follow transformers: repetition penalty, temperature, top-k, top-p, min-p", () => {
  const r = () => 0.5;
  // repetition penalty divides positive and multiplies negative scores of seen tokens
  const s = Float64Array.from([2, -1, 1.5, 0]);
  assert.equal(chooseToken(s, [0, 0, 1], { repetitionPenalty: 2 }, r), 2);
  assert.deepEqual([...s], [1, -2, 1.5, 0]);
  // top-k = 1 and a tiny top-p leave only the argmax; min-p = 1 keeps only tokens as likely as the top
  const logits = [0.1, 3, 2.9, -1, 2.95];
  for (const o of [{ topK: 1 }, { topP: 0.01 }, { minP: 1 }, { temperature: 1e-4 }])
    for (const u of [0, 0.3, 0.999]) assert.equal(chooseToken(Float64Array.from(logits), [], { doSample: true, ...o }, () => u), 1, JSON.stringify(o));
  // top-k = 2 keeps tokens 1 and 4: sampling with u just below p(token 1) picks 1, just above picks 4
  const p1 = Math.exp(3) / (Math.exp(3) + Math.exp(2.95));
  assert.equal(chooseToken(Float64Array.from(logits), [], { doSample: true, topK: 2 }, () => p1 - 1e-9), 1);
  assert.equal(chooseToken(Float64Array.from(logits), [], { doSample: true, topK: 2 }, () => p1 + 1e-9), 4);
  // top-p: HF's example semantics; with top_p 0.6 over probs [0.5, 0.3, 0.2] tokens 0 and 1 survive
  const lp = Float64Array.from([Math.log(0.5), Math.log(0.3), Math.log(0.2)]);
  assert.equal(chooseToken(lp, [], { doSample: true, topP: 0.6 }, () => 0.99), 1);
  // min-p 0.5 keeps tokens with p >= 0.5 * p_max: only 0.5 and 0.3 of [0.5, 0.3, 0.2]
  assert.equal(chooseToken(Float64Array.from([Math.log(0.5), Math.log(0.3), Math.log(0.2)]), [], { doSample: true, minP: 0.5 }, () => 0.99), 1);
});

test("sampling is reproducible by seed; stop tokens, stop strings and the streamer", async () => {
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"));
  const p = expected("llama_gqa").prompts[0]!;
  const opts = { maxNewTokens: 12, doSample: true, temperature: 1.5, topK: 50, topP: 0.95, seed: 7, stopTokenIds: [] };
  const a = await m.generate(p.input_ids, opts);
  const b = await m.generate(p.input_ids, opts);
  const c = await m.generate(p.input_ids, { ...opts, seed: 8 });
  assert.deepEqual(a.newTokens, b.newTokens);
  assert.notDeepEqual(a.newTokens, c.newTokens);
  assert.notDeepEqual(a.newTokens[0], p.greedy_continuation.slice(0, 12));
  // stop token: generation ends at (and includes) the first stop token
  const g = p.greedy_continuation;
  const stopped = await m.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [g[3]!] });
  assert.deepEqual(stopped.newTokens[0], g.slice(0, g.indexOf(g[3]!) + 1));
  // in a batch, a stopped row ends while the other continues
  const p1 = expected("llama_gqa").prompts[1]!;
  const both = await m.generate([p.input_ids, p1.input_ids], { maxNewTokens: 16, stopTokenIds: [g[1]!] });
  assert.deepEqual(both.newTokens[0], g.slice(0, 2));
  assert.deepEqual(both.newTokens[1], p1.greedy_continuation.slice(0, p1.greedy_continuation.includes(g[1]!) ? p1.greedy_continuation.indexOf(g[1]!) + 1 : 16));
  // stop strings, decoded with the byte-level tokenizer (token id = byte)
  const tok = await AutoTokenizer.fromPretrained(fixtureDir("byte_tokenizer"));
  const target = tok.decode(g.slice(4, 6));
  const byString = await m.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [], stopStrings: [target], tokenizer: tok });
  assert.ok(tok.decode(byString.newTokens[0]!).includes(target));
  assert.ok(byString.newTokens[0]!.length <= 6 && byString.newTokens[0]!.length >= 5, JSON.stringify(byString.newTokens[0]));
  // streamer sees every token of every row, in order
  const seen: [number, number, number][] = [];
  const s = await m.generate([p.input_ids, p1.input_ids], { maxNewTokens: 5, stopTokenIds: [], streamer: (e) => seen.push([e.batchIndex, e.step, e.token]) });
  assert.deepEqual(seen.filter(([b]) => b === 0).map(([, , t]) => t), s.newTokens[0]);
  assert.deepEqual(seen.filter(([b]) => b === 1).map(([, , t]) => t), s.newTokens[1]);
  assert.deepEqual(seen.map(([, st]) => st), [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
});

test("KV cache: preallocated blocks; decode steps inside a block compile nothing new", async () => {
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("qwen3_qknorm"));
  const p = expected("qwen3_qknorm").prompts[0]!;
  const cache = new KVCache({ batchSize: 1, ...m.cacheShape(), maxLength: 64, blockSize: 16 });
  assert.equal(cache.capacity, 64);
  assert.deepEqual(cache.keys[0]!.shape, [1, 2, 64, 24]);
  assert.deepEqual(cache.blockTable, [0, 1, 2, 3]);
  let logits = torch.noGrad(() => m.forward(torch.tensor([p.input_ids]), { cache }).logits);
  let tok = await logits.select(1, -1).argmax(-1).item();
  const tokens = [tok];
  const misses: number[] = [];
  for (let i = 0; i < 7; i++) {
    // positions 9..15: all inside the first 16-position block
    const before = torch.compiler.cacheStats().misses;
    logits = torch.noGrad(() => m.forward(torch.tensor([[tok]]), { cache }).logits);
    tok = await logits.select(1, -1).argmax(-1).item();
    tokens.push(tok);
    misses.push(torch.compiler.cacheStats().misses - before);
  }
  assert.deepEqual(tokens, p.greedy_continuation.slice(0, 8));
  assert.deepEqual(misses.slice(1), [0, 0, 0, 0, 0, 0], `recompiles per decode step: ${misses}`);
  assert.equal(cache.length, 15);
  assert.throws(() => cache.update(0, torch.zeros(1, 2, 60, 24), torch.zeros(1, 2, 60, 24)), /exceeds the capacity of 64/);
  cache.dispose();
});
