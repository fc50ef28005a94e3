// torch.compile(fn | module, options). The function runs in fused mode with every tensor op,
// including backward() and the optimizer's in-place updates, deferred into one lazy graph that
// is flushed as one unit at the end of the call (intermediates freed after their last use).
// See README.md in this folder for how to write a step for compile.
// Guards (input shapes/dtypes/devices, module structure and parameters) select a compiled
// entry. The first calls of an entry run the function (scheduling and compiling its graph once)
// and are recorded; once two consecutive recordings agree, later calls replay the recorded
// kernels directly (program.ts: no op library, no autograd, no dispatch). What a replay cannot
// reproduce keeps the entry on the re-run path, with the reason logged (TORCHTS_LOGS=recompiles).
// Host reads inside the function and async functions are errors that name the call, never
// silent graph breaks.
import { flushAll, realize, traceState } from "../runtime/dispatch.js";
import { withEagerMode } from "../runtime/mode.js";
import type { Storage } from "../runtime/storage.js";
import { Tensor } from "../tensor.js";
import { log } from "../runtime/logs.js";
import { cacheStats } from "../runtime/cache.js";
import { schedulerStats } from "../runtime/scheduler.js";
import { guardDiff, guardKey, guardParts, isModule, moduleParameters, type GuardedModule, type GuardParts } from "./guards.js";
import { padToBuckets, type DynamicDim } from "./dynamic.js";
import { leavesOf, record, type Trace } from "./recorder.js";
import { Program } from "./program.js";

export type { DynamicDim } from "./dynamic.js";
export { hostScalars } from "./host_scalars.js";

export interface CompileOptions {
  /** Dims that may vary within bounds; inputs are padded to a bucket (one compile per bucket). */
  dynamic?: DynamicDim[];
  /** Modules whose structure/parameters the compiled function depends on (guarded). */
  modules?: GuardedModule[];
  /** Name used in stats, logs and errors (default: the function's name). */
  name?: string;
  /**
   * Replay recorded kernels instead of running the function once two recorded calls agree
   * (default true; `TORCHTS_COMPILE_REPLAY=0` turns it off everywhere). With false every call
   * runs the function (reusing its schedule and kernels).
   */
  replay?: boolean;
}

export interface CompileStats {
  /** New guarded entries whose first call generated kernel code. */
  compiles: number;
  /** New guarded entries whose kernels all came from the memory or disk cache (no code generated). */
  loads: number;
  /** Calls that reused a compiled entry. */
  hits: number;
  /** Compiles caused by a guard failure of an existing compiled function. */
  recompiles: number;
  /** One line per recompile: the function and what changed. */
  recompileReasons: string[];
  /** Kernels generated (not loaded from the memory or disk cache) during compiles. */
  kernelsGenerated: number;
  /** Calls that replayed a recorded program (the function did not run). */
  replays: number;
  /** One line per entry that stays on the re-run path: the function and why it cannot be replayed. */
  replayDisabled: string[];
}

const stats: CompileStats = { compiles: 0, loads: 0, hits: 0, recompiles: 0, recompileReasons: [], kernelsGenerated: 0, replays: 0, replayDisabled: [] };

export function compileStats(): CompileStats {
  return { ...stats, recompileReasons: [...stats.recompileReasons], replayDisabled: [...stats.replayDisabled] };
}
export function resetCompileStats(): void {
  stats.compiles = stats.loads = stats.hits = stats.recompiles = stats.kernelsGenerated = stats.replays = 0;
  stats.recompileReasons = [];
  stats.replayDisabled = [];
}

/** Recordings that may disagree before an entry gives up on replay (lazily created state makes the first differ). */
const MAX_RECORDINGS = 4;

interface Entry {
  prev: Trace | null;
  program: Program | null;
  recordings: number;
  /** Why this entry stays on the re-run path (null: it may still be replayed). */
  disabled: string | null;
}

function replayOff(): boolean {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> } };
  return g.process?.env?.TORCHTS_COMPILE_REPLAY === "0";
}

const AsyncFunction = (async () => {}).constructor;

/** Parameters and buffers of the guarded modules: state that lives across calls. */
function moduleStorages(modules: readonly GuardedModule[]): Storage[] {
  const out: Storage[] = [];
  for (const m of modules) {
    for (const [, p] of m.namedParameters()) out.push(p._storage);
    const nb = (m as { namedBuffers?: () => Iterable<[string, Tensor]> }).namedBuffers;
    if (typeof nb === "function") for (const [, b] of nb.call(m)) if (b instanceof Tensor) out.push(b._storage);
  }
  return out;
}

function storagesIn(x: unknown, out: Storage[] = [], depth = 0): Storage[] {
  if (x instanceof Tensor) out.push(x._storage);
  else if (depth < 4 && Array.isArray(x)) for (const v of x) storagesIn(v, out, depth + 1);
  else if (depth < 4 && x && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype)
    for (const v of Object.values(x)) storagesIn(v, out, depth + 1);
  return out;
}

