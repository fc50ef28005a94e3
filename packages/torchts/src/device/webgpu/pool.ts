/// <reference types="@webgpu/types" />
import type { PoolStats } from "./types.js";
import { fmtBytes, OutOfMemoryError, opPrefix, sizeError } from "../../runtime/errors.js";
import { reportReleaseError } from "../../runtime/memory.js";
// Device buffers recycled by size bucket. Creating and destroying GPU buffers is slow, and a
// training loop frees and re-allocates the same sizes every step, so freed buffers wait in
// per-bucket lists (up to a byte cap) and allocation reuses them. When a memory limit would be
// exceeded, the pool is emptied and the allocation retried once before a clear error is raised.
// A size is checked before anything changes (a NaN one would make every statistic NaN), and a
// buffer released twice is counted and ignored (in a free list twice, two tensors would share it).

export { OutOfMemoryError };

/** Bucket sizes: powers of two up to 1 MiB, then multiples of 1 MiB (bounded waste, few buckets). */
function bucketSize(bytes: number): number {
  const b = Math.max(16, bytes);
  if (b <= 1 << 20) return 2 ** Math.ceil(Math.log2(b));
  return Math.ceil(b / (1 << 20)) * (1 << 20);
}

export class BufferPool {
  private free = new Map<number, GPUBuffer[]>();
  private pending: GPUBuffer[] = []; // destroyed after the next submit (they may still be encoded)
  /** Buffers released and not handed out again (pooled, waiting for destruction, destroyed). */
  private released = new WeakSet<GPUBuffer>();
  s: PoolStats;
  constructor(
    private device: GPUDevice,
    limitBytes: number,
    poolCapBytes: number,
    readonly maxBuffer: number,
  ) {
    this.s = {
      liveBytes: 0, liveBuffers: 0, pooledBytes: 0, pooledBuffers: 0, peakBytes: 0, allocations: 0, poolHits: 0,
      oomRetries: 0, limitBytes, poolCapBytes,
    };
  }

  /**
   * A buffer of at least `bytes`. Throws, with the pool unchanged, a RangeError for a size that
   * is not a finite non-negative integer and an OutOfMemoryError past the adapter's largest
   * buffer or the memory limit (after emptying the pool once).
   */
  acquire(bytes: number): GPUBuffer {
    if (!(bytes >= 0 && bytes <= this.maxBuffer && Number.isInteger(bytes)))
      throw sizeError("webgpu", bytes, "bytes", 1, `the adapter's largest storage buffer (maxBufferSize, maxStorageBufferBindingSize) is ${fmtBytes(this.maxBuffer)}`);
    const size = bucketSize(bytes);
    const hit = this.free.get(size)?.pop();
    if (hit) {
      this.s.pooledBytes -= size;
      this.s.pooledBuffers--;
      this.s.poolHits++;
      this.released.delete(hit);
      return this.track(hit, size);
    }
    if (size > this.maxBuffer)
      throw new OutOfMemoryError(
        `${opPrefix()}webgpu: out of memory: a buffer of ${fmt(size)} exceeds the adapter's maxStorageBufferBindingSize (${fmt(this.maxBuffer)})`,
      );
    if (this.s.liveBytes + this.s.pooledBytes + size > this.s.limitBytes) {
      // free what the pool holds and retry once
      this.s.oomRetries++;
      this.emptyPool();
      if (this.s.liveBytes + size > this.s.limitBytes)
        throw new OutOfMemoryError(
          `${opPrefix()}webgpu: out of memory: tried to allocate ${fmt(size)} with ${fmt(this.s.liveBytes)} in use and a limit of ${fmt(this.s.limitBytes)} (the buffer pool was emptied and the allocation retried). Free tensors (dispose(), torch.scope) or raise the limit (torch.webgpu.setMemoryLimit).`,
        );
    }
    const buf = this.device.createBuffer({
      size,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
    this.s.allocations++;
    return this.track(buf, size);
  }

  private track(b: GPUBuffer, size: number): GPUBuffer {
    this.s.liveBytes += size;
    this.s.liveBuffers++;
    if (this.s.liveBytes > this.s.peakBytes) this.s.peakBytes = this.s.liveBytes;
    return b;
  }

  /** Take a buffer back. Never throws: one already released is counted (memory.stats().releaseErrors) and ignored. */
  release(b: GPUBuffer): void {
    if (this.released.has(b)) {
      reportReleaseError("webgpu double free", `a buffer of ${fmt(b.size)} was released twice`);
      return;
    }
    this.released.add(b);
    const size = b.size;
    this.s.liveBytes -= size;
    this.s.liveBuffers--;
    if (this.s.pooledBytes + size > this.s.poolCapBytes) {
      this.pending.push(b);
      return;
    }
    const list = this.free.get(size) ?? [];
    list.push(b);
    this.free.set(size, list);
    this.s.pooledBytes += size;
    this.s.pooledBuffers++;
  }

  emptyPool(): void {
    for (const list of this.free.values()) this.pending.push(...list);
    this.free.clear();
    this.s.pooledBytes = 0;
    this.s.pooledBuffers = 0;
  }

  /** Called after a submit: buffers freed before it can be destroyed now. */
  afterSubmit(): void {
    for (const b of this.takeDead()) b.destroy();
  }

  /** Buffers waiting for destruction (the caller destroys them after its submit). */
  takeDead(): GPUBuffer[] {
    const d = this.pending;
    this.pending = [];
    return d;
  }
}

function fmt(b: number): string {
  if (b >= 1 << 30) return `${(b / (1 << 30)).toFixed(2)} GiB`;
  if (b >= 1 << 20) return `${(b / (1 << 20)).toFixed(2)} MiB`;
  if (b >= 1 << 10) return `${(b / (1 << 10)).toFixed(1)} KiB`;
  return `${b} bytes`;
}
