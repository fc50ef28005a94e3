import { test, before } from "node:test";
import assert from "node:assert/strict";
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { EngineInputError, EngineQueueFullError, LLMEngine, type RequestOutput, type SamplingParams } from "../src/engine.js";
import { load, modelDir, reference } from "./helpers.js";

let model: PreTrainedModel;
let tokenizer: PreTrainedTokenizer;
before(async () => {
  ({ model, tokenizer } = await load(modelDir()));
});

async function collect(it: AsyncIterable<RequestOutput>): Promise<{ tokens: number[]; text: string; finish: string | null; outs: RequestOutput[] }> {
  const outs: RequestOutput[] = [];
  for await (const o of it) outs.push(o);
  return { tokens: outs.flatMap((o) => o.tokenIds), text: outs.map((o) => o.text).join(""), finish: outs.at(-1)!.finishReason, outs };
}

const PROMPTS = ["Hello there", "The quick brown fox", "a", "1 2 3 4 5 6 7 8 9", "Once upon a time, in a land", "zzz"];

test("greedy output equals torchts generate() for the same prompt and max tokens", async () => {
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 4 });
  for (const p of PROMPTS.slice(0, 4)) {
    const ids = tokenizer.encode(p);
    const ref = await reference(model, tokenizer, ids, 12);
    const got = await collect(engine.generate(ids, { temperature: 0, maxTokens: 12 }));
    assert.deepEqual(got.tokens, ref.tokens, p);
    assert.equal(got.text, ref.text, p);
    assert.ok(got.finish === "length" || got.finish === "stop");
  }
  assert.equal(engine.stats.running, 0);
});

test("requests are batched: they decode in the same forward passes, join as slots free, and get the outputs they get alone; maxNumSeqs is honoured", async () => {
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 3 });
  // r0 is short: when it finishes, another takes its slot while the others still run
  const params = (i: number): SamplingParams => ({ temperature: 0, maxTokens: i === 0 ? 3 : 10, ignoreEos: true });
  const alone: number[][] = [];
  for (const [i, p] of PROMPTS.entries()) alone.push((await collect(engine.generate(tokenizer.encode(p), params(i)))).tokens);
  let maxRunning = 0;
  const steps: string[][] = [];
  const off = engine.onEvent((e) => {
    maxRunning = Math.max(maxRunning, engine.stats.running);
    if (e.type !== "token") return;
    const s = engine.stats.steps;
    (steps[s] ??= []).push(e.requestId);
  });
  const stepsBefore = engine.stats.steps;
  const together = await Promise.all(PROMPTS.map((p, i) => collect(engine.generate(tokenizer.encode(p), params(i), { requestId: `r${i}` }))));
  off();
  assert.deepEqual(together.map((t) => t.tokens), alone);
  assert.equal(maxRunning, 3);
  const used = steps.filter(Boolean);
  // every step that samples gives a token to each of the (at most 3) running requests at once
  assert.ok(used.every((s) => s.length <= 3 && new Set(s).size === s.length));
  assert.equal(used[0]!.length, 3, "the first three prefill in one forward pass");
  const total = together.reduce((a, t) => a + t.tokens.length, 0);
  // 3 + 5 * 10 = 53 tokens in far fewer steps than one token per step
  assert.equal(total, 53);
  assert.ok(engine.stats.steps - stepsBefore <= Math.ceil(total / 3) + 6, `${engine.stats.steps - stepsBefore} steps`);
  // a waiting request starts as soon as r0's slot frees, not after everything
  const firstOf = (id: string) => used.findIndex((s) => s.includes(id));
  const lastOf = (id: string) => used.length - 1 - [...used].reverse().findIndex((s) => s.includes(id));
  const late = ["r3", "r4", "r5"].filter((id) => firstOf(id) > 0);
  assert.ok(late.length >= 1);
  assert.ok(Math.min(...late.map(firstOf)) <= lastOf("r0") + 1);
  assert.equal(engine.stats.running, 0);
  assert.equal(engine.stats.waiting, 0);
});

