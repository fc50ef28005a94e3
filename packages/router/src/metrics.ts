// The router's /metrics (prom-client): requests by route and code, rejections by reason, TTFT / TPOT /
// end-to-end latency as the client sees them through the proxy, the router's own added time, picks per
// replica and role, the prefix index's hit ratio, queue depth per band and tenant, P/D decisions
// (llm-d's disagg decision counter), and each replica's state as the router sees it.
import client from "prom-client";
import type { Pool } from "./pool.js";
import type { Scheduler } from "./scheduler.js";

export type RouterMetrics = ReturnType<typeof buildMetrics>;

const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 20, 40, 80];

export function buildMetrics(pool: Pool, scheduler: Scheduler, stale: (id: string) => boolean) {
  const registry = new client.Registry();
  const r = [registry];
  const m = {
    registry,
    requests: new client.Counter({ name: "torchts_router_requests_total", help: "Requests answered, by route and HTTP status.", labelNames: ["path", "code"], registers: r }),
    rejected: new client.Counter({ name: "torchts_router_rejected_total", help: "Requests the router refused or could not serve, by reason.", labelNames: ["reason"], registers: r }),
    retries: new client.Counter({ name: "torchts_router_retries_total", help: "Requests sent again to another replica after one failed before answering.", registers: r }),
    ttft: new client.Histogram({ name: "torchts_router_time_to_first_token_seconds", help: "Arrival at the router to the first generated token sent on (streams).", buckets: LATENCY, registers: r }),
    tpot: new client.Histogram({ name: "torchts_router_time_per_output_token_seconds", help: "Time per output token after the first, through the router (streams).", buckets: LATENCY, registers: r }),
    e2e: new client.Histogram({ name: "torchts_router_e2e_request_latency_seconds", help: "Arrival at the router to the end of the response.", buckets: [...LATENCY, 160, 320], registers: r }),
    overhead: new client.Histogram({
      name: "torchts_router_overhead_seconds",
      help: "Time the router adds before the replica gets the request (parsing, scheduling, sending; queueing and prefill excluded).",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05],
      registers: r,
    }),
    queueTime: new client.Histogram({ name: "torchts_router_queue_time_seconds", help: "Time requests waited in the router's flow-control queue.", buckets: LATENCY, registers: r }),
    picks: new client.Counter({ name: "torchts_router_picks_total", help: "Requests sent to each replica, by role (decode, prefill).", labelNames: ["replica", "role"], registers: r }),
    queueDepth: new client.Gauge({ name: "torchts_router_queue_depth", help: "Requests waiting in the router, by priority band and tenant.", labelNames: ["band", "tenant"], registers: r }),
    disagg: new client.Counter({ name: "torchts_router_disagg_decision_total", help: "Prefill/decode decisions: decode-only, prefill-decode, or prefill-fallback (prefill failed, decoded alone).", labelNames: ["decision_type"], registers: r }),
  };
  new client.Gauge({
    name: "torchts_router_prefix_index_hit_ratio",
    help: "Prompt blocks found in the prefix index on the chosen replica over blocks looked up.",
    registers: r,
    collect() {
      const s = scheduler.indexStats;
      this.set(s.lookups ? s.hits / s.lookups : 0);
    },
  });
  new client.Counter({ name: "torchts_router_prefix_index_lookups_total", help: "Prompt blocks looked up in the prefix index.", registers: r, collect() { this.reset(); this.inc(scheduler.indexStats.lookups); } });
  new client.Counter({ name: "torchts_router_prefix_index_hits_total", help: "Prompt blocks found on the chosen replica.", registers: r, collect() { this.reset(); this.inc(scheduler.indexStats.hits); } });
  new client.Gauge({
    name: "torchts_router_replica_up",
    help: "1 while a replica is in the pool (healthy), 0 while it is out.",
    labelNames: ["replica"],
    registers: r,
    collect() {
      for (const x of pool.replicas) this.set({ replica: x.id }, x.healthy ? 1 : 0);
    },
  });
  new client.Gauge({
    name: "torchts_router_replica_stale",
    help: "1 while a replica's metrics are older than staleAfterMs (it counts as saturated).",
    labelNames: ["replica"],
    registers: r,
    collect() {
      for (const x of pool.replicas) this.set({ replica: x.id }, stale(x.id) ? 1 : 0);
    },
  });
  new client.Gauge({
    name: "torchts_router_replica_in_flight",
    help: "Requests this router has in flight on each replica (counted at dispatch).",
    labelNames: ["replica"],
    registers: r,
    collect() {
      for (const x of pool.replicas) this.set({ replica: x.id }, x.inFlight);
    },
  });
  return m;
}
