// Bounded body fuzz: 300 mutated request bodies (wrong types, missing fields, huge numbers, invalid
// JSON, bad UTF-8, wrong content types, oversized bodies) get only 2xx/4xx, each answer within its
// time limit, 4xx answers in OpenAI's error shape, and /health stays ok.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { load, modelDir } from "./helpers.js";
import { startServer, until, type Running } from "./server_helpers.js";

let srv: Running;
before(async () => {
  const { model, tokenizer } = await load(modelDir());
  srv = await startServer(model, tokenizer, { maxNumSeqs: 4 }, { bodyLimit: 256 * 1024 });
});
after(async () => {
  await srv.close();
});

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const WEIRD: unknown[] = [
  null, true, false, 0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, "", "x", "9", "\u0000", "💥".repeat(50), [], [1, 2], [[]], [null], {}, { a: 1 },
  "x".repeat(5000), Array.from({ length: 300 }, (_, i) => i), [-5], [1e12], [[1, 2], "a"],
];

const BASES: Record<string, Record<string, unknown>> = {
  "/v1/chat/completions": { model: "tiny-llama", messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 },
  "/v1/completions": { model: "tiny-llama", prompt: "hi", max_tokens: 2, temperature: 0 },
  "/tokenize": { prompt: "hi" },
  "/detokenize": { tokens: [104, 105] },
};
const FIELDS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed", "stream", "stream_options",
  "logit_bias", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop_token_ids", "min_tokens", "echo", "tokens", "logprobs", "response_format", "tools", "ignore_eos"];

test("300 mutated bodies: no 5xx, error shape on 4xx, server stays healthy", async () => {
  const r = rng(1234);
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const statuses = new Map<number, number>();
  const deadline = Date.now() + 60_000;
  for (let i = 0; i < 300 && Date.now() < deadline; i++) {
    const path = pick(Object.keys(BASES));
    const body: Record<string, unknown> = structuredClone(BASES[path]!);
    let raw: string | Uint8Array;
    let type = "application/json";
    const kind = i % 10;
    if (kind < 5) {
      // one to three fields set to odd values, or deleted
      for (let k = 0, n = 1 + Math.floor(r() * 3); k < n; k++) {
        const f = pick(FIELDS);
        if (r() < 0.2) delete body[f];
        else body[f] = structuredClone(pick(WEIRD));
      }
      if (r() < 0.3) (body.messages as unknown) = [{ role: pick(["user", "", 7, null]), content: pick(WEIRD) }];
      if (r() < 0.2) body.stream = true;
      raw = JSON.stringify(body);
    } else if (kind === 5) {
      const s = JSON.stringify(body);
      raw = s.slice(0, Math.floor(r() * s.length)); // truncated JSON
    } else if (kind === 6) {
      raw = Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xed, 0xa0, 0x80]), Buffer.from('","max_tokens":2}')]);
    } else if (kind === 7) {
      type = pick(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", ""]);
      raw = JSON.stringify(body);
    } else if (kind === 8) {
      raw = JSON.stringify({ ...body, prompt: "y".repeat(300 * 1024) }); // over the body limit
    } else {
      raw = pick(["null", "[]", "\"str\"", "42", "{\"__proto__\":{\"x\":1}}", "{\"constructor\":{\"prototype\":{}}}", "{}", "{\"messages\":[{}]}", "{\"prompt\":[[]]}", "{\"prompt\":1e400,\"max_tokens\":1e400}"]);
    }
    const headers: Record<string, string> = type ? { "content-type": type } : {};
    const res = await fetch(`${srv.url}${path}`, { method: "POST", headers, body: raw as BodyInit, signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    assert.ok(res.status < 500, `${path} ${String(raw).slice(0, 200)} -> ${res.status} ${text.slice(0, 300)}`);
    if (res.status >= 400) {
      const e = JSON.parse(text).error;
      assert.equal(typeof e.message, "string", text);
      assert.equal(e.code, res.status, text);
    }
  }
  assert.ok([...statuses.keys()].some((s) => s >= 400 && s < 500));
  assert.ok(statuses.has(413) && statuses.has(415) && statuses.has(400), JSON.stringify([...statuses]));
  assert.ok(await until(() => srv.engine.stats.running === 0 && srv.engine.stats.waiting === 0, 10_000));
  const h = await fetch(`${srv.url}/health`);
  assert.equal(h.status, 200);
});
