// Allocation inside the shared WebAssembly.Memory: size classes (four per power of two, so at
// most 25% is wasted) with free lists over a bump pointer. Blocks are never returned to the host (wasm memory cannot shrink), but
// freed blocks are reused, so a training loop that allocates the same shapes stays flat.

const PAGE = 65536;
const MIN_BYTES = 64;

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

  constructor(
    private readonly memory: GrowableMemory,
    base: number,
  ) {
    this.top = base;
  }

  /** Byte address of a block of at least `bytes`. Grows the memory when needed. */
  alloc(bytes: number): number {
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
    if (end + SLACK > have) this.memory.grow(Math.ceil((end + SLACK - have) / PAGE)); // RangeError when full
    this.top = end;
    this.bytesInUse += size;
    this.sizeOf.set(ptr, size);
    return ptr;
  }

  release(ptr: number): void {
    const size = this.sizeOf.get(ptr);
    if (size === undefined) throw new Error(`wasm arena: double free of block ${ptr}`);
    this.sizeOf.delete(ptr);
    this.bytesInUse -= size;
    const list = this.free.get(size) ?? [];
    list.push(ptr);
    this.free.set(size, list);
  }

  get reservedBytes(): number {
    return this.memory.buffer.byteLength;
  }
}