test("seeded sampling is reproducible per request whatever else runs", async () => {
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 4 });
  const ids = tokenizer.encode("Sampling test");
  const params: SamplingParams = { temperature: 1.2, topP: 0.9, topK: 50, minP: 0.01, seed: 1234, maxTokens: 12, ignoreEos: true };
  const a = await collect(engine.generate(ids, params));
  const [b] = await Promise.all([
    collect(engine.generate(ids, params)),
    collect(engine.generate(tokenizer.encode("noise"), { temperature: 1, maxTokens: 12 })),
    collect(engine.generate(tokenizer.encode("more noise"), { temperature: 1, seed: 9, maxTokens: 12 })),
  ]);
  assert.deepEqual(b!.tokens, a.tokens);
  const c = await collect(engine.generate(ids, { ...params, seed: 4321 }));
  assert.notDeepEqual(c.tokens, a.tokens);
  // penalties change the choice but stay deterministic
  const pen = { temperature: 0, maxTokens: 12, ignoreEos: true, presencePenalty: 1.5, frequencyPenalty: 1, repetitionPenalty: 1.3 };
  assert.deepEqual((await collect(engine.generate(ids, pen))).tokens, (await collect(engine.generate(ids, pen))).tokens);
});

test("stop strings are excluded from the output; stop_token_ids; length; text deltas add up", async () => {
  const engine = new LLMEngine({ model, tokenizer });
  const ids = tokenizer.encode("Hello there");
  const full = await collect(engine.generate(ids, { temperature: 0, maxTokens: 16, ignoreEos: true }));
  assert.equal(full.finish, "length");
  assert.equal(full.tokens.length, 16);
  assert.equal(full.text, tokenizer.decode(full.tokens));
  const stop = full.text.slice(5, 7);
  const cut = full.text.indexOf(stop);
  const s = await collect(engine.generate(ids, { temperature: 0, maxTokens: 16, ignoreEos: true, stop: [stop] }));
  assert.equal(s.finish, "stop");
  assert.equal(s.text, full.text.slice(0, cut));
  assert.equal(s.outs.at(-1)!.stopReason, stop);
  const tid = full.tokens[3]!;
  const t = await collect(engine.generate(ids, { temperature: 0, maxTokens: 16, ignoreEos: true, stopTokenIds: [tid] }));
  assert.equal(t.finish, "stop");
  assert.deepEqual(t.tokens, full.tokens.slice(0, full.tokens.indexOf(tid) + 1));
  assert.equal(t.outs.at(-1)!.stopReason, tid);
  assert.equal(t.text, tokenizer.decode(full.tokens.slice(0, full.tokens.indexOf(tid))));
});

test("abort ends a running or waiting request within one step and frees it", async () => {
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 1 });
  const ids = tokenizer.encode("abort me");
  const ac = new AbortController();
  const a = engine.generate(ids, { temperature: 0, maxTokens: 50, ignoreEos: true }, { requestId: "a", signal: ac.signal });
  const b = collect(engine.generate(ids, { temperature: 0, maxTokens: 50, ignoreEos: true }, { requestId: "b" }));
  let n = 0;
  let last: RequestOutput | undefined;
  let stepsAtAbort = 0;
  for await (const o of a) {
    last = o;
    if (++n === 3) {
      ac.abort();
      stepsAtAbort = engine.stats.steps;
    }
  }
  assert.equal(last!.finishReason, "abort");
  assert.ok(engine.stats.steps - stepsAtAbort <= 1);
  assert.equal(engine.abort("b"), true); // b was waiting (maxNumSeqs 1)
  const rb = await b;
  assert.equal(rb.finish, "abort");
  assert.equal(rb.tokens.length, 0);
  // breaking out of the loop aborts too
  for await (const _ of engine.generate(ids, { temperature: 0, maxTokens: 50 })) break;
  // and so does return() before the first next()
  await engine.generate(ids, { temperature: 0, maxTokens: 50, ignoreEos: true }).return!();
  assert.equal(engine.stats.running + engine.stats.waiting, 0);
  await engine.idle();
  assert.equal(engine.stats.running, 0);
  assert.equal(engine.stats.waiting, 0);
  assert.equal(engine.stats.kvCacheUsage, 0);
});

