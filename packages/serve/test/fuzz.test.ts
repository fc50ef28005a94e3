// Bounded fuzz of the HTTP surface. 2,000 mutated requests (wrong types, missing fields, huge and
// unparsable numbers, bad UTF-8, wrong content types, oversized bodies, odd headers, wrong methods and
// paths, edge-of-limit prompts) and a list of malformed HTTP requests written on raw sockets get only
// 2xx (well formed) or 4xx (in OpenAI's error shape); afterwards the server is idle, healthy and still
// gives the same greedy answer as before. Failures are collected, not thrown at the first, so one run
// names every kind of mutation that breaks the contract.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { load, modelDir } from "./helpers.js";
import { assertOpenAIError, rawHttp, scrape } from "./robust_helpers.js";
import { post, startServer, until, type Running } from "./server_helpers.js";

const BODY_LIMIT = 256 * 1024;
let srv: Running;
let port: number;
before(async () => {
  const { model, tokenizer } = await load(modelDir());
  srv = await startServer(model, tokenizer, { maxNumSeqs: 4, kvEvents: true }, { bodyLimit: BODY_LIMIT, kvTransfer: true, kvEvents: true });
  port = Number(new URL(srv.url).port);
});
after(async () => {
  await srv.close();
});

/** A small LCG: the same seed gives the same 2,000 cases on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const WEIRD: unknown[] = [
  null, true, false, 0, -0, -1, 1, 1.5, 16, 17, 128, 2 ** 31, 2 ** 31 + 1, 2 ** 53 + 1, 2 ** 63, 1e308, -1e308, 5e-324, Number.MAX_SAFE_INTEGER,
  "", "x", "9", "1e1", "\u0000", "\ud800", "\u202e", "💥".repeat(50), "x".repeat(5000),
  [], [1, 2], [[]], [null], [[1, 2], "a"], [-5], [1e12], [255], [256], Array.from({ length: 300 }, (_, i) => i), Array.from({ length: 300 }, () => "s"),
  {}, { a: 1 }, { "-1": 5 }, { "1e1": 1 }, { "300": 1 }, { "5": "x" }, { "5": 1e9 }, { include_usage: "yes" }, { type: "json_schema" }, { type: 7 },
  JSON.parse("[".repeat(60) + "]".repeat(60)),
];
// Number literals JSON.stringify cannot write (they overflow, underflow or are not JSON at all).
const RAW_VALUES = ["1e400", "-1e400", "1e-400", "123456789012345678901234567890", "-0", "0.1e1", "01", "NaN", "Infinity", '"\\ud800"', '"\\u0000"', "1.", ".5", "+1", "0x10"];
const RAW = "@@raw@@";

const BASES: Record<string, Record<string, unknown>> = {
  "/v1/chat/completions": { model: "tiny-llama", messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 },
  "/v1/completions": { model: "tiny-llama", prompt: "hi", max_tokens: 2, temperature: 0 },
  "/tokenize": { prompt: "hi" },
  "/detokenize": { tokens: [104, 105] },
  "/v1/kv_blocks": { token_ids: [104, 105, 106], cache_salt: "s" },
};
const FIELDS = [
  "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed", "stream", "stream_options",
  "logit_bias", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop_token_ids", "min_tokens", "echo", "tokens", "logprobs", "top_logprobs",
  "response_format", "tools", "tool_choice", "ignore_eos", "skip_special_tokens", "add_generation_prompt", "add_special_tokens", "suffix", "best_of", "user", "token_ids",
  "cache_salt", "priority", "kv_transfer_params",
];
const CONTENT_TYPES = [
  "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "application/json-patch+json", "text/json",
  "application/octet-stream", "", "*/*", "application/", "json",
];
const ODD_HEADERS: Record<string, string>[] = [
  { "content-encoding": "gzip" }, { "content-encoding": "br" }, { "content-encoding": "x-bogus" }, { "content-type": "application/json; charset=utf-16" },
  { "content-type": "application/json; charset=iso-8859-1" }, { "content-type": "APPLICATION/JSON" }, { "content-type": "application/json;;;" },
  { "content-type": "application/json, text/plain" }, { "content-type": 'application/json; charset="bogus"; q=' }, { accept: "text/html" },
  { accept: "text/event-stream" }, { "accept-encoding": "gzip, br, zstd" }, { authorization: "Bearer \u00ff\u00fe" }, { authorization: "Basic Zm9vOmJhcg==" },
  { "x-request-id": "a".repeat(8000) }, { "user-agent": "\u0080\u00ff" }, { cookie: "a=b; ".repeat(500) }, { "x-forwarded-for": "not an ip" },
  { "content-language": "??" }, { "idempotency-key": "" }, { "openai-organization": "\u00e9" }, { range: "bytes=0-1" }, { "if-none-match": "*" },
];
const PATHS: [string, string][] = [
  ["GET", "/v1/chat/completions"], ["PUT", "/v1/completions"], ["DELETE", "/v1/completions"], ["PATCH", "/tokenize"], ["POST", "/v1/completions/"],
  ["POST", "//v1/completions"], ["POST", "/v1/completions?stream=true&model=x"], ["POST", "/V1/COMPLETIONS"], ["POST", "/v1/completions%ZZ"],
  ["POST", "/v1/%E0%A4%A"], ["POST", "/v1/models"], ["POST", "/health"], ["POST", "/v1"], ["POST", "/v1/embeddings"], ["GET", "/v1/models?x=%ZZ"],
  ["GET", "/metrics?name[]=1"], ["GET", "/v1/models/tiny-llama"], ["OPTIONS", "/v1/completions"], ["POST", "/v1/completions#frag"], ["GET", "/%00"],
];
const RAW_DOCS = [
  "null", "[]", '"str"', "42", "{}", '{"messages":[{}]}', '{"prompt":[[]]}', '{"prompt":1e400,"max_tokens":1e400}', '{"__proto__":{"x":1}}',
  '{"constructor":{"prototype":{}}}', '{"prompt":"a","max_tokens":2,"max_tokens":"x"}', '{"prompt":"a"', '{"prompt":"a",}', "{'prompt':'a'}", "\ufeff{}",
  '{"prompt":' + "[".repeat(50_000) + "]".repeat(50_000) + "}", '{"prompt":"a","x":' + '{"a":'.repeat(20_000) + "1" + "}".repeat(20_000) + "}", " ", "\u0000",
];
// Bytes that are never valid UTF-8 where they stand (stray continuation, overlong, surrogate, truncated).
const BAD_UTF8 = [[0x80], [0xbf], [0xc0, 0xaf], [0xc1, 0xbf], [0xf5, 0x80, 0x80, 0x80], [0xff], [0xfe], [0xed, 0xa0, 0x80], [0xf0, 0x90], [0xe2, 0x82]];

