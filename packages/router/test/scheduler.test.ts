// The scheduling pipeline on replica state set by hand: deterministic picks (two schedulers with the same
// state pick alike, ties by a stable hash), a burst spread by in-flight counts, staleness as saturation,
// session targets by token and by rendezvous hashing of `user`, the hot-spot guard, and metric parsing.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HostKVTier } from "@torchts/serve";
import { Pool, Scheduler, readMetrics, routeInfo, sessionToken, validateConfig, type PickInput, type RouterConfig } from "../src/index.js";

const INFO = { priorityHeader: "x-torchts-priority", fairnessHeader: "x-gateway-inference-fairness-id", sessionHeader: "x-session-token" };

function world(extra: Record<string, unknown> = {}, n = 4): { cfg: RouterConfig; pool: Pool; s: Scheduler } {
  const cfg = validateConfig({ apiVersion: "torchts.router/v1", replicas: Array.from({ length: n }, (_, i) => ({ url: `http://127.0.0.1:${9001 + i}`, name: `r${i}` })), ...extra });
  const pool = new Pool(cfg);
  for (const r of pool.replicas) {
    r.healthy = true;
    r.metrics = { running: 0, waiting: 0, kvUsage: 0, prefixQueries: 0, prefixHits: 0, blockSize: 16, maxNumSeqs: 8 };
    r.metricsAt = Date.now();
  }
  return { cfg, pool, s: new Scheduler(cfg, pool, (salt, t, bs) => HostKVTier.keys(salt, t, bs)) };
}

const input = (text: string, headers: Record<string, string> = {}, extra: Record<string, unknown> = {}): PickInput => ({
  info: routeInfo("/v1/completions", { prompt: text, ...extra }, headers, INFO),
  tokens: [...Buffer.from(text)],
});

test("the same inputs give the same pick on two schedulers; ties go by a stable hash of the request", () => {
  // the default pipeline, each pick recorded as a dispatch would: both schedulers evolve alike
  const a = world(), b = world();
  const picks = (w: ReturnType<typeof world>) =>
    Array.from({ length: 50 }, (_, i) => {
      const inp = input(`prompt ${i} `.repeat(20));
      const m = w.s.memo(inp);
      const p = w.s.pick(inp, w.pool.replicas, m)!.replica;
      w.s.routed(inp, p, m);
      return p.id;
    });
  const pa = picks(a), pb = picks(b);
  assert.deepEqual(pa, pb);
  assert.equal(new Set(pa).size, 4);
  // equal scores everywhere (load scorers only): the request's hash decides, the same each time
  const t = world({ scheduling: { scorers: [{ type: "queue" }, { type: "in-flight" }] } });
  const tied = Array.from({ length: 40 }, (_, i) => t.s.pick(input(`other ${i}`), t.pool.replicas)!.replica.id);
  assert.ok(new Set(tied).size >= 3, "different requests spread");
  assert.deepEqual(tied, Array.from({ length: 40 }, (_, i) => t.s.pick(input(`other ${i}`), t.pool.replicas)!.replica.id));
});

test("no-hit-lru: cold prompts rotate over the replicas; a warm one stays where its prefix is", () => {
  const { s, pool } = world({ scheduling: { scorers: [{ type: "prefix-cache", weight: 3 }, { type: "no-hit-lru", weight: 2 }] } });
  const homes = Array.from({ length: 8 }, (_, k) => {
    const inp = input(`system prompt ${k} `.repeat(30));
    const m = s.memo(inp);
    const r = s.pick(inp, pool.replicas, m)!.replica;
    s.routed(inp, r, m);
    return r.id;
  });
  assert.deepEqual(homes, ["r0", "r1", "r2", "r3", "r0", "r1", "r2", "r3"]);
  assert.equal(s.pick(input(`system prompt 5 `.repeat(30) + "more"), pool.replicas)!.replica.id, "r1");
});