test("bad requests and a full queue throw before anything runs", async () => {
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 1, maxWaiting: 1, maxModelLen: 64 });
  assert.throws(() => engine.generate([], {}), EngineInputError);
  assert.throws(() => engine.generate([1, 999], {}), EngineInputError);
  assert.throws(() => engine.generate([1, 2, 3], { maxTokens: 62 }), /maximum context length is 64/);
  assert.throws(() => engine.generate([1, 2, 3], { temperature: -1 }), EngineInputError);
  for (const k of ["", " 3", "1e1", "0x1", "-1", "1.5", "999"]) assert.throws(() => engine.generate([1, 2, 3], { logitBias: { [k]: 5 } }), /logit_bias/, JSON.stringify(k));
  const running = collect(engine.generate([5, 6], { maxTokens: 4 }));
  const waiting = collect(engine.generate([5, 6], { maxTokens: 4 }));
  assert.throws(() => engine.generate([5, 6], { maxTokens: 4 }), EngineQueueFullError);
  await Promise.all([running, waiting]);
  await engine.close();
  assert.throws(() => engine.generate([5, 6], { maxTokens: 4 }), /shutting down/);
});

test("logprobs: the sampled token's log-probability and the top alternatives, from the model's log_softmax", async () => {
  const torch = await import("torchts");
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 2 });
  const ids = tokenizer.encode("Logprobs please");
  const got = await collect(engine.generate(ids, { temperature: 0, maxTokens: 3, ignoreEos: true, logprobs: 4 }));
  const lps = got.outs.flatMap((o) => o.logprobs ?? []);
  assert.equal(lps.length, 3);
  // the first token's distribution is the model's at the end of the prompt
  const ref = torch.noGrad(() => model.forward(torch.tensor([ids], { dtype: "int64" })).logits.select(0, 0).select(0, -1).logSoftmax(-1));
  const refVals = (await ref.tolist()) as number[];
  const first = lps[0]!;
  assert.equal(first.tokenId, got.tokens[0]);
  assert.ok(Math.abs(first.logprob - refVals[first.tokenId]!) < 1e-4);
  assert.equal(first.top.length, 4);
  const sorted = refVals.map((v, i) => [v, i] as const).sort((a, b) => b[0] - a[0]).slice(0, 4);
  assert.deepEqual(first.top.map((t) => t.tokenId), sorted.map((x) => x[1]));
  for (const lp of lps) {
    assert.equal(lp.top[0]!.tokenId, lp.tokenId, "greedy takes the most likely token");
    assert.ok(lp.top.every((t, i) => i === 0 || t.logprob <= lp.top[i - 1]!.logprob));
  }
  assert.throws(() => engine.generate(ids, { logprobs: 21 }), /logprobs must be an integer in \[0, 20\]/);
  const none = await collect(engine.generate(ids, { temperature: 0, maxTokens: 2 }));
  assert.ok(none.outs.every((o) => o.logprobs === undefined));
});

test("quantized weights (--quantization int8 | int4 | w8a8): greedy output equals generate() of the quantized model", async () => {
  const { quantize } = await import("torchts/transformers");
  for (const q of [{ bits: 8 as const }, { bits: 4 as const }, { bits: 8 as const, activations: "int8" as const }]) {
    const { model: m, tokenizer: t } = await load(modelDir());
    await quantize(m, q);
    const ids = t.encode("Hello there");
    const ref = await reference(m, t, ids, 8);
    const engine = new LLMEngine({ model: m, tokenizer: t, maxNumSeqs: 2 });
    const got = await collect(engine.generate(ids, { temperature: 0, maxTokens: 8 }));
    assert.deepEqual(got.tokens, ref.tokens, JSON.stringify(q));
  }
});
