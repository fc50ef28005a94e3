// `torchts bench serve` / benchServe(): vLLM's benchmark client against the real server (in-process,
// on 127.0.0.1, over the tiny random model). Every run is a bounded number of requests; the checks
// are the definitions (TTFT <= E2EL, TPOT's formula, ordered percentiles, throughput = count /
// duration, goodput = requests within the SLOs / duration), never timings.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { PreTrainedTokenizer } from "torchts/transformers";
import { BenchArgumentError, benchServe, type BenchServeResult } from "../src/index.js";
import { arrivalTimes } from "../src/bench/arrivals.js";
import { allowedTokenIds, randomRequests } from "../src/bench/dataset.js";
import { METRICS, percentile } from "../src/bench/metrics.js";
import { sendRequest } from "../src/bench/request.js";
import { SeededRandom } from "../src/bench/rng.js";
import OpenAI from "openai";
import { load, modelDir } from "./helpers.js";
import { startServer, type Running } from "./server_helpers.js";

const BIN = fileURLToPath(new URL("../../torchts/bin/torchts.js", import.meta.url));

let dir: string;
let tokenizer: PreTrainedTokenizer;
let srv: Running;

before(async () => {
  dir = modelDir();
  const loaded = await load(dir);
  tokenizer = loaded.tokenizer;
  srv = await startServer(loaded.model, tokenizer, { maxNumSeqs: 8 });
});
after(async () => {
  await srv.close();
});

/** The server's own totals (its Prometheus registry): TTFT and E2E histogram sums in seconds, tokens generated. */
async function serverTotals(): Promise<{ ttft: number; e2e: number; generated: number }> {
  const all = await srv.server.registry.getMetricsAsJSON();
  const value = (name: string, suffix: string) =>
    ((all.find((m) => m.name === name)?.values ?? []) as { value: number; metricName?: string }[]).filter((v) => (v.metricName ?? name) === name + suffix).reduce((s, v) => s + v.value, 0);
  return { ttft: value("vllm:time_to_first_token_seconds", "_sum"), e2e: value("vllm:e2e_request_latency_seconds", "_sum"), generated: value("vllm:generation_tokens_total", "") };
}

/** The client's clock encloses the server's: a request is sent before it arrives, and its first and
 *  last chunks are read after the server made them. So each client sum is at least the server's. */
async function checkAgainstServer(before: Awaited<ReturnType<typeof serverTotals>>, r: BenchServeResult): Promise<void> {
  const now = await serverTotals();
  assert.equal(now.generated - before.generated, r.total_output_tokens, "the server generated what the client counted");
  const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
  assert.ok(sum(r.ttfts) >= now.ttft - before.ttft, `client TTFT sum ${sum(r.ttfts)} >= server's ${now.ttft - before.ttft}`);
  assert.ok(sum(r.latencies) >= now.e2e - before.e2e, `client E2EL sum ${sum(r.latencies)} >= server's ${now.e2e - before.e2e}`);
}