test("a burst of one prefix to idle replicas is spread by in-flight counts (<= 50% to one)", () => {
  const { s, pool } = world();
  const counts = new Map<string, number>();
  for (let i = 0; i < 100; i++) {
    const inp = input("the same long system prompt ".repeat(20) + `user ${i}`);
    const m = s.memo(inp);
    const p = s.pick(inp, pool.replicas, m)!;
    p.replica.inFlight++;
    s.routed(inp, p.replica, m);
    counts.set(p.replica.id, (counts.get(p.replica.id) ?? 0) + 1);
  }
  assert.ok(Math.max(...counts.values()) <= 50, JSON.stringify([...counts]));
});

test("prefix scores follow the index; the hot-spot guard drops a replica's affinity when it is far more loaded", () => {
  const { s, pool } = world({ scheduling: { scorers: [{ type: "prefix-cache", weight: 5, maxLoadGap: 3 }, { type: "in-flight", weight: 1 }] } });
  const inp = input("shared prefix ".repeat(40));
  s.routed(inp, pool.replicas[2]!, s.memo(inp));
  assert.equal(s.pick(inp, pool.replicas)!.replica.id, "r2");
  pool.replicas[2]!.inFlight = 3;
  assert.notEqual(s.pick(inp, pool.replicas)!.replica.id, "r2");
});

test("the hot-spot guard: a replica with requests waiting beyond a full batch gives up its affinity while another is idle", () => {
  // r2 runs max_num_seqs = 4 sequences at once; the load gap alone (8) would wait for 8 more than the least loaded
  const { s, pool } = world({ scheduling: { scorers: [{ type: "prefix-cache", weight: 5 }, { type: "in-flight", weight: 1 }] } });
  pool.replicas[2]!.metrics!.maxNumSeqs = 4;
  const inp = input("shared prefix ".repeat(40));
  s.routed(inp, pool.replicas[2]!, s.memo(inp));
  pool.replicas[2]!.inFlight = 4;
  assert.equal(s.pick(inp, pool.replicas)!.replica.id, "r2", "a full batch, nothing waiting yet: the prefix wins");
  pool.replicas[2]!.inFlight = 5;
  assert.notEqual(s.pick(inp, pool.replicas)!.replica.id, "r2", "one waiting, and three replicas idle");
  for (const r of pool.replicas) if (r.id !== "r2") r.inFlight = 1;
  assert.equal(s.pick(inp, pool.replicas)!.replica.id, "r2", "one waiting, but nobody idle: waiting for a slot beats recomputing the prefix");
});

test("no-hit-lru: a replica's KV event for a prompt this router sent it does not make it look more recent", () => {
  const { s, pool } = world({ tokenizer: { remote: true }, scheduling: { scorers: [{ type: "precise-prefix-cache", weight: 3 }, { type: "no-hit-lru", weight: 2 }] } });
  const prompt = (k: number) => input(`system prompt number ${k}: `.padEnd(40, "x") + String(k).repeat(200));
  const sent = [0, 1, 2, 3].map((k) => {
    const inp = prompt(k);
    const m = s.memo(inp);
    const r = s.pick(inp, pool.replicas, m)!.replica;
    s.routed(inp, r, m);
    return r.id;
  });
  assert.deepEqual(sent, ["r0", "r1", "r2", "r3"]);
  // r0 was busy: its blocks of prompt 0 are stored (and reported) only now, after the later dispatches
  s.precise.apply("r0", { type: "BlockStored", block_hashes: HostKVTier.keys("", prompt(0).tokens!, 16), parent_block_hash: null, block_size: 16, ts: Date.now() / 1000 + 5 });
  assert.equal(s.precise.coldAt.get("r0"), undefined);
  assert.equal(s.pick(prompt(4), pool.replicas)!.replica.id, "r0", "the next new prompt goes to the replica that got one longest ago");
  // a new prompt another router sent (blocks this router never routed there) still counts, at the event's time
  s.precise.apply("r1", { type: "BlockStored", block_hashes: HostKVTier.keys("", prompt(9).tokens!, 16), parent_block_hash: null, block_size: 16, ts: Date.now() / 1000 + 6 });
  assert.ok(s.precise.coldAt.get("r1")! > Date.now());
});

