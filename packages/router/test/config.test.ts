// The versioned YAML configuration: defaults filled in, and every kind of mistake refused with a
// message that names the key and the line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError, parseConfig } from "../src/index.js";

const MINIMAL = "apiVersion: torchts.router/v1\nkind: RouterConfig\nreplicas:\n  - url: http://127.0.0.1:8001\n";

test("a minimal file gets GIE's default pipeline and the documented defaults", () => {
  const c = parseConfig(MINIMAL);
  assert.equal(c.replicas[0]!.role, "both");
  assert.equal(c.health.scrapeIntervalMs, 100);
  assert.equal(c.health.staleAfterMs, 200);
  assert.deepEqual(c.scheduling.filters, [{ type: "saturation" }]);
  assert.deepEqual(c.scheduling.scorers.map((s) => s.type), ["prefix-cache", "no-hit-lru", "queue", "kv-cache-utilization", "in-flight", "session-affinity"]);
  assert.equal(c.scheduling.picker.type, "max-score");
  assert.equal(c.flowControl.fairnessHeader, "x-gateway-inference-fairness-id");
  assert.equal(c.disaggregation.enabled, false);
  // with token ids available, the precise (KV-event) scorer joins by default
  const p = parseConfig(`${MINIMAL}tokenizer:\n  model: /models/x\n`);
  assert.equal(p.scheduling.scorers[0]!.type, "precise-prefix-cache");
});

test("a full file round-trips its settings", () => {
  const c = parseConfig(`apiVersion: torchts.router/v1
kind: RouterConfig
server: { host: 0.0.0.0, port: 9000 }
replicas:
  - { url: "http://10.0.0.1:8000", name: p0, role: prefill }
  - { url: "http://10.0.0.2:8000", name: d0, role: decode }
tokenizer: { remote: true }
health: { scrapeIntervalMs: 50, staleAfterMs: 150 }
scheduling:
  filters: [{ type: saturation }, { type: prefix-affinity, threshold: 0.5 }]
  scorers:
    - { type: precise-prefix-cache, weight: 3, speculativeTtlMs: 500 }
    - { type: queue, weight: 2 }
  picker: { type: weighted-random }
disaggregation: { enabled: true, uncachedTokensThreshold: 64 }
flowControl: { maxQueued: 10, queueTimeoutMs: 1000, maxInFlightPerReplica: 4, saturation: { queueDepth: 3, kvUsage: 0.9 } }
`);
  assert.equal(c.server.port, 9000);
  assert.deepEqual(c.replicas.map((r) => [r.name, r.role]), [["p0", "prefill"], ["d0", "decode"]]);
  assert.equal(c.scheduling.scorers[0]!.speculativeTtlMs, 500);
  assert.equal(c.scheduling.filters[1]!.threshold, 0.5);
  assert.equal(c.flowControl.saturation.queueDepth, 3);
  assert.equal(c.disaggregation.uncachedTokensThreshold, 64);
});

const bad = (text: string, ...patterns: RegExp[]) => {
  assert.throws(() => parseConfig(text, "r.yaml"), (e: Error) => {
    assert.ok(e instanceof ConfigError, e.message);
    for (const p of patterns) assert.match(e.message, p);
    return true;
  });
};

test("bad configurations are refused with the path and the line", () => {
  bad("apiVersion: torchts.router/v2\nreplicas: []\n", /apiVersion must be "torchts.router\/v1"/, /line 1/);
  bad("replicas:\n  - url: http://a:1\n", /apiVersion must be/);
  bad(`${MINIMAL}scheduling:\n  scorers:\n    - type: prefix\n`, /\/scheduling\/scorers\/0\/type \(line 7\): must be one of "prefix-cache"/);
  bad(`${MINIMAL}scheduling:\n  scorers:\n    - type: queue\n      weight: -1\n`, /weight \(line 8\): must be >= 0/);
  bad(`${MINIMAL}health:\n  scrapeIntervalMs: 500\n`, /scrapeIntervalMs \(line 6\): must be <= 100/);
  bad(`${MINIMAL}helth: {}\n`, /unknown key 'helth'/);
  bad(`${MINIMAL}    rol: decode\n`, /\/replicas\/0 \(line 4\): unknown key 'rol'/);
  bad("apiVersion: torchts.router/v1\nreplicas:\n  - url: http://a:1/v1\n", /give the server's root/);
  bad("apiVersion: torchts.router/v1\nreplicas:\n  - url: nope\n", /not a URL/);
  bad("apiVersion: torchts.router/v1\nreplicas:\n  - url: http://a:1\n  - url: http://a:1\n", /listed twice/);
  bad("apiVersion: torchts.router/v1\nreplicas:\n  - { url: 'http://a:1', role: prefill }\n", /at least one replica must decode/);
  bad(`${MINIMAL}disaggregation: { enabled: true }\n`.replace("8001", "8001\n    role: decode"), /no replica has role prefill or both/);
  bad(`${MINIMAL}scheduling:\n  scorers: [{ type: precise-prefix-cache }]\n`, /precise-prefix-cache needs token ids/);
  bad(`${MINIMAL}health: { staleAfterMs: 50 }\n`, /staleAfterMs .*at least scrapeIntervalMs/);
  bad("apiVersion: torchts.router/v1\nreplicas: [\n", /YAML error/);
  bad("apiVersion: torchts.router/v1\napiVersion: x\nreplicas: []\n", /YAML error/);
  bad("- 1\n- 2\n", /must be a mapping/);
  bad("apiVersion: torchts.router/v1\n", /list replicas, or find them with discovery/);
  bad("apiVersion: torchts.router/v1\ndiscovery:\n  - { dns: svc }\n", /discovery\/0 \(line 3\): missing required key 'port'/);
  // discovery alone is enough
  assert.equal(parseConfig("apiVersion: torchts.router/v1\ndiscovery:\n  - { dns: svc, port: 8000 }\n").discovery[0]!.refreshMs, 5000);
});
