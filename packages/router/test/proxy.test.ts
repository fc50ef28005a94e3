// The proxy in front of two real `torchts serve` replicas: SSE and JSON bodies byte for byte as a direct
// connection gives them (ids and timestamps aside), the official openai SDK through the router, a client
// disconnect passed on (the replica aborts the generation), and OpenAI-shaped errors for what the router
// refuses itself, while the replica's own 4xx pass through unchanged.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { metric, modelDir, spawnReplicas, type ChildReplica } from "./replicas.js";
import { post, startRouter, until, type RunningRouter } from "./router_helpers.js";

let reps: ChildReplica[];
let rt: RunningRouter;
before(async () => {
  reps = await spawnReplicas(2, modelDir(), ["--max-num-seqs", "4"]);
  rt = await startRouter(reps.map((r) => r.url));
});
after(async () => {
  await rt?.close();
  for (const r of reps ?? []) await r.kill();
});

/** What differs between two runs of the same greedy request: its id and creation time. */
const normalize = (s: string) => s.replace(/"id":"[a-z]+-[0-9a-f]+"/g, '"id":"X"').replace(/"created":\d+/g, '"created":0');

test("SSE and JSON bodies through the router equal a direct connection's, byte for byte", async () => {
  const cases: [string, Record<string, unknown>][] = [
    ["/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "stream me some bytes" }], max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } }],
    ["/v1/completions", { model: "tiny", prompt: "héllo wörld ✓ ", max_tokens: 10, temperature: 0, stream: true, ignore_eos: true }],
    ["/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "json please" }], max_tokens: 8, temperature: 0 }],
    ["/v1/completions", { model: "tiny", prompt: [5, 6, 7, 8], max_tokens: 6, temperature: 0, logprobs: 2 }],
  ];
  for (const [path, body] of cases) {
    // each run under its own cache_salt, so neither reuses the other's prefix (cached_tokens would differ)
    const via = await post(`${rt.url}${path}`, { ...body, cache_salt: `via-${path}-${JSON.stringify(body).length}` });
    assert.equal(via.status, 200, via.text);
    const served = via.headers.get("x-torchts-replica")!;
    const direct = await post(`http://${served}${path}`, { ...body, cache_salt: `direct-${path}-${JSON.stringify(body).length}` });
    assert.equal(via.headers.get("content-type"), direct.headers.get("content-type"));
    assert.equal(normalize(via.text), normalize(direct.text), `${path} ${JSON.stringify(body).slice(0, 60)}`);
    if (body.stream) assert.match(via.text, /data: \[DONE\]\n\n$/);
    assert.ok(via.headers.get("x-session-token"), "the session token names the replica");
  }
});

test("the openai SDK works through the router (chat, streaming, completions, models)", async () => {
  const client = new OpenAI({ baseURL: `${rt.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30_000 });
  const chat = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 5, temperature: 0 });
  assert.equal(chat.object, "chat.completion");
  assert.equal(chat.usage!.completion_tokens, chat.choices[0]!.finish_reason === "length" ? 5 : chat.usage!.completion_tokens);
  const stream = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 5, temperature: 0, stream: true });
  let text = "";
  for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
  assert.equal(text, chat.choices[0]!.message.content);
  const cmpl = await client.completions.create({ model: "tiny", prompt: "abc", max_tokens: 3, temperature: 0 });
  assert.equal(cmpl.object, "text_completion");
  const models = await client.models.list();
  assert.equal(models.data[0]!.id, "tiny");
});

test("a client that disconnects mid-stream aborts the generation on the replica", async () => {
  const ac = new AbortController();
  const r = await fetch(`${rt.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny", prompt: "a long one", max_tokens: 400, ignore_eos: true, temperature: 0, stream: true }),
    signal: ac.signal,
  });
  const served = `http://${r.headers.get("x-torchts-replica")}`;
  const aborts = await metric(served, "vllm:request_success_total", { finished_reason: "abort" });
  const reader = r.body!.getReader();
  await reader.read();
  ac.abort();
  assert.ok(await until(async () => (await metric(served, "vllm:request_success_total", { finished_reason: "abort" })) === aborts + 1, 10_000), "the replica saw the abort");
  assert.ok(await until(async () => (await metric(served, "vllm:num_requests_running")) === 0, 10_000));
  assert.ok(await until(() => rt.router.pool.replicas.every((x) => x.inFlight === 0)), "the router's in-flight count is released");
});

test("errors: the router's own are OpenAI-shaped; a replica's 4xx passes through unchanged", async () => {
  const shape = (j: any, status: number) => {
    assert.equal(typeof j.error.message, "string");
    assert.equal(typeof j.error.type, "string");
    assert.ok("param" in j.error);
    assert.equal(j.error.code, status);
  };
  const badJson = await post(`${rt.url}/v1/chat/completions`, "{not json");
  assert.equal(badJson.status, 400);
  shape(badJson.json(), 400);
  const arr = await post(`${rt.url}/v1/completions`, [1, 2]);
  assert.equal(arr.status, 400);
  shape(arr.json(), 400);
  const badPriority = await post(`${rt.url}/v1/completions`, { prompt: "x" }, { "x-torchts-priority": "high" });
  assert.equal(badPriority.status, 400);
  assert.equal(badPriority.json().error.param, "x-torchts-priority");
  const nf = await fetch(`${rt.url}/v2/nothing`);
  assert.equal(nf.status, 404);
  shape(await nf.json(), 404);
  const media = await fetch(`${rt.url}/v1/completions`, { method: "POST", headers: { "content-type": "text/plain" }, body: "hi" });
  assert.equal(media.status, 415);
  shape(await media.json(), 415);
  // the replica's validation: the same status and body as direct
  const bad = { model: "tiny", prompt: "x", max_tokens: -3 };
  const via = await post(`${rt.url}/v1/completions`, bad);
  const direct = await post(`${reps[0]!.url}/v1/completions`, bad);
  assert.equal(via.status, 400);
  assert.equal(via.text, direct.text);
  const unknownModel = await post(`${rt.url}/v1/chat/completions`, { model: "nope", messages: [{ role: "user", content: "x" }] });
  assert.equal(unknownModel.status, 404);
  const health = await (await fetch(`${rt.url}/health`)).json();
  assert.deepEqual(health, { status: "ok", replicas: { healthy: 2, total: 2 } });
});

test("/metrics parses as Prometheus text and counts what went through", async () => {
  const { default: parse } = await import("parse-prometheus-text-format");
  const families = new Map(parse(await (await fetch(`${rt.url}/metrics`)).text()).map((f) => [f.name, f]));
  for (const name of [
    "torchts_router_requests_total", "torchts_router_time_to_first_token_seconds", "torchts_router_time_per_output_token_seconds",
    "torchts_router_e2e_request_latency_seconds", "torchts_router_overhead_seconds", "torchts_router_picks_total", "torchts_router_prefix_index_hit_ratio",
    "torchts_router_replica_up", "torchts_router_replica_in_flight",
  ])
    assert.ok(families.has(name), name);
  const ok = families.get("torchts_router_requests_total")!.metrics.filter((m) => m.labels?.code === "200").reduce((s, m) => s + Number(m.value), 0);
  const picks = families.get("torchts_router_picks_total")!.metrics.reduce((s, m) => s + Number(m.value), 0);
  assert.ok(ok >= 7 && picks >= ok, `${ok} answered, ${picks} picks`);
  const ttft = families.get("torchts_router_time_to_first_token_seconds")!.metrics[0] as unknown as { count: string };
  assert.ok(Number(ttft.count) >= 3, "streams were timed");
});
