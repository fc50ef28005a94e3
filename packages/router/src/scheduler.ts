// The scheduling pipeline of GIE's endpoint picker: filters narrow the candidates, each scorer gives
// every candidate a score in [0, 1], the weighted sum ranks them, and the picker chooses. Everything is
// a function of the request and of state every router sees alike (replica metrics, KV events), plus this
// router's own in-flight counts; ties are broken by a stable hash of the request's key and the replica,
// never by chance or arrival order, so two routers given the same inputs pick the same replica.
import { noKeys, type KeysFn } from "./keys.js";
import type { FilterConfig, RouterConfig, ScorerConfig } from "./config.js";
import type { Pool, Replica } from "./pool.js";
import { ApproxIndex, PreciseIndex, textBlockHashes } from "./prefix_index.js";
import { stableHash, type RouteInfo } from "./request_info.js";

export interface PickInput {
  info: RouteInfo;
  /** Prompt token ids (precise scorer, P/D decider), when known. */
  tokens: number[] | null;
}

export interface Scored {
  replica: Replica;
  total: number;
  scores: Record<string, number>;
}

export interface Pick {
  replica: Replica;
  ranked: Scored[];
}

/** Per-request memo of the prompt's block hashes (each scorer and the decider reuse them). */
class Hashes {
  /** No candidate holds any of the prompt (set by the pick; the no-hit-lru scorer's case). */
  cold = false;
  private readonly text = new Map<number, string[]>();
  private readonly keys = new Map<number, string[]>();

  constructor(
    private readonly input: PickInput,
    private readonly keysFn: KeysFn,
  ) {}

  textBlocks(blockChars: number): string[] {
    let h = this.text.get(blockChars);
    if (!h) this.text.set(blockChars, (h = textBlockHashes(this.input.info.text, blockChars, `${this.input.info.model}\u0000${this.input.info.salt}`)));
    return h;
  }

  tokenBlocks(blockSize: number): string[] | null {
    if (!this.input.tokens) return null;
    let h = this.keys.get(blockSize);
    if (!h) this.keys.set(blockSize, (h = this.keysFn(this.input.info.salt, this.input.tokens, blockSize)));
    return h;
  }
}

export class Scheduler {
  readonly approx: ApproxIndex;
  readonly precise = new PreciseIndex();
  private rr = 0;
  private readonly sessionWeight: number;
  /** no-hit-lru: when (Date.now()) each replica last got a cold request (a prompt no candidate had) from this router. */
  private readonly lastCold = new Map<string, number>();
  private coldClock = 0;
  private readonly approxCfg: ScorerConfig | undefined;
  private readonly preciseCfg: ScorerConfig | undefined;
  /** Lookups and hits of the prefix indexes, in blocks (the router's hit-ratio metric). */
  readonly indexStats = { lookups: 0, hits: 0 };

  constructor(
    private readonly cfg: RouterConfig,
    private readonly pool: Pool,
    private readonly keysFn: KeysFn = noKeys,
  ) {
    this.approxCfg = cfg.scheduling.scorers.find((s) => s.type === "prefix-cache");
    this.preciseCfg = cfg.scheduling.scorers.find((s) => s.type === "precise-prefix-cache");
    this.approx = new ApproxIndex(this.approxCfg?.capacityPerReplica ?? 100_000);
    this.sessionWeight = cfg.scheduling.scorers.find((s) => s.type === "session-affinity")?.weight ?? 0;
  }

  private get blockChars(): number {
    return this.approxCfg?.blockChars ?? 64;
  }

  /** Saturated (GIE's detector): stale metrics, a queue at the threshold, or KV usage at the threshold. */
  saturated(r: Replica, now = Date.now()): boolean {
    const s = this.cfg.flowControl.saturation;
    if (this.pool.isStale(r, now)) return true;
    const m = r.metrics!;
    return m.waiting >= s.queueDepth || m.kvUsage >= s.kvUsage;
  }

  /** A replica can take one more request from this router now. */
  hasRoom(r: Replica): boolean {
    return r.healthy && r.inFlight < this.cfg.flowControl.maxInFlightPerReplica;
  }

  /** Requests there now: this router's in flight, or what the replica reports if it knows of more. */
  load(r: Replica, now = Date.now()): number {
    const m = this.pool.isStale(r, now) ? null : r.metrics;
    return Math.max(r.inFlight, m ? m.running + m.waiting : 0);
  }

  private blockSize(r: Replica): number {
    return this.precise.blockSize(r.id) ?? r.metrics?.blockSize ?? 16;
  }