const close = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${what}: ${a} != ${b}`);

/** The definitions every run must satisfy, recomputed from its per-request lists. */
function checkConsistent(r: BenchServeResult, percentiles: number[]): void {
  const ok = r.errors.map((e) => e === "");
  assert.equal(r.completed + r.failed, r.num_prompts);
  assert.equal(r.completed, ok.filter(Boolean).length);
  const ttfts: number[] = [];
  const tpots: number[] = [];
  const itls: number[] = [];
  const e2els: number[] = [];
  r.errors.forEach((err, i) => {
    if (err) return;
    const ttft = r.ttfts[i]!;
    const lat = r.latencies[i]!;
    assert.ok(ttft > 0 && ttft <= lat, `request ${i}: ttft ${ttft} <= e2el ${lat}`);
    // E2EL is the last token chunk: TTFT plus every gap after it.
    close(ttft + r.itls[i]!.reduce((s, x) => s + x, 0), lat, `request ${i}: ttft + sum(itl)`);
    ttfts.push(ttft * 1000);
    e2els.push(lat * 1000);
    for (const g of r.itls[i]!) itls.push(g * 1000);
    if (r.output_lens[i]! > 1) tpots.push(((lat - ttft) / (r.output_lens[i]! - 1)) * 1000);
  });
  const samples = { ttft: ttfts, tpot: tpots, itl: itls, e2el: e2els };
  for (const m of METRICS) {
    const xs = samples[m];
    close(r[`mean_${m}_ms`], xs.reduce((s, x) => s + x, 0) / xs.length, `mean ${m}`);
    close(r[`median_${m}_ms`], percentile(xs, 50), `median ${m}`);
    assert.ok(r[`std_${m}_ms`] >= 0);
    let prev = -Infinity;
    for (const p of percentiles) {
      const v = r[`p${p}_${m}_ms`];
      assert.ok(v >= prev, `${m}: p${p} ${v} >= ${prev}`);
      assert.ok(v >= Math.min(...xs) && v <= Math.max(...xs), `${m}: p${p} within the samples`);
      prev = v;
    }
  }
  const outTotal = r.output_lens.reduce((s, x) => s + x, 0);
  const inTotal = r.input_lens.reduce((s, x, i) => s + (ok[i] ? x : 0), 0);
  assert.equal(r.total_output_tokens, outTotal);
  assert.equal(r.total_input_tokens, inTotal);
  close(r.request_throughput * r.duration, r.completed, "request throughput * duration");
  close(r.output_throughput * r.duration, outTotal, "output throughput * duration");
  close(r.total_token_throughput * r.duration, outTotal + inTotal, "total token throughput * duration");
  assert.ok(r.duration >= Math.max(...r.start_times.map((s, i) => s + r.latencies[i]!)) - 1e-6, "duration covers every request");
}

test("benchServe on /v1/completions: 12 token-id prompts, concurrency 4, every token counted, metrics consistent", { timeout: 120_000 }, async () => {
  const percentiles = [50, 90, 99];
  let calls = 0;
  const server = await serverTotals();
  const r = await benchServe({ baseUrl: srv.url, tokenizer: dir, numPrompts: 12, maxConcurrency: 4, inputLen: 16, outputLen: 8, ignoreEos: true, metricPercentiles: percentiles, onRequestDone: () => calls++ });
  assert.equal(r.model_id, "tiny-llama"); // no model given: the first of /v1/models
  assert.equal(r.backend, "openai");
  assert.equal(r.completed, 12, r.errors.join("; "));
  assert.equal(r.failed, 0);
  assert.equal(calls, 12);
  assert.equal(r.total_output_tokens, 12 * 8); // usage's completion_tokens, ignore_eos
  assert.deepEqual(r.output_lens, new Array(12).fill(8));
  assert.deepEqual(r.input_lens, new Array(12).fill(16)); // token-id prompts: the server counts exactly inputLen
  assert.equal(r.total_input_tokens, 12 * 16);
  assert.ok(r.mean_tpot_ms > 0);
  assert.ok(r.max_concurrent_requests >= 1 && r.max_concurrent_requests <= 4, `peak in flight ${r.max_concurrent_requests} <= 4`);
  assert.ok(r.queue_times.every((q) => q >= 0));
  assert.equal(r.request_goodput, null); // no SLOs given
  checkConsistent(r, percentiles);
  await checkAgainstServer(server, r);
});

test("benchServe on chat: text prompts with a shared prefix, concurrency 1 sends one at a time, goodput counts the requests within the SLO", { timeout: 120_000 }, async () => {
  const server = await serverTotals();
  const r = await benchServe({ baseUrl: srv.url, endpoint: "/v1/chat/completions", model: "tiny-llama", tokenizer, numPrompts: 6, maxConcurrency: 1, inputLen: 12, outputLen: 6, prefixLen: 4, requestRate: 200, burstiness: 0.5, seed: 3, metricPercentiles: [90] });
  assert.equal(r.backend, "openai-chat");
  assert.equal(r.completed, 6, r.errors.join("; "));
  assert.equal(r.total_output_tokens, 36);
  assert.equal(r.max_concurrent_requests, 1);
  // usage's prompt_tokens: the chat template's tokens come on top of the 16 prompt tokens.
  for (const n of r.input_lens) assert.ok(n > 16, `prompt_tokens ${n}`);
  // One at a time: each request starts after the previous one ended.
  const order = r.start_times.map((s, i) => [s, s + r.latencies[i]!] as const).sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < order.length; i++) assert.ok(order[i]![0] >= order[i - 1]![1] - 1e-6, `request ${i} overlaps the one before`);
  checkConsistent(r, [90]);
  await checkAgainstServer(server, r); // chat's opening role chunk, sent before any token, is not the TTFT

  // Goodput with the run's own median TTFT as the SLO: exactly the requests at or under it count.
  const slo = r.median_ttft_ms;
  const g = await benchServe({ baseUrl: srv.url, model: "tiny-llama", tokenizer, numPrompts: 6, maxConcurrency: 2, inputLen: 8, outputLen: 4, goodput: { ttft: slo, e2el: 1e9 } });
  const within = g.ttfts.filter((t, i) => !g.errors[i] && t * 1000 <= slo).length;
  close(g.request_goodput! * g.duration, within, "goodput * duration");
});

test("a failing endpoint: every request is counted failed with the server's message", { timeout: 60_000 }, async () => {
  const r = await benchServe({ baseUrl: srv.url, model: "no-such-model", tokenizer, numPrompts: 3, inputLen: 4, outputLen: 2 });
  assert.equal(r.completed, 0);
  assert.equal(r.failed, 3);
  for (const e of r.errors) assert.match(e, /404|model/i);
  assert.equal(r.total_output_tokens, 0);
  assert.equal(r.request_throughput, 0);
});

/** A server that answers one scripted SSE stream: each step is [ms to wait, the event's data]. */
async function scripted(steps: [number, string][]): Promise<{ url: string; server: HttpServer }> {
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on("end", async () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const [ms, data] of steps) {
        await new Promise((r) => setTimeout(r, ms));
        res.write(`data: ${data}\n\n`);
      }
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address() as { port: number };
  return { url: `http://127.0.0.1:${addr.port}`, server };
}

