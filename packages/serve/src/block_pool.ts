// The paged KV cache's block pool: `numBlocks` fixed-size blocks of `blockSize` token slots each,
// identified by the integers 0..numBlocks-1. A block is either free (reference count 0, on the free
// list) or used (count >= 1). Every owner of a block holds one reference: a request's block table
// (SequenceBlocks), each of its forks, and the radix prefix cache for the blocks its nodes own. A
// block goes back to the free list when its last reference is dropped.
//
// Pure bookkeeping: no tensors. The engine maps block id b, slot s to row b * blockSize + s of its
// per-layer K and V buffers.
//
// Every misuse (unknown id, double free, a reference to a free block, a non-integer or negative
// count) throws an Error naming the problem and leaves the pool exactly as it was.

export interface BlockPoolOptions {
  /** Number of KV blocks in the pool (a positive integer). */
  numBlocks: number;
  /** Tokens per block (a positive integer; default 16, as vLLM's `--block-size`). */
  blockSize?: number;
}

export const DEFAULT_BLOCK_SIZE = 16;

export function checkCount(what: string, n: unknown, min = 0): number {
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < min)
    throw new Error(`${what} must be an integer >= ${min}, got ${describe(n)}`);
  return n;
}

export function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint" || v == null) return String(v);
  if (Array.isArray(v)) return `an array of length ${v.length}`;
  return `a ${typeof v}`;
}

export class BlockPool {
  /** Number of blocks in the pool. */
  readonly total: number;
  /** Tokens per block. */
  readonly blockSize: number;
  private readonly refs: Int32Array;
  // Free block ids; allocation pops from the end. The order is immaterial for correctness: the
  // prefix cache's LRU lives in the radix tree, not in the free list.
  private readonly freeList: number[];

  constructor(options: BlockPoolOptions) {
    if (options == null || typeof options !== "object")
      throw new Error(`BlockPool: expected an options object { numBlocks, blockSize? }, got ${describe(options)}`);
    this.total = checkCount("BlockPool: numBlocks", options.numBlocks, 1);
    this.blockSize = checkCount("BlockPool: blockSize", options.blockSize ?? DEFAULT_BLOCK_SIZE, 1);
    this.refs = new Int32Array(this.total);
    this.freeList = [];
    // Reverse so the first allocation gets block 0, 1, 2, ... (easier to read in tests and logs).
    for (let b = this.total - 1; b >= 0; b--) this.freeList.push(b);
  }

  /** Number of free blocks. */
  get free(): number {
    return this.freeList.length;
  }

  /** Number of blocks with at least one reference. */
  get used(): number {
    return this.total - this.freeList.length;
  }

  /** Fraction of blocks in use, 0..1 (vllm:kv_cache_usage_perc). */
  get usage(): number {
    return this.used / this.total;
  }

  /** Blocks needed to hold `numTokens` tokens. */
  blocksFor(numTokens: number): number {
    checkCount("BlockPool.blocksFor: numTokens", numTokens);
    return Math.ceil(numTokens / this.blockSize);
  }

  /**
   * Takes `n` free blocks, each with reference count 1, all or nothing: returns their ids, or null
   * (and changes nothing) when fewer than `n` are free.
   */
  allocate(n: number): number[] | null {
    checkCount("BlockPool.allocate: n", n);
    if (n > this.freeList.length) return null;
    const out = this.freeList.splice(this.freeList.length - n, n).reverse();
    for (const b of out) this.refs[b] = 1;
    return out;
  }

  /** The reference count of block `id` (0 when free). */
  refCount(id: number): number {
    return this.refs[this.checkId("refCount", id)]!;
  }

  /** True when block `id` is on the free list. */
  isFree(id: number): boolean {
    return this.refCount(id) === 0;
  }

  /** Adds a reference to a used block; returns the new count. A free block cannot be revived this way. */
  incRef(id: number): number {
    const b = this.checkId("incRef", id);
    if (this.refs[b] === 0) throw new Error(`BlockPool.incRef: block ${b} is free; allocate() it first`);
    return ++this.refs[b]!;
  }

  /** Drops a reference; the block returns to the free list when its count reaches 0. Returns the new count. */
  decRef(id: number): number {
    const b = this.checkId("decRef", id);
    if (this.refs[b] === 0)
      throw new Error(`BlockPool.decRef: block ${b} is already free (double free, or reference count below zero)`);
    const n = --this.refs[b]!;
    if (n === 0) this.freeList.push(b);
    return n;
  }

  /** incRef on every id, all or nothing (an id may appear more than once: one reference each time). */
  incRefAll(ids: readonly number[]): void {
    this.checkIds("incRefAll", ids, false);
    for (const b of ids) this.refs[b]!++;
  }

  /**
   * decRef on every id, all or nothing: the whole list is checked first, so a list that would drop
   * some block below zero (counting repeats) throws without touching any block. Returns how many
   * blocks became free.
   */
  release(ids: readonly number[]): number {
    this.checkIds("release", ids, true);
    let freed = 0;
    for (const b of ids) {
      if (--this.refs[b]! === 0) {
        this.freeList.push(b);
        freed++;
      }
    }
    return freed;
  }

  /** Throws if the pool's own bookkeeping is inconsistent (for tests and debug builds). */
  validate(): void {
    const onList = new Uint8Array(this.total);
    for (const b of this.freeList) {
      if (!Number.isInteger(b) || b < 0 || b >= this.total) throw new Error(`BlockPool: bad id ${b} on the free list`);
      if (onList[b]) throw new Error(`BlockPool: block ${b} is on the free list twice`);
      onList[b] = 1;
    }
    for (let b = 0; b < this.total; b++) {
      const r = this.refs[b]!;
      if (r < 0) throw new Error(`BlockPool: block ${b} has reference count ${r}`);
      if ((r === 0) !== (onList[b] === 1))
        throw new Error(
          `BlockPool: block ${b} has reference count ${r} but is ${onList[b] ? "" : "not "}on the free list`,
        );
    }
    if (this.free + this.used !== this.total) throw new Error("BlockPool: free + used != total");
  }

  private checkId(op: string, id: unknown): number {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0 || id >= this.total)
      throw new Error(`BlockPool.${op}: unknown block id ${describe(id)} (the pool has blocks 0..${this.total - 1})`);
    return id;
  }

  private checkIds(op: string, ids: readonly number[], dropping: boolean): void {
    if (!Array.isArray(ids)) throw new Error(`BlockPool.${op}: expected an array of block ids, got ${describe(ids)}`);
    const seen = new Map<number, number>();
    for (const id of ids) {
      const b = this.checkId(op, id);
      const k = (seen.get(b) ?? 0) + 1;
      seen.set(b, k);
      if (this.refs[b] === 0)
        throw new Error(
          dropping
            ? `BlockPool.${op}: block ${b} is already free (double free, or reference count below zero)`
            : `BlockPool.${op}: block ${b} is free; allocate() it first`,
        );
      if (dropping && k > this.refs[b]!)
        throw new Error(`BlockPool.${op}: block ${b} appears ${k} times but has only ${this.refs[b]} references`);
    }
  }
}
