// The engine's scheduler (vLLM's, with SGLang's prefix cache): every step it picks the tokens of one
// forward pass under a token budget (--max-num-batched-tokens) and a sequence cap (--max-num-seqs).
// Running requests come first, in priority order: a decode needs one token, an unfinished prefill its
// next chunk. Then waiting requests join (priority first, then longest cached prefix first), each
// reusing the longest cached prefix of its tokens from the radix tree (or loading it from the host
// tier) and prefilling what is left in chunks. When the block pool runs out, unlocked cached blocks
// are evicted (LRU leaves); if that is not enough, the lowest-priority running request is preempted:
// its computed blocks go into the prefix cache, its own references are dropped and it waits to be
// recomputed (its generated tokens and its RNG are kept, so its output does not change).
import { BlockPool } from "./block_pool.js";
import { RadixCache } from "./radix_cache.js";
import { SequenceBlocks, type BlockCopy } from "./sequence_blocks.js";
import { HostKVTier } from "./hicache.js";
import { byPriority, type Request } from "./request.js";

export interface Scheduled {
  req: Request;
  /** First position computed this step (= req.numComputed before the step). */
  start: number;
  /** Tokens computed this step. */
  count: number;
  /** The step ends the request's known tokens: its logits sample the next token. */
  sample: boolean;
}

export interface SchedulerOptions {
  numBlocks: number;
  blockSize: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  enablePrefixCaching: boolean;
  /** Save evicted blocks here and load them back on a hit. */
  hostTier: HostKVTier | null;
  /** Reads the KV of one pool block (all layers) for the host tier; may be asynchronous to finish. */
  saveBlock?: (block: number, key: string) => void;
  /** Writes blocks' data (one array per block, the host tier's layout) into pool blocks, in one go. */
  writeBlocks?: (blocks: number[], data: Float32Array[]) => void;
  /** Copies of shared blocks to make before a sequence writes into them. */
  copyBlocks?: (copies: BlockCopy[]) => void;
  /**
   * KV events (vLLM's KV-event stream, for a cache-aware router): whole blocks the prefix cache took
   * (`tokens` is the prefix up to the last of them) and blocks it gave up. Off (no hashing) when unset.
   */
  onKvEvent?: (e: KvCacheEvent) => void;
}

/** A change of the prefix cache, with blocks named by their chained hashes (HostKVTier.keys). */
export type KvCacheEvent =
  | { type: "BlockStored"; blockHashes: string[]; parentBlockHash: string | null; tokenIds: number[]; blockSize: number; cacheSalt: string }
  | { type: "BlockRemoved"; blockHashes: string[]; cacheSalt: string };

export class Scheduler {
  readonly pool: BlockPool;
  readonly radix: RadixCache;
  readonly waiting: Request[] = [];
  readonly running: Request[] = [];
  preemptions = 0;

  constructor(readonly o: SchedulerOptions) {
    this.pool = new BlockPool({ numBlocks: o.numBlocks, blockSize: o.blockSize });
    const save = o.hostTier && o.saveBlock ? o.saveBlock : null;
    this.radix = new RadixCache(this.pool, {
      onEvict: save || o.onKvEvent
        ? (salt, tokens, blocks) => {
            const keys = HostKVTier.keys(salt, tokens, o.blockSize).slice(-blocks.length);
            // a block the tier already holds (saved at an earlier eviction, loaded back since) is not copied again
            if (save) blocks.forEach((b, i) => o.hostTier!.has(keys[i]!) || save(b, keys[i]!));
            o.onKvEvent?.({ type: "BlockRemoved", blockHashes: keys, cacheSalt: salt });
          }
        : undefined,
    });
  }

  get blockSize(): number {
    return this.o.blockSize;
  }

  /** Fraction of the pool held by requests (blocks only the prefix cache holds count as free, as in vLLM). */
  get usage(): number {
    return (this.pool.used - this.radix.evictableBlocks) / this.pool.total;
  }

