// C[M x N] = A[M x K] * B[K x N] in float32 on the wasm GEMM. Operands inside the shared memory
// are read in place (strided views welcome) and packed into panels by the worker pool; the
// result is written straight into `out` when it lives there too. Threads split the larger of
// M and N, so a short-and-wide product (a convolution) still uses every core.
import { GEMM, GEMM_FN, P } from "./gemm.js";
import { inArena } from "./ops.js";
import { wasmRuntime, type WasmRuntime } from "./runtime.js";
import { GEMV_MAX_M, gemvF32 } from "./gemv.js";
import { SGEMV_MAX_M, nativeSgemv } from "../native/sgemv.js";
import { blasBridge, blasLayout, blasShares, blasStats, bridgePoolFn, GEMM_PARAM as GP } from "../native/blas.js";

type F32 = { [i: number]: number; length: number };

const MR = GEMM.MR;
const NR = 4 * GEMM.NV;
const MIN_FLOPS_PER_THREAD = 2e6;
const MIN_PACK_PER_THREAD = 32768; // floats

/** out[oo + i*N + j] = sum_k A[ao + i*sam + k*sak] * B[bo + k*sbk + j*sbn]. False when wasm is off. */
export function matmulF32(
  M: number, K: number, N: number,
  A: F32, ao: number, sam: number, sak: number,
  B: F32, bo: number, sbk: number, sbn: number,
  out: F32 & { fill?: unknown }, oo: number,
): boolean {
  const rt = wasmRuntime();
  // skinny x @ W^T with every operand in place: the native AVX-512 kernel streams W (decode's linear layers)
  // (a stride of a single row or column is any number: the kernel never reads it)
  const ldx = M === 1 ? K : sam, ldw = N === 1 ? K : sbn;
  if (rt && M <= SGEMV_MAX_M && sak === 1 && sbk === 1 && K > 0 && N > 0 && ldx >= K && ldw >= K &&
      inArena(rt, A) && inArena(rt, B) && inArena(rt, out) && !overlaps(out, A) && !overlaps(out, B) &&
      nativeSgemv(rt, M, K, N, A.byteOffset + ao * 4, ldx, B.byteOffset + bo * 4, ldw, out.byteOffset + oo * 4, N))
    return true;
  if (M <= GEMV_MAX_M && gemvF32(M, K, N, A, ao, sam, sak, B, bo, sbk, sbn, out, oo)) return true; // skinny: stream B in place
  if (!rt) return false;
  if (M === 0 || N === 0) return true;
  if (blasMatmul(rt, M, K, N, A, [ao], sam, sak, B, [bo], sbk, sbn, out, oo)) return true;
  if (K === 0) {
    for (let i = 0; i < M * N; i++) out[oo + i] = 0;
    return true;
  }
  const { arena } = rt;
  const held: number[] = [];
  const alloc = (bytes: number) => {
    const p = arena.alloc(bytes);
    held.push(p);
    return p;
  };
  let blk: { g: Int32Array; release(): void } | null = null;
  try {
    const a = operand(rt, A, ao, sam, sak, M, K, alloc);
    const b = operand(rt, B, bo, sbk, sbn, K, N, alloc);
    // C is written tile by tile while A and B are still read: never straight into an operand's block
    const direct = inArena(rt, out) && !overlaps(out, A) && !overlaps(out, B);
    const c = direct ? out.byteOffset + oo * 4 : alloc(M * N * 4);
    blk = gemmBlock(rt, M, K, N, a.s1 === 1); // rows with contiguous k are read in place
    const g = blk.g;
    g.set([a.ptr, a.s0 * 4, a.s1 * 4, b.ptr, b.s0 * 4, b.s1 * 4], P.srcA / 4);
    g[P.c / 4] = c;
    g[P.ldc / 4] = N * 4;
    runGemm(rt, g, M, K, N);
    if (!direct) {
      const r = rt.view(Float32Array, c, M * N);
      if (out instanceof Float32Array) out.set(r, oo);
      else for (let i = 0; i < M * N; i++) out[oo + i] = r[i]!;
    }
  } finally {
    blk?.release();
    for (let i = held.length - 1; i >= 0; i--) arena.release(held[i]!);
  }
  return true;
}

