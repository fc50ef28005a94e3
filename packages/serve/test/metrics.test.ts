// /metrics against the requests that made it: parsed by parse-prometheus-text-format, the deltas of
// vllm:prompt_tokens_total, vllm:generation_tokens_total, vllm:request_success_total{finished_reason}
// and the counts of the TTFT, inter-token and e2e histograms equal what the openai SDK's responses say
// (usage and finish_reason, choice by choice); refused requests count nowhere; the gauges follow a
// running request. (server.test.ts checks the families exist and the token totals of a few requests.)
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { load, modelDir } from "./helpers.js";
import { family, histogram, sampleValue, scrape, type Metrics } from "./robust_helpers.js";
import { post, startServer, until, type Running } from "./server_helpers.js";

let srv: Running;
let openai: OpenAI;
before(async () => {
  const { model, tokenizer } = await load(modelDir());
  srv = await startServer(model, tokenizer, { maxNumSeqs: 4 });
  openai = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30_000 });
});
after(async () => {
  await srv.close();
});

const MODEL = "tiny-llama";
const REASONS = ["stop", "length", "abort"];

interface Tally {
  prompt: number;
  completion: number;
  choices: number;
  reasons: Record<string, number>;
}

function snapshot(fs: Metrics) {
  return {
    prompt: sampleValue(fs, "vllm:prompt_tokens_total"),
    generation: sampleValue(fs, "vllm:generation_tokens_total"),
    success: Object.fromEntries(REASONS.map((r) => [r, sampleValue(fs, "vllm:request_success_total", { finished_reason: r })])),
    ttft: histogram(fs, "vllm:time_to_first_token_seconds"),
    itl: histogram(fs, "vllm:inter_token_latency_seconds"),
    e2e: histogram(fs, "vllm:e2e_request_latency_seconds"),
  };
}

test("counter and histogram deltas equal the summed usage and finish reasons of the SDK's requests", { timeout: 60_000 }, async () => {
  const t0 = performance.now();
  const before = snapshot(await scrape(srv.url));
  const tally: Tally = { prompt: 0, completion: 0, choices: 0, reasons: {} };
  const count = (usage: OpenAI.CompletionUsage | null | undefined, reasons: (string | null)[]) => {
    assert.ok(usage, "a response without usage");
    tally.prompt += usage.prompt_tokens;
    tally.completion += usage.completion_tokens;
    tally.choices += reasons.length;
    for (const r of reasons) tally.reasons[r!] = (tally.reasons[r!] ?? 0) + 1;
  };
  // the token "A" and a stop string made of it: logit_bias forces it, so these requests stop for certain
  const a = (await post(`${srv.url}/tokenize`, { prompt: "A", add_special_tokens: false })).json().tokens[0] as number;
  const eos = 2;
  const forceA = { logit_bias: { [a]: 100 } };

  const plain = await Promise.all([
    openai.completions.create({ model: MODEL, prompt: "one", max_tokens: 5, temperature: 0 }),
    openai.completions.create({ model: MODEL, prompt: ["two", "three", "four"], max_tokens: 7, temperature: 0.8, seed: 3 }),
    openai.completions.create({ model: MODEL, prompt: [5, 6, 7, 8], max_tokens: 6, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming),
    openai.completions.create({ model: MODEL, prompt: "eos now", max_tokens: 9, logit_bias: { [eos]: 100 } }),
    openai.completions.create({ model: MODEL, prompt: "stop id", max_tokens: 9, ...forceA, stop_token_ids: [a] } as OpenAI.CompletionCreateParamsNonStreaming),
  ]);
  for (const r of plain) count(r.usage, r.choices.map((c) => c.finish_reason));
  assert.deepEqual(plain[3]!.choices.map((c) => [c.finish_reason, plain[3]!.usage!.completion_tokens]), [["stop", 1]]);
  assert.deepEqual(plain[4]!.choices.map((c) => [c.finish_reason, plain[4]!.usage!.completion_tokens]), [["stop", 1]]);

  const chats = await Promise.all([
    openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 9, temperature: 0 }),
    openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "say AA" }], max_completion_tokens: 9, ...forceA, stop: ["AA"] }),
  ]);
  for (const r of chats) count(r.usage, r.choices.map((c) => c.finish_reason));
  assert.equal(chats[1]!.choices[0]!.finish_reason, "stop");
  assert.equal(chats[1]!.usage!.completion_tokens, 2);

  // streams: usage from the include_usage chunk, finish reasons from the choices' last chunks
  const streams = [
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "stream" }], max_tokens: 6, stream: true, stream_options: { include_usage: true } }),
    await openai.completions.create({ model: MODEL, prompt: "streamed", max_tokens: 4, ignore_eos: true, stream: true, stream_options: { include_usage: true } } as OpenAI.CompletionCreateParamsStreaming),
  ];
  for (const s of streams) {
    let usage: OpenAI.CompletionUsage | null | undefined;
    const reasons: (string | null)[] = [];
    for await (const c of s as AsyncIterable<{ usage?: OpenAI.CompletionUsage | null; choices: { index: number; finish_reason: string | null }[] }>) {
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) if (ch.finish_reason) reasons[ch.index] = ch.finish_reason;
    }
    count(usage, reasons);
  }

  // refused requests count nowhere
  await assert.rejects(openai.completions.create({ model: MODEL, prompt: "x", max_tokens: 10_000 }), OpenAI.BadRequestError);
  await assert.rejects(openai.chat.completions.create({ model: "gpt-4", messages: [{ role: "user", content: "x" }] }), OpenAI.NotFoundError);
  await assert.rejects(openai.completions.create({ model: MODEL, prompt: [300], max_tokens: 1 }), OpenAI.BadRequestError);

  const fs = await scrape(srv.url);
  const after = snapshot(fs);
  const elapsed = (performance.now() - t0) / 1000;
  assert.equal(tally.choices, 1 + 3 + 1 + 1 + 1 + 2 + 2);
  assert.equal(after.prompt - before.prompt, tally.prompt, "vllm:prompt_tokens_total");
  assert.equal(after.generation - before.generation, tally.completion, "vllm:generation_tokens_total");
  for (const r of REASONS) assert.equal(after.success[r]! - before.success[r]!, tally.reasons[r] ?? 0, `vllm:request_success_total{finished_reason="${r}"}`);
  // one first token and one e2e observation per choice; an inter-token gap per token after the first
  assert.equal(after.ttft.count - before.ttft.count, tally.choices, "TTFT count");
  assert.equal(after.e2e.count - before.e2e.count, tally.choices, "e2e count");
  assert.equal(after.itl.count - before.itl.count, tally.completion - tally.choices, "ITL count");
  // the latencies sum to something inside the test's own span, choice by choice
  const e2eSum = after.e2e.sum - before.e2e.sum;
  assert.ok(e2eSum > 0 && e2eSum <= elapsed * tally.choices, `e2e sum ${e2eSum} over ${elapsed} s`);
  assert.ok(after.ttft.sum - before.ttft.sum <= e2eSum + 1e-9);
  for (const h of [after.ttft, after.itl, after.e2e]) {
    const counts = Object.entries(h.buckets).sort(([x], [y]) => (x === "+Inf" ? Infinity : Number(x)) - (y === "+Inf" ? Infinity : Number(y))).map(([, v]) => v);
    assert.ok(counts.every((v, i) => i === 0 || v >= counts[i - 1]!), `buckets not cumulative: ${JSON.stringify(h.buckets)}`);
    assert.equal(h.buckets["+Inf"], h.count);
  }
});

