// The compile cache shared by every eager mode (and, next, by compile()): executables keyed
// by graph structure, shapes, strides, dtypes and device, never by values.
import type { DevicePlugin, Executable } from "../device/plugin.js";
import type { IRGraph } from "../ir/prims.js";
import { nodeKey } from "../ir/prims.js";

export interface CacheStats {
  hits: number;
  misses: number;
  compileTimeMs: number;
  entries: number;
}

const MAX_ENTRIES = 8192;
const cache = new Map<string, Executable>();
const stats = { hits: 0, misses: 0, compileTimeMs: 0 };

export function graphKey(dev: DevicePlugin, g: IRGraph): string {
  return `${dev.name}|${g.nodes.map(nodeKey).join("|")}`;
}

export function getExecutable(dev: DevicePlugin, g: IRGraph): Executable {
  const key = graphKey(dev, g);
  const hit = cache.get(key);
  if (hit) {
    stats.hits++;
    cache.delete(key); // refresh LRU position
    cache.set(key, hit);
    return hit;
  }
  stats.misses++;
  const t0 = performance.now();
  const exe = dev.compile(g);
  stats.compileTimeMs += performance.now() - t0;
  cache.set(key, exe);
  if (cache.size > MAX_ENTRIES) cache.delete(cache.keys().next().value!);
  return exe;
}

export function cacheStats(): CacheStats {
  return { ...stats, entries: cache.size };
}

export function resetCache(): void {
  cache.clear();
  stats.hits = stats.misses = stats.compileTimeMs = 0;
}