function messagesMutation(pick: <T>(xs: T[]) => T): unknown {
  return pick<() => unknown>([
    () => [{ role: pick(["user", "", 7, null, "x".repeat(100), "tool"]), content: pick(WEIRD) }],
    () => [{ role: "user", content: [{ type: "text", text: pick(WEIRD) }] }],
    () => [{ role: "user", content: [{ type: pick(WEIRD) }] }],
    () => [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }],
    () => [{ role: "user" }],
    () => Array.from({ length: 500 }, () => ({ role: "user", content: "a" })),
    () => [{ role: "user", content: "hi", name: pick(WEIRD), tool_calls: pick(WEIRD) }],
    () => [pick(WEIRD)],
    () => [{ role: "system", content: "s" }],
  ])();
}

interface Case {
  kind: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
}

function makeCase(r: () => number, i: number): Case {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  const path = pick(Object.keys(BASES));
  const body: Record<string, unknown> = structuredClone(BASES[path]!);
  const json = { "content-type": "application/json" };
  const kind = i % 20;
  if (kind < 9) {
    // one to three fields set to odd values (some written as raw literals), or deleted
    const raws: string[] = [];
    for (let k = 0, n = 1 + Math.floor(r() * 3); k < n; k++) {
      const f = pick(FIELDS);
      const u = r();
      if (u < 0.15) delete body[f];
      else if (u < 0.3) {
        body[f] = `${RAW}${raws.length}`;
        raws.push(pick(RAW_VALUES));
      } else body[f] = structuredClone(pick(WEIRD));
    }
    if (r() < 0.25) body.messages = messagesMutation(pick);
    if (r() < 0.2) body.stream = true;
    let text = JSON.stringify(body);
    raws.forEach((v, k) => (text = text.replace(`"${RAW}${k}"`, v)));
    return { kind: "fields", method: "POST", path, headers: json, body: text };
  }
  if (kind === 9) {
    const s = JSON.stringify(body);
    return { kind: "truncated", method: "POST", path, headers: json, body: s.slice(0, Math.floor(r() * s.length)) };
  }
  if (kind === 10) {
    // invalid UTF-8 spliced into a string value (or anywhere)
    const s = Buffer.from(JSON.stringify({ ...body, user: "abc" }));
    const at = r() < 0.7 ? s.indexOf('"abc"') + 2 : Math.floor(r() * s.length);
    return { kind: "bad-utf8", method: "POST", path, headers: json, body: Buffer.concat([s.subarray(0, at), Buffer.from(pick(BAD_UTF8)), s.subarray(at)]) };
  }
  if (kind === 11) {
    const type = pick(CONTENT_TYPES);
    return { kind: "content-type", method: "POST", path, headers: type ? { "content-type": type } : {}, body: JSON.stringify(body) };
  }
  if (kind === 12) {
    const field = path === "/detokenize" ? "tokens" : path === "/v1/chat/completions" ? "messages" : "prompt";
    const big = field === "tokens" ? Array.from({ length: 70_000 }, () => 1) : field === "messages" ? [{ role: "user", content: "y".repeat(BODY_LIMIT + 1) }] : "y".repeat(BODY_LIMIT + 1);
    return { kind: "oversized", method: "POST", path, headers: json, body: JSON.stringify({ ...body, [field]: big }) };
  }
  if (kind === 13) {
    const headers: Record<string, string> = { ...json };
    for (let k = 0, n = 1 + Math.floor(r() * 3); k < n; k++) Object.assign(headers, pick(ODD_HEADERS));
    if (r() < 0.3) body[pick(FIELDS)] = structuredClone(pick(WEIRD));
    return { kind: "headers", method: "POST", path, headers, body: JSON.stringify(body) };
  }
  if (kind === 14) return { kind: "raw-doc", method: "POST", path, headers: json, body: pick(RAW_DOCS) };
  if (kind === 15) {
    const [method, p] = pick(PATHS);
    return { kind: "method-path", method, path: p, headers: method === "GET" || method === "OPTIONS" ? {} : json, body: method === "GET" || method === "OPTIONS" ? undefined : JSON.stringify(body) };
  }
  if (kind === 16) {
    // at and just past the limits: the 128-token context, maxChoices 16, the vocabulary's last id
    const edge = pick<Record<string, unknown>>([
      { prompt: Array.from({ length: 127 }, () => 5), max_tokens: 1 },
      { prompt: Array.from({ length: 128 }, () => 5), max_tokens: 1 },
      { prompt: Array.from({ length: 100 }, () => 5), max_tokens: 28 },
      { prompt: Array.from({ length: 100 }, () => 5), max_tokens: 29 },
      { prompt: [255], max_tokens: 1 },
      { prompt: [256], max_tokens: 1 },
      { prompt: "a", n: 16, max_tokens: 1 },
      { prompt: "a", n: 17, max_tokens: 1 },
      { prompt: Array.from({ length: 16 }, () => "a"), max_tokens: 1 },
      { prompt: Array.from({ length: 17 }, () => "a"), max_tokens: 1 },
      { prompt: [[1, 2], [3]], n: 8, max_tokens: 1 },
      { prompt: "a", max_tokens: 2, min_tokens: 2, stop: ["a", "b"], stop_token_ids: [2], logit_bias: { "255": 100 } },
      { prompt: "a", max_tokens: 2, min_tokens: 3 },
      { prompt: "", max_tokens: 1 },
      { prompt: [""], max_tokens: 1 },
    ]);
    return { kind: "edge", method: "POST", path: "/v1/completions", headers: json, body: JSON.stringify({ ...edge, temperature: 0 }) };
  }
  if (kind === 17) {
    const n = Math.floor(r() * 2000);
    return { kind: "garbage", method: "POST", path, headers: json, body: Buffer.from(Array.from({ length: n }, () => Math.floor(r() * 256))) };
  }
  // still valid, streamed or not, with sampling settings: these must come back 200
  const validPath = path === "/tokenize" || path === "/detokenize" ? "/v1/completions" : path;
  Object.assign(body, structuredClone(BASES[validPath]!), { stream: r() < 0.5, temperature: r(), top_p: 0.5 + r() / 2, top_k: Math.floor(r() * 50), seed: Math.floor(r() * 1e9) });
  if (r() < 0.5) body.stream_options = { include_usage: true };
  return { kind: "valid", method: "POST", path: validPath, headers: json, body: JSON.stringify(body) };
}

