import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { load, modelDir, reference } from "./helpers.js";
import { post, startServer, until, type Running } from "./server_helpers.js";

let model: PreTrainedModel;
let tokenizer: PreTrainedTokenizer;
let srv: Running;
let openai: OpenAI;

before(async () => {
  ({ model, tokenizer } = await load(modelDir()));
  srv = await startServer(model, tokenizer, { maxNumSeqs: 8 });
  openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });
});
after(async () => {
  await srv.close();
});

const MESSAGES = [
  { role: "system" as const, content: "You are terse." },
  { role: "user" as const, content: "Say something." },
];

test("openai SDK: models.list, chat and completions, streaming and not, greedy equal to generate()", async () => {
  const models = await openai.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ["tiny-llama"]);

  const chatIds = tokenizer.applyChatTemplate(MESSAGES, { addGenerationPrompt: true, tokenize: true });
  const refChat = await reference(model, tokenizer, chatIds, 12);
  const chat = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, temperature: 0, max_tokens: 12 });
  assert.equal(chat.object, "chat.completion");
  assert.equal(chat.choices[0]!.message.role, "assistant");
  assert.equal(chat.choices[0]!.message.content, refChat.text);
  assert.equal(chat.usage!.prompt_tokens, chatIds.length);
  assert.equal(chat.usage!.completion_tokens, refChat.tokens.length);
  assert.equal(chat.usage!.total_tokens, chatIds.length + refChat.tokens.length);

  const stream = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, temperature: 0, max_tokens: 12, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.equal(chunks[0]!.choices[0]!.delta.role, "assistant");
  assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  assert.equal(new Set(chunks.map((c) => c.created)).size, 1);
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices, []);
  // the same counts; the streamed request found the first one's prompt blocks in the prefix cache
  const { prompt_tokens_details: cachedStream, ...countsStream } = last.usage!;
  const { prompt_tokens_details: cachedFirst, ...countsFirst } = chat.usage!;
  assert.deepEqual(countsStream, countsFirst);
  assert.equal(cachedFirst!.cached_tokens, 0);
  assert.equal(cachedStream!.cached_tokens, Math.floor((chatIds.length - 1) / 16) * 16);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
  assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), refChat.text);
  assert.equal(chunks.at(-2)!.choices[0]!.finish_reason, chat.choices[0]!.finish_reason);

  const prompt = "The meaning of life is";
  const refCmpl = await reference(model, tokenizer, tokenizer.encode(prompt), 10);
  const cmpl = await openai.completions.create({ model: "tiny-llama", prompt, temperature: 0, max_tokens: 10 });
  assert.equal(cmpl.object, "text_completion");
  assert.equal(cmpl.choices[0]!.text, refCmpl.text);
  const cs = await openai.completions.create({ model: "tiny-llama", prompt, temperature: 0, max_tokens: 10, stream: true });
  let text = "";
  for await (const c of cs) text += c.choices[0]?.text ?? "";
  assert.equal(text, refCmpl.text);

  // list of strings, token ids, echo
  const ids = tokenizer.encode(prompt);
  const multi = await openai.completions.create({ model: "tiny-llama", prompt: [prompt, "zzz"], temperature: 0, max_tokens: 10 });
  assert.equal(multi.choices.length, 2);
  assert.equal(multi.choices[0]!.text, refCmpl.text);
  const byIds = await openai.completions.create({ model: "tiny-llama", prompt: ids, temperature: 0, max_tokens: 10, echo: true });
  assert.equal(byIds.choices[0]!.text, tokenizer.decode(ids) + refCmpl.text);
  assert.equal(multi.usage!.prompt_tokens, ids.length + tokenizer.encode("zzz").length);
});

test("greedy outputs are the same for concurrent requests as alone", async () => {
  const prompts = Array.from({ length: 8 }, (_, i) => `prompt number ${i} ${"x".repeat(i)}`);
  const alone: string[] = [];
  for (const p of prompts) alone.push((await openai.completions.create({ prompt: p, model: "tiny-llama", temperature: 0, max_tokens: 8 })).choices[0]!.text);
  let peak = 0;
  const off = srv.engine.onEvent(() => (peak = Math.max(peak, srv.engine.stats.running)));
  const together = await Promise.all(prompts.map((p) => openai.completions.create({ prompt: p, model: "tiny-llama", temperature: 0, max_tokens: 8 })));
  off();
  assert.deepEqual(together.map((c) => c.choices[0]!.text), alone);
  assert.ok(peak > 1, `requests ran concurrently (peak ${peak})`);
});

