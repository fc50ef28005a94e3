// Device memory accounting. Buffers are released when their Storage becomes unreachable
// (FinalizationRegistry) or deterministically through dispose()/torch.scope().
import type { DeviceBuffer, DevicePlugin } from "../device/plugin.js";
import { isSize, opPrefix } from "./errors.js";

export interface MemoryStats {
  liveBytes: number;
  peakBytes: number;
  allocationCount: number;
  liveBuffers: number;
  /**
   * Release problems caught and ignored since the process started (a double free, a device
   * free that threw): a release never throws, it is counted here and warned about once per kind.
   */
  releaseErrors: number;
}

const stats: MemoryStats = { liveBytes: 0, peakBytes: 0, allocationCount: 0, liveBuffers: 0, releaseErrors: 0 };

const warned = new Set<string>();

/**
 * A release went wrong (`kind` names the problem, e.g. "wasm arena double free"): count it in
 * memory.stats().releaseErrors and warn on stderr the first time this kind happens. Never
 * throws: it runs in FinalizationRegistry callbacks and dispose(), where an exception would
 * kill the process or hide the error being handled.
 */
export function reportReleaseError(kind: string, detail: unknown): void {
  stats.releaseErrors++;
  if (warned.has(kind)) return;
  warned.add(kind);
  try {
    const msg = detail instanceof Error ? detail.message : String(detail);
    console.warn(`torchts: ${kind}: ${msg} (ignored; later ones are only counted in torch.memory.stats().releaseErrors)`);
  } catch {
    // no console (or an unprintable detail): the count is enough
  }
}

interface Held {
  dev: DevicePlugin;
  buf: DeviceBuffer;
  /** false once the buffer was freed or handed to another owner: the finalizer then does nothing */
  live: boolean;
}

/** What owns a tracked buffer (a Storage): it keeps its registration record. */
export interface BufferOwner {
  _held: Held | null;
  /** What the FinalizationRegistry watches for the owner (see register). */
  _gcToken: object | null;
}

// The sentinel marks the end of a forced collection's releases: V8 runs a registry's cleanup
// callbacks for one collection together, as a task of its own that may come after the next
// setImmediate, and a training step that started before them would stack its allocations on
// the previous step's garbage (twice the memory).
const SENTINEL = Symbol("gc sentinel");
let sentinelSeen: (() => void) | null = null;
function finalize(h: Held | typeof SENTINEL): void {
  try {
    if (h === SENTINEL) sentinelSeen?.();
    else if (h.live) {
      h.live = false;
      release(h.dev, h.buf);
    }
  } catch (e) {
    reportReleaseError("finalizer", e); // an exception here would be uncaught: it kills the process
  }
}

type Registry = FinalizationRegistry<Held | typeof SENTINEL> & { cleanupSome?: () => void };
type RegistryCtor = new (cb: (h: Held | typeof SENTINEL) => void) => Registry;
let registryObj: Registry | null = null;

/**
 * Registered without unregister tokens (a token costs V8 a keyed lookup on register and on
 * unregister, ~2x the time): an explicit free marks the record dead instead. Made on first use
 * from a FinalizationRegistry that has `cleanupSome` where the engine offers one, so that
 * collectNow() can run the releases a collection found before it returns.
 */
function registry(): Registry {
  if (registryObj) return registryObj;
  const sync = exiting ? null : syncCleanupRegistry();
  registryObj = new (sync ?? (FinalizationRegistry as unknown as RegistryCtor))(finalize);
  if (sync) retireAtExit();
  return registryObj;
}

// Set once the process (or worker) emitted "exit": tensors made from then on use the main
// context's FinalizationRegistry.
let exiting = false;

/**
 * Node 20 tears an environment down with JavaScript disallowed, yet still runs a cleanup task
 * that a late collection (one in an "exit" handler, or during the test runner's last report)
 * posted for a registry. For a registry of the main context it skips the call; for one from a
 * vm context (ours, for cleanupSome) V8's "illegal access" reaches the uncaught-exception
 * handler and the process aborts (SIGABRT) after its work is done. So at "exit" the releases
 * already found are run now, and the registry is dropped: nothing references it then, so a
 * later collection finds it dead and schedules none of its callbacks (the process is ending:
 * the memory goes back with it). Registrations from later "exit" handlers go to a plain
 * registry, which Node's teardown handles.
 */
function retireAtExit(): void {
  const proc = (globalThis as { process?: { once?: (ev: string, fn: () => void) => unknown } }).process;
  if (typeof proc?.once !== "function") return;
  // the listener holds no reference to the registry: "exit" listeners stay reachable until the
  // last one returns, and a collection in a later one must find the registry dead
  proc.once("exit", () => {
    try {
      registryObj?.cleanupSome?.();
    } catch (e) {
      reportReleaseError("collection", e);
    }
    exiting = true;
    registryObj = null;
  });
}