/** What is wrong with the answer to `c`, or null. */
function check(c: Case, status: number, type: string, text: string): string | null {
  if (status >= 500 || status < 200 || (status >= 300 && status < 400)) return `status ${status}: ${text.slice(0, 200)}`;
  if (c.kind === "valid" && status !== 200) return `a valid request got ${status}: ${text.slice(0, 200)}`;
  if (status >= 400) {
    try {
      assertOpenAIError(status, text);
    } catch (e) {
      return (e as Error).message;
    }
    return null;
  }
  if (type.startsWith("text/event-stream")) {
    const events = text.split("\n\n").filter(Boolean);
    if (events.at(-1) !== "data: [DONE]") return `a stream that does not end with [DONE]: ${text.slice(-200)}`;
    for (const ev of events.slice(0, -1)) {
      const d = JSON.parse(ev.replace(/^data: /, "")) as { error?: unknown; choices?: { finish_reason?: string | null }[] };
      if (d.error) return `an error inside a 200 stream: ${ev}`;
      for (const ch of d.choices ?? []) if (ch.finish_reason && !["stop", "length"].includes(ch.finish_reason)) return `finish_reason ${ch.finish_reason}: ${ev}`;
    }
    return null;
  }
  // KV blocks are binary: whole float32 blocks, as many as x-kv-blocks says
  if (c.path === "/v1/kv_blocks" && type.startsWith("application/octet-stream")) return null;
  if (!type.startsWith("application/json")) return c.path.startsWith("/metrics") || c.method === "HEAD" ? null : `200 with content-type ${type}`;
  const b = JSON.parse(text) as { choices?: { finish_reason?: string }[]; usage?: { completion_tokens?: number }; tokens?: unknown; prompt?: unknown };
  if (c.path.includes("completions")) {
    if (!Array.isArray(b.choices) || !b.choices.length || typeof b.usage?.completion_tokens !== "number") return `a 200 completion without choices or usage: ${text.slice(0, 200)}`;
    for (const ch of b.choices) if (!["stop", "length"].includes(ch.finish_reason!)) return `finish_reason ${ch.finish_reason}`;
  }
  return null;
}

