// The wasm cpu backend: one module of SIMD kernels emitted at run time, one shared memory,
// a worker pool over it. Everything is created lazily on first use; `wasmRuntime()` is null
// when the JS fallback is selected (TORCHTS_CPU_BACKEND=js) or the runtime lacks wasm SIMD.
import { Arena, type GrowableMemory } from "./arena.js";
import { emitModule, type Fn } from "./emitter.js";
import { GEMM, gemmFns } from "./gemm.js";
import { convFns } from "./conv.js";
import { layerNormFns } from "./layernorm.js";
import { elementwiseFns } from "./elementwise.js";
import { copyFns } from "./copy.js";
import { probeFns } from "./probe.js";
import { attentionFns } from "./attention.js";
import { gemvFns } from "./gemv.js";
import { qgemvFns } from "./qgemv.js";
import { qdotFns } from "./qdot.js";
import { CTL_BYTES, MAX_THREADS, Pool } from "./pool.js";
import { detect, type Features } from "./features.js";
import { collectNow } from "../../../runtime/memory.js";
import { blasInfo } from "../native/blas.js";

export interface WasmRuntime {
  memory: GrowableMemory; // the shared WebAssembly.Memory
  arena: Arena;
  pool: Pool;
  fn: Record<string, number>;
  exports: Record<string, (...a: number[]) => number>;
  features: Features;
  /** The SharedArrayBuffers of `memory` that views were made on (they change as it grows). */
  buffers: WeakSet<ArrayBufferLike>;
  /** A view of the current memory (registered in `buffers`). */
  view<T>(ctor: new (b: ArrayBufferLike, off: number, n: number) => T, ptr: number, n: number): T;
}

let rt: WasmRuntime | null | undefined;
let requested: "js" | "wasm" | "auto" = envBackend();
let reason = "";

function envBackend(): "js" | "wasm" | "auto" {
  const v = typeof process !== "undefined" ? process.env?.TORCHTS_CPU_BACKEND : undefined;
  if (v === "js" || v === "wasm") return v;
  if (v !== undefined && v !== "" && v !== "auto") throw new Error(`TORCHTS_CPU_BACKEND must be js, wasm or auto, got ${v}`);
  return "auto";
}

function defaultThreads(f: Features): number {
  const env = typeof process !== "undefined" ? Number(process.env?.TORCHTS_NUM_THREADS) : NaN;
  if (Number.isInteger(env) && env > 0) return Math.min(env, MAX_THREADS);
  return f.workers ? Math.min(f.cores, MAX_THREADS) : 1;
}

function build(): WasmRuntime | null {
  const features = detect();
  if (requested === "js") {
    reason = "TORCHTS_CPU_BACKEND=js";
    return null;
  }
  if (!features.simd || !features.sharedMemory) {
    reason = !features.simd ? "this runtime has no WebAssembly SIMD" : "this runtime has no shared WebAssembly.Memory";
    if (requested === "wasm") throw new Error(`TORCHTS_CPU_BACKEND=wasm: ${reason}`);
    return null;
  }
  const fns: Fn[] = [];
  const add = (list: Fn[]) => {
    const base = fns.length;
    fns.push(...list);
    return base;
  };
  add(gemmFns(GEMM, features.relaxedSimd));
  add(convFns(fns.length));
  add(elementwiseFns(features.relaxedSimd));
  add(layerNormFns());
  add(copyFns());
  add(probeFns(features.relaxedSimd));
  add(attentionFns(features.relaxedSimd));
  add([...gemvFns(features.relaxedSimd), ...qgemvFns(features.relaxedSimd)]);
  add(qdotFns());
  const pages = { initial: 32, maximum: 65536 };
  const bytes = emitModule(fns, pages);
  const memory = new WebAssembly.Memory({ ...pages, shared: true });
  // Workers get the compiled module itself, so they share its optimized code.
  const module = new WebAssembly.Module(bytes as BufferSource);
  const inst = new WebAssembly.Instance(module, { env: { memory } });
  const exports = inst.exports as unknown as Record<string, (...a: number[]) => number>;
  const names = fns.map((f) => f.name);
  const fn: Record<string, number> = {};
  names.forEach((n, i) => (fn[n] = i));
  const pool = new Pool(memory, module, names, names.map((n) => exports[n]!), defaultThreads(features), features.spawn);
  const buffers = new WeakSet<ArrayBufferLike>();
  const view = <T>(ctor: new (b: ArrayBufferLike, off: number, n: number) => T, ptr: number, n: number): T => {
    const b = memory.buffer;
    buffers.add(b);
    return new ctor(b, ptr, n);
  };
  const arena = new Arena(memory, CTL_BYTES * 64);
  // before the memory grows, free what tensors that died since the last collection still hold
  arena.reclaim = () => void collectNow();
  return { memory, arena, pool, fn, exports, features, buffers, view };
}

export function wasmRuntime(): WasmRuntime | null {
  if (rt === undefined) rt = build();
  return rt;
}

/** Selects the backend for kernels compiled from now on (tests; the env var is the usual way). */
export function setCpuBackend(b: "js" | "wasm" | "auto"): void {
  requested = b;
  rt?.pool.close();
  rt = undefined;
}

export function setNumThreads(n: number): void {
  const r = wasmRuntime();
  if (!r) return;
  if (!(Number.isInteger(n) && n >= 1)) throw new Error(`setNumThreads: expected a positive integer, got ${n}`);
  r.pool.threads = Math.min(n, MAX_THREADS);
}

export function getNumThreads(): number {
  return wasmRuntime()?.pool.threads ?? 1;
}

export interface CpuInfo {
  backend: "wasm" | "js";
  simd: boolean;
  relaxedSimd: boolean;
  threads: number;
  workersReady: number;
  cores: number;
  reason: string;
  arenaBytes: number;
  /** What runs float32 products natively (Node, bridge built): the AVX-512 or AVX2 kernel's name, or OpenBLAS' build string and core; "" for the wasm GEMM. */
  blas: string;
  /** That kernel: "avx512", "avx2", "openblas", or "" (the wasm GEMM). */
  blasKernel: "avx512" | "avx2" | "openblas" | "";
  /** Why the wasm GEMM runs float32 products instead ("" when a native kernel does). */
  blasReason: string;
}

export function cpuInfo(): CpuInfo {
  const r = wasmRuntime();
  const f = r?.features ?? detect();
  return {
    backend: r ? "wasm" : "js",
    simd: f.simd,
    relaxedSimd: f.relaxedSimd,
    threads: r?.pool.threads ?? 1,
    workersReady: r?.pool.ready() ?? 0,
    cores: f.cores,
    reason: r ? "" : reason,
    arenaBytes: r?.arena.reservedBytes ?? 0,
    ...(r ? blasInfo() : { blas: "", blasKernel: "" as const, blasReason: "the wasm backend is off" }),
  };
}


