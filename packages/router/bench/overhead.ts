// Proxy overhead: time to first byte of a streamed chat completion, direct to a `torchts serve` replica
// and through a `torchts router` process in front of it, interleaved request by request (the same
// conditions for both), sequential. The first byte of a chat stream is the replica's role chunk, written
// before any generation, so it measures the HTTP path rather than the model. Also checks that the SSE
// bytes through the router equal the direct ones (ids and timestamps aside), and reads the router's own
// torchts_router_overhead_seconds histogram. A bare node:http pipe proxy (bench/bare_proxy.ts) runs beside
// them as the floor of what any Node proxy adds on this machine.
//   node --import tsx bench/overhead.ts [--requests 300] [--precise]
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { modelDir, spawnReplica, spawnRouter } from "../test/replicas.js";

const { values } = parseArgs({ options: { requests: { type: "string", default: "300" }, precise: { type: "boolean", default: false } } });
const N = Number(values.requests);

async function ttfb(url: string, i: number): Promise<{ ms: number; body: string }> {
  const body = { model: "tiny", messages: [{ role: "user", content: `measure the proxy ${i % 10}` }], max_tokens: 4, temperature: 0, stream: true, cache_salt: `s${i}` };
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  const reader = r.body!.getReader();
  const first = await reader.read();
  const ms = performance.now() - t0;
  const dec = new TextDecoder();
  let text = dec.decode(first.value, { stream: true });
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
  }
  return { ms, body: text };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const q = (xs: number[]) => ({ p50: +pct(xs, 50).toFixed(3), p90: +pct(xs, 90).toFixed(3), p99: +pct(xs, 99).toFixed(3) });
const normalize = (s: string) => s.replace(/"id":"[a-z]+-[0-9a-f]+"/g, '"id":"X"').replace(/"created":\d+/g, '"created":0');

const dir = modelDir();
const rep = await spawnReplica(dir);
const file = join(dir, "router.yaml");
writeFileSync(file, stringify({ apiVersion: "torchts.router/v1", replicas: [{ url: rep.url }], ...(values.precise ? { tokenizer: { model: dir } } : {}) }));
const router = await spawnRouter(file);
const bareChild = spawn(process.execPath, ["--import", "tsx", new URL("./bare_proxy.ts", import.meta.url).pathname, rep.url], { stdio: ["ignore", "pipe", "inherit"] });
const bare: string = await new Promise((r) => bareChild.stdout!.on("data", (d) => { const m = /listening on (\S+)/.exec(String(d)); if (m) r(m[1]!); }));
try {
  // warm both paths (JIT, keep-alive connections, the replica's first compile)
  for (let i = 0; i < 20; i++) {
    await ttfb(rep.url, i);
    await ttfb(router.url, i);
    await ttfb(bare, i);
  }
  const direct: number[] = [], via: number[] = [], viaBare: number[] = [];
  let identical = 0;
  for (let i = 0; i < N; i++) {
    // alternate which goes first, so neither path always follows the other
    let a, b;
    if (i % 2) {
      a = await ttfb(rep.url, i);
      b = await ttfb(router.url, i);
    } else {
      b = await ttfb(router.url, i);
      a = await ttfb(rep.url, i);
    }
    direct.push(a.ms);
    via.push(b.ms);
    viaBare.push((await ttfb(bare, i)).ms);
    if (normalize(a.body) === normalize(b.body)) identical++;
  }
  const metrics = await (await fetch(`${router.url}/metrics`)).text();
  const buckets = [...metrics.matchAll(/torchts_router_overhead_seconds_bucket\{le="([^"]+)"\} (\d+)/g)].map((m) => [m[1]!, Number(m[2])] as const);
  const total = buckets.at(-1)![1];
  const le = (q: number) => buckets.find(([, c]) => c >= q * total)![0];
  const out = {
    requests: N,
    scorers: values.precise ? "default + precise (local tokenizer)" : "default",
    direct_ttfb_ms: q(direct),
    router_ttfb_ms: q(via),
    bare_proxy_ttfb_ms: q(viaBare),
    added_ttfb_ms: { p50: +(pct(via, 50) - pct(direct, 50)).toFixed(3), p90: +(pct(via, 90) - pct(direct, 90)).toFixed(3), p99: +(pct(via, 99) - pct(direct, 99)).toFixed(3) },
    added_over_bare_proxy_ms: { p50: +(pct(via, 50) - pct(viaBare, 50)).toFixed(3), p90: +(pct(via, 90) - pct(viaBare, 90)).toFixed(3), p99: +(pct(via, 99) - pct(viaBare, 99)).toFixed(3) },
    router_overhead_histogram: { p50_le_s: le(0.5), p99_le_s: le(0.99), count: total },
    sse_identical: `${identical}/${N}`,
  };
  console.log(JSON.stringify(out, null, 2));
} finally {
  await router.kill();
  bareChild.kill();
  await rep.kill();
}