  /** Prompt tokens `r` already holds (the longest cached prefix either index knows of). */
  cachedTokens(input: PickInput, r: Replica, memo = new Hashes(input, this.keysFn)): number {
    let best = 0;
    if (this.preciseCfg) {
      const bs = this.blockSize(r);
      const keys = memo.tokenBlocks(bs);
      if (keys) best = this.precise.match(r.id, keys) * bs;
    }
    if (this.approxCfg || !this.preciseCfg) {
      // characters to tokens: the ~4 characters per token llm-d's decider assumes
      const chars = this.approx.match(r.id, memo.textBlocks(this.blockChars)) * this.blockChars;
      best = Math.max(best, input.tokens ? Math.min(input.tokens.length, Math.floor(chars / 4)) : Math.floor(chars / 4));
    }
    return best;
  }

  promptTokens(input: PickInput): number {
    return input.tokens?.length ?? Math.ceil(input.info.text.length / 4);
  }

  private filter(f: FilterConfig, input: PickInput, cands: Replica[], memo: Hashes, now: number): Replica[] {
    if (f.type === "saturation") {
      // a session's own replica stays a candidate while it is loaded (queue, KV) but answering: moving the
      // session would cost its whole cached context, waiting there a queue slot. Stale metrics still count.
      const session = this.sessionWeight > 0 ? this.sessionTarget(input.info) : null;
      return cands.filter((r) => (r.id === session && !this.pool.isStale(r, now)) || !this.saturated(r, now));
    }
    // prefix-affinity: only the replicas with enough of the prompt, when there are any
    const th = f.threshold ?? 0.8;
    const keep = cands.filter((r) => this.prefixFraction(r, memo) >= th);
    return keep.length ? keep : cands;
  }

  private prefixFraction(r: Replica, memo: Hashes): number {
    let best = 0;
    if (this.preciseCfg) {
      const keys = memo.tokenBlocks(this.blockSize(r));
      if (keys?.length) best = this.precise.match(r.id, keys) / keys.length;
    }
    const t = memo.textBlocks(this.blockChars);
    if (t.length) best = Math.max(best, this.approx.match(r.id, t) / t.length);
    return best;
  }

  private score(s: ScorerConfig, input: PickInput, cands: Replica[], memo: Hashes, now: number): number[] {
    const fresh = (r: Replica) => !this.pool.isStale(r, now);
    switch (s.type) {
      case "prefix-cache":
      case "precise-prefix-cache": {
        const loads = cands.map((r) => this.load(r, now));
        const minLoad = Math.min(...loads);
        const gap = s.maxLoadGap ?? 8;
        return cands.map((r, i) => {
          // the hot-spot guard: a replica this far above the least loaded gives up its affinity, and so
          // does one with requests waiting beyond a full batch (its max_num_seqs, when its metrics give
          // one) while a replica is idle: the request would wait for a slot there while one computes nothing
          if (loads[i]! - minLoad >= gap || (minLoad === 0 && loads[i]! > (r.metrics?.maxNumSeqs || Infinity))) return 0;
          if (s.type === "prefix-cache") {
            const h = memo.textBlocks(s.blockChars ?? 64);
            return h.length ? this.approx.match(r.id, h) / h.length : 0;
          }
          const keys = memo.tokenBlocks(this.blockSize(r));
          return keys?.length ? this.precise.match(r.id, keys, now) / keys.length : 0;
        });
      }
      case "no-hit-lru": {
        // GIE's no-hit-lru: a prompt nobody holds goes to the replica that least recently got one, so new
        // prefixes spread evenly instead of piling onto whichever replica a tie favours
        // "cold": no candidate holds a real part of it (a shared chat-template header is not a hit)
        memo.cold = cands.every((r) => this.prefixFraction(r, memo) < (s.coldThreshold ?? 0.25));
        if (!memo.cold || cands.length < 2) return cands.map(() => 0);
        // recency: this router's own cold dispatches, or the KV events' record of any router's
        const last = (r: Replica) => Math.max(this.lastCold.get(r.id) ?? -Infinity, this.precise.coldAt.get(r.id) ?? -Infinity);
        const order = cands.slice().sort((a, b) => last(a) - last(b) || a.index - b.index);
        return cands.map((r) => 1 - order.indexOf(r) / (cands.length - 1));
      }
      case "queue": {
        // min-max normalised waiting queue (GIE's queue scorer); stale counts as the longest
        const q = cands.map((r) => (fresh(r) ? r.metrics!.waiting : Infinity));
        const finite = q.filter((x) => Number.isFinite(x));
        const lo = Math.min(...finite), hi = Math.max(...finite);
        return q.map((x) => (!Number.isFinite(x) ? 0 : hi === lo ? 1 : (hi - x) / (hi - lo)));
      }
      case "kv-cache-utilization":
        return cands.map((r) => (fresh(r) ? 1 - r.metrics!.kvUsage : 0));
      case "in-flight": {
        const most = Math.max(...cands.map((r) => r.inFlight));
        return cands.map((r) => (most === 0 ? 1 : (most - r.inFlight) / most));
      }
      case "session-affinity": {
        const target = this.sessionTarget(input.info);
        return cands.map((r) => (r.id === target ? 1 : 0));
      }
    }
  }