test("the stream reader: chat's opening role chunk is not the first token; usage gives the counts; an error event fails the request", async () => {
  const chunk = (delta: object, finish: string | null = null) => JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] });
  const { url, server } = await scripted([
    [0, chunk({ role: "assistant", content: "" })],
    [60, chunk({ content: "ab" })],
    [5, chunk({ content: "c" })],
    [5, chunk({}, "length")],
    [0, JSON.stringify({ object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15 } })],
    [0, "[DONE]"],
  ]);
  try {
    const client = new OpenAI({ baseURL: url, apiKey: "unused", maxRetries: 0, timeout: 10_000 });
    const spec = { endpoint: "/v1/chat/completions" as const, model: "m", ignoreEos: true };
    const o = await sendRequest(client, spec, { prompt: "hi", promptLen: 1, outputLen: 4 }, performance.now());
    assert.equal(o.success, true, o.error);
    assert.ok(o.ttft >= 0.05, `TTFT ${o.ttft} s counts from the first content, not the role chunk`);
    assert.equal(o.itl.length, 2); // "ab" -> "c" -> the finish chunk
    assert.equal(o.generatedText, "abc");
    assert.equal(o.outputTokens, 4);
    assert.equal(o.promptLen, 11);
    close(o.ttft + o.itl[0]! + o.itl[1]!, o.latency, "ttft + itl");
  } finally {
    server.close();
  }
  const failing = await scripted([
    [0, JSON.stringify({ object: "text_completion", choices: [{ index: 0, text: "x", finish_reason: null }] })],
    [0, JSON.stringify({ error: { message: "engine fell over", type: "internal_error", param: null, code: 500 } })],
  ]);
  try {
    const client = new OpenAI({ baseURL: failing.url, apiKey: "unused", maxRetries: 0, timeout: 10_000 });
    const o = await sendRequest(client, { endpoint: "/v1/completions", model: "m", ignoreEos: false }, { prompt: [1, 2], promptLen: 2, outputLen: 4 }, performance.now());
    assert.equal(o.success, false);
    assert.match(o.error, /engine fell over/);
  } finally {
    failing.server.close();
  }
});