// The panels live in one scratch block kept across calls: fresh wasm pages cost ~12 us each
// on first touch, and a block released to the arena is soon taken by a tensor.
const KEEP_BYTES = 64 << 20;
let kept: { rt: WasmRuntime; ptr: number; bytes: number; busy: boolean } | null = null;

const align64 = (n: number) => Math.ceil(n / 64) * 64;

/**
 * The parameter block of one product (P in gemm.ts) with its panel and edge buffers; the caller
 * fills the operand fields (srcA.., srcB.., c, ldc), calls runGemm, then release(). With
 * `aDirect` (A's rows have contiguous k and are read in place), only the row panel cut by the
 * M edge is packed, so A's buffer holds that one panel.
 */
export function gemmBlock(rt: WasmRuntime, M: number, K: number, N: number, aDirect: boolean): { g: Int32Array; release(): void } {
  const sizes = blockSizes(M, K, N, aDirect);
  const { base, release } = scratch(rt, sizes.reduce((x, y) => x + y, 0));
  return { g: initBlock(rt, base, sizes, M, K, N, aDirect), release };
}

/** Byte sizes (64-aligned) of a product's parameter block, A panels, B panels and edge tiles. */
function blockSizes(M: number, K: number, N: number, aDirect: boolean): number[] {
  const mp = Math.ceil(M / MR), np = Math.ceil(N / NR);
  const aPanels = aDirect ? (M % MR ? 1 : 0) : mp;
  return [P.BYTES + 16, aPanels * MR * K * 4, np * NR * K * 4, M % MR || N % NR ? (mp + np) * MR * NR * 4 : 0].map(align64);
}

/** Scratch memory for panels: the block kept across calls when it is free and large enough. */
function scratch(rt: WasmRuntime, total: number): { base: number; release(): void } {
  if (total <= KEEP_BYTES && !(kept?.rt === rt && kept.busy)) {
    if (kept?.rt !== rt || kept.bytes < total) {
      if (kept?.rt === rt) rt.arena.release(kept.ptr);
      kept = null; // an allocation that throws leaves nothing half-kept
      kept = { rt, ptr: rt.arena.alloc(total), bytes: total, busy: false };
    }
    const k = kept;
    k.busy = true;
    return { base: k.ptr, release: () => (k.busy = false) };
  }
  const base = rt.arena.alloc(total);
  return { base, release: () => rt.arena.release(base) };
}

/** Fills the parameter block at `base` (laid out by `sizes`) for an M x K x N product; operand fields stay 0. */
function initBlock(rt: WasmRuntime, base: number, sizes: number[], M: number, K: number, N: number, aDirect: boolean): Int32Array {
  const mp = Math.ceil(M / MR), np = Math.ceil(N / NR);
  const at: number[] = [];
  sizes.reduce((p, n) => (at.push(p), p + n), base);
  const g = rt.view(Int32Array, base, (P.BYTES + 16) / 4);
  g.fill(0); // also the zero bias block after the fields
  // panel ip lives at ap + ip*K*MR*4: in place, the one packed panel (mp - 1) sits at the buffer's start
  g[P.ap / 4] = aDirect ? at[1]! - (mp - 1) * K * MR * 4 : at[1]!;
  g[P.aDirect / 4] = aDirect ? 1 : 0;
  g[P.bp / 4] = at[2]!;
  g[P.M / 4] = M;
  g[P.N / 4] = N;
  g[P.K / 4] = K;
  g[P.mp / 4] = mp;
  g[P.np / 4] = np;
  g[P.edge / 4] = at[3]!;
  g[P.bias / 4] = base + P.BYTES;
  g[P.biasStep / 4] = 0;
  return g;
}

/** Batched products this small run one product per pool unit (gemm_batch) instead of one pool job each. */
const BATCH_MAX_FLOPS = 8e6;
const BATCH_MAX_SCRATCH = 16 << 20;

/**
 * out[oo + b*M*N + i*N + j] = sum_k A[aOffs[b] + i*sam + k*sak] * B[bOffs[b] + k*sbk + j*sbn] for
 * each product b, all in one pool job when the products are small and every operand is in the
 * shared memory. False when that does not apply (the caller runs the products one by one).
 */
