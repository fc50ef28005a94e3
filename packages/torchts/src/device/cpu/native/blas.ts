// The optional native float32 GEMM on Node, through a small N-API bridge (native/blas.c, built
// by scripts/build_native.mjs at install) with three kernels:
//   avx512   torchts' own (native/gemm_avx512.c), on CPUs with AVX-512: ~240 GFLOP/s a core here;
//   avx2     torchts' own (native/gemm_avx2.c), the same design on 256-bit registers, for CPUs
//            with AVX2 and FMA only: ~37 GFLOP/s a core on a 2 GHz EPYC 7001 (Zen 1), its FMA limit;
//   openblas the system's OpenBLAS, what PyTorch's CPU matmul uses (Debian's 0.3.21 runs its
//            256-bit Haswell kernels on AMD's AVX-512 cores: ~120 GFLOP/s a core there; on the
//            Zen 1 EPYC its single-threaded calls, one per share, ran 9-17 GFLOP/s on the small
//            step's products, under the wasm GEMM).
// 128-bit wasm SIMD caps a GEMM at ~60 GFLOP/s a core. Operands stay where they are (the bridge
// reads and writes views of the wasm memory in place). What it cannot express (a stride that is
// neither rows nor columns, aliasing, the browser, no bridge) runs on the wasm GEMM instead.
//   TORCHTS_CPU_BLAS=auto (default: avx512, else avx2, else openblas, else wasm) | avx512 | avx2 | openblas (required) | off

import type { WasmRuntime } from "../wasm/runtime.js";