test("benchServe refuses bad options before sending anything", async () => {
  const base = { baseUrl: srv.url, tokenizer, numPrompts: 2, inputLen: 4, outputLen: 2 };
  const bad: [object, RegExp][] = [
    [{ numPrompts: 0 }, /numPrompts/],
    [{ requestRate: 0 }, /requestRate/],
    [{ requestRate: Number.NaN }, /requestRate/],
    [{ burstiness: -1 }, /burstiness/],
    [{ maxConcurrency: 1.5 }, /maxConcurrency/],
    [{ inputLen: 0, prefixLen: 0 }, /at least one token/],
    [{ outputLen: 0 }, /outputLen/],
    [{ endpoint: "/v1/embeddings" }, /endpoint/],
    [{ goodput: { latency: 5 } }, /goodput/],
    [{ baseUrl: "127.0.0.1:8000" }, /baseUrl/],
    [{ tokenizer: "/nonexistent/tokenizer" }, /tokenizer/],
  ];
  for (const [o, msg] of bad) await assert.rejects(benchServe({ ...base, ...o } as Parameters<typeof benchServe>[0]), (e: Error) => e instanceof BenchArgumentError && msg.test(e.message), JSON.stringify(o));
});

test("the random dataset: seeded, a shared prefix, no special tokens, exact token-id lengths", () => {
  const opts = { numPrompts: 5, inputLen: 10, outputLen: 3, prefixLen: 4, text: false };
  const a = randomRequests(tokenizer, opts, new SeededRandom(7));
  assert.deepEqual(randomRequests(tokenizer, opts, new SeededRandom(7)), a);
  assert.notDeepEqual(randomRequests(tokenizer, opts, new SeededRandom(8)), a);
  const allowed = new Set(allowedTokenIds(tokenizer));
  for (const r of a) {
    const ids = r.prompt as number[];
    assert.equal(ids.length, 14);
    assert.equal(r.promptLen, 14);
    assert.equal(r.outputLen, 3);
    assert.deepEqual(ids.slice(0, 4), (a[0]!.prompt as number[]).slice(0, 4));
    for (const id of ids) assert.ok(allowed.has(id));
  }
  // The text form encodes back to its stated length.
  for (const r of randomRequests(tokenizer, { ...opts, text: true }, new SeededRandom(7))) assert.equal(tokenizer.encode(r.prompt as string, { addSpecialTokens: false }).length, r.promptLen);
});

test("arrival times: all at 0 at rate inf; else increasing and ending at numPrompts / rate", () => {
  assert.deepEqual(arrivalTimes(4, Infinity, 1, new SeededRandom(0)), [0, 0, 0, 0]);
  for (const burstiness of [0.3, 1, 4]) {
    const t = arrivalTimes(50, 10, burstiness, new SeededRandom(1));
    for (let i = 1; i < t.length; i++) assert.ok(t[i]! >= t[i - 1]!);
    close(t[49]!, 5, `last arrival, burstiness ${burstiness}`);
  }
  const even = arrivalTimes(4, 2, Infinity, new SeededRandom(0));
  for (let i = 0; i < 4; i++) close(even[i]!, (i + 1) / 2, "fixed gaps");
  // Gamma(k, theta) draws have mean k * theta.
  const rng = new SeededRandom(5);
  let s = 0;
  for (let i = 0; i < 4000; i++) s += rng.gamma(0.5, 2);
  assert.ok(Math.abs(s / 4000 - 1) < 0.1, `gamma mean ${s / 4000}`);
});

function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (err += d));
    const t = setTimeout(() => c.kill("SIGKILL"), 100_000);
    c.on("exit", (code) => {
      clearTimeout(t);
      resolve({ code, out, err });
    });
  });
}

