// Flow control on its own: strict priority bands, round-robin turns between tenants, a bounded queue
// (429 queue-full, eviction of the lowest band by a higher one), 503 after the queue timeout, sheddable
// requests (priority < 0) dropped first while everything is saturated, and a cancelled request leaving.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Cancelled, FlowController, Rejected } from "../src/index.js";

/** A controller over `slots` units of capacity that the test frees by hand. */
function setup(o: { maxQueued?: number; queueTimeoutMs?: number; saturated?: () => boolean } = {}) {
  let free = 0;
  const order: string[] = [];
  const fc = new FlowController<string>({ maxQueued: o.maxQueued ?? 1000, queueTimeoutMs: o.queueTimeoutMs ?? 60_000 }, o.saturated ?? (() => false));
  const submit = (band: number, tenant: string, name: string, signal?: AbortSignal) =>
    fc.admit(band, tenant, () => (free > 0 ? (free--, order.push(name), name) : null), signal);
  const release = (n = 1) => {
    free += n;
    fc.pump();
  };
  return { fc, submit, release, order };
}

const settle = () => new Promise((r) => setImmediate(r));

test("strict priority: a higher band always goes first, FCFS within a tenant", async () => {
  const { submit, release, order } = setup();
  const all = [submit(0, "a", "low1"), submit(5, "a", "high1"), submit(0, "a", "low2"), submit(5, "a", "high2"), submit(-1, "a", "shed1")];
  release(5);
  await Promise.all(all);
  assert.deepEqual(order, ["high1", "high2", "low1", "low2", "shed1"]);
});

test("fairness: with two tenants backlogged and one sending 10x the other's rate, the quieter gets >= 40% of dispatches", async () => {
  const { submit, release, order } = setup();
  const pending: Promise<unknown>[] = [];
  // each tick: tenant "loud" adds 10 requests, "quiet" adds 1, and one request is dispatched
  for (let tick = 0; tick < 40; tick++) {
    for (let k = 0; k < 10; k++) pending.push(submit(0, "loud", `loud-${tick}-${k}`));
    pending.push(submit(0, "quiet", `quiet-${tick}`));
    release(2);
    await settle();
  }
  // while both were backlogged (the quiet tenant's 40 all went within these 80 dispatches)
  const window = order.slice(0, 80);
  const quiet = window.filter((n) => n.startsWith("quiet")).length;
  assert.ok(quiet / window.length >= 0.4, `quiet got ${quiet} of ${window.length}`);
  // and within a tenant, first come first served
  const loud = order.filter((n) => n.startsWith("loud"));
  assert.deepEqual(loud.slice(0, 5), ["loud-0-0", "loud-0-1", "loud-0-2", "loud-0-3", "loud-0-4"]);
  release(1000);
  await Promise.all(pending);
});

test("three tenants take turns round robin", async () => {
  const { submit, release, order } = setup();
  const p = ["a", "a", "a", "b", "b", "c"].map((t, i) => submit(0, t, `${t}${i}`));
  release(6);
  await Promise.all(p);
  assert.deepEqual(order, ["a0", "b3", "c5", "a1", "b4", "a2"]);
});

test("a full queue answers 429 queue-full; a higher band evicts the newest of the lowest band", async () => {
  const { submit, release } = setup({ maxQueued: 3 });
  const a = submit(0, "t", "a");
  const b = submit(-2, "t", "b");
  const c = submit(-2, "u", "c");
  const evicted = assert.rejects(c, (e: Rejected) => e instanceof Rejected && e.status === 429 && e.reason === "queue-full-evicted");
  await assert.rejects(submit(-2, "t", "d"), (e: Rejected) => e instanceof Rejected && e.status === 429 && e.reason === "queue-full");
  await assert.rejects(submit(-5, "t", "d"), (e: Rejected) => e.status === 429 && e.reason === "queue-full", "no band below -5 to evict");
  const e = submit(0, "t", "e");
  await evicted;
  release(3);
  assert.deepEqual(await Promise.all([a, e, b]), ["a", "e", "b"]);
});

test("a request that waits past the queue timeout gets 503 queue-timeout", async () => {
  const { fc, submit } = setup({ queueTimeoutMs: 30 });
  await assert.rejects(submit(0, "t", "x"), (e: Rejected) => e instanceof Rejected && e.status === 503 && e.reason === "queue-timeout");
  assert.equal(fc.depth, 0);
});

test("while saturated, sheddable requests are refused at once and queued ones are dropped first", async () => {
  let saturated = false;
  const { fc, submit, release, order } = setup({ saturated: () => saturated });
  const queuedShed = submit(-1, "t", "shed-queued");
  const keep = submit(0, "t", "keep");
  saturated = true;
  await assert.rejects(submit(-1, "t", "shed-new"), (e: Rejected) => e.status === 429 && e.reason === "saturated-sheddable");
  fc.pump();
  await assert.rejects(queuedShed, (e: Rejected) => e.status === 429 && e.reason === "saturated-sheddable");
  saturated = false;
  release(1);
  assert.equal(await keep, "keep");
  assert.deepEqual(order, ["keep"]);
});

test("a cancelled request leaves the queue; a free slot goes to the next", async () => {
  const { fc, submit, release } = setup();
  const ac = new AbortController();
  const gone = submit(0, "t", "gone", ac.signal);
  const next = submit(0, "t", "next");
  ac.abort();
  await assert.rejects(gone, (e) => e instanceof Cancelled);
  assert.equal(fc.depth, 1);
  release(1);
  assert.equal(await next, "next");
});