  /** The tokens of the next forward pass; requests that cannot fit now wait. */
  schedule(): Scheduled[] {
    let budget = this.o.maxNumBatchedTokens;
    const out: Scheduled[] = [];
    this.running.sort(byPriority);
    let preempted = false;
    for (let i = 0; i < this.running.length && budget > 0; i++) {
      const req = this.running[i]!;
      const n = Math.min(req.tokens.length - req.numComputed, budget);
      if (n <= 0) continue;
      // make room: evict cached blocks, then preempt from the back (lowest priority, latest arrival)
      while (!this.allocate(req, req.numComputed + n)) {
        const victim = this.running[this.running.length - 1]!;
        this.preempt(victim);
        preempted = true;
        if (victim === req) break;
      }
      if (req.blocks === null) {
        i--; // the array shifted: req was the last one
        continue;
      }
      out.push({ req, start: req.numComputed, count: n, sample: req.numComputed + n === req.tokens.length });
      budget -= n;
    }
    if (preempted) return out; // no admissions in a step that had to preempt
    const order = this.admissionOrder();
    for (const req of order) {
      if (budget <= 0 || this.running.length >= this.o.maxNumSeqs) break;
      this.admit(req);
      const n = Math.min(req.tokens.length - req.numComputed, budget);
      if (!this.allocate(req, req.numComputed + n)) {
        this.release(req, false);
        break;
      }
      this.waiting.splice(this.waiting.indexOf(req), 1);
      this.running.push(req);
      out.push({ req, start: req.numComputed, count: n, sample: req.numComputed + n === req.tokens.length });
      budget -= n;
    }
    return out;
  }

  /** After a step computed `s.count` tokens of `s.req`: cache the prompt's blocks once they are all computed. */
  computed(s: Scheduled): void {
    const req = s.req;
    req.numComputed += s.count;
    if (!req.promptCached && req.numComputed >= req.prompt.length) {
      req.promptCached = true;
      this.cacheBlocks(req, req.prompt.length);
    }
  }

  /** A finished or aborted request: its computed blocks stay in the prefix cache; its own references go. */
  finish(req: Request): void {
    const w = this.waiting.indexOf(req);
    if (w >= 0) this.waiting.splice(w, 1);
    const r = this.running.indexOf(req);
    if (r >= 0) this.running.splice(r, 1);
    this.release(req, true);
  }

  // ---- internals

  private admissionOrder(): Request[] {
    // preempted requests first (they hold outputs already), then priority, then longest cached prefix
    const lpm = this.o.enablePrefixCaching ? this.radix.orderWaiting(this.waiting, (r) => ({ tokens: r.tokens, salt: r.salt })) : this.waiting.slice();
    return lpm.map((r, i) => ({ r, i })).sort((a, b) => (b.r.preemptions > 0 ? 1 : 0) - (a.r.preemptions > 0 ? 1 : 0) || a.r.priority - b.r.priority || a.i - b.i).map((x) => x.r);
  }

  /** Give a waiting request its block table, starting with the longest cached prefix it can reuse. */
  private admit(req: Request): void {
    const blocks = new SequenceBlocks(this.pool);
    if (this.o.enablePrefixCaching) {
      // the last token is always computed: its logits are needed, and it must not land in a cached block
      const limit = req.tokens.length - 1;
      let m = this.radix.match(req.tokens, req.salt, { maxTokens: limit });
      if (this.o.hostTier && this.loadFromHost(req, m.tokens, limit)) m = this.radix.match(req.tokens, req.salt, { maxTokens: limit, countStats: false });
      this.radix.lock(m.node);
      blocks.adoptPrefix(req.tokens.slice(0, m.tokens), m.blocks);
      req.node = m.node;
      req.numComputed = m.tokens;
    } else req.numComputed = 0;
    req.cachedTokens ??= req.numComputed;
    req.blocks = blocks;
  }

  /** Blocks the host tier has right after the device match: load them into fresh pool blocks and cache them. */
  private loadFromHost(req: Request, matched: number, limit: number): boolean {
    const bs = this.o.blockSize;
    const keys = HostKVTier.keys(req.salt, req.tokens, bs, Math.floor(limit / bs));
    const data: Float32Array[] = [];
    for (let i = matched / bs; i < keys.length; i++) {
      const d = this.o.hostTier!.load(keys[i]!);
      if (!d) break;
      data.push(d);
    }
    return this.importBlocks(req.tokens, req.salt, matched / bs, data) > 0;
  }

  /** Blocks of `tokens` (under `salt`) the prefix cache has on the device now, counted from the start. */
  cachedBlocks(tokens: readonly number[], salt: string): number {
    return this.radix.peek(tokens, salt) / this.o.blockSize;
  }