/**
 * FinalizationRegistry.prototype.cleanupSome (a normative-optional part of the weak references
 * proposal) runs a registry's pending cleanups synchronously. V8 has it behind a flag that only
 * affects contexts created after it is set, so the constructor comes from a fresh vm context.
 * Tried on V8 11 (Node 20), where the flag exists; an engine without the flag would print an
 * error for it, so elsewhere only a registry that already has the method is used.
 */
function syncCleanupRegistry(): RegistryCtor | null {
  if (typeof (FinalizationRegistry.prototype as Partial<Registry>).cleanupSome === "function") return FinalizationRegistry as unknown as RegistryCtor;
  const g = globalThis as { process?: { versions?: { v8?: string }; getBuiltinModule?: (m: string) => unknown } };
  if (Number(g.process?.versions?.v8?.split(".")[0]) !== 11) return null;
  try {
    const v8 = g.process?.getBuiltinModule?.("node:v8") as { setFlagsFromString(f: string): void } | undefined;
    const vm = g.process?.getBuiltinModule?.("node:vm") as { runInNewContext(code: string): unknown } | undefined;
    if (!v8 || !vm) return null;
    v8.setFlagsFromString("--harmony-weak-refs-with-cleanup-some");
    const ctor = vm.runInNewContext("FinalizationRegistry") as RegistryCtor;
    v8.setFlagsFromString("--no-harmony-weak-refs-with-cleanup-some"); // contexts made later are as they were
    return typeof (ctor.prototype as Partial<Registry>).cleanupSome === "function" ? ctor : null;
  } catch {
    return null;
  }
}

// The registry watches a token, an empty object only the owner references, not the owner: V8's
// young-generation collector keeps a registered target alive (until a full collection), and with
// it everything the target references (a storage's pending node, that node's inputs, ...).
function register(owner: BufferOwner, dev: DevicePlugin, buf: DeviceBuffer): void {
  const h: Held = { dev, buf, live: true };
  const token = {};
  owner._held = h;
  owner._gcToken = token;
  registry().register(token, h);
}

/**
 * Collect garbage now and free the buffers of the tensors it found dead before returning
 * (a device allocator calls it before growing: tensors that died inside synchronous code, a
 * training step or a model's initialization, otherwise keep their memory until the event loop
 * turns). Returns false, doing nothing, where the engine cannot run finalizers synchronously.
 */
export function collectNow(): boolean {
  const r = registry();
  const gc = r.cleanupSome ? gcFunction() : null;
  if (!gc) return false;
  const before = stats.liveBytes;
  try {
    gc();
    r.cleanupSome!();
  } catch (e) {
    reportReleaseError("collection", e);
  }
  liveAfterGc = stats.liveBytes;
  collectedSinceYield = true;
  freedSinceYield += Math.max(0, before - stats.liveBytes);
  collections.total++;
  return true;
}

// Full collections torchts asked for (test seam): all of them, and those a yield ran (maybeYield).
const collections = { total: 0, atYield: 0 };
export function collectionCounts(): { total: number; atYield: number } {
  return { ...collections };
}

function unregister(owner: BufferOwner): void {
  if (owner._held) owner._held.live = false;
  owner._held = null;
  owner._gcToken = null;
}

// Bytes allocated since the host last yielded to the event loop. FinalizationRegistry
// callbacks only run between macrotasks, and `await t.item()` on cpu resolves as a microtask,
// so a training loop would never give the runtime a chance to release buffers.
let sinceYield = 0;
const YIELD_BYTES = 16 * 1024 * 1024;
// Device memory (the cpu's wasm arena, GPU buffers) is invisible to V8's heap accounting, so
// V8 sees no reason to collect the small Storage objects that own it and the live set only
// grows. When it has doubled (plus slack) since the last collection, collect before yielding.
const GC_SLACK = 128 * 1024 * 1024;
let liveAfterGc = 0;
let collectionRequested = false;
/**
 * A collection ran inside synchronous code since the last yield (collectNow, before the wasm arena
 * grew). When the step itself made that garbage (it allocated at least as many bytes since the
 * last yield as the collections found dead), the yield that ends it collects too if the live
 * memory grew by AFTER_SYNC_SLACK since, so the rest of the step's garbage does not stay for the
 * next step to stack its allocations on. When the garbage is several small steps' (the arena's
 * reclaim window filled over many of them), it does not: what the step left is freed with the
 * next window, and a second full collection (~10 ms on a small training step's heap, every few
 * steps in strict eager) would only repeat the first's marking for a few MiB.
 */