test("the precise index from KV events: stored blocks score, removed ones stop scoring", () => {
  const { s, pool } = world({ tokenizer: { remote: true }, scheduling: { scorers: [{ type: "precise-prefix-cache", weight: 3, speculativeTtlMs: 0 }] } });
  const inp = input("x".repeat(100));
  const keys = HostKVTier.keys("", inp.tokens!, 16);
  s.precise.apply("r3", { type: "BlockStored", block_hashes: keys, block_size: 16, ts: 1000.5 });
  // blocks nobody held: r3 just cached a new prefix (no-hit-lru's shared memory); the same blocks on r2 are not new
  assert.equal(s.precise.coldAt.get("r3"), 1_000_500);
  s.precise.apply("r2", { type: "BlockStored", block_hashes: keys.slice(0, 3), block_size: 16, ts: 2000 });
  assert.equal(s.precise.coldAt.get("r2"), undefined);
  s.precise.clear("r2");
  const p = s.pick(inp, pool.replicas)!;
  assert.equal(p.replica.id, "r3");
  assert.equal(p.ranked[0]!.scores["precise-prefix-cache"], 1);
  assert.equal(s.cachedTokens(inp, pool.replicas[3]!), 96);
  s.precise.apply("r3", { type: "BlockRemoved", block_hashes: keys.slice(2) });
  assert.equal(s.cachedTokens(inp, pool.replicas[3]!), 32);
  // garbage events change nothing
  s.precise.apply("r3", { type: "BlockStored", block_hashes: "nope" });
  s.precise.apply("r3", { type: "Whatever" });
  assert.equal(s.cachedTokens(inp, pool.replicas[3]!), 32);
  // another salt names other blocks
  assert.equal(s.cachedTokens(input("x".repeat(100), {}, { cache_salt: "t2" }), pool.replicas[3]!), 0);
});

test("no-hit-lru's shared memory: a new prompt after a shared header is cold, a cached prompt's new question is not", () => {
  const { s } = world({ tokenizer: { remote: true } });
  const header = "<|system|>You are".padEnd(32, " ");
  const a = HostKVTier.keys("", [...Buffer.from(header + "a".repeat(160))], 16);
  const b = HostKVTier.keys("", [...Buffer.from(header + "b".repeat(320))], 16);
  // r0 computes prompt a from scratch (no parent): cold
  s.precise.apply("r0", { type: "BlockStored", block_hashes: a, parent_block_hash: null, block_size: 16, ts: 1 });
  assert.equal(s.precise.coldAt.get("r0"), 1000);
  // r1 computes prompt b in chunks of 8 blocks: the first chunk's two header blocks are cached already,
  // its six after them are new to all (cold); the next chunk, new too but deeper than its length, is the
  // same prompt and does not move the time
  s.precise.apply("r1", { type: "BlockStored", block_hashes: b.slice(0, 8), parent_block_hash: null, block_size: 16, ts: 2 });
  assert.equal(s.precise.coldAt.get("r1"), 2000);
  s.precise.apply("r1", { type: "BlockStored", block_hashes: b.slice(8, 16), parent_block_hash: b[7], block_size: 16, ts: 3 });
  assert.equal(s.precise.coldAt.get("r1"), 2000);
  // r0 answers a question after prompt a: three blocks new to all, but after the 12 it already had
  const q = HostKVTier.keys("", [...Buffer.from(header + "a".repeat(160) + "question 7: what is 7 squared?".padEnd(48, "?"))], 16);
  assert.equal(q.length, 15);
  s.precise.apply("r0", { type: "BlockStored", block_hashes: q.slice(12), parent_block_hash: q[11], block_size: 16, ts: 4 });
  assert.equal(s.precise.coldAt.get("r0"), 1000, "a warm request's own blocks are not a new prompt");
  // a parent this router never saw (its stream joined late): the blocks count from the root
  s.precise.apply("r2", { type: "BlockStored", block_hashes: ["x1", "x2", "x3"], parent_block_hash: "unknown", block_size: 16, ts: 5 });
  assert.equal(s.precise.coldAt.get("r2"), 5000);
});

