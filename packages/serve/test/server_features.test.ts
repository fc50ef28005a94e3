// The engine's features through the server and the official openai SDK: logprobs (chat and completions,
// streamed and not), usage.prompt_tokens_details.cached_tokens with cache_salt isolation, priority, and
// /metrics for the prefix cache, preemptions and the cache config; greedy outputs under preemption equal
// the outputs alone.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { load, modelDir } from "./helpers.js";
import { startServer, type Running } from "./server_helpers.js";
import { sampleValue, scrape } from "./robust_helpers.js";

let model: PreTrainedModel;
let tokenizer: PreTrainedTokenizer;
let srv: Running;
let client: OpenAI;
before(async () => {
  ({ model, tokenizer } = await load(modelDir({ maxPositionEmbeddings: 2048 })));
  srv = await startServer(model, tokenizer, { maxNumSeqs: 8, maxModelLen: 2048 });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  await srv.close();
});

test("logprobs: chat (logprobs + top_logprobs) and completions (logprobs: k), streamed and not, agree", async () => {
  const messages = [{ role: "user" as const, content: "Tell me" }];
  const chat = await client.chat.completions.create({ model: "tiny-llama", messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = chat.choices[0]!.logprobs!.content!;
  assert.equal(content.length, chat.usage!.completion_tokens);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.logprob <= 0 && t.logprob === t.top_logprobs[0]!.logprob, "greedy picks the top token");
    assert.deepEqual(t.bytes, [...Buffer.from(t.token, "utf8")]);
  }
  const stream = await client.chat.completions.create({ model: "tiny-llama", messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3, stream: true });
  const streamed: { token: string; logprob: number }[] = [];
  for await (const c of stream) for (const t of c.choices[0]?.logprobs?.content ?? []) streamed.push({ token: t.token, logprob: t.logprob });
  // the same tokens; log-probabilities equal up to float rounding (the second request reuses the cached prefix)
  assert.deepEqual(streamed.map((t) => t.token), content.map((t) => t.token));
  streamed.forEach((t, i) => assert.ok(Math.abs(t.logprob - content[i]!.logprob) < 1e-4));
  const cmpl = await client.completions.create({ model: "tiny-llama", prompt: "Tell me", max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = cmpl.choices[0]!.logprobs!;
  assert.equal(lp.tokens!.length, 4);
  assert.equal(lp.token_logprobs!.length, 4);
  assert.ok(lp.top_logprobs!.every((m) => Object.keys(m).length >= 1 && Object.keys(m).length <= 2));
  assert.deepEqual(lp.text_offset, lp.tokens!.map((_, i) => lp.tokens!.slice(0, i).join("").length));
  if (!lp.tokens!.join("").includes("\ufffd")) assert.equal(lp.tokens!.join(""), cmpl.choices[0]!.text);
  const none = await client.completions.create({ model: "tiny-llama", prompt: "Tell me", max_tokens: 2 });
  assert.equal(none.choices[0]!.logprobs, null);
  await assert.rejects(client.chat.completions.create({ model: "tiny-llama", messages, max_tokens: 2, top_logprobs: 2 }), (e: InstanceType<typeof OpenAI.APIError>) => e.status === 400);
  await assert.rejects(client.completions.create({ model: "tiny-llama", prompt: "x", max_tokens: 2, logprobs: 21 }), (e: InstanceType<typeof OpenAI.APIError>) => e.status === 400);
});

test("cached_tokens: a 1,500-token prompt sent twice reuses all but the last block; another cache_salt reuses nothing; /metrics counts it", async () => {
  const before = await scrape(srv.url);
  const q0 = sampleValue(before, "vllm:prefix_cache_queries_total");
  const h0 = sampleValue(before, "vllm:prefix_cache_hits_total");
  const prompt = Array.from({ length: 1500 }, (_, i) => 3 + ((i * 37 + 11) % 250));
  const ask = (extra: Record<string, unknown> = {}) =>
    client.completions.create({ model: "tiny-llama", prompt, max_tokens: 3, temperature: 0, ...extra } as OpenAI.CompletionCreateParamsNonStreaming);
  const first = await ask();
  assert.equal(first.usage!.prompt_tokens_details?.cached_tokens, 0);
  const second = await ask();
  assert.ok(second.usage!.prompt_tokens_details!.cached_tokens! >= 1500 - 16, JSON.stringify(second.usage));
  assert.equal(second.choices[0]!.text, first.choices[0]!.text);
  const salted = await ask({ cache_salt: "tenant-2" });
  assert.equal(salted.usage!.prompt_tokens_details!.cached_tokens, 0);
  const high = await ask({ cache_salt: "tenant-2", priority: -5 });
  assert.ok(high.usage!.prompt_tokens_details!.cached_tokens! >= 1500 - 16);
  const m = await scrape(srv.url);
  assert.ok(sampleValue(m, "vllm:prefix_cache_queries_total") - q0 >= 4 * 1500);
  assert.ok(sampleValue(m, "vllm:prefix_cache_hits_total") - h0 >= 2 * (1500 - 16));
  assert.equal(sampleValue(m, "vllm:cache_config_info", { block_size: "16", enable_prefix_caching: "true" }), 1);
  await assert.rejects(ask({ cache_salt: 5 }), (e: InstanceType<typeof OpenAI.APIError>) => e.status === 400);
  await assert.rejects(ask({ priority: 1.5 }), (e: InstanceType<typeof OpenAI.APIError>) => e.status === 400);
});

test("a pool too small for the load preempts (vllm:num_preemptions_total > 0) and greedy outputs stay those of each request alone", async () => {
  const small = await startServer(model, tokenizer, { maxNumSeqs: 8, maxModelLen: 2048, numKvBlocks: 24, maxNumBatchedTokens: 64 });
  try {
    const c = new OpenAI({ baseURL: `${small.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const prompts = Array.from({ length: 8 }, (_, k) => Array.from({ length: 30 + 7 * k }, (_, i) => 3 + ((i * 13 + k * 101) % 250)));
    const ask = (p: number[]) => c.completions.create({ model: "tiny-llama", prompt: p, max_tokens: 20, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
    const alone: string[] = [];
    for (const p of prompts) alone.push((await ask(p)).choices[0]!.text);
    const together = await Promise.all(prompts.map(ask));
    assert.deepEqual(together.map((r) => r.choices[0]!.text), alone);
    const m = await scrape(small.url);
    assert.ok(sampleValue(m, "vllm:num_preemptions_total") > 0, "preempted");
    assert.equal(sampleValue(m, "vllm:cache_config_info", { num_gpu_blocks: "24" }), 1);
  } finally {
    await small.close();
  }
});
