// The replicas and what the router knows of each: health, the metrics of GIE's model-server protocol
// (vLLM's names, or SGLang's), scraped every scrapeIntervalMs (<= 100 ms), and the requests this router
// has in flight there (counted at dispatch, so a burst is spread before any scrape could show it).
//
// A refused connection or a draining /health (503) takes a replica out at once, so a dead one leaves
// within one interval; a replica that accepts but does not answer (busy, stopped) is only stale, which
// the scheduler counts as saturated, and is taken out after deadAfterMs without an answer.
import { EventEmitter } from "node:events";
import parsePrometheus from "parse-prometheus-text-format";
import type { RouterConfig, Role } from "./config.js";
import { keepAliveAgent, request, type UpstreamError } from "./upstream.js";

export interface ReplicaMetrics {
  running: number;
  waiting: number;
  kvUsage: number;
  prefixQueries: number;
  prefixHits: number;
  blockSize: number | null;
  maxNumSeqs: number | null;
}

export class Replica {
  healthy = false;
  /** Why it is out of the pool ("starting", "refused", "draining", "no answer"...). */
  reason = "starting";
  metrics: ReplicaMetrics | null = null;
  /** Date.now() of the last metrics read (stale once older than staleAfterMs). */
  metricsAt = 0;
  lastSeenAt = 0;
  inFlight = 0;
  /** Scrape rounds run for it; `downAtTick` is the round that took it out (tests count rounds, not time). */
  ticks = 0;
  downAtTick = -1;
  scraping = false;
  failures = 0;
  readonly agent = keepAliveAgent();

  constructor(
    readonly id: string,
    readonly url: URL,
    readonly role: Role,
    readonly index: number,
  ) {}

  get origin(): string {
    return this.url.origin;
  }

  canPrefill(): boolean {
    return this.role !== "decode";
  }

  canDecode(): boolean {
    return this.role !== "prefill";
  }
}

/** Reads the gauges and counters the router uses from a /metrics text (vLLM names first, then SGLang's). */
const WANTED = [
  "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
  "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:cache_config_info",
  "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
];

/** The exposition's lines (samples and their # HELP / # TYPE) of the metrics the router reads. */
function wantedLines(text: string): string {
  const keep = (name: string) => WANTED.some((w) => name === w || name === `${w}_total`);
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const name = line.startsWith("# ") ? line.split(" ", 3)[2] ?? "" : /^[^\s{]+/.exec(line)?.[0] ?? "";
    if (keep(name)) out.push(line);
  }
  return out.join("\n") + "\n";
}

export function readMetrics(text: string): ReplicaMetrics | null {
  let families: ReturnType<typeof parsePrometheus>;
  try {
    // the scrape runs every 100 ms per replica: parse only what is used (histograms are most of the text)
    families = parsePrometheus(wantedLines(text));
  } catch {
    return null;
  }
  const byName = new Map(families.map((f) => [f.name, f]));
  const sum = (...names: string[]): number | null => {
    for (const n of names) {
      const f = byName.get(n);
      if (f) return f.metrics.reduce((s, m) => s + (Number(m.value) || 0), 0);
    }
    return null;
  };
  const running = sum("vllm:num_requests_running", "sglang:num_running_reqs");
  const waiting = sum("vllm:num_requests_waiting", "sglang:num_queue_reqs");
  if (running === null || waiting === null) return null;
  const info = byName.get("vllm:cache_config_info")?.metrics[0]?.labels ?? {};
  const intOr = (v: string | undefined) => (v !== undefined && /^\d+$/.test(v) ? Number(v) : null);
  return {
    running,
    waiting,
    kvUsage: Math.min(1, Math.max(0, sum("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage") ?? 0)),
    prefixQueries: sum("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries") ?? 0,
    prefixHits: sum("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits") ?? 0,
    blockSize: intOr(info.block_size),
    maxNumSeqs: intOr(info.max_num_seqs),
  };
}

export class Pool extends EventEmitter {
  /** Configured replicas first (in order), then discovered ones (by id); changed only by setDiscovered. */
  replicas: Replica[];
  private readonly fixed: Replica[];
  private nextIndex: number;
  private timer: NodeJS.Timeout | null = null;
  private readonly h: RouterConfig["health"];