test("stale metrics count as saturated: the saturation filter leaves only fresh replicas, none when all are stale", () => {
  const { s, pool } = world();
  pool.replicas[0]!.metricsAt = Date.now() - 10_000;
  pool.replicas[1]!.metrics!.waiting = 5;
  pool.replicas[2]!.metrics!.kvUsage = 0.85;
  assert.ok(s.saturated(pool.replicas[0]!) && s.saturated(pool.replicas[1]!) && s.saturated(pool.replicas[2]!));
  for (let i = 0; i < 20; i++) assert.equal(s.pick(input(`p${i}`), pool.replicas)!.replica.id, "r3");
  pool.replicas[3]!.metricsAt = Date.now() - 10_000;
  assert.equal(s.pick(input("p"), pool.replicas), null);
});

test("session affinity: the token's replica while healthy; `user` by rendezvous hashing, only a dead replica's users move", () => {
  const { s, pool } = world();
  const tok = { "x-session-token": sessionToken("r1") };
  for (let i = 0; i < 20; i++) assert.equal(s.pick(input(`turn ${i}`, tok), pool.replicas)!.replica.id, "r1");
  // loaded (queue at the saturation threshold) but answering: the session waits there; stale: it moves
  pool.replicas[1]!.metrics!.waiting = 5;
  assert.equal(s.pick(input("turn x", tok), pool.replicas)!.replica.id, "r1");
  pool.replicas[1]!.metricsAt = Date.now() - 10_000;
  assert.notEqual(s.pick(input("turn y", tok), pool.replicas)!.replica.id, "r1");
  pool.replicas[1]!.metrics!.waiting = 0;
  pool.replicas[1]!.metricsAt = Date.now();
  const users = Array.from({ length: 40 }, (_, i) => `user-${i}`);
  const home = users.map((u) => s.pick(input("hi", {}, { user: u }), pool.replicas)!.replica.id);
  assert.ok(new Set(home).size >= 3, "users spread over the replicas");
  pool.replicas[0]!.healthy = false;
  const after = users.map((u) => s.pick(input("hi", {}, { user: u }), pool.replicas.filter((r) => r.healthy))!.replica.id);
  users.forEach((_, i) => {
    if (home[i] !== "r0") assert.equal(after[i], home[i], "a user on a live replica stays");
    else assert.notEqual(after[i], "r0");
  });
  // a token naming a dead replica is ignored
  assert.notEqual(s.pick(input("x", { "x-session-token": sessionToken("r0") }), pool.replicas.filter((r) => r.healthy))!.replica.id, "r0");
});

test("readMetrics reads vLLM's and SGLang's names; garbage is null", () => {
  const vllm = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 2
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.25
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m"} 100
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m"} 40
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="100",max_num_seqs="8",model_name="m"} 1
`;
  assert.deepEqual(readMetrics(vllm), { running: 3, waiting: 2, kvUsage: 0.25, prefixQueries: 100, prefixHits: 40, blockSize: 16, maxNumSeqs: 8 });
  const sgl = "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 1\n# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 4\n# TYPE sglang:token_usage gauge\nsglang:token_usage 0.5\n";
  assert.deepEqual(readMetrics(sgl), { running: 1, waiting: 4, kvUsage: 0.5, prefixQueries: 0, prefixHits: 0, blockSize: null, maxNumSeqs: null });
  assert.equal(readMetrics("<html>not metrics</html>"), null);
  assert.equal(readMetrics(""), null);
});
