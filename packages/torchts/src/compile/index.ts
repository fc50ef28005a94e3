// torch.compile(fn | module, options). The function runs in fused mode with every tensor op,
// including backward() and the optimizer's in-place updates, deferred into one lazy graph that
// is flushed as one unit at the end of the call (intermediates freed after their last use).
// See README.md in this folder for how to write a step for compile.
// Guards (input shapes/dtypes/devices, module structure and parameters) select a compiled
// entry; the first call of an entry schedules and compiles the graph, later calls reuse that
// schedule and those kernels (the scheduler's plan cache: no re-scheduling, no code generation).
// Host reads inside the function and async functions are errors that name the call, never
// silent graph breaks.
import { flushAll, traceState } from "../runtime/dispatch.js";
import { withEagerMode } from "../runtime/mode.js";
import type { Storage } from "../runtime/storage.js";
import { Tensor } from "../tensor.js";
import { log } from "../runtime/logs.js";
import { cacheStats } from "../runtime/cache.js";
import { schedulerStats } from "../runtime/scheduler.js";
import { guardDiff, guardKey, guardParts, isModule, type GuardedModule, type GuardParts } from "./guards.js";
import { padToBuckets, type DynamicDim } from "./dynamic.js";

export type { DynamicDim } from "./dynamic.js";

export interface CompileOptions {
  /** Dims that may vary within bounds; inputs are padded to a bucket (one compile per bucket). */
  dynamic?: DynamicDim[];
  /** Modules whose structure/parameters the compiled function depends on (guarded). */
  modules?: GuardedModule[];
  /** Name used in stats, logs and errors (default: the function's name). */
  name?: string;
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
}

const stats: CompileStats = { compiles: 0, loads: 0, hits: 0, recompiles: 0, recompileReasons: [], kernelsGenerated: 0 };

export function compileStats(): CompileStats {
  return { ...stats, recompileReasons: [...stats.recompileReasons] };
}
export function resetCompileStats(): void {
  stats.compiles = stats.loads = stats.hits = stats.recompiles = stats.kernelsGenerated = 0;
  stats.recompileReasons = [];
}

const AsyncFunction = (async () => {}).constructor;

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
  const entries = new Set<string>(); // guard keys of the compiled entries
  let last: GuardParts | null = null;

  return function compiled(...rawArgs: unknown[]): unknown {
    const args = options.dynamic?.length ? padToBuckets(rawArgs, options.dynamic, name) : rawArgs;
    const parts = guardParts(args, modules);
    const key = guardKey(parts);
    const fresh = !entries.has(key);
    if (fresh) {
      if (last) {
        const why = `${name}: ${guardDiff(last, parts)}`;
        stats.recompiles++;
        stats.recompileReasons.push(why);
        log("recompiles", `recompiling ${why}`);
      }
      entries.add(key);
    } else stats.hits++;
    last = parts;
    const gen0 = cacheStats().codegen;
    const plans0 = schedulerStats().planMisses;
    const out = withEagerMode("fused", () => {
      flushAll(); // work from before the call is not part of its graph
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
      flushAll(storagesIn(r), true);
      return r;
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