export function matmulBatchedF32(
  M: number, K: number, N: number,
  A: F32, aOffs: ArrayLike<number>, sam: number, sak: number,
  B: F32, bOffs: ArrayLike<number>, sbk: number, sbn: number,
  out: F32, oo: number,
): boolean {
  const nb = aOffs.length;
  const rt = wasmRuntime();
  // skinny products stream B in place (gemv) rather than pack it
  if (!rt || nb < 2 || M <= GEMV_MAX_M || K === 0 || N === 0 || 2 * M * N * K > BATCH_MAX_FLOPS) return false;
  if (blasMatmul(rt, M, K, N, A, aOffs, sam, sak, B, bOffs, sbk, sbn, out, oo)) return true;
  if (!inArena(rt, A) || !inArena(rt, B) || !inArena(rt, out) || overlaps(out as Float32Array, A) || overlaps(out as Float32Array, B)) return false;
  const aDirect = sak === 1;
  const sizes = blockSizes(M, K, N, aDirect);
  const stride = sizes.reduce((x, y) => x + y, 0);
  if (nb * stride > BATCH_MAX_SCRATCH) return false;
  const { base, release } = scratch(rt, nb * stride);
  try {
    const mp = Math.ceil(M / MR), np = Math.ceil(N / NR);
    const aUnits = aDirect ? (M % MR ? 1 : 0) : mp;
    const kc = Math.ceil(K / Math.ceil(K / GEMM.KC));
    const a0 = (A as Float32Array).byteOffset, b0 = (B as Float32Array).byteOffset, c0 = (out as Float32Array).byteOffset + oo * 4;
    for (let i = 0; i < nb; i++) {
      const g = initBlock(rt, base + i * stride, sizes, M, K, N, aDirect);
      g.set([a0 + aOffs[i]! * 4, sam * 4, sak * 4, b0 + bOffs[i]! * 4, sbk * 4, sbn * 4], P.srcA / 4);
      g[P.c / 4] = c0 + i * M * N * 4;
      g[P.ldc / 4] = N * 4;
      g[P.kc / 4] = kc;
      g[P.nb / 4] = np;
      g[P.aFirst / 4] = aDirect ? mp - 1 : 0;
      g[P.units / 4] = np + aUnits;
    }
    rt.pool.run(GEMM_FN.batch, nb, [base, stride], 1, Math.ceil(MIN_FLOPS_PER_THREAD / (2 * M * N * K)));
  } finally {
    release();
  }
  return true;
}

/**
 * The products of matmulBatchedF32's contract through the native bridge's kernel, each cut into the shares
 * blasShares gives its shape: in the shared memory the shares of all products are one pool job,
 * elsewhere one call each on this thread (same shares, same sums). False (nothing written) when
 * the bridge is off or cannot express the strides, or the output overlaps an operand.
 */
function blasMatmul(
  rt: WasmRuntime, M: number, K: number, N: number,
  A: F32, aOffs: ArrayLike<number>, sam: number, sak: number,
  B: F32, bOffs: ArrayLike<number>, sbk: number, sbn: number,
  out: F32, oo: number,
): boolean {
  const blas = blasBridge();
  if (!blas || K === 0 || M * N === 0) return false;
  const b = blas.bridge;
  if (!(A instanceof Float32Array && B instanceof Float32Array && out instanceof Float32Array)) return false;
  const l = blasLayout(M, K, N, sam, sak, sbk, sbn);
  if (!l || overlaps(out, A) || overlaps(out, B)) return false;
  const [ta, lda, tb, ldb] = l;
  const nb = aOffs.length;
  const { byCols, share, shares } = blasShares(M, N, blas.kernel);
  blasStats.calls += nb;
  if (!(inArena(rt, A) && inArena(rt, B) && inArena(rt, out))) {
    for (let i = 0; i < nb; i++)
      for (let r0 = 0; r0 < (byCols ? N : M); r0 += share) {
        const n = Math.min(share, (byCols ? N : M) - r0);
        const ao = aOffs[i]! + (byCols ? 0 : ta ? r0 : r0 * lda), bo = bOffs[i]! + (byCols ? (tb ? r0 * ldb : r0) : 0);
        const co = oo + i * M * N + (byCols ? r0 : r0 * N);
        b.sgemm(ta, tb, byCols ? M : n, byCols ? n : N, K, A, ao, lda, B, bo, ldb, 0, out, co, N, blas.code);
      }
    return true;
  }
  const words = GP.offs + 2 * nb;
  const pb = rt.arena.alloc(words * 4);
  try {
    const p = rt.view(Int32Array, pb, words);
    const a0 = A.byteOffset / 4, b0 = B.byteOffset / 4;
    p.set([ta, tb, M, N, K, lda, ldb, N, byCols ? 1 : 0, share, nb, out.byteOffset / 4 + oo, M * N, blas.code]);
    for (let i = 0; i < nb; i++) {
      p[GP.offs + 2 * i] = a0 + aOffs[i]!;
      p[GP.offs + 2 * i + 1] = b0 + bOffs[i]!;
    }
    const perShare = (2 * M * N * K) / shares;
    rt.pool.run(bridgePoolFn(rt, b, "gemmSlab"), nb * shares, [pb], 1, Math.ceil(MIN_FLOPS_PER_THREAD / perShare));
  } finally {
    rt.arena.release(pb);
  }
  return true;
}