  constructor(cfg: RouterConfig) {
    super();
    this.setMaxListeners(64);
    this.h = cfg.health;
    this.fixed = cfg.replicas.map((r, i) => {
      const url = new URL(r.url);
      return new Replica(r.name ?? url.host, url, r.role, i);
    });
    this.replicas = [...this.fixed];
    this.nextIndex = this.fixed.length;
  }

  /**
   * The replicas discovery found now (host:port ids): new ones join (out until their first scrape), gone
   * ones leave (requests in flight there finish on their own).
   */
  setDiscovered(found: { url: string; role: Role }[]): void {
    const keep = new Map(this.replicas.filter((r) => !this.fixed.includes(r)).map((r) => [r.id, r]));
    const next: Replica[] = [];
    for (const f of found) {
      const url = new URL(f.url);
      if (this.fixed.some((r) => r.id === url.host) || next.some((r) => r.id === url.host)) continue;
      const had = keep.get(url.host);
      if (had) {
        next.push(had);
        keep.delete(url.host);
      } else {
        const r = new Replica(url.host, url, f.role, this.nextIndex++);
        next.push(r);
        if (this.timer) void this.scrape(r);
      }
    }
    for (const gone of keep.values()) {
      this.down(gone, "left discovery");
      gone.agent.destroy();
    }
    next.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.replicas = [...this.fixed, ...next];
    this.emit("update");
  }

  /** Start scraping; resolves after the first round, so a router starts with what it can see. */
  async start(): Promise<void> {
    this.timer = setInterval(() => this.round(), this.h.scrapeIntervalMs);
    await Promise.all(this.replicas.filter((r) => !r.scraping).map((r) => this.scrape(r)));
    this.emit("update");
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const r of this.replicas) r.agent.destroy();
  }

  get(id: string): Replica | undefined {
    return this.replicas.find((r) => r.id === id);
  }

  isStale(r: Replica, now = Date.now()): boolean {
    return !r.metrics || now - r.metricsAt > this.h.staleAfterMs;
  }

  private round(): void {
    for (const r of this.replicas) {
      r.ticks++;
      // a scrape still waiting for its answer is left to finish: the replica goes stale meanwhile
      if (!r.scraping) void this.scrape(r);
    }
  }

  private async scrape(r: Replica): Promise<void> {
    r.scraping = true;
    // an answer may take longer than an interval (the replica is mid-step): it still counts when it comes
    const timeout = Math.max(1000, this.h.scrapeIntervalMs * 5);
    try {
      const [health, metrics] = await Promise.all([
        request(r, "GET", "/health", null, {}, timeout),
        request(r, "GET", "/metrics", null, {}, timeout),
      ]);
      const now = Date.now();
      r.lastSeenAt = now;
      r.failures = 0;
      if (metrics.status === 200) {
        const m = readMetrics(metrics.body.toString("utf8"));
        if (m) {
          r.metrics = m;
          r.metricsAt = now;
        }
      }
      if (health.status === 200) this.up(r);
      else this.down(r, health.status === 503 ? "draining" : `/health answered ${health.status}`);
    } catch (e) {
      this.failed(r, e as UpstreamError);
    } finally {
      r.scraping = false;
      this.emit("update");
    }
  }

  /** A failure seen by a scrape or by a proxied request. */
  failed(r: Replica, e: UpstreamError): void {
    if (e.kind === "refused") return this.down(r, "refused");
    if (e.kind === "timeout") {
      if (Date.now() - r.lastSeenAt > this.h.deadAfterMs) this.down(r, "no answer");
      return;
    }
    if (e.kind === "aborted") return;
    if (++r.failures >= 2) this.down(r, e.kind);
  }

  private up(r: Replica): void {
    if (r.healthy) return;
    r.healthy = true;
    r.reason = "";
    this.emit("up", r);
  }

  down(r: Replica, reason: string): void {
    r.reason = reason;
    if (!r.healthy) return;
    r.healthy = false;
    r.downAtTick = r.ticks;
    r.metrics = null;
    this.emit("down", r);
    this.emit("update");
  }
}