test("npx torchts bench serve: vLLM's table, a progress bar, the JSON file and the PNG", { timeout: 120_000 }, async () => {
  const tmp = mkdtempSync(join(tmpdir(), "torchts-bench-"));
  const json = join(tmp, "r.json");
  const png = join(tmp, "r.png");
  const r = await run([
    "bench", "serve", "--base-url", srv.url, "--model", "tiny-llama", "--tokenizer", dir, "--num-prompts", "12", "--request-rate", "100",
    "--burstiness", "2", "--max-concurrency", "4", "--input-len", "16", "--output-len", "8", "--seed", "1", "--ignore-eos",
    "--goodput", "ttft:100000", "e2el:100000", "--metric-percentiles", "50,90,99", "--json", json, "--plot", png,
  ]);
  assert.equal(r.code, 0, r.err);
  const lines = r.out.split("\n");
  const top = lines.indexOf("============ Serving Benchmark Result ============");
  const end = lines.indexOf("=".repeat(50));
  assert.ok(top >= 0 && end > top, r.out);
  const rows = new Map<string, string>();
  for (const line of lines.slice(top + 1, end)) {
    if (/^-+[^-]+.*-+$/.test(line) && line.length === 50) continue; // a section rule
    const m = /^(.{40}) (\S+)$/.exec(line); // vLLM's "{:<40} {:<10}"
    assert.ok(m && m[1]!.trimEnd().endsWith(":"), `row '${line}'`);
    rows.set(m[1]!.trimEnd(), m[2]!);
  }
  assert.equal(rows.get("Successful requests:"), "12");
  assert.equal(rows.get("Failed requests:"), "0");
  assert.equal(rows.get("Total generated tokens:"), "96");
  assert.equal(rows.get("Request rate configured (RPS):"), "100.00");
  assert.equal(rows.get("Maximum request concurrency:"), "4");
  for (const name of ["TTFT", "TPOT", "ITL", "E2EL"]) for (const stat of ["Mean", "Median", "P50", "P90", "P99"]) assert.match(rows.get(`${stat} ${name} (ms):`) ?? "", /^\d+\.\d\d$/, `${stat} ${name}`);
  assert.ok(lines.includes("---------------Time to First Token----------------"));
  assert.match(r.err, /12\/12 requests \| [\d.]+ req\/s .*ETA/);
  const j = JSON.parse(readFileSync(json, "utf8"));
  assert.equal(j.completed, 12);
  assert.equal(j.total_output_tokens, 96);
  assert.equal(j.request_rate, 100);
  assert.equal(j.burstiness, 2);
  assert.equal(j.max_concurrency, 4);
  close(j.request_goodput * j.duration, 12, "every request within generous SLOs");
  for (const k of ["mean_ttft_ms", "median_tpot_ms", "std_itl_ms", "p50_e2el_ms", "p90_ttft_ms", "p99_itl_ms", "latencies"]) assert.ok(k in j, k);
  assert.ok(!("generated_texts" in j), "per-request lists only with --save-detailed");
  const bytes = readFileSync(png);
  assert.deepEqual([...bytes.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
  assert.ok(bytes.length > 1000, `${bytes.length} bytes`);
  assert.equal(bytes.readUInt32BE(16), 1000); // IHDR width
});

test("npx torchts bench serve: an unknown flag, a bad rate or a bad SLO is a usage error (exit 2)", { timeout: 120_000 }, async () => {
  const [flag, rate, slo, sub] = await Promise.all([
    run(["bench", "serve", "--base-url", srv.url, "--bogus"]),
    run(["bench", "serve", "--base-url", srv.url, "--request-rate", "fast"]),
    run(["bench", "serve", "--base-url", srv.url, "--goodput", "latency:5"]),
    run(["bench", "nope"]),
  ]);
  assert.equal(flag.code, 2);
  assert.match(flag.err, /--bogus/);
  assert.match(flag.err, /usage: torchts bench serve/);
  assert.equal(rate.code, 2);
  assert.match(rate.err, /--request-rate: expected a number > 0 or inf, got 'fast'/);
  assert.equal(slo.code, 2);
  assert.match(slo.err, /--goodput: the SLOs are ttft, tpot and e2el, got 'latency'/);
  assert.equal(sub.code, 2);
  assert.match(sub.err, /unknown benchmark 'nope'/);
});