export interface Bridge {
  sgemm(
    ta: number, tb: number, M: number, N: number, K: number,
    A: Float32Array, ao: number, lda: number, B: Float32Array, bo: number, ldb: number,
    beta: number, C: Float32Array, co: number, ldc: number, kernel: number,
  ): void;
  /** One share [lo, hi) of the product whose parameter block (GEMM_PARAM) is at byte pb of mem. */
  gemmSlab(mem: Float32Array, lo: number, hi: number, pb: number): void;
  setThreads(n: number): void;
  /** The kernels this machine runs, comma-separated: "avx512,avx2,openblas", "avx2,openblas", "openblas", "". */
  kernels(): string;
  /** Units [lo, hi) of the attention whose parameter block (NATIVE_ATTN, native/attention.ts) is at byte pb of mem. */
  attnFwd(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Units [lo, hi) of the short-query attention whose parameter block (NATIVE_ATTN_DEC, native/attention.ts) is at byte pb of mem. */
  attnDecode(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Rows [lo, hi) quantized for the int8 GEMM (parameter block Q8_ROWS, native/w8a8.ts). */
  q8Rows(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Column shares [lo, hi) of the int8 GEMM (parameter block W8A8_SLAB, native/w8a8.ts). */
  w8a8Slab(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Rows [lo, hi) of one image's im2col matrix (parameter block IM2COL, native/conv.ts). */
  im2col(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Weight rows [lo, hi) of the AVX2 int8 weight-only product (QGEMV, native/qgemv.ts) whose block is at byte pb of mem. */
  q8Gemv(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Weight rows [lo, hi) of the AVX-512 float32 product for few rows (SGEMV, native/sgemv.ts) whose block is at byte pb of mem. */
  sgemv(mem: Float32Array, lo: number, hi: number, pb: number): void;
  /** Whether this CPU runs the int8 kernels (AVX-512 VNNI). */
  vnni(): boolean;
  /** (hi - lo) x 4096 x 24 FMAs on the calling thread, AVX-512 (kernel 1, the default) or AVX2 (kernel 2): a benchmark's hardware limit; mem is unused. */
  fmaProbe(mem: Float32Array | null, lo: number, hi: number, kernel?: number): number;
  /** Why OpenBLAS did not load, or null. */
  error(): string | null;
  config(): string;
  /** Absolute path of the addon (workers load it themselves). */
  path: string;
}

/** Int32 words of gemmSlab's parameter block, then (aOff, bOff) per product; offsets in floats. */
export const GEMM_PARAM = { ta: 0, tb: 1, M: 2, N: 3, K: 4, lda: 5, ldb: 6, ldc: 7, byCols: 8, share: 9, nb: 10, co: 11, cStride: 12, kernel: 13, offs: 14 } as const;

export type BlasKernel = "avx512" | "avx2" | "openblas";
/** The bridge's number for each kernel (sgemm's last argument, GEMM_PARAM.kernel). */
export const KERNEL_CODE: Record<BlasKernel, number> = { openblas: 0, avx512: 1, avx2: 2 };

/**
 * How a product is cut into single-threaded shares, from its shape alone, at most 8. OpenBLAS:
 * along the longer of M and N, 32 or more each, so its sums never depend on the thread count.
 * avx512 and avx2: their sums do not depend on the cut at all (each element is the same k-ordered
 * sum), so shares only balance the threads: whole column tiles (32 wide, avx2 16) while there are
 * two of them per share (each share packs just its own columns of B and reads A in place), else
 * rows, a register tile's height (12, avx2 6) at a time.
 */
export function blasShares(M: number, N: number, kernel: BlasKernel = "openblas"): { byCols: boolean; share: number; shares: number } {
  if (kernel === "avx512" || kernel === "avx2") {
    const cols = kernel === "avx512" ? 32 : 16, rows = kernel === "avx512" ? 12 : 6;
    const byCols = N >= 2 * cols, dim = byCols ? N : M, tile = byCols ? cols : rows;
    const share = Math.max(2 * tile, Math.ceil(Math.ceil(dim / 8) / tile) * tile);
    return { byCols, share, shares: Math.ceil(dim / share) };
  }
  const byCols = N > M;
  const dim = byCols ? N : M;
  const share = Math.max(32, Math.ceil(Math.ceil(dim / 8) / 16) * 16);
  return { byCols, share, shares: Math.ceil(dim / share) };
}

type Mode = "auto" | BlasKernel | "off";
type NodeProcess = { env?: Record<string, string | undefined>; getBuiltinModule?: (m: string) => unknown };

/** The bridge and the kernel its products run. */
export interface Blas {
  bridge: Bridge;
  kernel: BlasKernel;
  /** KERNEL_CODE[kernel] */
  code: number;
  /** Whether the int8 kernels (AVX-512 VNNI) run here. */
  vnni: boolean;
}

/** The bridge's functions with a pool function's arguments (memory, lo, hi, parameter block). */
export type BridgePoolFn = "gemmSlab" | "attnFwd" | "attnDecode" | "q8Rows" | "w8a8Slab" | "im2col" | "q8Gemv" | "sgemv" | "fmaProbe";

const poolFns = new WeakMap<WasmRuntime, Map<BridgePoolFn, number>>();

/**
 * The index of the pool function running the bridge's `name` over rt's memory, registered (on
 * this thread and every worker, each loading the addon itself) the first time it is asked for.
 */
export function bridgePoolFn(rt: WasmRuntime, b: Bridge, name: BridgePoolFn): number {
  let fns = poolFns.get(rt);
  if (!fns) poolFns.set(rt, (fns = new Map()));
  let fn = fns.get(name);
  if (fn === undefined) {
    const memory = rt.memory, f = b[name].bind(b) as (mem: Float32Array, lo: number, hi: number, pb: number) => void;
    fn = rt.pool.addNative(b.path, name, (lo, hi, pb) => f(new Float32Array(memory.buffer), lo!, hi!, pb!));
    fns.set(name, fn);
  }
  return fn;
}

const blocks = new WeakMap<WasmRuntime, Map<BridgePoolFn, { ptr: number; words: Int32Array }>>();

/**
 * The parameter block of the bridge's pool function `name` on rt's memory: `words` int32 words,
 * allocated once per runtime (decode makes ~85 calls a step, and a job's block is only read while
 * pool.run runs it), as a view that is current even after the memory grew.
 */
export function bridgeBlock(rt: WasmRuntime, name: BridgePoolFn, words: number): { ptr: number; words: Int32Array } {
  let byFn = blocks.get(rt);
  if (!byFn) blocks.set(rt, (byFn = new Map()));
  let b = byFn.get(name);
  if (!b) {
    const ptr = rt.arena.alloc(words * 4);
    byFn.set(name, (b = { ptr, words: rt.view(Int32Array, ptr, words) }));
  }
  // the view goes stale when the memory grows (a new buffer)
  if (b.words.buffer !== rt.memory.buffer) b.words = rt.view(Int32Array, b.ptr, words);
  return b;
}

const MODES: readonly Mode[] = ["auto", "avx512", "avx2", "openblas", "off"];
const proc = (globalThis as { process?: NodeProcess }).process;
let mode: Mode = envMode();
let blas: Blas | null | undefined;
let reason = "";

/** Products the bridge ran (tests check which path a call took). */
export const blasStats = { calls: 0 };

function envMode(): Mode {
  const v = proc?.env?.TORCHTS_CPU_BLAS;
  if (v === undefined || v === "") return "auto";
  if ((MODES as readonly string[]).includes(v)) return v as Mode;
  throw new Error(`TORCHTS_CPU_BLAS must be auto, avx512, avx2, openblas or off, got ${v}`);
}

// packages/torchts/{src,dist}/device/cpu/native/ -> packages/torchts/build/native/
const ADDON = "../../../../build/native/torchts_blas.node";

function loadBridge(): Bridge | null {
  try {
    const m = proc?.getBuiltinModule?.("node:module") as
      | { createRequire(u: string): ((p: string) => unknown) & { resolve(p: string): string } }
      | undefined;
    if (!m) {
      reason = "not running on Node";
      return null;
    }
    const req = m.createRequire(import.meta.url);
    const path = req.resolve(ADDON);
    return Object.assign(Object.create(req(path) as object) as Bridge, { path });
  } catch (e) {
    reason = `the native bridge is not built (npm run build:native -w torchts): ${(e as Error).message.split("\n")[0]}`;
    return null;
  }
}

function load(): Blas | null {
  if (mode === "off") {
    reason = "TORCHTS_CPU_BLAS=off";
    return null;
  }
  const b = loadBridge();
  let kernel: BlasKernel | null = null;
  if (b) {
    const has = b.kernels().split(",");
    const auto = (["avx512", "avx2", "openblas"] as const).find((k) => has.includes(k)) ?? null;
    kernel = mode === "auto" ? auto : has.includes(mode) ? mode : null;
    if (!kernel) reason = mode === "avx512" ? "this CPU has no AVX-512 kernel" : mode === "avx2" ? "this CPU has no AVX2 kernel" : (b.error() ?? "OpenBLAS did not load");
    // the pool's threads split products; OpenBLAS' own threads would have to be woken per call
    if (has.includes("openblas")) b.setThreads(1);
  }
  if (!kernel && mode !== "auto") throw new Error(`TORCHTS_CPU_BLAS=${mode}: ${reason}`);
  return b && kernel ? { bridge: b, kernel, code: KERNEL_CODE[kernel], vnni: kernel === "avx512" && b.vnni() } : null;
}

/** The bridge and its kernel, or null (off, not built, no kernel for this machine, not Node). */
export function blasBridge(): Blas | null {
  if (blas === undefined) blas = load();
  return blas;
}

/** Selects the GEMM for products run from now on (tests; the env var is the usual way). */
export function setCpuBlas(m: Mode): void {
  if (!MODES.includes(m)) throw new Error(`setCpuBlas: expected auto, avx512, avx2, openblas or off, got ${String(m)}`);
  const before = { mode, blas, reason };
  mode = m;
  blas = undefined;
  reason = "";
  if (m === "auto" || m === "off") return;
  try {
    blasBridge(); // required: fail here, not at the first product
  } catch (e) {
    ({ mode, blas, reason } = before); // a failed switch leaves the previous choice in force
    throw e;
  }
}

/** The AVX-512 kernel's name in blasInfo(). */
export const AVX512_NAME = "torchts AVX-512 sgemm (12x32 tiles)";
/** The AVX2 kernel's name in blasInfo(). */
export const AVX2_NAME = "torchts AVX2 sgemm (6x16 tiles)";

/**
 * What runs float32 products: the kernel ("avx512", "avx2", "openblas" or "" for the wasm GEMM), its
 * description (OpenBLAS' build string and core), or the reason the wasm GEMM runs.
 */
export function blasInfo(): { blas: string; blasKernel: BlasKernel | ""; blasReason: string } {
  const b = blasBridge();
  if (!b) return { blas: "", blasKernel: "", blasReason: reason };
  return { blas: b.kernel === "avx512" ? AVX512_NAME : b.kernel === "avx2" ? AVX2_NAME : b.bridge.config(), blasKernel: b.kernel, blasReason: "" };
}

/** Row-major transpose flag and leading dimension of a strided R x C operand, or null. */
function layout(R: number, C: number, s0: number, s1: number): [number, number] | null {
  if (s1 === 1 || C === 1) {
    const ld = R === 1 ? C : s0;
    if (ld >= C) return [0, ld];
  }
  if (s0 === 1 || R === 1) {
    const ld = C === 1 ? R : s1;
    if (ld >= R) return [1, ld];
  }
  return null;
}

/** [ta, lda, tb, ldb] of op(A) (M x K) times op(B) (K x N), or null when BLAS cannot take the strides. */
export function blasLayout(M: number, K: number, N: number, sam: number, sak: number, sbk: number, sbn: number): [number, number, number, number] | null {
  const la = layout(M, K, sam, sak), lb = layout(K, N, sbk, sbn);
  return la && lb ? [la[0], la[1], lb[0], lb[1]] : null;
}
