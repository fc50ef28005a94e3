// A growable receive buffer for framed TCP protocols: chunks are appended (amortized one copy
// per byte, so a 100 MB value arriving in 64 KB chunks costs ~100 MB of copying, not the
// quadratic cost of concatenating every chunk), and a parser reads at a cursor that it can roll
// back when a message is not complete yet.

/** Thrown by a read past the received bytes: the message is incomplete, parse it again later. */
export class Incomplete extends Error {}
const INCOMPLETE = new Incomplete("incomplete message");

export class ByteQueue {
  private buf = Buffer.allocUnsafe(4096);
  private start = 0;
  private end = 0;
  /** Read position while parsing (absolute index into buf). */
  private cur = 0;

  append(chunk: Uint8Array): void {
    const need = this.end + chunk.length;
    if (need > this.buf.length) {
      const live = this.end - this.start;
      const size = Math.max(4096, 2 * (live + chunk.length));
      // compact in place when that is enough room, else grow
      const next = live + chunk.length <= this.buf.length / 2 ? this.buf : Buffer.allocUnsafe(size);
      this.buf.copy(next, 0, this.start, this.end);
      this.cur -= this.start;
      this.buf = next;
      this.end = live;
      this.start = 0;
    }
    this.buf.set(chunk, this.end);
    this.end += chunk.length;
  }

  get available(): number {
    return this.end - this.start;
  }

  /** Start parsing one message at the first unconsumed byte. */
  begin(): void {
    this.cur = this.start;
  }
  /** The message parsed since begin() is complete: drop its bytes. */
  commit(): void {
    this.start = this.cur;
    if (this.start === this.end) this.start = this.end = this.cur = 0;
  }

  private take(n: number): number {
    if (this.end - this.cur < n) throw INCOMPLETE;
    const at = this.cur;
    this.cur += n;
    return at;
  }
  u8(): number {
    return this.buf[this.take(1)]!;
  }
  u16(): number {
    return this.buf.readUInt16LE(this.take(2));
  }
  u32(): number {
    return this.buf.readUInt32LE(this.take(4));
  }
  /** An unsigned 64-bit little-endian length; lengths past 2^53 are refused. */
  u64(): number {
    const v = this.buf.readBigUInt64LE(this.take(8));
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`length ${v} is too large`);
    return Number(v);
  }
  i64(): bigint {
    return this.buf.readBigInt64LE(this.take(8));
  }
  /** n bytes, copied out (the queue's memory is reused). */
  bytes(n: number): Buffer {
    const at = this.take(n);
    return Buffer.from(this.buf.subarray(at, at + n));
  }
  /** Whether n more bytes have arrived (so a large payload can be awaited without parsing it). */
  has(n: number): boolean {
    return this.end - this.cur >= n;
  }
}
