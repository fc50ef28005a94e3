// Prefix-aware routing against round robin on the acceptance workload (four `torchts serve` replicas with
// KV events and pools too small for every system prompt; 8 system prompts x many users, streamed): the
// replicas' prefix-cache hit rate from their own /metrics, prompt tokens computed, and TTFT through the
// router (p50, p99), each pipeline on the same request stream under its own cache_salt.
//   node --import tsx bench/prefix_routing.ts [--requests 192] [--concurrency 8]
import { parseArgs } from "node:util";
import { metric, modelDir, spawnReplicas } from "../test/replicas.js";
import { startRouter } from "../test/router_helpers.js";
import { percentile, run, workload } from "../test/workload.js";

const { values } = parseArgs({ options: { requests: { type: "string", default: "192" }, concurrency: { type: "string", default: "8" } } });
const dir = modelDir();
const reps = await spawnReplicas(4, dir, ["--kv-events", "--max-num-seqs", "4", "--num-kv-blocks", "96", "--max-num-batched-tokens", "128"]);

async function counters() {
  let q = 0, h = 0;
  for (const r of reps) {
    q += await metric(r.url, "vllm:prefix_cache_queries_total");
    h += await metric(r.url, "vllm:prefix_cache_hits_total");
  }
  return { q, h };
}

async function measure(name: string, extra: Record<string, unknown>) {
  const rt = await startRouter(reps.map((r) => r.url), extra);
  try {
    const turns = workload({ prompts: 8, requests: Number(values.requests), sysChars: 512, maxTokens: 2, seed: 7, salt: name, stream: true });
    const a = await counters();
    const t0 = performance.now();
    const res = await run(rt.url, turns, Number(values.concurrency));
    const seconds = (performance.now() - t0) / 1000;
    const b = await counters();
    const per = new Map<string, number>();
    for (const r of res) per.set(r.replica!, (per.get(r.replica!) ?? 0) + 1);
    const ttft = res.map((r) => r.ttftMs);
    return {
      pipeline: name,
      ok: res.filter((r) => r.status === 200).length,
      hit_rate: +((b.h - a.h) / (b.q - a.q)).toFixed(3),
      prompt_tokens_computed: b.q - a.q - (b.h - a.h),
      ttft_ms: { p50: +percentile(ttft, 50).toFixed(1), p99: +percentile(ttft, 99).toFixed(1) },
      requests_per_s: +(res.length / seconds).toFixed(2),
      per_replica: [...per.values()],
    };
  } finally {
    await rt.close();
  }
}

try {
  const rr = await measure("round-robin", { scheduling: { filters: [], scorers: [{ type: "queue", weight: 1 }], picker: { type: "round-robin" } } });
  const pa = await measure("prefix-aware", { tokenizer: { model: dir }, health: { staleAfterMs: 1000 } });
  console.log(JSON.stringify({ rr, pa, hit_rate_ratio: +(pa.hit_rate / rr.hit_rate).toFixed(2), p50_ttft_ratio: +(pa.ttft_ms.p50 / rr.ttft_ms.p50).toFixed(2) }, null, 1));
} finally {
  for (const r of reps) await r.kill();
}
