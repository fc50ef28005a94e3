// SGLang's RadixAttention prefix cache as a pure data structure: a radix tree over token ids whose
// nodes own KV blocks of a BlockPool.
//
// Granularity (the choice this file makes): nodes are block-aligned. Every non-root node holds a
// whole number of blocks: `tokens.length === blocks.length * blockSize`, and block i of a node holds
// the KV of tokens [i * blockSize, (i + 1) * blockSize) of its span. Only full blocks are ever
// cached (a request's partial last block stays private to it, as in vLLM), matches are whole
// blocks, and nodes split only at block boundaries, so a child is found by its first block's
// tokens and two children of a node never share their first block.
//
// Tenancy: every `cacheSalt` has its own tree (root). Different salts never share a node or a block.
//
// Ownership: the tree holds one pool reference on every block its nodes own (taken by insert(),
// dropped by evict()/clear()). A request that reuses a match holds its own references (see
// SequenceBlocks.adoptPrefix), so a block's reference count is the number of its owners.
//
// Locks: lock(node) adds one to the lock count of the node and every ancestor; locked nodes are
// never evicted. A node's count is at least the sum of its children's, so an unlocked node's whole
// subtree is unlocked: `evictableBlocks` (blocks of unlocked nodes) is exactly what evict() can free.
//
// Eviction: LRU over unlocked leaves, using a logical clock refreshed along the path by match() and
// insert(). When a leaf holds more blocks than are still needed, only its tail is evicted (the
// node splits and its head stays cached), so eviction is block-granular like vLLM's free queue.
//
// Node handles: match() and insert() return the deepest node of the path. Splits keep a handle's
// meaning (the new node is the upper part; the handle keeps the end of the span). Only eviction
// ends a node; lock() on an evicted node throws. Lock a matched node before the next evict().

import { BlockPool, checkCount, describe } from "./block_pool.js";

/** A node of the tree as callers see it (read-only). */
export interface CacheNode {
  /** Tokens from the root to the end of this node's span. */
  readonly depth: number;
  /** The cache salt of this node's tree. */
  readonly salt: string;
  /** Active locks on this node or below it. */
  readonly lockCount: number;
  /** True once the node has been evicted (or the cache cleared); it can no longer be locked. */
  readonly evicted: boolean;
}

export interface MatchResult {
  /** Cached prefix length in tokens (a multiple of blockSize). */
  tokens: number;
  /** The cached blocks of that prefix, in order (`tokens / blockSize` of them). */
  blocks: number[];
  /** The node whose span ends at the match: lock it while the request uses the blocks. */
  node: CacheNode;
}

export interface MatchOptions {
  /**
   * Match at most this many tokens (default: all). An engine passes `prompt.length - 1` so that
   * the last prompt token is always computed (its logits are needed) and never written into a
   * cached block.
   */
  maxTokens?: number;
  /** Count this lookup in `stats` (default true; false for re-matches that should not count). */
  countStats?: boolean;
}

export interface InsertResult {
  /** Tokens of the inserted prefix that were already cached (blocks of the caller's not taken). */
  cachedTokens: number;
  /** Blocks the tree took a reference on (the caller's, from `cachedTokens / blockSize` on). */
  newBlocks: number[];
  /** The tree's blocks for the whole inserted prefix (`floor(tokens.length / blockSize)` of them). */
  blocks: number[];
  /** The deepest node of the inserted prefix (a salt's root when nothing was inserted). */
  node: CacheNode;
}

export interface CacheStats {
  /** Prompt tokens looked up by match() (vllm:prefix_cache_queries_total). */
  queries: number;
  /** Of those, tokens found in the cache (vllm:prefix_cache_hits_total). */
  hits: number;
  /** match() calls counted. */
  lookups: number;
  /** Blocks the tree has taken ownership of, over its lifetime. */
  insertedBlocks: number;
  /** Blocks the tree has given up through evict(), over its lifetime. */
  evictedBlocks: number;
}

