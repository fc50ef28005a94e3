// Where each prompt prefix is cached, in two forms (GIE / llm-d):
//  - ApproxIndex: what this router sent where. A prompt's text is cut into blocks of `blockChars`
//    characters, chained-hashed (each block's hash covers everything before it, seeded with the model
//    and cache_salt), and the blocks of a routed prompt are remembered in a per-replica LRU. Needs no
//    tokenizer and works in front of any server, but knows nothing of evictions or other routers.
//  - PreciseIndex: what the replicas report in their KV-event streams (BlockStored / BlockRemoved with
//    vLLM-style chained block hashes). A prompt's token ids hashed the same way (HostKVTier.keys) name
//    the blocks to look up. Routers fed by the same streams hold the same index (HA).
// Both answer "how many leading blocks of this prompt does replica r hold?".
import { createHash } from "node:crypto";

/** Chained hashes of the whole `blockChars`-character blocks of `text`. */
export function textBlockHashes(text: string, blockChars: number, seed: string): string[] {
  const out: string[] = [];
  let prev = createHash("sha1").update(seed).digest("base64");
  for (let i = 0; i + blockChars <= text.length; i += blockChars) {
    prev = createHash("sha1").update(prev).update(text.slice(i, i + blockChars)).digest("base64");
    out.push(prev);
  }
  return out;
}

/** Leading entries of `hashes` found by `has`. */
function leading(hashes: readonly string[], has: (h: string) => boolean): number {
  let n = 0;
  while (n < hashes.length && has(hashes[n]!)) n++;
  return n;
}

export class ApproxIndex {
  private readonly lru = new Map<string, Map<string, true>>();
  lookups = 0;
  hits = 0;

  constructor(readonly capacityPerReplica: number) {}

  match(replica: string, hashes: readonly string[]): number {
    const m = this.lru.get(replica);
    return m ? leading(hashes, (h) => m.has(h)) : 0;
  }

  /** The routed prompt's blocks now live on `replica` (most recently used). */
  record(replica: string, hashes: readonly string[]): void {
    let m = this.lru.get(replica);
    if (!m) this.lru.set(replica, (m = new Map()));
    for (const h of hashes) {
      m.delete(h);
      m.set(h, true);
    }
    for (const k of m.keys()) {
      if (m.size <= this.capacityPerReplica) break;
      m.delete(k);
    }
  }

  drop(replica: string): void {
    this.lru.delete(replica);
  }

  size(replica: string): number {
    return this.lru.get(replica)?.size ?? 0;
  }
}

/** One event of a replica's GET /v1/kv_events stream (vLLM's KV events, as JSON). */
export interface KvEvent {
  seq?: number;
  ts?: unknown;
  type: string;
  block_hashes?: unknown;
  parent_block_hash?: unknown;
  token_ids?: unknown;
  block_size?: unknown;
  cache_salt?: unknown;
}

interface ReplicaBlocks {
  blocks: Set<string>;
  blockSize: number | null;
  /** Blocks of prompts routed here whose events have not come yet, with their expiry (Date.now() ms). */
  speculative: Map<string, number>;
  lastSeq: number;
  events: number;
}

export class PreciseIndex {
  private readonly byReplica = new Map<string, ReplicaBlocks>();
  /** How many replicas hold each block (a block nobody held before is a newly computed prefix). */
  private readonly holders = new Map<string, number>();
  /**
   * When each replica last cached a prefix no replica had, by the event's own timestamp: the no-hit-lru
   * scorer's shared memory, the same on every router fed by the same streams, whichever router sent the
   * cold request. A BlockStored counts when at least two of its blocks are new to all and they start
   * nearer the chain's root than their own length: a new system prompt after a shared template header.
   * A request that hit a cached prompt also stores new blocks, its own question, but deep in the chain;
   * counting those (as any two new blocks once did) made every busy replica look like it had just taken
   * a new prompt, and new prompts then piled onto the replicas that happened to be idle.
   * Not when this router sent that prompt there itself (its new blocks are ones it speculated for the
   * replica): its own record has the dispatch time, and the event's, later by the replica's queue and
   * prefill, would put that replica after ones that got a new prompt after it (a busy replica's event
   * came after the next two dispatches, and the next new prompt went to a replica that already had two).
   * The speculative entries are what tells: with speculativeTtlMs 0 there are none, and such an event
   * counts at its own time as before (docs/router.md says so).
   */
  readonly coldAt = new Map<string, number>();
  /** Each held block's position in its chain (0: the prompt's first block), from the events' parent hashes. */
  private readonly depth = new Map<string, number>();
  lookups = 0;
  hits = 0;