  /**
   * Put the KV of blocks [first, first + data.length) of `tokens` (under `salt`; data[i] is block first + i's,
   * in the host tier's layout) into fresh pool blocks, written in one go, and into the prefix cache after the
   * `first` blocks it already holds. Evicts to make room; returns the blocks taken (a host-tier hit, or blocks
   * pulled from another replica).
   */
  importBlocks(tokens: readonly number[], salt: string, first: number, data: readonly Float32Array[]): number {
    const bs = this.o.blockSize;
    const n = data.length;
    if (n <= 0 || this.cachedBlocks(tokens, salt) < first) return 0;
    // the cached blocks before them must survive the eviction that makes room
    const m = this.radix.match(tokens, salt, { maxTokens: first * bs, countStats: false });
    this.radix.lock(m.node);
    let ids: number[] | null = null;
    try {
      if (this.pool.free < n) this.radix.evict(n - this.pool.free);
      ids = this.pool.allocate(Math.min(n, this.pool.free));
      if (!ids || ids.length === 0) return 0;
      this.o.writeBlocks!(ids, data.slice(0, ids.length));
      const end = (first + ids.length) * bs;
      this.radix.insert(tokens.slice(0, end), [...m.blocks, ...ids], salt);
      if (this.o.onKvEvent) this.storedEvent(salt, tokens.slice(0, end), ids.length);
      return ids.length;
    } finally {
      this.radix.unlock(m.node);
      if (ids?.length) this.pool.release(ids); // the tree holds what it took
    }
  }

  /** Slots for positions [0, upTo) of req; evicts cached blocks when the pool is short. False: still short. */
  private allocate(req: Request, upTo: number): boolean {
    const blocks = req.blocks!;
    const add = upTo - blocks.numTokens;
    if (add <= 0) return true;
    const need = blocks.blocksNeeded(add);
    if (need > this.pool.free) this.radix.evict(need - this.pool.free);
    if (need > this.pool.free) return false;
    const r = blocks.appendTokens(req.tokens.slice(blocks.numTokens, upTo));
    if (!r) return false;
    if (r.copies.length) this.o.copyBlocks?.(r.copies);
    return true;
  }

  private preempt(req: Request): void {
    const r = this.running.indexOf(req);
    if (r >= 0) this.running.splice(r, 1);
    this.release(req, true);
    req.numComputed = 0;
    req.preemptions++;
    this.preemptions++;
    this.waiting.unshift(req);
  }

  /** Drop req's block references and lock (after putting its computed full blocks in the prefix cache). */
  private release(req: Request, cache: boolean): void {
    if (req.blocks && cache) this.cacheBlocks(req, req.numComputed);
    if (req.node) this.radix.unlock(req.node);
    req.node = null;
    req.blocks?.release();
    req.blocks = null;
  }

  /** BlockStored events describing everything cached now (what a new KV-event subscriber starts from). */
  snapshot(emit: (e: KvCacheEvent) => void): void {
    const bs = this.o.blockSize;
    for (const sp of this.radix.spans()) {
      const full = Math.floor(sp.tokens.length / bs);
      const keys = HostKVTier.keys(sp.salt, sp.tokens, bs, full);
      const first = full - sp.blocks.length;
      emit({ type: "BlockStored", blockHashes: keys.slice(first), parentBlockHash: first > 0 ? keys[first - 1]! : null, tokenIds: sp.tokens.slice(first * bs), blockSize: bs, cacheSalt: sp.salt });
    }
  }

  /** A BlockStored event for the last `n` full blocks of `tokens`. */
  private storedEvent(salt: string, tokens: readonly number[], n: number): void {
    const bs = this.o.blockSize;
    const full = Math.floor(tokens.length / bs);
    const keys = HostKVTier.keys(salt, tokens, bs, full);
    const first = full - n;
    this.o.onKvEvent!({
      type: "BlockStored",
      blockHashes: keys.slice(first),
      parentBlockHash: first > 0 ? keys[first - 1]! : null,
      tokenIds: tokens.slice(first * bs, full * bs),
      blockSize: bs,
      cacheSalt: salt,
    });
  }

  /** Put the full blocks of req's first `n` computed tokens into the radix tree and share the tree's copies. */
  private cacheBlocks(req: Request, n: number): void {
    if (!this.o.enablePrefixCaching || !req.blocks) return;
    const upTo = Math.min(n, req.numComputed);
    if (upTo < this.o.blockSize) return;
    const res = this.radix.insert(req.tokens.slice(0, upTo), req.blocks.blocks, req.salt);
    if (this.o.onKvEvent && res.newBlocks.length) this.storedEvent(req.salt, req.tokens.slice(0, upTo), res.newBlocks.length);
    req.blocks.sharePrefix(res.blocks);
    // lock the deeper node (and let go of the old one)
    this.radix.lock(res.node);
    if (req.node) this.radix.unlock(req.node);
    req.node = res.node;
  }
}
