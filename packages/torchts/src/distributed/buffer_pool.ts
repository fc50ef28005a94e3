// Reused ArrayBuffers for the bytes a collective moves (one pool per thread). A fresh 64 MB array
// costs ~16k page faults the first time it is touched, more than copying into warm memory, so the
// main thread's staging copies, and the communication thread's received payloads, come from
// here, and what is done with goes back. Bounded: at most `perSize` buffers of one size and
// `capBytes` in all; past that a returned buffer is left to the GC.

export class BufferPool {
  private readonly free = new Map<number, ArrayBuffer[]>();
  private bytes = 0;
  constructor(
    private readonly capBytes: number,
    private readonly perSize: number,
  ) {}

  /** A buffer of exactly `byteLength` bytes (contents arbitrary). */
  take(byteLength: number): ArrayBuffer {
    const list = this.free.get(byteLength);
    const b = list?.pop();
    if (b) {
      this.bytes -= byteLength;
      return b;
    }
    return new ArrayBuffer(byteLength);
  }

  /** Hand a buffer back (nothing may use it any more); detached or unshareable ones are ignored. */
  give(b: ArrayBufferLike): void {
    if (!(b instanceof ArrayBuffer) || b.byteLength === 0 || this.bytes + b.byteLength > this.capBytes) return;
    const list = this.free.get(b.byteLength) ?? [];
    if (list.length >= this.perSize || list.includes(b)) return;
    list.push(b);
    this.free.set(b.byteLength, list);
    this.bytes += b.byteLength;
  }

  get pooledBytes(): number {
    return this.bytes;
  }
}
