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

test("KV cache across block boundaries: tiny blocks give the golden continuations (strict, fused, compiled)", async () => {
  for (const name of ["llama_gqa", "gpt2"] as const) {
    const m = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
    const [p0, p1] = expected(name).prompts as [ReturnType<typeof expected>["prompts"][0], ReturnType<typeof expected>["prompts"][0]];
    for (const mode of ["strict", "fused", "compiled"] as const)
      for (const blockSize of [3, 4]) {
        const out = await torch.withEagerMode(mode === "compiled" ? "strict" : mode, () =>
          m.generate([p0.input_ids, p1.input_ids.slice(0, 5)], { maxNewTokens: 16, stopTokenIds: [], blockSize, compile: mode === "compiled" }),
        );
        assert.deepEqual(out.newTokens[0], p0.greedy_continuation, `${name} ${mode} blockSize ${blockSize}`);
        const alone = await m.generate(p1.input_ids.slice(0, 5), { maxNewTokens: 16, stopTokenIds: [] });
        assert.deepEqual(out.newTokens[1], alone.newTokens[0], `${name} ${mode} blockSize ${blockSize}: short row`);
      }
  }
});

test("KV cache: prefill after decode steps (several tokens at once) keeps the cache consistent", async () => {
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("qwen2_tied"));
  const p = expected("qwen2_tied").prompts[0]!;
  const seq = p.full_sequence;
  const ref = await torch.noGrad(() => m.forward(torch.tensor([seq])).logits).select(1, -1);
  const cache = new KVCache({ batchSize: 1, ...m.cacheShape(), maxLength: seq.length, blockSize: 4 });
  // blocks of 4: 5 tokens, 2 single steps (into the tail), 6 tokens (the tail lands in the big
  // buffer first), 3 single steps (crossing a block), 4 tokens, then single steps to the end
  const chunks = [5, 1, 1, 6, 1, 1, 1, 4];
  let at = 0;
  let logits: torch.Tensor | null = null;
  for (const n of [...chunks, ...new Array<number>(seq.length - chunks.reduce((a, b) => a + b, 0)).fill(1)]) {
    logits = torch.noGrad(() => m.forward(torch.tensor([seq.slice(at, at + n)]), { cache, logitsToKeep: 1 }).logits);
    assert.equal(logits.shape[1], 1);
    at += n;
  }
  assert.equal(cache.length, seq.length);
  const diff = await logits!.select(1, -1).sub(ref).abs().max().item();
  assert.ok(diff < 1e-4, `last logits differ by ${diff}`);
  cache.dispose();
});

test("compiled generate: decode steps are replayed (no host work, no recompiles) and give the golden tokens", async () => {
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"));
  const p = expected("llama_gqa").prompts[0]!;
  torch.compiler.resetStats();
  // prompt 8 + 16 new tokens in blocks of 32: one decode entry, recorded until two recordings
  // agree (the first call creates the entry's state), then replayed
  const out = await m.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [], compile: true });
  assert.deepEqual(out.newTokens[0], p.greedy_continuation);
  const s = torch.compiler.stats();
  assert.equal(s.recompiles, 0, JSON.stringify(s.recompileReasons));
  assert.deepEqual(s.replayDisabled, []);
  assert.ok(s.replays >= 15 - 3, JSON.stringify(s)); // 15 decode calls, at most three recorded
});

test("forward: a tensor attentionMask (mask built on the device) and logitsToKeep match the host path", async () => {
  for (const name of ["qwen3_qknorm", "gpt2"] as const) {
    const m = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
    const p = expected(name).prompts[1]!;
    const ids = [[0, 0, ...p.input_ids.slice(0, 6)], p.input_ids.slice(0, 8)];
    const mask = [[0, 0, 1, 1, 1, 1, 1, 1], new Array<number>(8).fill(1)];
    const host = torch.noGrad(() => m.forward(torch.tensor(ids), { attentionMask: mask }).logits);
    // longer than needed: entries past the new tokens are ignored
    const maskT = torch.tensor(mask.map((r) => [...r, 1, 1]), { dtype: "float32" });
    const dev = torch.noGrad(() => m.forward(torch.tensor(ids), { attentionMask: maskT }).logits);
    assert.equal(await host.sub(dev).abs().max().item(), 0, `${name}: device mask`);
    const last2 = torch.noGrad(() => m.forward(torch.tensor(ids), { attentionMask: mask, logitsToKeep: 2 }).logits);
    assert.deepEqual(last2.shape, [2, 2, m.config.vocabSize]);
    assert.ok((await host.narrow(1, 6, 2).sub(last2).abs().max().item()) < 1e-5, `${name}: logitsToKeep`);
  }
});

