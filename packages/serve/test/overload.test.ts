// Overload: 200 requests at once against maxNumSeqs 4 and maxWaiting 32 (`--max-waiting 32`). The
// excess is refused with 429, a Retry-After header and OpenAI's error body; every accepted request
// runs to the end and answers 200; the engine never holds more than maxNumSeqs + maxWaiting requests;
// afterwards it is idle and accepts requests again.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { load, modelDir } from "./helpers.js";
import { assertOpenAIError, sampleValue, scrape } from "./robust_helpers.js";
import { post, startServer, until, type Running } from "./server_helpers.js";

const MAX_NUM_SEQS = 4;
const MAX_WAITING = 32;
const CLIENTS = 200;
const MAX_TOKENS = 16;

let srv: Running;
before(async () => {
  const { model, tokenizer } = await load(modelDir());
  srv = await startServer(model, tokenizer, { maxNumSeqs: MAX_NUM_SEQS, maxWaiting: MAX_WAITING });
});
after(async () => {
  await srv.close();
});

test("200 concurrent requests against maxWaiting 32: 429 + Retry-After for the excess, 200 for every accepted one", { timeout: 120_000 }, async (t) => {
  const engine = srv.engine;
  const kvBefore = engine.stats.kvCacheUsage;
  const lengthBefore = sampleValue(await scrape(srv.url), "vllm:request_success_total", { finished_reason: "length" });
  // how many requests the engine holds right after each one it accepts (it calls through: an observer, not a stub)
  let peak = 0;
  const generate = engine.generate.bind(engine);
  engine.generate = (...args: Parameters<typeof generate>) => {
    const it = generate(...args);
    peak = Math.max(peak, engine.stats.running + engine.stats.waiting);
    return it;
  };
  let accepted = 0;
  let rejected = 0;
  const problems: string[] = [];
  try {
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const stream = i % 2 === 1;
        const chat = i % 4 >= 2;
        const body = chat
          ? { messages: [{ role: "user", content: `client ${i}` }], max_tokens: MAX_TOKENS, ignore_eos: true, temperature: 0, stream }
          : { prompt: `client ${i}`, max_tokens: MAX_TOKENS, ignore_eos: true, temperature: 0, stream };
        const r = await post(`${srv.url}/v1/${chat ? "chat/completions" : "completions"}`, body, {}, 60_000);
        if (r.status === 429) {
          rejected++;
          const ra = r.headers.get("retry-after");
          if (!ra || !/^\d+$/.test(ra) || Number(ra) < 1) problems.push(`#${i}: 429 with Retry-After ${ra}`);
          try {
            assertOpenAIError(429, r.text, `#${i}`);
            if (r.json().error.type !== "rate_limit_error") problems.push(`#${i}: 429 of type ${r.json().error.type}`);
          } catch (e) {
            problems.push((e as Error).message);
          }
          return;
        }
        if (r.status !== 200) {
          problems.push(`#${i}: ${r.status} ${r.text.slice(0, 200)}`);
          return;
        }
        accepted++;
        // an accepted request runs to its end: all MAX_TOKENS tokens, finish_reason length
        if (stream) {
          const events = r.text.split("\n\n").filter(Boolean);
          if (events.at(-1) !== "data: [DONE]") problems.push(`#${i}: stream without [DONE]`);
          const finishes = events.slice(0, -1).flatMap((e) => (JSON.parse(e.slice(6)) as { choices: { finish_reason: string | null }[] }).choices.map((c) => c.finish_reason).filter(Boolean));
          if (finishes.join() !== "length") problems.push(`#${i}: stream finished with ${JSON.stringify(finishes)}`);
        } else {
          const b = r.json();
          if (b.usage.completion_tokens !== MAX_TOKENS || b.choices[0].finish_reason !== "length") problems.push(`#${i}: ${r.text.slice(0, 300)}`);
        }
      }),
    );
  } finally {
    engine.generate = generate;
  }
  t.diagnostic(`accepted ${accepted}, rejected ${rejected}, at most ${peak} in the engine at once`);
  assert.deepEqual(problems, []);
  assert.equal(accepted + rejected, CLIENTS);
  assert.ok(accepted >= MAX_WAITING, `only ${accepted} accepted`);
  assert.ok(rejected > 0, "200 requests at once never filled a waiting queue of 32");
  assert.ok(peak <= MAX_NUM_SEQS + MAX_WAITING, `the engine held ${peak} requests at once (maxNumSeqs ${MAX_NUM_SEQS} + maxWaiting ${MAX_WAITING})`);

  assert.ok(await until(() => engine.stats.running === 0 && engine.stats.waiting === 0, 10_000), JSON.stringify(engine.stats));
  assert.equal(engine.stats.kvCacheUsage, kvBefore);
  const m = await scrape(srv.url);
  assert.equal(sampleValue(m, "vllm:request_success_total", { finished_reason: "length" }) - lengthBefore, accepted);
  assert.equal(sampleValue(m, "vllm:num_requests_waiting"), 0);
  assert.equal(sampleValue(m, "vllm:num_requests_running"), 0);
  // the queue drained: the server takes requests again
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  const again = await post(`${srv.url}/v1/completions`, { prompt: "again", max_tokens: 2 });
  assert.equal(again.status, 200, again.text);
});