export interface RadixCacheOptions {
  /** SGLang's LPM policy falls back to first-come-first-served above this many waiting requests (default 128). */
  lpmMaxWaiting?: number;
  /**
   * Called by evict() for each span it gives up, before the blocks go back to the pool (their KV is
   * still intact): `tokens` is the whole prefix from the root to the end of the span and `blocks` the
   * span's blocks (the last `blocks.length` blocks of that prefix). A HiCache host tier saves them here.
   * Its errors are swallowed: eviction must finish.
   */
  onEvict?: (salt: string, tokens: readonly number[], blocks: readonly number[]) => void;
}

class Node implements CacheNode {
  children = new Map<string, Node>();
  lockCount = 0;
  evicted = false;
  constructor(
    readonly cache: RadixCache,
    readonly salt: string,
    public parent: Node | null,
    public tokens: number[],
    public blocks: number[],
    public depth: number,
    public lastAccess: number,
  ) {}
}

type Tokens = ArrayLike<number>;

/** A binary min-heap of nodes by lastAccess (ties: the deeper node first, then insertion order). */
class LruHeap {
  private items: Node[] = [];
  get size(): number {
    return this.items.length;
  }
  private less(a: Node, b: Node): boolean {
    return a.lastAccess < b.lastAccess || (a.lastAccess === b.lastAccess && a.depth > b.depth);
  }
  push(n: Node): void {
    const h = this.items;
    h.push(n);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }
  pop(): Node | undefined {
    const h = this.items;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

export class RadixCache {
  readonly pool: BlockPool;
  readonly blockSize: number;
  private readonly roots = new Map<string, Node>();
  private readonly owned: Uint8Array; // owned[b] = 1 when block b belongs to a node
  private clock = 0;
  private _cachedBlocks = 0;
  private _protectedBlocks = 0;
  private _nodes = 0;
  private readonly lpmMaxWaiting: number;
  private readonly onEvict: RadixCacheOptions["onEvict"];
  private readonly _stats: CacheStats = { queries: 0, hits: 0, lookups: 0, insertedBlocks: 0, evictedBlocks: 0 };

  constructor(pool: BlockPool, options: RadixCacheOptions = {}) {
    if (!(pool instanceof BlockPool)) throw new Error(`RadixCache: expected a BlockPool, got ${describe(pool)}`);
    this.pool = pool;
    this.blockSize = pool.blockSize;
    this.owned = new Uint8Array(pool.total);
    this.lpmMaxWaiting = checkCount("RadixCache: lpmMaxWaiting", options.lpmMaxWaiting ?? 128);
    this.onEvict = options.onEvict;
  }

  /** Blocks owned by the tree. */
  get cachedBlocks(): number {
    return this._cachedBlocks;
  }
  /** Blocks in locked nodes (in use by running requests; not evictable). */
  get protectedBlocks(): number {
    return this._protectedBlocks;
  }
  /** Blocks in unlocked nodes: what evict() can give back. */
  get evictableBlocks(): number {
    return this._cachedBlocks - this._protectedBlocks;
  }
  /** Non-root nodes in all trees. */
  get nodeCount(): number {
    return this._nodes;
  }
  /** A copy of the counters. */
  get stats(): CacheStats {
    return { ...this._stats };
  }
  /** hits / queries (0 before any query). */
  get hitRate(): number {
    return this._stats.queries === 0 ? 0 : this._stats.hits / this._stats.queries;
  }
  /** True when block `id` belongs to a node of the tree. */
  owns(id: number): boolean {
    this.pool.refCount(id); // validates the id
    return this.owned[id] === 1;
  }

  /**
   * The longest cached prefix of `tokens` under `salt`, in whole blocks. Refreshes the LRU clock of
   * every node on the path and splits a node when the match ends inside it, so that the returned
   * node ends exactly at the match. Lock the node (lock()) before the next evict().
   */
  match(tokens: Tokens, salt: string = "", options: MatchOptions = {}): MatchResult {
    checkTokens("RadixCache.match", tokens);
    salt = checkSalt("RadixCache.match", salt);
    const limit = this.limitOf("RadixCache.match", tokens, options.maxTokens);
    const countStats = options.countStats ?? true;
    let root = this.roots.get(salt);
    if (root === undefined) {
      root = new Node(this, salt, null, [], [], 0, ++this.clock);
      this.roots.set(salt, root);
    }
    const now = ++this.clock;
    root.lastAccess = now;
    const blocks: number[] = [];
    let node = root;
    let pos = 0;
    while (pos < limit) {
      const child = node.children.get(this.keyAt(tokens, pos));
      if (child === undefined) break;
      const k = this.matchBlocks(child, tokens, pos, limit);
      const end = k < child.blocks.length ? this.split(child, k) : child;
      end.lastAccess = now;
      for (const b of end.blocks) blocks.push(b);
      pos += k * this.blockSize;
      node = end;
      if (end !== child) break;
    }
    if (countStats) {
      this._stats.lookups++;
      this._stats.queries += tokens.length;
      this._stats.hits += pos;
    }
    return { tokens: pos, blocks, node };
  }

  /** The length match() would return, without touching the tree, the LRU clock or the stats. */
  peek(tokens: Tokens, salt: string = "", maxTokens?: number): number {
    checkTokens("RadixCache.peek", tokens);
    salt = checkSalt("RadixCache.peek", salt);
    const limit = this.limitOf("RadixCache.peek", tokens, maxTokens);
    let node = this.roots.get(salt);
    let pos = 0;
    while (node !== undefined && pos < limit) {
      const child: Node | undefined = node.children.get(this.keyAt(tokens, pos));
      if (child === undefined) break;
      const k = this.matchBlocks(child, tokens, pos, limit);
      pos += k * this.blockSize;
      if (k < child.blocks.length) break;
      node = child;
    }
    return pos;
  }

  /** Adds one lock to `node` and each of its ancestors. */
  lock(node: CacheNode): void {
    const n = this.own("lock", node);
    if (n.evicted) throw new Error(`RadixCache.lock: the node (depth ${n.depth}) has been evicted; match() again`);
    for (let p: Node | null = n; p !== null; p = p.parent) {
      if (p.lockCount++ === 0) this._protectedBlocks += p.blocks.length;
    }
  }

  /** Removes one lock from `node` and each of its ancestors. */
  unlock(node: CacheNode): void {
    const n = this.own("unlock", node);
    if (n.lockCount <= 0)
      throw new Error(`RadixCache.unlock: the node (depth ${n.depth}) is not locked (unlock without lock)`);
    let top = n;
    for (let p: Node | null = n; p !== null; p = p.parent) {
      if (--p.lockCount === 0) this._protectedBlocks -= p.blocks.length;
      top = p;
    }
    this.dropRootIfEmpty(top);
  }

  /**
   * Caches the full blocks of `tokens` (a request's prompt, or prompt + output, after it computed
   * them): `blocks[i]` must hold the KV of tokens [i * blockSize, (i + 1) * blockSize). The part
   * already cached keeps the tree's blocks (the caller's duplicates are not taken: the caller may
   * switch to the tree's copies with SequenceBlocks.sharePrefix and free its own). For the rest the
   * tree takes a reference on the caller's blocks; the caller keeps (and later drops) its own.
   * Nothing changes when a check fails.
   */
  insert(tokens: Tokens, blocks: readonly number[], salt: string = ""): InsertResult {
    checkTokens("RadixCache.insert", tokens);
    salt = checkSalt("RadixCache.insert", salt);
    if (!Array.isArray(blocks)) throw new Error(`RadixCache.insert: blocks must be an array, got ${describe(blocks)}`);
    const bs = this.blockSize;
    const nFull = Math.floor(tokens.length / bs);
    if (blocks.length < nFull)
      throw new Error(
        `RadixCache.insert: ${tokens.length} tokens fill ${nFull} blocks of ${bs} but only ${blocks.length} blocks were given`,
      );
    for (let i = 0; i < nFull; i++) this.pool.refCount(blocks[i]!); // throws on unknown ids
    // Dry run: how much is already cached?
    const limit = nFull * bs;
    const cachedTokens = this.peek(tokens, salt, limit);
    const first = cachedTokens / bs;
    const newBlocks = blocks.slice(first, nFull);
    const seen = new Set<number>();
    for (const b of newBlocks) {
      if (this.pool.refCount(b) === 0)
        throw new Error(`RadixCache.insert: block ${b} is free; the caller must hold a reference to it`);
      if (this.owned[b]) throw new Error(`RadixCache.insert: block ${b} is already owned by another node of the tree`);
      if (seen.has(b)) throw new Error(`RadixCache.insert: block ${b} appears twice in the blocks to insert`);
      seen.add(b);
    }
    // Walk again, splitting where the new span leaves an existing node, then add the new leaf.
    const m = this.match(tokens, salt, { maxTokens: limit, countStats: false });
    const node = m.node as Node;
    if (m.tokens !== cachedTokens) throw new Error("RadixCache.insert: internal error (match and peek disagree)");
    let end = node;
    if (newBlocks.length > 0) {
      const leaf = new Node(
        this,
        salt,
        node,
        Array.from(sliceOf(tokens, cachedTokens, limit)),
        newBlocks,
        limit,
        node.lastAccess,
      );
      node.children.set(this.keyAt(tokens, cachedTokens), leaf);
      this.pool.incRefAll(newBlocks);
      for (const b of newBlocks) this.owned[b] = 1;
      this._cachedBlocks += newBlocks.length;
      this._stats.insertedBlocks += newBlocks.length;
      this._nodes++;
      end = leaf;
    }
    return { cachedTokens, newBlocks, blocks: m.blocks.concat(newBlocks), node: end };
  }

  /**
   * Frees at least `nBlocks` pool blocks if it can, evicting the least recently used unlocked
   * leaves (only the tail of the last one when it holds more than needed). Returns how many blocks
   * went back to the pool's free list (fewer when not enough is evictable).
   */
  evict(nBlocks: number): number {
    checkCount("RadixCache.evict: nBlocks", nBlocks);
    if (nBlocks === 0 || this.evictableBlocks === 0) return 0;
    const heap = new LruHeap();
    for (const root of this.roots.values()) {
      const stack = [...root.children.values()];
      while (stack.length > 0) {
        const n = stack.pop()!;
        if (n.children.size === 0) {
          if (n.lockCount === 0) heap.push(n);
        } else for (const c of n.children.values()) stack.push(c);
      }
    }
    let freed = 0;
    while (freed < nBlocks && heap.size > 0) {
      let leaf = heap.pop()!;
      const need = nBlocks - freed;
      if (leaf.blocks.length > need) {
        this.split(leaf, leaf.blocks.length - need);
      }
      const parent = leaf.parent!;
      if (this.onEvict) {
        const path: number[][] = [];
        for (let p: Node | null = leaf; p !== null; p = p.parent) path.push(p.tokens);
        try {
          this.onEvict(leaf.salt, path.reverse().flat(), leaf.blocks.slice());
        } catch {
          /* a host tier's failure only loses the copy */
        }
      }
      freed += this.remove(leaf);
      leaf = parent;
      if (leaf.parent === null) this.dropRootIfEmpty(leaf);
      else if (leaf.children.size === 0 && leaf.lockCount === 0) heap.push(leaf);
    }
    return freed;
  }

  /** Gives every cached block back (throws, changing nothing, while any node is locked). Returns blocks freed. */
  clear(): number {
    for (const root of this.roots.values())
      if (root.lockCount > 0)
        throw new Error(`RadixCache.clear: ${root.lockCount} lock(s) are held under salt ${JSON.stringify(root.salt)}`);
    let freed = 0;
    for (const root of [...this.roots.values()]) {
      const stack = [...root.children.values()];
      const order: Node[] = [];
      while (stack.length > 0) {
        const n = stack.pop()!;
        order.push(n);
        for (const c of n.children.values()) stack.push(c);
      }
      for (let i = order.length - 1; i >= 0; i--) freed += this.remove(order[i]!);
      this.dropRootIfEmpty(root);
    }
    return freed;
  }

  /**
   * Orders a waiting queue longest-cached-prefix first (SGLang's `lpm` policy), stably, so equal
   * matches keep their order (sort by priority/arrival first). Above `lpmMaxWaiting` items the
   * queue is returned in its own order (SGLang's FCFS fallback: matching every waiting prompt
   * each step costs too much).
   */
  orderWaiting<T>(items: readonly T[], key: (item: T) => { tokens: Tokens; salt?: string }): T[] {
    if (items.length > this.lpmMaxWaiting) return items.slice();
    const scored = items.map((item, i) => {
      const { tokens, salt } = key(item);
      return { item, i, len: this.peek(tokens, salt ?? "", Math.max(0, tokens.length - 1)) };
    });
    scored.sort((a, b) => b.len - a.len || a.i - b.i);
    return scored.map((s) => s.item);
  }

  /**
   * Every cached span, parents before children: its salt, the whole token prefix up to the span's end and
   * the span's own blocks (a KV-event subscriber's snapshot).
   */
  *spans(): Generator<{ salt: string; tokens: number[]; blocks: number[] }> {
    for (const root of this.roots.values()) {
      const stack: [Node, number[]][] = [...root.children.values()].map((c) => [c, []]);
      while (stack.length) {
        const [n, before] = stack.pop()!;
        const tokens = before.concat(n.tokens);
        yield { salt: n.salt, tokens, blocks: n.blocks.slice() };
        for (const c of n.children.values()) stack.push([c, tokens]);
      }
    }
  }

  /** Throws if the tree's bookkeeping is inconsistent (for tests and debug builds). */
  validate(): void {
    const bs = this.blockSize;
    const seen = new Uint8Array(this.pool.total);
    let cached = 0;
    let protectedBlocks = 0;
    let nodes = 0;
    const visit = (n: Node, root: Node): number => {
      const where = `node at depth ${n.depth} (salt ${JSON.stringify(root.salt)})`;
      if (n.evicted) throw new Error(`RadixCache: ${where} is marked evicted but still in the tree`);
      if (n.salt !== root.salt) throw new Error(`RadixCache: ${where} has salt ${JSON.stringify(n.salt)}`);
      if (n.tokens.length !== n.blocks.length * bs)
        throw new Error(`RadixCache: ${where} has ${n.tokens.length} tokens for ${n.blocks.length} blocks`);
      if (n !== root && n.blocks.length === 0) throw new Error(`RadixCache: ${where} is empty`);
      const parentDepth = n.parent === null ? 0 : n.parent.depth;
      if (n.depth !== parentDepth + n.tokens.length) throw new Error(`RadixCache: ${where} has a wrong depth`);
      for (const b of n.blocks) {
        if (seen[b]) throw new Error(`RadixCache: block ${b} is owned by two nodes`);
        seen[b] = 1;
        if (!this.owned[b]) throw new Error(`RadixCache: block ${b} is in a node but not marked owned`);
        if (this.pool.refCount(b) < 1) throw new Error(`RadixCache: block ${b} is in a node but free in the pool`);
      }
      cached += n.blocks.length;
      if (n.lockCount > 0) protectedBlocks += n.blocks.length;
      if (n !== root) nodes++;
      let childLocks = 0;
      for (const [key, c] of n.children) {
        if (c.parent !== n) throw new Error(`RadixCache: a child of ${where} has another parent`);
        if (key !== this.keyAt(c.tokens, 0)) throw new Error(`RadixCache: a child of ${where} is under a wrong key`);
        childLocks += visit(c, root);
      }
      if (n.lockCount < childLocks)
        throw new Error(`RadixCache: ${where} has lock count ${n.lockCount} < its children's ${childLocks}`);
      return n.lockCount;
    };
    for (const [salt, root] of this.roots) {
      if (root.salt !== salt || root.parent !== null || root.blocks.length !== 0)
        throw new Error(`RadixCache: bad root for salt ${JSON.stringify(salt)}`);
      visit(root, root);
    }
    for (let b = 0; b < this.pool.total; b++)
      if (this.owned[b] && !seen[b]) throw new Error(`RadixCache: block ${b} is marked owned but in no node`);
    if (cached !== this._cachedBlocks) throw new Error(`RadixCache: cachedBlocks ${this._cachedBlocks} != ${cached}`);
    if (protectedBlocks !== this._protectedBlocks)
      throw new Error(`RadixCache: protectedBlocks ${this._protectedBlocks} != ${protectedBlocks}`);
    if (nodes !== this._nodes) throw new Error(`RadixCache: nodeCount ${this._nodes} != ${nodes}`);
  }

  /**
   * Every node of every tree (for tests, debugging and a future host tier): its salt, the tokens
   * from the root to the end of its span, and its blocks, which hold the last
   * `blocks.length * blockSize` of those tokens.
   */
  *nodes(): Generator<{ salt: string; path: number[]; blocks: readonly number[]; lockCount: number }> {
    for (const root of this.roots.values()) {
      const stack: [Node, number[]][] = [...root.children.values()].map((c) => [c, []]);
      while (stack.length > 0) {
        const [n, prefix] = stack.pop()!;
        const path = prefix.concat(n.tokens);
        yield { salt: root.salt, path, blocks: n.blocks.slice(), lockCount: n.lockCount };
        for (const c of n.children.values()) stack.push([c, path]);
      }
    }
  }

  // --- internals ---

  private own(op: string, node: CacheNode): Node {
    if (!(node instanceof Node) || node.cache !== this)
      throw new Error(`RadixCache.${op}: not a node of this cache (got ${describe(node)})`);
    return node;
  }

  private limitOf(op: string, tokens: Tokens, maxTokens: number | undefined): number {
    const max = maxTokens === undefined ? tokens.length : checkCount(`${op}: maxTokens`, maxTokens);
    return Math.floor(Math.min(max, tokens.length) / this.blockSize) * this.blockSize;
  }

  private keyAt(tokens: Tokens, pos: number): string {
    let s = "";
    for (let i = pos; i < pos + this.blockSize; i++) s += tokens[i] + ",";
    return s;
  }

  /** Whole blocks of `child` that equal tokens[pos..limit) (at least 1: the key matched). */
  private matchBlocks(child: Node, tokens: Tokens, pos: number, limit: number): number {
    const bs = this.blockSize;
    const maxBlocks = Math.min(child.blocks.length, (limit - pos) / bs);
    let k = 1; // the first block is the child's key
    outer: for (; k < maxBlocks; k++) {
      const o = k * bs;
      for (let j = 0; j < bs; j++) if (child.tokens[o + j] !== tokens[pos + o + j]) break outer;
    }
    return k;
  }

  /** Splits `n` after its first `k` blocks: a new node takes the head, `n` keeps the tail. Returns the head. */
  private split(n: Node, k: number): Node {
    const bs = this.blockSize;
    const parent = n.parent!;
    const head = new Node(
      this,
      n.salt,
      parent,
      n.tokens.slice(0, k * bs),
      n.blocks.slice(0, k),
      n.depth - n.tokens.length + k * bs,
      n.lastAccess,
    );
    head.lockCount = n.lockCount;
    parent.children.set(this.keyAt(n.tokens, 0), head);
    n.tokens = n.tokens.slice(k * bs);
    n.blocks = n.blocks.slice(k);
    n.parent = head;
    head.children.set(this.keyAt(n.tokens, 0), n);
    this._nodes++;
    return head;
  }

  /** Removes an unlocked leaf and drops the tree's references on its blocks. Returns blocks freed in the pool. */
  private remove(n: Node): number {
    const parent = n.parent!;
    parent.children.delete(this.keyAt(n.tokens, 0));
    n.evicted = true;
    n.parent = null;
    for (const b of n.blocks) this.owned[b] = 0;
    this._cachedBlocks -= n.blocks.length;
    this._stats.evictedBlocks += n.blocks.length;
    this._nodes--;
    return this.pool.release(n.blocks);
  }

  private dropRootIfEmpty(root: Node): void {
    if (
      root.parent === null &&
      root.children.size === 0 &&
      root.lockCount === 0 &&
      this.roots.get(root.salt) === root
    ) {
      this.roots.delete(root.salt);
      root.evicted = true;
    }
  }
}

function checkTokens(op: string, tokens: Tokens): void {
  if (tokens == null || typeof tokens !== "object" || typeof tokens.length !== "number")
    throw new Error(`${op}: tokens must be an array of token ids, got ${describe(tokens)}`);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (typeof t !== "number" || !Number.isSafeInteger(t) || t < 0)
      throw new Error(`${op}: tokens[${i}] must be a non-negative integer token id, got ${describe(t)}`);
  }
}

function checkSalt(op: string, salt: unknown): string {
  if (salt === undefined || salt === null) return "";
  if (typeof salt !== "string") throw new Error(`${op}: cacheSalt must be a string, got ${describe(salt)}`);
  return salt;
}

function sliceOf(tokens: Tokens, start: number, end: number): ArrayLike<number> {
  return Array.prototype.slice.call(tokens, start, end) as number[];
}