/** Pack-pass and fused-column-driver functions of a product (the matrix's, or a convolution's). */
export interface GemmFns {
  pack: number;
  cols: number;
}
const MATMUL_FNS: GemmFns = { pack: GEMM_FN.pack, cols: GEMM_FN.cols };

/**
 * Short-and-wide products pack each B panel inside the tile loop when all of A (read once per
 * column panel) fits in about half of a 1 MiB L2; longer A gets the K x MC cache blocking.
 */
const FUSED_MAX_A_BYTES = 512 << 10;

/**
 * Runs one product described by `g`. Wide and short (N > M, small A): threads split the columns
 * and pack each B panel just before using it. Otherwise all B panels are packed in one parallel
 * pass and threads split the larger of M and N. A is packed only where it is not read in place.
 */
export function runGemm(rt: WasmRuntime, g: Int32Array, M: number, K: number, N: number, fns: GemmFns = MATMUL_FNS): void {
  const mp = g[P.mp / 4]!, np = g[P.np / 4]!;
  const pb = g.byteOffset;
  const blocks = Math.ceil(K / GEMM.KC);
  g[P.kc / 4] = Math.ceil(K / blocks); // equal K blocks: no short last block
  const packMin = Math.ceil(MIN_PACK_PER_THREAD / (K * Math.max(MR, NR)));
  const byCols = N > M;
  const perUnit = 2 * K * (byCols ? NR * M : MR * N);
  const minUnits = Math.ceil(MIN_FLOPS_PER_THREAD / perUnit);
  // A panels to pack: all, or with rows read in place only the one cut by the M edge
  const direct = g[P.aDirect / 4] === 1;
  const aFirst = direct ? mp - 1 : 0, aUnits = direct ? (M % MR ? 1 : 0) : mp;
  g[P.aFirst / 4] = aFirst;
  if (byCols && mp * MR * K * 4 <= FUSED_MAX_A_BYTES) {
    g[P.nb / 4] = 0;
    if (aUnits) rt.pool.run(fns.pack, aUnits, [pb], 1, packMin);
    rt.pool.run(fns.cols, np, [pb], 1, minUnits);
    return;
  }
  g[P.nb / 4] = np;
  rt.pool.run(fns.pack, np + aUnits, [pb], 1, packMin);
  rt.pool.run(GEMM_FN.driver, byCols ? np : mp, [pb, byCols ? 1 : 0], 1, minUnits);
}

function overlaps(x: Float32Array, y: F32): boolean {
  return y instanceof Float32Array && x.buffer === y.buffer && x.byteOffset < y.byteOffset + y.byteLength && y.byteOffset < x.byteOffset + x.byteLength;
}

interface Operand {
  ptr: number; // byte address of element [0, 0]
  s0: number; // element strides
  s1: number;
}

/** A strided operand in place when it is in the shared memory, else copied in contiguously. */
function operand(rt: WasmRuntime, X: F32, xo: number, s0: number, s1: number, R: number, C: number, alloc: (b: number) => number): Operand {
  if (inArena(rt, X)) return { ptr: X.byteOffset + xo * 4, s0, s1 };
  const ptr = alloc(R * C * 4);
  const v = rt.view(Float32Array, ptr, R * C);
  for (let i = 0; i < R; i++) for (let j = 0; j < C; j++) v[i * C + j] = X[xo + i * s0 + j * s1]!;
  return { ptr, s0: C, s1: 1 };
}
