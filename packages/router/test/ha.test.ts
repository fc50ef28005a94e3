// Active-active HA: two routers over the same four replicas share no state; each builds its prefix index
// from the replicas' KV-event streams and reads the same metrics. The request stream alternates between
// them, and for every request the other router is asked (dry run) where it would send it: they agree on
// >= 95% of picks. One router is a `torchts router --config` process, the other in-process; the process is
// then killed (SIGKILL) mid-run: a client that retries on the other router loses nothing.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { modelDir, spawnReplicas, spawnRouter, type ChildReplica, type ChildRouter } from "./replicas.js";
import { post, startRouter, type RunningRouter } from "./router_helpers.js";
import { workload } from "./workload.js";

const dir = modelDir();
let reps: ChildReplica[];
let a: ChildRouter, b: RunningRouter;
before(async () => {
  reps = await spawnReplicas(4, dir, ["--kv-events", "--max-num-seqs", "4", "--num-kv-blocks", "96", "--max-num-batched-tokens", "128"]);
  // the same configuration for both (CPU replicas answer scrapes late: see prefix_routing.test.ts)
  const cfg = { tokenizer: { model: dir }, health: { staleAfterMs: 5000 } };
  const file = join(dir, "router.yaml");
  writeFileSync(file, stringify({ apiVersion: "torchts.router/v1", kind: "RouterConfig", replicas: reps.map((r) => ({ url: r.url })), ...cfg }));
  [a, b] = await Promise.all([spawnRouter(file), startRouter(reps.map((r) => r.url), cfg)]);
});
after(async () => {
  await a?.kill();
  await b?.close();
  for (const r of reps ?? []) await r.kill();
});

test("two routers given the same request stream agree on >= 95% of picks", { timeout: 90_000 }, async () => {
  const turns = workload({ prompts: 8, requests: 64, sysChars: 512, maxTokens: 2, seed: 11, salt: "ha" });
  let agree = 0;
  const served = new Set<string>();
  for (let i = 0; i < turns.length; i++) {
    const [serve, other] = i % 2 ? [a, b] : [b, a];
    const dry = (await post(`${other.url}/v1/chat/completions`, turns[i]!.body, { "x-torchts-dry-run": "1" })).json();
    const r = await post(`${serve.url}/v1/chat/completions`, turns[i]!.body);
    assert.equal(r.status, 200);
    served.add(r.headers.get("x-torchts-replica")!);
    if (dry.replica === r.headers.get("x-torchts-replica")) agree++;
  }
  console.log(`# agreement ${agree}/${turns.length}`);
  assert.ok(agree / turns.length >= 0.95, `${agree} of ${turns.length}`);
  assert.equal(served.size, 4);
});

test("a router killed mid-run loses no request for a client that retries on the other", { timeout: 90_000 }, async () => {
  const turns = workload({ prompts: 8, requests: 48, sysChars: 256, maxTokens: 4, seed: 12, salt: "ha2", stream: true });
  const routers = [a.url, b.url];
  let retried = 0;
  const one = async (body: Record<string, unknown>, first: number) => {
    for (let k = 0; k < 2; k++) {
      try {
        const r = await fetch(`${routers[(first + k) % 2]}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
        const text = await r.text();
        // a whole answer: 200 and a stream that ended with [DONE]
        if (r.status === 200 && text.endsWith("data: [DONE]\n\n")) return true;
      } catch {
        /* the router went away mid-request: try the other */
      }
      retried++;
    }
    return false;
  };
  let next = 0;
  const results: boolean[] = [];
  const worker = async (w: number) => {
    for (let i = next++; i < turns.length; i = next++) {
      if (i === 16) void a.kill("SIGKILL"); // one router dies while requests are in flight on it
      results[i] = await one(turns[i]!.body, (i + w) % 2);
    }
  };
  await Promise.all([0, 1, 2, 3].map(worker));
  assert.equal(results.filter(Boolean).length, turns.length, "every request answered in full");
  console.log(`# retried ${retried}`);
  assert.ok(retried > 0, "some requests did need the other router");
});
