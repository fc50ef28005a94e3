// A request's block table: the token ids that have a KV slot, in order, and the pool blocks
// holding them (token i lives in block blocks[floor(i / blockSize)], slot i % blockSize).
//
// The table holds one pool reference per block. Blocks can be shared: a cached prefix adopted from
// the RadixCache (full blocks, never written again) and, after fork(), every block of the parent.
// Only the last, partially filled block is ever written; when it is shared, appendTokens() copies it
// first (copy-on-write) and reports the copy the engine must perform on the KV buffers.

import { BlockPool, checkCount, describe } from "./block_pool.js";

export interface BlockCopy {
  /** Copy the KV of block `src`'s first `slots` slots into block `dst`. */
  src: number;
  dst: number;
  slots: number;
}

export interface AppendResult {
  /** Blocks allocated for this append (the copy-on-write target first, if any). */
  newBlocks: number[];
  /** Copies to perform before writing the new tokens' KV. */
  copies: BlockCopy[];
  /** Position of the first appended token. */
  start: number;
}

export class SequenceBlocks {
  readonly pool: BlockPool;
  readonly blockSize: number;
  private _tokens: number[] = [];
  private _blocks: number[] = [];
  private _released = false;

  constructor(pool: BlockPool) {
    if (!(pool instanceof BlockPool)) throw new Error(`SequenceBlocks: expected a BlockPool, got ${describe(pool)}`);
    this.pool = pool;
    this.blockSize = pool.blockSize;
  }

  /** Token ids with a KV slot, in order. */
  get tokens(): readonly number[] {
    return this._tokens;
  }
  get numTokens(): number {
    return this._tokens.length;
  }
  /** The block table. */
  get blocks(): readonly number[] {
    return this._blocks;
  }
  get released(): boolean {
    return this._released;
  }

  /**
   * Starts the table with a cached prefix (RadixCache.match's tokens and blocks): takes one
   * reference on each block. Only on an empty table; `tokens.length` must be `blocks.length * blockSize`.
   */
  adoptPrefix(tokens: ArrayLike<number>, blocks: readonly number[]): void {
    this.checkLive("adoptPrefix");
    if (this._tokens.length > 0)
      throw new Error(`SequenceBlocks.adoptPrefix: the table already holds ${this._tokens.length} tokens`);
    if (!Array.isArray(blocks))
      throw new Error(`SequenceBlocks.adoptPrefix: blocks must be an array, got ${describe(blocks)}`);
    const toks = checkTokenList("SequenceBlocks.adoptPrefix", tokens);
    if (toks.length !== blocks.length * this.blockSize)
      throw new Error(
        `SequenceBlocks.adoptPrefix: ${blocks.length} blocks of ${this.blockSize} hold ${blocks.length * this.blockSize} tokens, got ${toks.length}`,
      );
    if (new Set(blocks).size !== blocks.length) throw new Error("SequenceBlocks.adoptPrefix: a block appears twice");
    this.pool.incRefAll(blocks);
    this._tokens = toks;
    this._blocks = blocks.slice();
  }

  /** Blocks appendTokens(n tokens) would allocate now (including a copy-on-write of the last block). */
  blocksNeeded(n: number): number {
    checkCount("SequenceBlocks.blocksNeeded: n", n);
    this.checkLive("blocksNeeded");
    if (n === 0) return 0;
    const bs = this.blockSize;
    const len = this._tokens.length;
    const capacity = this._blocks.length * bs;
    const grow = Math.max(0, Math.ceil((len + n - capacity) / bs));
    return grow + (this.needsCopy() ? 1 : 0);
  }

  /**
   * Gives `tokens` KV slots at the end of the table, allocating blocks as needed (all or nothing:
   * returns null, changing nothing, when the pool has too few free blocks; evict or preempt, then retry).
   */
  appendTokens(tokens: ArrayLike<number>): AppendResult | null {
    this.checkLive("appendTokens");
    const toks = checkTokenList("SequenceBlocks.appendTokens", tokens);
    const start = this._tokens.length;
    const need = this.blocksNeeded(toks.length);
    const got = this.pool.allocate(need);
    if (got === null) return null;
    const copies: BlockCopy[] = [];
    let next = 0;
    if (toks.length > 0 && this.needsCopy()) {
      const last = this._blocks.length - 1;
      const src = this._blocks[last]!;
      const dst = got[next++]!;
      copies.push({ src, dst, slots: start % this.blockSize });
      this._blocks[last] = dst;
      this.pool.decRef(src); // still referenced by the other owner(s)
    }
    while (next < got.length) this._blocks.push(got[next++]!);
    for (const t of toks) this._tokens.push(t);
    return { newBlocks: got, copies, start };
  }