async function greedy(): Promise<string> {
  const r = await post(`${srv.url}/v1/completions`, { prompt: "The fuzz", max_tokens: 8, temperature: 0 });
  assert.equal(r.status, 200, r.text);
  return r.json().choices[0].text;
}

function failureReport(failures: Map<string, string[]>): string {
  return [...failures].map(([k, v]) => `${k} (${v.length}): ${v.slice(0, 3).join(" | ")}`).join("\n");
}

test("2,000 mutated requests: only 2xx (well formed) or 4xx (OpenAI's error shape); the server stays healthy", { timeout: 180_000 }, async () => {
  const before = await greedy();
  const kvBefore = srv.engine.stats.kvCacheUsage;
  let aborts = 0;
  srv.engine.onEvent((e) => e.type === "finish" && e.reason === "abort" && aborts++);
  const r = rng(1234);
  const cases = Array.from({ length: 2000 }, (_, i) => makeCase(r, i));
  const statuses = new Map<number, number>();
  const failures = new Map<string, string[]>();
  const fail = (kind: string, msg: string) => failures.set(kind, [...(failures.get(kind) ?? []), msg]);
  let next = 0;
  // four clients at once, as a server sees them; each request has its own time limit
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = next++; i < cases.length; i = next++) {
        const c = cases[i]!;
        const what = `#${i} ${c.kind} ${c.method} ${c.path} ${JSON.stringify(c.headers).slice(0, 100)} ${String(c.body ?? "").slice(0, 120)}`;
        let res: Response;
        let text: string;
        try {
          res = await fetch(`${srv.url}${c.path}`, { method: c.method, headers: c.headers, body: c.body as BodyInit | undefined, signal: AbortSignal.timeout(10_000) });
          text = await res.text();
        } catch (e) {
          fail(c.kind, `${what}: no answer (${(e as Error).message})`);
          continue;
        }
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const bad = check(c, res.status, res.headers.get("content-type") ?? "", text);
        if (bad) fail(c.kind, `${what}: ${bad}`);
        if ((res.status === 429 || res.status === 503) && !res.headers.get("retry-after")) fail(c.kind, `${what}: ${res.status} without Retry-After`);
        if (i % 250 === 249) {
          const h = await fetch(`${srv.url}/health`, { signal: AbortSignal.timeout(10_000) });
          if (h.status !== 200) fail("health", `after #${i}: /health ${h.status}`);
        }
      }
    }),
  );
  assert.equal(failures.size, 0, `${[...failures.values()].reduce((s, v) => s + v.length, 0)} of 2000 broke the contract:\n${failureReport(failures)}`);
  // every family of answers was reached: validation, limits, content types, routing, success
  for (const s of [200, 400, 404, 413, 415]) assert.ok(statuses.has(s), `no ${s} among ${JSON.stringify([...statuses])}`);
  assert.ok(await until(() => srv.engine.stats.running === 0 && srv.engine.stats.waiting === 0, 10_000), JSON.stringify(srv.engine.stats));
  assert.equal(srv.engine.stats.kvCacheUsage, kvBefore);
  assert.equal(aborts, 0, "no client went away, yet requests were aborted (a forward pass threw?)");
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  await scrape(srv.url);
  assert.equal(await greedy(), before);
});