test("compiled generate: a later call with the same cache shape reuses the cache and replays from the start", async () => {
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("qwen2_tied"));
  const [p0, p1] = expected("qwen2_tied").prompts as [ReturnType<typeof expected>["prompts"][0], ReturnType<typeof expected>["prompts"][0]];
  const opts = { maxNewTokens: 16, stopTokenIds: [], compile: true };
  assert.deepEqual((await m.generate(p0.input_ids, opts)).newTokens[0], p0.greedy_continuation);
  torch.compiler.resetStats();
  assert.deepEqual((await m.generate(p0.input_ids, opts)).newTokens[0], p0.greedy_continuation);
  const s = torch.compiler.stats();
  assert.equal(s.replays, 15, JSON.stringify(s)); // every decode step (prefill ran twice before: recorded, not yet replayed)
  // another prompt into the same (stale) cache, and two generations at once on one model
  const [a, b] = await Promise.all([m.generate(p1.input_ids, opts), m.generate(p0.input_ids, opts)]);
  assert.deepEqual(a.newTokens[0], p1.greedy_continuation);
  assert.deepEqual(b.newTokens[0], p0.greedy_continuation);
  assert.deepEqual((await m.generate(p1.input_ids, opts)).newTokens[0], p1.greedy_continuation);
});

test("chooseToken samples over a 151,936-token vocabulary (Qwen's): no spread of the scores onto the stack", () => {
  const V = 151936;
  const logits = new Float64Array(V).fill(-5);
  logits[1234] = 10;
  for (const o of [{ doSample: true }, { doSample: true, minP: 0.1 }, { doSample: true, topP: 0.9 }])
    assert.equal(chooseToken(Float64Array.from(logits), [], o, () => 0.5), 1234, JSON.stringify(o));
});

test("an unpadded float32 prompt filling the cache view attends causally without a mask: the masked path's outputs", async () => {
  const attn = (p: ReturnType<typeof torch.profiler.profile>) => p.events.filter((e) => e.name.includes('"name":"attention"')).map((e) => e.name);
  for (const name of ["llama_gqa", "qwen3_qknorm"] as const) {
    const m = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
    const ids = torch.tensor([expected(name).prompts[0]!.input_ids.slice(0, 8)]);
    let prof = torch.profiler.profile({ recordShapes: true });
    const causal = torch.noGrad(() => m.forward(ids).logits);
    await causal.data();
    prof.stop();
    const seen = attn(prof);
    assert.ok(seen.length > 0 && seen.every((n) => n.includes('"causal":true') && n.includes('"mask":false')), `${name}: ${seen[0]}`);
    // the same rows through a tensor mask (built on the device: the masked kernel)
    prof = torch.profiler.profile({ recordShapes: true });
    const masked = torch.noGrad(() => m.forward(ids, { attentionMask: torch.ones([1, 8]) }).logits);
    await masked.data();
    prof.stop();
    assert.ok(attn(prof).every((n) => n.includes('"causal":false') && n.includes('"mask":true')), `${name}: masked path`);
    assert.equal(await causal.sub(masked).abs().max().item(), 0, `${name}: causal vs masked logits`);
  }
  // compiled generate takes its causal prefill step when the prompt fills whole blocks
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"));
  const p = expected("llama_gqa").prompts[0]!;
  assert.equal(p.input_ids.length % 4, 0);
  const opts = { maxNewTokens: 16, stopTokenIds: [], blockSize: 4 };
  const eager = await m.generate(p.input_ids, opts);
  const compiled = await m.generate(p.input_ids, { ...opts, compile: true });
  assert.deepEqual(eager.newTokens[0], p.greedy_continuation);
  assert.deepEqual(compiled.newTokens[0], p.greedy_continuation);
});