  private get(replica: string): ReplicaBlocks {
    let r = this.byReplica.get(replica);
    if (!r) this.byReplica.set(replica, (r = { blocks: new Set(), blockSize: null, speculative: new Map(), lastSeq: -1, events: 0 }));
    return r;
  }

  /** Apply one event; malformed events are ignored (a replica's stream is input like any other). */
  apply(replica: string, e: KvEvent): void {
    const r = this.get(replica);
    r.events++;
    if (typeof e.seq === "number") r.lastSeq = e.seq;
    const hashes = Array.isArray(e.block_hashes) ? e.block_hashes.filter((h): h is string => typeof h === "string") : [];
    if (e.type === "BlockStored") {
      if (Number.isInteger(e.block_size) && (e.block_size as number) > 0) r.blockSize = e.block_size as number;
      // an unknown parent (a stream joined after its prompt was stored) counts as the root, as before
      const parent = typeof e.parent_block_hash === "string" ? this.depth.get(e.parent_block_hash) : undefined;
      const base = parent === undefined ? 0 : parent + 1;
      let fresh = 0, firstFresh = -1, ours = 0;
      hashes.forEach((h, i) => {
        if (!this.holders.has(h)) {
          fresh++;
          if (r.speculative.has(h)) ours++;
          if (firstFresh < 0) firstFresh = base + i;
          this.depth.set(h, base + i);
        }
        if (!r.blocks.has(h)) {
          r.blocks.add(h);
          this.holders.set(h, (this.holders.get(h) ?? 0) + 1);
        }
        r.speculative.delete(h);
      });
      if (fresh >= 2 && firstFresh < fresh && ours < fresh) this.coldAt.set(replica, typeof e.ts === "number" && Number.isFinite(e.ts) ? e.ts * 1000 : Date.now());
    } else if (e.type === "BlockRemoved") {
      for (const h of hashes) if (r.blocks.delete(h)) this.release(h);
    } else if (e.type === "AllBlocksCleared") {
      for (const h of r.blocks) this.release(h);
      r.blocks.clear();
    }
  }

  private release(h: string): void {
    const n = (this.holders.get(h) ?? 1) - 1;
    if (n > 0) this.holders.set(h, n);
    else {
      this.holders.delete(h);
      this.depth.delete(h);
    }
  }

  /** The stream (re)starts with a snapshot: forget what it said before. */
  clear(replica: string): void {
    const r = this.byReplica.get(replica);
    if (r) for (const h of r.blocks) this.release(h);
    this.byReplica.delete(replica);
  }

  blockSize(replica: string): number | null {
    return this.byReplica.get(replica)?.blockSize ?? null;
  }

  /** Leading blocks of `keys` held by `replica` (stored, or routed there within the speculative TTL). */
  match(replica: string, keys: readonly string[], now = Date.now()): number {
    const r = this.byReplica.get(replica);
    if (!r) return 0;
    return leading(keys, (k) => r.blocks.has(k) || (r.speculative.get(k) ?? 0) > now);
  }

  speculate(replica: string, keys: readonly string[], ttlMs: number, now = Date.now()): void {
    if (ttlMs <= 0) return;
    const r = this.get(replica);
    for (const k of keys) if (!r.blocks.has(k)) r.speculative.set(k, now + ttlMs);
    // expired entries go once the map grows (amortized)
    if (r.speculative.size > 4096) for (const [k, t] of r.speculative) if (t <= now) r.speculative.delete(k);
  }

  stats(replica: string): { blocks: number; events: number; lastSeq: number } {
    const r = this.byReplica.get(replica);
    return { blocks: r?.blocks.size ?? 0, events: r?.events ?? 0, lastSeq: r?.lastSeq ?? -1 };
  }
}
