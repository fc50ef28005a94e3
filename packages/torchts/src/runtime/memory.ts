// Device memory accounting. Buffers are released when their Storage becomes unreachable
// (FinalizationRegistry) or deterministically through dispose()/torch.scope().
import type { DeviceBuffer, DevicePlugin } from "../device/plugin.js";

export interface MemoryStats {
  liveBytes: number;
  peakBytes: number;
  allocationCount: number;
  liveBuffers: number;
}

const stats: MemoryStats = { liveBytes: 0, peakBytes: 0, allocationCount: 0, liveBuffers: 0 };

interface Held {
  dev: DevicePlugin;
  buf: DeviceBuffer;
}

const registry = new FinalizationRegistry<Held>((h) => release(h.dev, h.buf));

// Bytes allocated since the host last yielded to the event loop. FinalizationRegistry
// callbacks only run between macrotasks, and `await t.item()` on cpu resolves as a microtask,
// so a training loop would never give the runtime a chance to release buffers.
let sinceYield = 0;
const YIELD_BYTES = 16 * 1024 * 1024;

/** Let pending buffer releases run if enough was allocated since the last time. */
export async function maybeYield(): Promise<void> {
  if (sinceYield < YIELD_BYTES) return;
  sinceYield = 0;
  await new Promise<void>((r) => (typeof setImmediate === "function" ? setImmediate(r) : setTimeout(r, 0)));
}

export function trackAlloc(owner: object, dev: DevicePlugin, buf: DeviceBuffer): void {
  sinceYield += buf.bytes;
  stats.liveBytes += buf.bytes;
  stats.liveBuffers++;
  stats.allocationCount++;
  if (stats.liveBytes > stats.peakBytes) stats.peakBytes = stats.liveBytes;
  registry.register(owner, { dev, buf }, owner);
}

function release(dev: DevicePlugin, buf: DeviceBuffer): void {
  stats.liveBytes -= buf.bytes;
  stats.liveBuffers--;
  dev.free(buf);
}

export function trackFree(owner: object, dev: DevicePlugin, buf: DeviceBuffer): void {
  registry.unregister(owner);
  release(dev, buf);
}

export function memoryStats(): MemoryStats {
  return { ...stats };
}

export function resetPeakStats(): void {
  stats.peakBytes = stats.liveBytes;
}

/** Move a buffer's ownership (and its release on GC) from one storage object to another. */
export function transferOwnership(from: object, to: object, dev: DevicePlugin, buf: DeviceBuffer): void {
  registry.unregister(from);
  registry.register(to, { dev, buf }, to);
}
