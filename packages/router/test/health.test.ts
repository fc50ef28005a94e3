// Replica health as the router tracks it, against real `torchts serve` processes: a killed replica leaves
// the pool within two scrape rounds (counted in rounds, not wall time) and requests keep succeeding on the
// other; it comes back when it listens again; a stopped (SIGSTOP) replica answers nothing, goes stale, and
// stale counts as saturated, so requests avoid it until it answers again.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { modelDir, spawnReplica, type ChildReplica } from "./replicas.js";
import { post, startRouter, until, type RunningRouter } from "./router_helpers.js";
import { sessionToken } from "../src/index.js";

const dir = modelDir();
let a: ChildReplica, b: ChildReplica;
let rt: RunningRouter;
before(async () => {
  [a, b] = await Promise.all([spawnReplica(dir), spawnReplica(dir)]);
  rt = await startRouter([a.url, b.url], { health: { scrapeIntervalMs: 50, staleAfterMs: 150 } });
});
after(async () => {
  await rt?.close();
  await a?.kill();
  await b?.kill();
});

const ask = (headers: Record<string, string> = {}) => post(`${rt.url}/v1/completions`, { model: "tiny", prompt: "are you there", max_tokens: 2, temperature: 0 }, headers, 20_000);

test("a killed replica is out within two scrape rounds, requests keep succeeding, and it returns when healthy", async () => {
  const ra = rt.router.pool.replicas[0]!;
  const aId = ra.id;
  assert.ok(ra.healthy);
  await a.kill();
  const killedAt = ra.ticks;
  // sticky to the dead one: the router may not know yet; the refused connection is retried elsewhere
  const r = await ask({ "x-session-token": sessionToken(aId) });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.headers.get("x-torchts-replica"), rt.router.pool.replicas[1]!.id);
  assert.ok(await until(() => !ra.healthy, 5000));
  assert.ok(ra.downAtTick - killedAt <= 2, `out after ${ra.downAtTick - killedAt} rounds`);
  for (let i = 0; i < 5; i++) assert.equal((await ask()).status, 200);
  // back on the same port: in the pool again, and its session token reaches it
  a = await spawnReplica(dir, [], Number(new URL(`http://${aId}`).port));
  assert.ok(await until(() => ra.healthy, 20_000), "healthy again");
  const back = await ask({ "x-session-token": sessionToken(aId) });
  assert.equal(back.status, 200);
  assert.equal(back.headers.get("x-torchts-replica"), aId);
});

test("a stopped replica goes stale, counts as saturated and is avoided; it is fresh again once it answers", async () => {
  const rb = rt.router.pool.replicas[1]!;
  const state = async () => ((await (await fetch(`${rt.url}/router/replicas`)).json()) as { replicas: { id: string; stale: boolean; saturated: boolean; healthy: boolean }[] }).replicas.find((x) => x.id === rb.id)!;
  assert.equal((await state()).stale, false);
  b.child.kill("SIGSTOP");
  try {
    assert.ok(await until(async () => (await state()).stale, 5000));
    const s = await state();
    assert.equal(s.saturated, true);
    assert.equal(s.healthy, true, "not dead: it still accepts connections");
    const m = await (await fetch(`${rt.url}/metrics`)).text();
    assert.match(m, new RegExp(`torchts_router_replica_stale\\{replica="${rb.id}"\\} 1`));
    for (let i = 0; i < 4; i++) {
      const r = await ask({ "x-session-token": sessionToken(rb.id) });
      assert.equal(r.status, 200);
      assert.notEqual(r.headers.get("x-torchts-replica"), rb.id, "saturated replicas are filtered out, session or not");
    }
  } finally {
    b.child.kill("SIGCONT");
  }
  assert.ok(await until(async () => !(await state()).stale, 10_000));
});

test("with no healthy replica the router answers 503 at once, and /health says so", async () => {
  await a.kill();
  await b.kill();
  assert.ok(await until(() => rt.router.pool.replicas.every((r) => !r.healthy), 5000));
  const r = await ask();
  assert.equal(r.status, 503);
  assert.equal(r.headers.get("x-llm-d-request-dropped-reason"), "no-healthy-replica");
  assert.equal(r.json().error.code, 503);
  const h = await fetch(`${rt.url}/health`);
  assert.equal(h.status, 503);
});
