// Allocation inside the shared WebAssembly.Memory: size classes (four per power of two, so at
// most 25% is wasted) with free lists over a bump pointer. Blocks are never returned to the host (wasm memory cannot shrink), but
// freed blocks are reused, so a training loop that allocates the same shapes stays flat.
// A size is checked before anything changes: a bad one (NaN, negative, fractional) is a
// RangeError, one the memory cannot hold an OutOfMemoryError, and the arena stays as it was.
// A double free is counted and ignored, never applied (a block on a free list twice would be
// handed to two tensors).
import { fmtBytes, outOfMemory, sizeError } from "../../../runtime/errors.js";
import { reportReleaseError } from "../../../runtime/memory.js";

const PAGE = 65536;
const MIN_BYTES = 64;
/** wasm32: a memory holds at most 65536 pages (4 GiB). */
export const WASM32_MAX_BYTES = 65536 * PAGE;

/** The block size serving `bytes`: 64, then 2^k * {1, 1.25, 1.5, 1.75} (multiples of 16). */
export function classSize(bytes: number): number {
  if (bytes <= MIN_BYTES) return MIN_BYTES;
  const k = Math.floor(Math.log2(bytes - 1));
  const quarter = 2 ** (k - 2);
  return 2 ** k + Math.ceil((bytes - 2 ** k) / quarter) * quarter;
}
const SLACK = 64; // 64-byte blocks: every block is 16-byte (v128) aligned

/** The part of WebAssembly.Memory used here (structural, so published types need no wasm lib). */
export interface GrowableMemory {
  readonly buffer: ArrayBufferLike;
  grow(pages: number): number;
}

export class Arena {
  private top: number;
  private readonly free = new Map<number, number[]>();
  private readonly sizeOf = new Map<number, number>();
  bytesInUse = 0;
  /** Frees of a block that is not allocated (double frees): counted, not applied. */
  invalidFrees = 0;

  constructor(
    private readonly memory: GrowableMemory,
    base: number,
    /** The most bytes the memory can grow to (its declared maximum; wasm32 allows 4 GiB). */
    readonly maxBytes: number = WASM32_MAX_BYTES,
  ) {
    this.top = base;
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
    const size = classSize(Math.ceil(bytes / 16) * 16);
    const hit = this.free.get(size)?.pop();
    if (hit !== undefined) {
      this.bytesInUse += size;
      this.sizeOf.set(hit, size);
      return hit;
    }
    const ptr = this.top;
    const end = ptr + size;
    // SLACK bytes past the last block keep over-reading vector loads inside the memory
    const have = this.memory.buffer.byteLength;
    if (end + SLACK > have) this.grow(bytes, end + SLACK - have);
    this.top = end;
    this.bytesInUse += size;
    this.sizeOf.set(ptr, size);
    return ptr;
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
    const list = this.free.get(size) ?? [];
    list.push(ptr);
    this.free.set(size, list);
    return true;
  }

  get reservedBytes(): number {
    return this.memory.buffer.byteLength;
  }
}