  /**
   * The replica a session belongs to: the one its token names, or, for a `user` without a token, the
   * top replica by rendezvous hashing over the healthy decoders (the same on every router; when one leaves,
   * only its own sessions move).
   */
  sessionTarget(info: RouteInfo): string | null {
    if (info.sessionReplica && this.pool.get(info.sessionReplica)?.healthy) return info.sessionReplica;
    if (!info.user) return null;
    let best: string | null = null, bestH = "";
    for (const r of this.pool.replicas) {
      if (!r.healthy || !r.canDecode()) continue;
      const h = stableHash(`${info.user}\u0000${r.id}`);
      if (h > bestH) [best, bestH] = [r.id, h];
    }
    return best;
  }

  /**
   * Rank `cands` (already limited to the role wanted and to replicas with room) and pick one; null when
   * the filters leave none (the flow controller then holds the request).
   */
  pick(input: PickInput, cands: Replica[], memo = new Hashes(input, this.keysFn)): Pick | null {
    const now = Date.now();
    let c = cands;
    for (const f of this.cfg.scheduling.filters) {
      c = this.filter(f, input, c, memo, now);
      if (!c.length) return null;
    }
    const totals = c.map(() => 0);
    const parts = c.map(() => ({}) as Record<string, number>);
    for (const s of this.cfg.scheduling.scorers) {
      const v = this.score(s, input, c, memo, now);
      v.forEach((x, i) => {
        totals[i]! += s.weight * x;
        parts[i]![s.type] = x;
      });
    }
    const ranked: Scored[] = c.map((r, i) => ({ replica: r, total: totals[i]!, scores: parts[i]! }));
    const tie = (r: Replica) => stableHash(`${input.info.key}\u0000${r.id}`);
    ranked.sort((a, b) => b.total - a.total || (tie(b.replica) > tie(a.replica) ? 1 : -1));
    const picker = this.cfg.scheduling.picker.type;
    let chosen = ranked[0]!;
    if (picker === "round-robin") chosen = ranked.slice().sort((a, b) => a.replica.index - b.replica.index)[this.rr++ % ranked.length]!;
    else if (picker === "weighted-random") {
      // "random" drawn from the request's key: the same request is drawn the same way on every router
      const sum = ranked.reduce((s, x) => s + x.total, 0);
      let u = (parseInt(stableHash(`${input.info.key}\u0001`).slice(0, 12), 16) / 2 ** 48) * (sum || ranked.length);
      for (const x of ranked) {
        u -= sum ? x.total : 1;
        if (u < 0) {
          chosen = x;
          break;
        }
      }
    }
    return { replica: chosen.replica, ranked };
  }

  /** A request was sent to `r`: remember where its prompt now lives (`memo`: the one its pick used). */
  routed(input: PickInput, r: Replica, memo: Hashes): void {
    // strictly increasing, so cold picks within one millisecond still keep their order
    if (memo.cold) this.lastCold.set(r.id, (this.coldClock = Math.max(Date.now(), this.coldClock + 1e-3)));
    if (this.approxCfg) this.approx.record(r.id, memo.textBlocks(this.blockChars));
    if (this.preciseCfg) {
      const keys = memo.tokenBlocks(this.blockSize(r));
      if (keys) this.precise.speculate(r.id, keys, this.preciseCfg.speculativeTtlMs ?? 2000);
    }
  }

  /** Lookup accounting for the hit-ratio metric: blocks of the prompt found on the chosen replica. */
  account(input: PickInput, r: Replica, memo = new Hashes(input, this.keysFn)): void {
    const bs = this.blockSize(r);
    const keys = this.preciseCfg ? memo.tokenBlocks(bs) : null;
    if (keys) {
      this.indexStats.lookups += keys.length;
      this.indexStats.hits += this.precise.match(r.id, keys);
    } else {
      const t = memo.textBlocks(this.blockChars);
      this.indexStats.lookups += t.length;
      this.indexStats.hits += this.approx.match(r.id, t);
    }
  }

  memo(input: PickInput): Hashes {
    return new Hashes(input, this.keysFn);
  }

  forget(r: Replica): void {
    this.approx.drop(r.id);
    this.precise.clear(r.id);
  }
}

export type { Hashes };
