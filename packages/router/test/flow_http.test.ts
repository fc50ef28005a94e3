// Flow control end to end (a real `torchts serve` replica, the router over HTTP): two tenants backlogged,
// one sending 10x the other's rate, the quieter gets >= 40% of dispatches; a full queue answers 429 with
// the reason header; a queue timeout 503; priority < 0 is shed first once the replica is saturated; a
// client that gives up while queued leaves the queue.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { metric, modelDir, spawnReplica, type ChildReplica } from "./replicas.js";
import { post, sleep, startRouter, until } from "./router_helpers.js";
import type { Dispatch } from "../src/index.js";

let rep: ChildReplica;
before(async () => {
  // a 4096-token context: the held generations below outlast several scrape rounds, however fast decode gets
  rep = await spawnReplica(modelDir(4096), ["--max-num-seqs", "1"]);
});
after(async () => {
  await rep?.kill();
});

const body = (maxTokens: number, extra: Record<string, unknown> = {}) => ({ model: "tiny", prompt: "flow control", max_tokens: maxTokens, temperature: 0, ignore_eos: true, ...extra });

/**
 * Send a streamed request at once. The replica answers its headers when the request gets a slot there (so
 * that it can still answer an error status): `status` resolves then, 0 if it was stopped first.
 */
function start(url: string, maxTokens: number) {
  const ac = new AbortController();
  const status = fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body(maxTokens, { stream: true })), signal: ac.signal }).then(
    (r) => r.status,
    () => 0,
  );
  return { status, stop: () => ac.abort() };
}

/** Start a streamed request and return once it runs (it holds a slot until `stop`). */
async function hold(url: string, maxTokens = 900) {
  const h = start(url, maxTokens);
  assert.equal(await h.status, 200);
  return h;
}

test("two tenants backlogged at a 10:1 rate: the quieter gets >= 40% of dispatches", { timeout: 60_000 }, async () => {
  const rt = await startRouter([rep.url], { flowControl: { maxInFlightPerReplica: 1, maxQueued: 500 } });
  const order: string[] = [];
  rt.router.events.on("dispatch", (d: Dispatch) => order.push(d.tenant));
  const ac = new AbortController();
  const send = (tenant: string) =>
    fetch(`${rt.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json", "x-gateway-inference-fairness-id": tenant }, body: JSON.stringify(body(64)), signal: ac.signal }).then(
      (r) => r.text().then(() => r.status),
      () => 0,
    );
  const pending: Promise<number>[] = [];
  try {
    // ten ticks: the loud tenant sends 10 requests a tick, the quiet one 1; the replica serves about half a request a tick
    for (let tick = 0; tick < 10; tick++) {
      for (let k = 0; k < 10; k++) pending.push(send("loud"));
      pending.push(send("quiet"));
      await sleep(100);
    }
    assert.ok(await until(() => order.filter((t) => t === "quiet").length === 10, 30_000), "all quiet requests dispatched");
    const window = order.slice(0, order.lastIndexOf("quiet") + 1);
    const quiet = window.filter((t) => t === "quiet").length;
    assert.ok(quiet / window.length >= 0.4, `quiet got ${quiet} of ${window.length} dispatches while both were backlogged`);
    // the loud tenant's remaining requests: their clients give up, and they leave the queue
  } finally {
    ac.abort();
    await Promise.all(pending);
    assert.ok(await until(() => rt.router.flow.depth === 0, 5000), "cancelled requests left the queue");
    await rt.close();
  }
});

test("a full queue answers 429 queue-full; waiting past the timeout answers 503 queue-timeout", { timeout: 60_000 }, async () => {
  const rt = await startRouter([rep.url], { flowControl: { maxInFlightPerReplica: 1, maxQueued: 2, queueTimeoutMs: 400 } });
  try {
    const h = await hold(rt.url);
    const queued = [post(`${rt.url}/v1/completions`, body(2)), post(`${rt.url}/v1/completions`, body(2))];
    assert.ok(await until(() => rt.router.flow.depth === 2));
    const full = await post(`${rt.url}/v1/completions`, body(2));
    assert.equal(full.status, 429);
    assert.equal(full.headers.get("x-llm-d-request-dropped-reason"), "queue-full");
    assert.equal(full.headers.get("retry-after"), "1");
    assert.equal(full.json().error.type, "rate_limit_error");
    for (const q of await Promise.all(queued)) {
      assert.equal(q.status, 503);
      assert.equal(q.headers.get("x-llm-d-request-dropped-reason"), "queue-timeout");
      assert.equal(q.json().error.code, 503);
    }
    h.stop();
    const m = await (await fetch(`${rt.url}/metrics`)).text();
    assert.match(m, /torchts_router_rejected_total\{reason="queue-full"\} 1/);
    assert.match(m, /torchts_router_rejected_total\{reason="queue-timeout"\} 2/);
  } finally {
    await rt.close();
  }
});

test("priority < 0 is shed while the replica is saturated; priority 0 waits and is served", { timeout: 120_000 }, async () => {
  // saturated at one waiting request (GIE's detector with queueDepth 1)
  const rt = await startRouter([rep.url], { flowControl: { saturation: { queueDepth: 1 } } });
  const saturated = () => (rt.router.pool.replicas[0]!.metrics?.waiting ?? 0) >= 1 && rt.router.scheduler.saturated(rt.router.pool.replicas[0]!);
  const idle = () => until(async () => (await metric(rep.url, "vllm:num_requests_running")) === 0 && (await metric(rep.url, "vllm:num_requests_waiting")) === 0, 20_000);
  /**
   * The scenario, from an idle replica. The router sees the replica through its scrapes (every 100 ms); once
   * one shows the two waiting requests, it stays saturated for a whole generation (seconds), so the requests
   * below meet the state the test saw.
   */
  async function scenario() {
    // one running, two waiting on the replica (max-num-seqs 1): saturated for two whole generations (the
    // waiting ones are not awaited: their headers come only when they get the slot). Sent to the replica
    // itself, not through the router, whose flow control would hold back the last one
    const holds = [await hold(rep.url, 4000), start(rep.url, 4000), start(rep.url, 4000)];
    try {
      if (!(await until(saturated, 10_000))) return { saturated: false } as const;
      const shed = await post(`${rt.url}/v1/completions`, body(2), { "x-torchts-priority": "-1" });
      const shedBody = await post(`${rt.url}/v1/completions`, body(2, { priority: -5 }));
      const normal = post(`${rt.url}/v1/completions`, body(2));
      const waited = await until(() => rt.router.flow.depth === 1, 5_000);
      for (const h of holds) h.stop();
      return { saturated: true, shed, shedBody, waited, normal: await normal } as const;
    } finally {
      for (const h of holds) h.stop();
      await Promise.all(holds.map((h) => h.status));
      await idle();
    }
  }
  try {
    const r = await scenario();
    assert.ok(r.saturated, "saturated");
    assert.equal(r.shed.status, 429);
    assert.equal(r.shed.headers.get("x-llm-d-request-dropped-reason"), "saturated-sheddable");
    assert.equal(r.shedBody.status, 429, "the body's priority counts too");
    assert.ok(r.waited, "priority 0 waits in the router");
    assert.equal(r.normal.status, 200);
  } finally {
    await rt.close();
  }
});