test("metric types, the model_name label on every vllm: sample, and cache_config_info", async () => {
  const fs = await scrape(srv.url);
  const types: Record<string, string> = {
    "vllm:prompt_tokens_total": "COUNTER",
    "vllm:generation_tokens_total": "COUNTER",
    "vllm:request_success_total": "COUNTER",
    "vllm:num_requests_running": "GAUGE",
    "vllm:num_requests_waiting": "GAUGE",
    "vllm:kv_cache_usage_perc": "GAUGE",
    "vllm:time_to_first_token_seconds": "HISTOGRAM",
    "vllm:inter_token_latency_seconds": "HISTOGRAM",
    "vllm:e2e_request_latency_seconds": "HISTOGRAM",
  };
  for (const [name, type] of Object.entries(types)) assert.equal(family(fs, name).type, type, name);
  // every series, the histograms' included (read as series: see robust_helpers.ts)
  for (const f of fs.series.filter((x) => x.name.startsWith("vllm:")))
    for (const m of f.metrics) assert.equal(m.labels?.model_name, MODEL, `${f.name} ${JSON.stringify(m)}`);
  const info = family(fs, "vllm:cache_config_info").metrics[0]!;
  assert.equal(info.labels!.max_num_seqs, String(srv.engine.maxNumSeqs));
  assert.equal(info.labels!.max_model_len, String(srv.engine.maxModelLen));
});

test("the gauges follow a running request: running 1 and KV usage above 0 while it runs, back to 0 after", { timeout: 60_000 }, async () => {
  const ac = new AbortController();
  const stream = await openai.completions.create(
    { model: MODEL, prompt: "gauge", max_tokens: 100, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming,
    { signal: ac.signal },
  );
  const it = (stream as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  await it.next();
  const during = await scrape(srv.url);
  assert.equal(sampleValue(during, "vllm:num_requests_running"), 1);
  assert.equal(sampleValue(during, "vllm:num_requests_waiting"), 0);
  const kv = sampleValue(during, "vllm:kv_cache_usage_perc");
  assert.ok(kv > 0 && kv <= 1, `kv_cache_usage_perc ${kv}`);
  ac.abort();
  await it.return?.();
  assert.ok(await until(() => srv.engine.stats.running === 0, 5000));
  const done = await scrape(srv.url);
  assert.equal(sampleValue(done, "vllm:num_requests_running"), 0);
  assert.equal(sampleValue(done, "vllm:kv_cache_usage_perc"), 0);
});
