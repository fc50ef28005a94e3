// The optional native float32 GEMM on Node: the system's OpenBLAS through a small N-API bridge
// (native/blas.c, built by scripts/build_native.mjs at install). 128-bit wasm SIMD caps a GEMM
// at ~120 GFLOP/s on two cores; OpenBLAS' AVX2 / AVX-512 kernels run the same product about 2x
// faster, and are what PyTorch's CPU matmul uses. Operands stay where they are (the bridge
// reads and writes views of the wasm memory in place). What it cannot express (a stride that is
// neither rows nor columns, aliasing, the browser, no OpenBLAS) runs on the wasm GEMM instead.
//   TORCHTS_CPU_BLAS=auto (default: OpenBLAS when it loads) | openblas (required) | off

export interface Bridge {
  sgemm(
    ta: number, tb: number, M: number, N: number, K: number,
    A: Float32Array, ao: number, lda: number, B: Float32Array, bo: number, ldb: number,
    beta: number, C: Float32Array, co: number, ldc: number,
  ): void;
  /** One share [lo, hi) of the product whose parameter block (GEMM_PARAM) is at byte pb of mem. */
  gemmSlab(mem: Float32Array, lo: number, hi: number, pb: number): void;
  setThreads(n: number): void;
  error(): string | null;
  config(): string;
  /** Absolute path of the addon (workers load it themselves). */
  path: string;
}

/** Int32 words of gemmSlab's parameter block, then (aOff, bOff) per product; offsets in floats. */
export const GEMM_PARAM = { ta: 0, tb: 1, M: 2, N: 3, K: 4, lda: 5, ldb: 6, ldc: 7, byCols: 8, share: 9, nb: 10, co: 11, cStride: 12, offs: 13 } as const;

/**
 * How a product is cut into single-threaded sgemm shares, from its shape alone (so its sums
 * never depend on threads): along the longer of M and N, at most 8 shares of 32 or more.
 */
export function blasShares(M: number, N: number): { byCols: boolean; share: number; shares: number } {
  const byCols = N > M;
  const dim = byCols ? N : M;
  const share = Math.max(32, Math.ceil(Math.ceil(dim / 8) / 16) * 16);
  return { byCols, share, shares: Math.ceil(dim / share) };
}

type Mode = "auto" | "openblas" | "off";
type NodeProcess = { env?: Record<string, string | undefined>; getBuiltinModule?: (m: string) => unknown };

const proc = (globalThis as { process?: NodeProcess }).process;
let mode: Mode = envMode();
let bridge: Bridge | null | undefined;
let reason = "";

/** Products OpenBLAS ran (tests check which path a call took). */
export const blasStats = { calls: 0 };

function envMode(): Mode {
  const v = proc?.env?.TORCHTS_CPU_BLAS;
  if (v === undefined || v === "" || v === "auto") return "auto";
  if (v === "openblas" || v === "off") return v;
  throw new Error(`TORCHTS_CPU_BLAS must be auto, openblas or off, got ${v}`);
}

// packages/torchts/{src,dist}/device/cpu/native/ -> packages/torchts/build/native/
const ADDON = "../../../../build/native/torchts_blas.node";

function load(): Bridge | null {
  if (mode === "off") {
    reason = "TORCHTS_CPU_BLAS=off";
    return null;
  }
  let b: Bridge | null = null;
  try {
    const m = proc?.getBuiltinModule?.("node:module") as
      | { createRequire(u: string): ((p: string) => unknown) & { resolve(p: string): string } }
      | undefined;
    if (!m) reason = "not running on Node";
    else {
      const req = m.createRequire(import.meta.url);
      const path = req.resolve(ADDON);
      b = Object.assign(Object.create(req(path) as object) as Bridge, { path });
    }
  } catch (e) {
    reason = `the native bridge is not built (npm run build:native -w torchts): ${(e as Error).message.split("\n")[0]}`;
  }
  const err = b?.error();
  if (b && err) {
    reason = err;
    b = null;
  }
  if (!b && mode === "openblas") throw new Error(`TORCHTS_CPU_BLAS=openblas: ${reason}`);
  // the pool's threads split products; OpenBLAS' own threads would have to be woken per call
  b?.setThreads(1);
  return b;
}

/** The loaded bridge, or null (off, not built, no OpenBLAS, not Node). */
export function blasBridge(): Bridge | null {
  if (bridge === undefined) bridge = load();
  return bridge;
}

/** Selects the GEMM for products run from now on (tests; the env var is the usual way). */
export function setCpuBlas(m: Mode): void {
  if (m !== "auto" && m !== "openblas" && m !== "off") throw new Error(`setCpuBlas: expected auto, openblas or off, got ${String(m)}`);
  const before = { mode, bridge, reason };
  mode = m;
  bridge = undefined;
  reason = "";
  if (m !== "openblas") return;
  try {
    blasBridge(); // required: fail here, not at the first product
  } catch (e) {
    ({ mode, bridge, reason } = before); // a failed switch leaves the previous choice in force
    throw e;
  }
}

/** What runs float32 products: OpenBLAS' build string, or "" with the reason it is not used. */
export function blasInfo(): { blas: string; blasReason: string } {
  const b = blasBridge();
  return { blas: b ? b.config() : "", blasReason: b ? "" : reason };
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