let collectedSinceYield = false;
/** Bytes the collections inside synchronous code released since the last yield. */
let freedSinceYield = 0;
const AFTER_SYNC_SLACK = 4 * 1024 * 1024;

/**
 * Ask for a collection at the next yield whatever the growth rule says: the fused scheduler
 * calls it when a flush leaves many old values behind that only unreachable pending nodes read
 * (an optimizer step's previous parameters), which V8 would otherwise keep until a late major GC
 * while the arena grows into fresh, page-faulting memory.
 */
export function requestCollection(): void {
  collectionRequested = true;
}
let collector: (() => void) | null | undefined;

function gcFunction(): (() => void) | null {
  if (collector !== undefined) return collector;
  collector = null;
  const g = globalThis as { gc?: () => void; process?: { getBuiltinModule?: (m: string) => unknown } };
  if (typeof g.gc === "function") return (collector = g.gc);
  try {
    const v8 = g.process?.getBuiltinModule?.("node:v8") as { setFlagsFromString(f: string): void } | undefined;
    const vm = g.process?.getBuiltinModule?.("node:vm") as { runInNewContext(code: string): unknown } | undefined;
    if (v8 && vm) {
      v8.setFlagsFromString("--expose-gc"); // only makes `gc` visible to contexts created from now on
      const f = vm.runInNewContext("gc");
      if (typeof f === "function") collector = f as () => void;
    }
  } catch {
    collector = null; // browsers and locked-down runtimes: rely on the engine's own GC
  }
  return collector;
}

/** Let pending buffer releases run if enough was allocated since the last time. */
export async function maybeYield(): Promise<void> {
  if (sinceYield < YIELD_BYTES) return;
  const made = sinceYield;
  sinceYield = 0;
  const grown = collectedSinceYield
    ? made >= freedSinceYield && stats.liveBytes > liveAfterGc + AFTER_SYNC_SLACK
    : stats.liveBytes > 2 * liveAfterGc + GC_SLACK;
  const collect = (collectionRequested || grown) && gcFunction() !== null;
  collectionRequested = false;
  if (collect) collections.atYield++;
  // where finalizers can run synchronously, the releases are done before the event loop turns
  const done = collect && collectNow();
  collectedSinceYield = false;
  freedSinceYield = 0;
  if (collect && !done) {
    const seen = new Promise<void>((r) => (sentinelSeen = r));
    registry().register({}, SENTINEL);
    collections.total++;
    collector!();
    // the releases normally follow within a task or two; never wait long for them
    await Promise.race([seen, new Promise<void>((r) => setTimeout(r, 100))]);
    sentinelSeen = null;
    liveAfterGc = stats.liveBytes;
  } else await new Promise<void>((r) => (typeof setImmediate === "function" ? setImmediate(r) : setTimeout(r, 0)));
}

export function trackAlloc(owner: BufferOwner, dev: DevicePlugin, buf: DeviceBuffer): void {
  // a device plugin's buffer of an impossible size would make every statistic NaN: refuse it
  // before any of them changes (the buffer goes back to the device)
  if (!isSize(buf.bytes)) {
    try {
      dev.free(buf);
    } catch {
      // refused anyway
    }
    throw new RangeError(`${opPrefix()}invalid allocation size: ${dev.name} returned a buffer of ${String(buf.bytes)} bytes`);
  }
  sinceYield += buf.bytes;
  stats.liveBytes += buf.bytes;
  stats.liveBuffers++;
  stats.allocationCount++;
  if (stats.liveBytes > stats.peakBytes) stats.peakBytes = stats.liveBytes;
  register(owner, dev, buf);
}

function release(dev: DevicePlugin, buf: DeviceBuffer): void {
  stats.liveBytes -= buf.bytes;
  stats.liveBuffers--;
  try {
    dev.free(buf);
  } catch (e) {
    reportReleaseError(`${dev.name} free`, e);
  }
}

/** Free an owner's buffer now. Never throws: a buffer it does not hold (a double free) is counted and ignored. */
export function trackFree(owner: BufferOwner, dev: DevicePlugin, buf: DeviceBuffer): void {
  const h = owner._held;
  if (h === null || h.buf !== buf || !h.live) {
    reportReleaseError("double free", `a buffer of ${String(buf.bytes)} bytes on ${dev.name} was freed by an owner that does not hold it`);
    return;
  }
  unregister(owner);
  release(dev, buf);
}

export function memoryStats(): MemoryStats {
  return { ...stats };
}

export function resetPeakStats(): void {
  stats.peakBytes = stats.liveBytes;
}

/** Move a buffer's ownership (and its release on GC) from one storage object to another. */
export function transferOwnership(from: BufferOwner, to: BufferOwner, dev: DevicePlugin, buf: DeviceBuffer): void {
  unregister(from);
  register(to, dev, buf);
}