test("stop strings are not in the output; seeds reproduce", async () => {
  const base = { model: "tiny-llama", prompt: "Hello", temperature: 0, max_tokens: 12, ignore_eos: true } as const;
  const full = (await openai.completions.create(base as never)) as OpenAI.Completion;
  const stop = full.choices[0]!.text.slice(4, 6);
  const cut = (await openai.completions.create({ ...base, stop } as never)) as OpenAI.Completion;
  assert.equal(cut.choices[0]!.text, full.choices[0]!.text.slice(0, full.choices[0]!.text.indexOf(stop)));
  assert.equal(cut.choices[0]!.finish_reason, "stop");
  const s = { model: "tiny-llama", messages: MESSAGES, temperature: 1, seed: 77, max_tokens: 10 };
  const a = await openai.chat.completions.create(s);
  const b = await openai.chat.completions.create(s);
  assert.equal(a.choices[0]!.message.content, b.choices[0]!.message.content);
});

function isError(r: { json: () => any }, status: number): void {
  const e = r.json().error;
  assert.equal(typeof e.message, "string");
  assert.equal(typeof e.type, "string");
  assert.ok("param" in e);
  assert.equal(e.code, status);
}

test("errors: 400, 404, 401, 429 with Retry-After, in OpenAI's shape", async () => {
  const chat = `${srv.url}/v1/chat/completions`;
  const cmpl = `${srv.url}/v1/completions`;
  for (const [body, param] of [
    ["{not json", null],
    [{ messages: "hi" }, "messages"],
    [{ messages: [] }, "messages"],
    [{ messages: MESSAGES, temperature: "hot" }, "temperature"],
    [{ messages: MESSAGES, max_tokens: 1000 }, "max_tokens"],
    [{ messages: MESSAGES, n: 1e9 }, "n"],
  ] as const) {
    const r = await post(chat, body);
    assert.equal(r.status, 400, `${JSON.stringify(body)} -> ${r.text}`);
    isError(r, 400);
    if (param) assert.equal(r.json().error.param, param, r.text);
  }
  const long = await post(cmpl, { prompt: "x".repeat(200), max_tokens: 4 });
  assert.equal(long.status, 400);
  assert.match(long.json().error.message, /context/);
  const nf = await post(chat, { model: "gpt-4", messages: MESSAGES });
  assert.equal(nf.status, 404);
  isError(nf, 404);
  await assert.rejects(openai.chat.completions.create({ model: "nope", messages: MESSAGES }), (e: unknown) => e instanceof OpenAI.NotFoundError);

  const keyed = await startServer(model, tokenizer, {}, { apiKey: "sekret" });
  try {
    const none = await post(`${keyed.url}/v1/completions`, { prompt: "a", max_tokens: 1 });
    assert.equal(none.status, 401);
    isError(none, 401);
    const wrong = await post(`${keyed.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { authorization: "Bearer nope" });
    assert.equal(wrong.status, 401);
    const ok = await post(`${keyed.url}/v1/completions`, { prompt: "a", max_tokens: 1 }, { authorization: "Bearer sekret" });
    assert.equal(ok.status, 200);
    assert.equal((await fetch(`${keyed.url}/health`)).status, 200);
  } finally {
    await keyed.close();
  }

  const small = await startServer(model, tokenizer, { maxNumSeqs: 1, maxWaiting: 1 });
  const ac = new AbortController();
  try {
    const long = { prompt: "a", max_tokens: 100, ignore_eos: true, stream: true };
    const opts = { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(long), signal: ac.signal };
    const first = fetch(`${small.url}/v1/completions`, opts);
    const second = fetch(`${small.url}/v1/completions`, opts);
    assert.ok(await until(() => small.engine.stats.running === 1 && small.engine.stats.waiting === 1));
    const third = await post(`${small.url}/v1/completions`, long);
    assert.equal(third.status, 429);
    assert.equal(third.headers.get("retry-after"), "1");
    isError(third, 429);
    ac.abort();
    await Promise.allSettled([first, second]);
    assert.ok(await until(() => small.engine.stats.running === 0 && small.engine.stats.waiting === 0));
  } finally {
    await small.close();
  }
});

test("tokenize and detokenize", async () => {
  const t = await post(`${srv.url}/tokenize`, { prompt: "héllo" });
  assert.equal(t.status, 200);
  assert.deepEqual(t.json().tokens, tokenizer.encode("héllo"));
  const d = await post(`${srv.url}/detokenize`, { tokens: t.json().tokens });
  assert.equal(d.json().prompt, "héllo");
  const m = await post(`${srv.url}/tokenize`, { messages: MESSAGES });
  assert.equal(m.json().count, tokenizer.applyChatTemplate(MESSAGES, { addGenerationPrompt: true, tokenize: true }).length);
  assert.equal((await post(`${srv.url}/detokenize`, { tokens: [100000] })).status, 400);
});

test("a client that disconnects mid-stream aborts its request within one step", async () => {
  const metricsText = async () => (await fetch(`${srv.url}/metrics`)).text();
  const abortsBefore = abortCount(await metricsText());
  const ac = new AbortController();
  const r = await fetch(`${srv.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: MESSAGES, max_tokens: 60, ignore_eos: true, stream: true }),
    signal: ac.signal,
  });
  const reader = r.body!.getReader();
  await reader.read();
  assert.equal(srv.engine.stats.running, 1);
  ac.abort();
  const stepsAtClose = srv.engine.stats.steps;
  assert.ok(await until(() => srv.engine.stats.running === 0));
  assert.ok(srv.engine.stats.steps - stepsAtClose <= 2, `stopped after ${srv.engine.stats.steps - stepsAtClose} steps`);
  assert.equal(srv.engine.stats.kvCacheUsage, 0);
  assert.equal(abortCount(await metricsText()), abortsBefore + 1);
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
});

