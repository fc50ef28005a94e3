// Replicas found by DNS (a Kubernetes headless Service in production; here `localhost`): the router
// resolves the name, scrapes what it finds and routes there; addresses that leave the answer leave the
// pool.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Pool, validateConfig } from "../src/index.js";
import { modelDir, spawnReplica } from "./replicas.js";
import { post, startRouter } from "./router_helpers.js";

test("discovery by DNS: the router finds a replica by name and routes to it", { timeout: 60_000 }, async () => {
  const rep = await spawnReplica(modelDir());
  const rt = await startRouter([], { discovery: [{ dns: "localhost", port: rep.port, family: 4, refreshMs: 200 }] });
  try {
    assert.deepEqual(rt.router.pool.replicas.map((r) => r.id), [`127.0.0.1:${rep.port}`]);
    assert.ok(rt.router.pool.replicas[0]!.healthy);
    const r = await post(`${rt.url}/v1/completions`, { model: "tiny", prompt: "found you", max_tokens: 2 });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("x-torchts-replica"), `127.0.0.1:${rep.port}`);
  } finally {
    await rt.close();
    await rep.kill();
  }
});

test("discovered replicas join and leave with the DNS answer; configured ones stay", () => {
  const cfg = validateConfig({ apiVersion: "torchts.router/v1", replicas: [{ url: "http://10.0.0.9:8000", name: "fixed" }], discovery: [{ dns: "x", port: 8000 }] });
  const pool = new Pool(cfg);
  pool.setDiscovered([{ url: "http://10.0.0.2:8000", role: "both" }, { url: "http://10.0.0.1:8000", role: "both" }]);
  assert.deepEqual(pool.replicas.map((r) => r.id), ["fixed", "10.0.0.1:8000", "10.0.0.2:8000"]);
  const kept = pool.replicas[1]!;
  kept.inFlight = 3;
  pool.setDiscovered([{ url: "http://10.0.0.1:8000", role: "both" }, { url: "http://10.0.0.3:8000", role: "decode" }]);
  assert.deepEqual(pool.replicas.map((r) => r.id), ["fixed", "10.0.0.1:8000", "10.0.0.3:8000"]);
  assert.equal(pool.replicas[1], kept, "a replica still in the answer keeps its state");
  assert.equal(pool.replicas[2]!.role, "decode");
  pool.stop();
});
