// Allocation inside the shared WebAssembly.Memory: best fit over the freed blocks, which are
// split to the size asked for and coalesced with their free neighbours when released, over a
// bump pointer that comes back down when the block at the top is freed. So any freed memory
// serves any later size (a model's initialization temporaries become its activations), and the
// arena holds what is allocated plus the holes between allocated blocks. Blocks are never
// returned to the host (wasm memory cannot shrink).
// A size is checked before anything changes: a bad one (NaN, negative, fractional) is a
// RangeError, one the memory cannot hold an OutOfMemoryError, and the arena stays as it was.
// A double free is counted and ignored, never applied (a block freed twice would be handed to
// two tensors).
import { fmtBytes, outOfMemory, sizeError } from "../../../runtime/errors.js";
import { reportReleaseError } from "../../../runtime/memory.js";

const PAGE = 65536;
const MIN_BYTES = 64;
/** wasm32: a memory holds at most 65536 pages (4 GiB). */
export const WASM32_MAX_BYTES = 65536 * PAGE;

/** The block size serving `bytes`: 16-byte multiples (v128 alignment), at least 64. */
export function classSize(bytes: number): number {
  return Math.max(MIN_BYTES, Math.ceil(bytes / 16) * 16);
}
const SLACK = 64; // bytes past the top block: over-reading vector loads stay inside the memory
/** A free block no longer than this past the size asked for is handed out whole (no sliver stays behind). */
const SPLIT_MIN = 256;
// `reclaim` runs only when the bytes in use grew past what they were after it last ran (or the
// least they were since) by RECLAIM_FRACTION of that, and at least RECLAIM_MIN: what a
// collection can find is what became garbage since, so one that finds little is not repeated at
// every growth, memory that really is live (weights being loaded) grows with a bounded number of
// collections (geometric steps), and a small workload collects about as often as the runtime's
// own rule (memory.ts, maybeYield: 128 MiB of slack) would. A collection marks the whole
// JavaScript heap whatever it finds (~10 ms with torchts loaded): at 64 MiB, a small model's strict
// eager steps (13 MiB of garbage each) spent 2.5 ms a step in it on average, at 128 MiB 1.4 ms.
const RECLAIM_FRACTION = 1 / 8;
export const RECLAIM_MIN = 128 * 1024 * 1024;

/** The part of WebAssembly.Memory used here (structural, so published types need no wasm lib). */
export interface GrowableMemory {
  readonly buffer: ArrayBufferLike;
  grow(pages: number): number;
}

export class Arena {
  private top: number;
  /** The highest `top` ever reached (the arena's high-water mark). */
  highWater: number;
  /** Free blocks: start -> size, end -> start, and (size, start) pairs sorted for best fit. */
  private readonly freeAt = new Map<number, number>();
  private readonly freeEnd = new Map<number, number>();
  // Flat pairs [size0, ptr0, size1, ptr1, ...] sorted, in the first `pairs` pairs of a typed array:
  // its copyWithin is a memmove, where a JS array's is a generic per-element loop (~0.5 us a call
  // on a 15-block list: the arena took 0.92 ms of a small training step, 0.56 now) and splice
  // allocates its result.
  private bySize = new Float64Array(64);
  private pairs = 0;
  private readonly sizeOf = new Map<number, number>();
  bytesInUse = 0;
  /** Frees of a block that is not allocated (double frees): counted, not applied. */
  invalidFrees = 0;
  /**
   * Called once before the memory would grow by `bytes`: it may release blocks (a garbage
   * collection whose finalizers free dead tensors); the allocation then looks again.
   */
  reclaim: ((bytes: number) => void) | null = null;
  /** bytesInUse after `reclaim` last ran, lowered by the releases since. */
  private floor = 0;

  constructor(
    private readonly memory: GrowableMemory,
    base: number,
    /** The most bytes the memory can grow to (its declared maximum; wasm32 allows 4 GiB). */
    readonly maxBytes: number = WASM32_MAX_BYTES,
  ) {
    this.top = this.highWater = base;
  }

  /**
   * Byte address of a block of at least `bytes`. Grows the memory when needed. Throws, with the
   * arena unchanged, a RangeError for a size that is not a finite non-negative integer and an
   * OutOfMemoryError when the memory cannot hold the block.
   */
  alloc(bytes: number): number {
    if (!(bytes >= 0 && bytes <= this.maxBytes && Number.isInteger(bytes)))
      throw sizeError("wasm arena", bytes, "bytes", 1, `the wasm memory holds at most ${fmtBytes(this.maxBytes)}`);
    // vector loops may finish the last 16 bytes of a block
    return this.place(classSize(bytes), bytes, true);
  }