type Family = { name: string; metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string }[] };
function family(text: string, name: string): Family | undefined {
  return (parsePrometheusTextFormat(text) as Family[]).find((f) => f.name === name);
}
function value(text: string, name: string): number {
  return Number(family(text, name)!.metrics[0]!.value);
}
function abortCount(text: string): number {
  return Number(family(text, "vllm:request_success_total")!.metrics.find((m) => m.labels!.finished_reason === "abort")!.value);
}

test("/metrics parses; token counters' deltas equal the summed usage", async () => {
  const before = await (await fetch(`${srv.url}/metrics`)).text();
  let prompt = 0;
  let completion = 0;
  const reqs = [
    openai.completions.create({ model: "tiny-llama", prompt: "one", max_tokens: 5, temperature: 0 }),
    openai.completions.create({ model: "tiny-llama", prompt: ["two", "three"], max_tokens: 7, temperature: 0.7, seed: 3 }),
    openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, max_tokens: 9, temperature: 0 }),
  ];
  for (const r of await Promise.all(reqs)) {
    prompt += r.usage!.prompt_tokens;
    completion += r.usage!.completion_tokens;
  }
  const s = await openai.chat.completions.create({ model: "tiny-llama", messages: MESSAGES, max_tokens: 6, stream: true, stream_options: { include_usage: true } });
  for await (const c of s)
    if (c.usage) {
      prompt += c.usage.prompt_tokens;
      completion += c.usage.completion_tokens;
    }
  const after = await (await fetch(`${srv.url}/metrics`)).text();
  assert.equal(value(after, "vllm:prompt_tokens_total") - value(before, "vllm:prompt_tokens_total"), prompt);
  assert.equal(value(after, "vllm:generation_tokens_total") - value(before, "vllm:generation_tokens_total"), completion);
  for (const name of [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:cache_config_info",
  ])
    assert.ok(family(after, name), `${name} in ${JSON.stringify((parsePrometheusTextFormat(after) as Family[]).map((f) => f.name))}`);
  assert.equal(family(after, "vllm:num_requests_running")!.metrics[0]!.labels!.model_name, "tiny-llama");
  const ttft = family(after, "vllm:time_to_first_token_seconds")!.metrics[0]!;
  assert.ok(Number(ttft.buckets!["+Inf"]) >= 5, JSON.stringify(ttft));
  const done = (t: string) => family(t, "vllm:request_success_total")!.metrics.filter((m) => m.labels!.finished_reason !== "abort").reduce((a, m) => a + Number(m.value), 0);
  assert.equal(done(after) - done(before), 5);
});

test("a request refused with 429 part-way through its n choices leaves none of them running", async () => {
  const small = await startServer(model, tokenizer, { maxNumSeqs: 1, maxWaiting: 1 });
  try {
    let tokens = 0;
    small.engine.onEvent((e) => e.type === "token" && tokens++);
    // choice 0 runs, choice 1 waits, choice 2 finds the queue full: all or none
    const r = await post(`${small.url}/v1/completions`, { prompt: "a", n: 3, max_tokens: 100, ignore_eos: true });
    assert.equal(r.status, 429);
    isError(r, 429);
    assert.ok(await until(() => small.engine.stats.running === 0 && small.engine.stats.waiting === 0, 1000), JSON.stringify(small.engine.stats));
    assert.ok(tokens < 10, `the refused choices generated ${tokens} tokens`);
  } finally {
    await small.close();
  }
});

test("too many prompts times n is refused before any prompt is tokenized", async () => {
  const encode = tokenizer.encode;
  let calls = 0;
  tokenizer.encode = ((...a: Parameters<typeof encode>) => (calls++, encode.apply(tokenizer, a))) as typeof encode;
  try {
    const r = await post(`${srv.url}/v1/completions`, { prompt: Array.from({ length: 100_000 }, () => "a"), max_tokens: 1 });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json().error.param, "n");
    assert.equal((await post(`${srv.url}/v1/completions`, { prompt: ["a", "b"], n: 9, max_tokens: 1 })).status, 400);
    assert.equal(calls, 0);
  } finally {
    tokenizer.encode = encode;
  }
});