export function compile<F extends (...args: any[]) => any>(fn: F, options?: CompileOptions): F;
export function compile<M extends GuardedModule & { forward: (...a: any[]) => any }>(module: M, options?: CompileOptions): M["forward"];
export function compile(target: unknown, options: CompileOptions = {}): (...args: unknown[]) => unknown {
  const mod = isModule(target) ? target : null;
  const fn = mod ? (...a: unknown[]) => mod.forward(...a) : (target as (...a: unknown[]) => unknown);
  if (typeof fn !== "function") throw new TypeError("torch.compile: expected a function or an nn.Module");
  const name = options.name ?? (mod ? mod.constructor.name : fn.name || "<anonymous>");
  if (!mod && fn instanceof AsyncFunction)
    throw new TypeError(
      `torch.compile: '${name}' is an async function. A compiled step must be synchronous: do the awaits (item(), data()) after calling it`,
    );
  const modules = [...(mod ? [mod] : []), ...(options.modules ?? [])];
  const entries = new Map<string, Entry>(); // by guard key
  let last: GuardParts | null = null;
  let known: WeakRef<Storage>[] = []; // what the last recorded call wrote (state among it lives on)

  /** Tensors whose `.grad` a call may set: leaves among the arguments, module parameters. */
  const gradHolders = (args: unknown[]): Tensor[] => [
    ...leavesOf(args).map((l) => l.t).filter((t) => t.isLeaf && t.requiresGrad),
    ...modules.flatMap((m) => moduleParameters(m)),
  ];

  const runTraced = (args: unknown[], holders: Tensor[] = []): unknown => {
    const prev = traceState.fn;
    traceState.fn = name;
    traceState.violation = null;
    let r: unknown;
    try {
      r = fn(...args);
    } finally {
      traceState.fn = prev;
    }
    const bad = traceState.violation as Error | null;
    traceState.violation = null;
    if (bad) throw bad;
    if (r instanceof Promise)
      throw new TypeError(`torch.compile: '${name}' returned a Promise; a compiled step must be synchronous`);
    // the whole call is one graph; what it returns is kept, other intermediates are freed after
    // their last use inside it (and recomputed should anyone read them later)
    // gradients left on leaves are handed out too (recorded calls keep them materialized for replay)
    const keep = storagesIn(r);
    for (const h of holders) if (h.grad) keep.push(h.grad._storage);
    flushAll(keep, true);
    return r;
  };

  const recordCall = (entry: Entry, args: unknown[]): unknown => {
    for (const s of storagesIn(args)) if (!s.buf && s.pending) realize(s);
    const holders = gradHolders(args);
    const state = [...moduleStorages(modules), ...known.map((w) => w.deref()).filter((s) => s !== undefined)];
    const { trace, result } = record(args, state, holders, () => runTraced(args, holders));
    known = [...new Set(trace.kernels.flatMap((k) => k.outs))].map((s) => new WeakRef(s));
    entry.recordings++;
    if (entry.prev) {
      const p = Program.build(entry.prev, trace);
      if (typeof p !== "string") {
        entry.program = p;
        entry.prev = null;
        log("recompiles", () => `${name}: replaying ${p.kernelCount} recorded kernels from now on (${(p.poolBytes / 1048576).toFixed(1)} MiB of intermediates kept)`);
        return result;
      }
      if (entry.recordings >= MAX_RECORDINGS) {
        entry.disabled = p;
        entry.prev = null;
        stats.replayDisabled.push(`${name}: ${p}`);
        log("recompiles", `${name}: not replayable, every call runs the function: ${p}`);
        return result;
      }
      log("recompiles", `${name}: recorded calls differ (${p}); recording again`);
    }
    entry.prev = trace;
    return result;
  };

  return function compiled(...rawArgs: unknown[]): unknown {
    const args = options.dynamic?.length ? padToBuckets(rawArgs, options.dynamic, name) : rawArgs;
    const parts = guardParts(args, modules);
    const key = guardKey(parts);
    let entry = entries.get(key);
    const fresh = !entry;
    if (!entry) {
      if (last) {
        const why = `${name}: ${guardDiff(last, parts)}`;
        stats.recompiles++;
        stats.recompileReasons.push(why);
        log("recompiles", `recompiling ${why}`);
      }
      entries.set(key, (entry = { prev: null, program: null, recordings: 0, disabled: options.replay === false ? "replay: false" : replayOff() ? "TORCHTS_COMPILE_REPLAY=0" : null }));
    } else stats.hits++;
    last = parts;
    const e = entry;
    const gen0 = cacheStats().codegen;
    const plans0 = schedulerStats().planMisses;
    const out = withEagerMode("fused", () => {
      flushAll(); // work from before the call is not part of its graph
      if (e.program) {
        const r = e.program.replay(args, gradHolders(args));
        if (typeof r !== "string") {
          stats.replays++;
          return r.result;
        }
        log("recompiles", `${name}: this call runs the function (${r})`);
        return runTraced(args);
      }
      return e.disabled ? runTraced(args) : recordCall(e, args);
    });
    if (fresh) {
      const generated = cacheStats().codegen - gen0;
      stats.kernelsGenerated += generated;
      if (generated > 0) stats.compiles++;
      else stats.loads++;
      log("cache", `${name}: compiled entry ${generated > 0 ? `generated ${generated} kernels` : "loaded every kernel from the cache"}`);
    }
    else if (schedulerStats().planMisses !== plans0) log("recompiles", `${name}: same guards but a different graph was scheduled`);
    return out;
  };
}
