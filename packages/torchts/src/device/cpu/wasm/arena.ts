// Allocation inside the shared WebAssembly.Memory: power-of-two size classes with free lists
// over a bump pointer. Blocks are never returned to the host (wasm memory cannot shrink), but
// freed blocks are reused, so a training loop that allocates the same shapes stays flat.

const PAGE = 65536;
const MIN_CLASS = 6;
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
    bytes = Math.ceil(bytes / 16) * 16; // vector loops may finish the last 16 bytes of a block
    let cls = MIN_CLASS;
    while (1 << cls < bytes) cls++;
    const hit = this.free.get(cls)?.pop();
    const size = 2 ** cls;
    this.bytesInUse += size;
    if (hit !== undefined) {
      this.sizeOf.set(hit, cls);
      return hit;
    }
    const ptr = this.top;
    const end = ptr + size;
    // SLACK bytes past the last block keep over-reading vector loads inside the memory
    const have = this.memory.buffer.byteLength;
    if (end + SLACK > have) this.memory.grow(Math.ceil((end + SLACK - have) / PAGE));
    this.top = end;
    this.sizeOf.set(ptr, cls);
    return ptr;
  }

  release(ptr: number): void {
    const cls = this.sizeOf.get(ptr);
    if (cls === undefined) throw new Error(`wasm arena: double free of block ${ptr}`);
    this.sizeOf.delete(ptr);
    this.bytesInUse -= 2 ** cls;
    const list = this.free.get(cls) ?? [];
    list.push(ptr);
    this.free.set(cls, list);
  }

  get reservedBytes(): number {
    return this.memory.buffer.byteLength;
  }
}
