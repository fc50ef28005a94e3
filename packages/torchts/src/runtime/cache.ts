// The compile cache shared by every eager mode (and, next, by compile()): executables keyed
// by graph structure, shapes, strides, dtypes and device, never by values.
import type { DevicePlugin, Executable } from "../device/plugin.js";
import type { IRGraph } from "../ir/prims.js";
import { nodeKey } from "../ir/prims.js";
import { nodeId, nodeIdGeneration } from "../ir/node_id.js";
import { fusedKey, fusionDevices, isFused } from "./fused_graph.js";
import { cacheDir, cacheOnly, diskGet, diskPut } from "./disk_cache.js";
import { log } from "./logs.js";

export interface CacheStats {
  hits: number;
  misses: number;
  compileTimeMs: number;
  entries: number;
  /** Fused kernels whose code was generated in this process (not loaded from the disk cache). */
  codegen: number;
}

const MAX_ENTRIES = 8192;
const cache = new Map<string, Executable>();
const stats = { hits: 0, misses: 0, compileTimeMs: 0, codegen: 0 };

export function graphKey(dev: DevicePlugin, g: IRGraph): string {
  const base = `${dev.name}|${g.nodes.map(nodeKey).join("|")}`;
  return isFused(g) ? `${base}|${fusedKey(g)}` : base;
}

// One-node graphs (every strict eager op) are found by the node's interned id first: no key
// string is built for a hit. The entries are the main cache's executables.
let singles = new Map<DevicePlugin, Map<number, Executable>>();
let singlesGeneration = nodeIdGeneration;
let singlesSize = 0;

export function getExecutable(dev: DevicePlugin, g: IRGraph): Executable {
  if (g.nodes.length !== 1 || isFused(g)) return lookup(dev, g);
  const id = nodeId(g.nodes[0]!);
  if (singlesGeneration !== nodeIdGeneration || singlesSize >= MAX_ENTRIES) {
    singles = new Map();
    singlesGeneration = nodeIdGeneration;
    singlesSize = 0;
  }
  let byId = singles.get(dev);
  const hit = byId?.get(id);
  if (hit) {
    stats.hits++;
    return hit;
  }
  const exe = lookup(dev, g);
  if (!byId) singles.set(dev, (byId = new Map()));
  byId.set(id, exe);
  singlesSize++;
  return exe;
}

function lookup(dev: DevicePlugin, g: IRGraph): Executable {
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
  const exe = isFused(g) && fusionDevices.has(dev) ? compileFusedCached(dev, g, key) : dev.compile(g);
  stats.compileTimeMs += performance.now() - t0;
  cache.set(key, exe);
  if (cache.size > MAX_ENTRIES) cache.delete(cache.keys().next().value!);
  return exe;
}

/** Fused kernels: disk tier first (their generated source is what is stored), then codegen. */
function compileFusedCached(dev: DevicePlugin, g: IRGraph, key: string): Executable {
  type Compile = (g: IRGraph, source?: string) => Executable & { source?: string };
  const src = diskGet(key);
  if (src !== null) {
    try {
      return (dev.compile as Compile)(g, src);
    } catch (e) {
      log("cache", `cached kernel failed to load (${(e as Error).message}); recompiling`);
    }
  }
  if (cacheOnly())
    throw new Error(`TORCHTS_CACHE_ONLY=1: kernel not in the disk cache (${cacheDir()}): ${key.slice(0, 300)}`);
  stats.codegen++;
  const exe = (dev.compile as Compile)(g);
  log("kernels", () => `${key.slice(0, 200)}\n${exe.source ?? "<no source>"}`);
  if (exe.source !== undefined) diskPut(key, exe.source);
  return exe;
}

export function cacheStats(): CacheStats {
  return { ...stats, entries: cache.size };
}

/** Drops the executables compiled for a device name (its device was destroyed; a new one compiles afresh). */
export function dropDeviceExecutables(name: string): void {
  for (const k of [...cache.keys()]) if (k.startsWith(`${name}|`)) cache.delete(k);
}

export function resetCache(): void {
  cache.clear();
  stats.hits = stats.misses = stats.compileTimeMs = stats.codegen = 0;
}