  private place(size: number, bytes: number, mayReclaim: boolean): number {
    const hit = this.fromFree(size);
    if (hit >= 0) return hit;
    // (no free block ever ends at the top: releasing one there lowers the top instead)
    const ptr = this.top;
    const end = ptr + size;
    // SLACK bytes past the last block keep over-reading vector loads inside the memory
    if (mayReclaim && end + SLACK > this.memory.buffer.byteLength && this.reclaim && this.bytesInUse >= this.floor + Math.max(RECLAIM_MIN, this.floor * RECLAIM_FRACTION)) {
      const r = this.reclaim;
      this.reclaim = null; // an allocation it makes must not recurse into another collection
      try {
        r(size);
      } finally {
        this.reclaim = r;
      }
      this.floor = this.bytesInUse;
      return this.place(size, bytes, false); // the free blocks may serve it now (and the top may have moved)
    }
    const have = this.memory.buffer.byteLength;
    if (end + SLACK > have) this.grow(bytes, end + SLACK - have);
    this.top = end;
    if (end > this.highWater) this.highWater = end;
    this.bytesInUse += size;
    this.sizeOf.set(ptr, size);
    return ptr;
  }

  /** The best-fitting free block for `size`, split when much larger; -1 when none fits. */
  private fromFree(size: number): number {
    const s = this.bySize;
    let lo = 0;
    let hi = this.pairs;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (s[2 * mid]! < size) lo = mid + 1;
      else hi = mid;
    }
    if (lo === this.pairs) return -1;
    const have = s[2 * lo]!;
    const ptr = s[2 * lo + 1]!;
    this.unfree(ptr, have);
    const take = have - size >= SPLIT_MIN ? size : have;
    if (take < have) this.addFree(ptr + take, have - take);
    this.bytesInUse += take;
    this.sizeOf.set(ptr, take);
    return ptr;
  }

  private pairIndex(size: number, ptr: number): number {
    const s = this.bySize;
    let lo = 0;
    let hi = this.pairs;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const ms = s[2 * mid]!;
      if (ms < size || (ms === size && s[2 * mid + 1]! < ptr)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private addFree(ptr: number, size: number): void {
    this.freeAt.set(ptr, size);
    this.freeEnd.set(ptr + size, ptr);
    if (2 * this.pairs + 2 > this.bySize.length) {
      const wider = new Float64Array(this.bySize.length * 2);
      wider.set(this.bySize);
      this.bySize = wider;
    }
    const s = this.bySize;
    const at = 2 * this.pairIndex(size, ptr);
    s.copyWithin(at + 2, at, 2 * this.pairs);
    this.pairs++;
    s[at] = size;
    s[at + 1] = ptr;
  }

  private unfree(ptr: number, size: number): void {
    this.freeAt.delete(ptr);
    this.freeEnd.delete(ptr + size);
    const at = 2 * this.pairIndex(size, ptr);
    this.bySize.copyWithin(at, at + 2, 2 * this.pairs);
    this.pairs--;
  }

  private grow(bytes: number, more: number): void {
    const have = this.memory.buffer.byteLength;
    const left = `${fmtBytes(this.bytesInUse)} in use, ${fmtBytes(have)} of the wasm memory's ${fmtBytes(this.maxBytes)} reserved`;
    if (have + more > this.maxBytes) throw outOfMemory(bytes, `wasm arena: ${left}`);
    try {
      this.memory.grow(Math.ceil(more / PAGE));
    } catch (e) {
      throw outOfMemory(bytes, `wasm arena: the memory could not grow (${e instanceof Error ? e.message : String(e)}); ${left}`);
    }
  }

  /**
   * Return a block. Never throws: freeing a block that is not allocated (a double free, or an
   * address the arena never handed out) is counted in `invalidFrees` and
   * memory.stats().releaseErrors and ignored. Returns whether the block was freed.
   */
  release(ptr: number): boolean {
    const size = this.sizeOf.get(ptr);
    if (size === undefined) {
      this.invalidFrees++;
      reportReleaseError("wasm arena double free", `block ${String(ptr)} is not allocated`);
      return false;
    }
    this.sizeOf.delete(ptr);
    this.bytesInUse -= size;
    if (this.bytesInUse < this.floor) this.floor = this.bytesInUse;
    let start = ptr;
    let end = ptr + size;
    const before = this.freeEnd.get(start);
    if (before !== undefined) {
      this.unfree(before, start - before);
      start = before;
    }
    const after = this.freeAt.get(end);
    if (after !== undefined) {
      this.unfree(end, after);
      end += after;
    }
    if (end === this.top) this.top = start; // the top comes back down
    else this.addFree(start, end - start);
    return true;
  }

  /** The size of the allocated block at `ptr` (what it counts in bytesInUse), or undefined. */
  blockBytes(ptr: number): number | undefined {
    return this.sizeOf.get(ptr);
  }

  /** Bytes in free blocks below the top (freed, not yet reused). */
  get freeBytes(): number {
    let n = 0;
    for (const v of this.freeAt.values()) n += v;
    return n;
  }

  get reservedBytes(): number {
    return this.memory.buffer.byteLength;
  }
}