test("malformed HTTP on raw sockets: 2xx or 4xx in OpenAI's error shape, never a crash", { timeout: 120_000 }, async () => {
  const greedyBefore = await greedy();
  const body = '{"prompt":"hi","max_tokens":2,"temperature":0}';
  const req = (b: string | Buffer, extra = "", target = "/v1/completions") => {
    const bytes = typeof b === "string" ? Buffer.from(b) : b;
    return Buffer.concat([Buffer.from(`POST ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n${extra}Content-Length: ${bytes.length}\r\n\r\n`), bytes]);
  };
  const cases: [string, string | Buffer][] = [
    ["garbage request line", "GARBAGE\r\n\r\n"],
    ["HTTP/2 preface on HTTP/1", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"],
    ["two Content-Lengths", `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: 3\r\n\r\n${body}`],
    ["Content-Length and chunked", `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`],
    ["bad chunk size", `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n${body}\r\n0\r\n\r\n`],
    ["negative Content-Length", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n{}"],
    ["Content-Length past 2^64", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999999999999\r\n\r\n{}"],
    ["control bytes in a header", req(body, "X-Bad: \u0001\u007f\r\n")],
    ["header section over 16 KiB", req(body, `X-Long: ${"a".repeat(20_000)}\r\n`)],
    ["3,000 headers", req(body, Array.from({ length: 3000 }, (_, i) => `X-${i}: 1\r\n`).join(""))],
    ["URL over 16 KiB", `GET /v1/${"a".repeat(100_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`],
    ["bad percent-encoding in the path", req(body, "", "/v1/completions%ZZ")],
    ["bad percent-encoding in a GET path", "GET /v1/%ZZ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
    ["no Host header", `POST /v1/completions HTTP/1.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`],
    ["Content-Length over the body limit", `POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 999999999\r\n\r\n{}`],
    ["chunked body over the body limit", `POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${"40000\r\n" + "y".repeat(0x40000) + "\r\n"}${"40000\r\n" + "y".repeat(0x40000) + "\r\n"}0\r\n\r\n`],
    ["Transfer-Encoding gzip, chunked", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"],
    ["valid chunked", `POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`],
    ["HTTP/1.0", `POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`],
    ["Expect: 100-continue", req(body, "Expect: 100-continue\r\n")],
    ["Expect: something else", req(body, "Expect: 42-nonsense\r\n")],
    ["absolute-form target", req(body, "", "http://elsewhere/v1/completions")],
    ["asterisk target", "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
    ["dot segments", "GET /v1/../metrics/../v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
    ["empty body", req("")],
    ["UTF-8 BOM before the JSON", req(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)]))],
    ["duplicate Content-Type", req(body, "Content-Type: text/plain\r\n")],
    ["obs-fold header", req(body, "X-Fold: a\r\n b\r\n")],
    ["lowercase method", `post /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`],
    ["unknown method", "BREW /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"],
    ["two requests pipelined, the second malformed", Buffer.concat([req(body).toString().replace("Connection: close\r\n", ""), "NOT HTTP\r\n\r\n"].map((s) => Buffer.from(s)))],
  ];
  const failures: string[] = [];
  for (const [name, data] of cases) {
    const r = await rawHttp(port, data);
    if (r.status === 0) failures.push(`${name}: no answer`);
    else if (r.status >= 500 || r.status < 200) failures.push(`${name}: ${r.status} ${r.body.slice(0, 200)}`);
    else if (r.status >= 400)
      try {
        assertOpenAIError(r.status, r.body, name);
      } catch (e) {
        failures.push((e as Error).message);
      }
  }
  // a body that never arrives: the client goes away part-way; the server must forget the request
  await rawHttp(port, `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"prompt":"hi"`, 200);
  assert.deepEqual(failures, [], `${failures.length} of ${cases.length} malformed requests broke the contract:\n${failures.join("\n")}`);
  assert.ok(await until(() => srv.engine.stats.running === 0 && srv.engine.stats.waiting === 0, 10_000));
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
  assert.equal(await greedy(), greedyBefore);
});