  /** Block id and slot of token `position`. */
  slot(position: number): { block: number; offset: number } {
    checkCount("SequenceBlocks.slot: position", position);
    if (position >= this._tokens.length)
      throw new Error(
        `SequenceBlocks.slot: position ${position} is past the ${this._tokens.length} tokens of the table`,
      );
    return { block: this._blocks[Math.floor(position / this.blockSize)]!, offset: position % this.blockSize };
  }

  /** Flat slot indices (block * blockSize + offset) of tokens [start, end), for the attention kernels' writes. */
  slotMapping(start: number, end: number = this._tokens.length): Int32Array {
    checkCount("SequenceBlocks.slotMapping: start", start);
    checkCount("SequenceBlocks.slotMapping: end", end);
    if (start > end || end > this._tokens.length)
      throw new Error(`SequenceBlocks.slotMapping: [${start}, ${end}) is not within the ${this._tokens.length} tokens`);
    const bs = this.blockSize;
    const out = new Int32Array(end - start);
    for (let p = start; p < end; p++) out[p - start] = this._blocks[Math.floor(p / bs)]! * bs + (p % bs);
    return out;
  }

  /** A copy of this table sharing every block (one more reference each), for n > 1 / beam search. */
  fork(): SequenceBlocks {
    this.checkLive("fork");
    this.pool.incRefAll(this._blocks);
    const child = new SequenceBlocks(this.pool);
    child._tokens = this._tokens.slice();
    child._blocks = this._blocks.slice();
    return child;
  }

  /**
   * Replaces the leading blocks of the table by `blocks` when they differ (RadixCache.insert's
   * `blocks`: the tree's copies of the same tokens), dropping this table's duplicates. Only full
   * blocks can be replaced. Returns how many blocks were replaced.
   */
  sharePrefix(blocks: readonly number[]): number {
    this.checkLive("sharePrefix");
    if (!Array.isArray(blocks))
      throw new Error(`SequenceBlocks.sharePrefix: blocks must be an array, got ${describe(blocks)}`);
    const full = Math.floor(this._tokens.length / this.blockSize);
    if (blocks.length > full)
      throw new Error(
        `SequenceBlocks.sharePrefix: ${blocks.length} blocks given but the table has ${full} full blocks`,
      );
    if (new Set(blocks).size !== blocks.length) throw new Error("SequenceBlocks.sharePrefix: a block appears twice");
    const take: number[] = [];
    const drop: number[] = [];
    for (let i = 0; i < blocks.length; i++) {
      if (blocks[i] !== this._blocks[i]) {
        take.push(blocks[i]!);
        drop.push(this._blocks[i]!);
      }
    }
    const mine = new Set(this._blocks);
    for (const b of take)
      if (mine.has(b)) throw new Error(`SequenceBlocks.sharePrefix: block ${b} is already in the table elsewhere`);
    this.pool.incRefAll(take); // validates take before anything changes
    this.pool.release(drop);
    for (let i = 0; i < blocks.length; i++) this._blocks[i] = blocks[i]!;
    return take.length;
  }

  /** Drops every reference of the table. Returns how many blocks became free. The table is unusable after. */
  release(): number {
    this.checkLive("release");
    const freed = this.pool.release(this._blocks);
    this._released = true;
    this._blocks = [];
    this._tokens = [];
    return freed;
  }

  private needsCopy(): boolean {
    return this._tokens.length % this.blockSize !== 0 && this.pool.refCount(this._blocks[this._blocks.length - 1]!) > 1;
  }

  private checkLive(op: string): void {
    if (this._released) throw new Error(`SequenceBlocks.${op}: the table has been released`);
  }
}

function checkTokenList(op: string, tokens: ArrayLike<number>): number[] {
  if (tokens == null || typeof tokens !== "object" || typeof tokens.length !== "number")
    throw new Error(`${op}: tokens must be an array of token ids, got ${describe(tokens)}`);
  const out = new Array<number>(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (typeof t !== "number" || !Number.isSafeInteger(t) || t < 0)
      throw new Error(`${op}: tokens[${i}] must be a non-negative integer token id, got ${describe(t)}`);
    out[i] = t;
  }
  return out;
}
