// C[M x N] = A[M x K] * B[K x N] in float32 on the wasm GEMM: operands are packed into panels
// inside the shared memory (strided views welcome), row panels are split across threads.
import { GEMM } from "./gemm.js";
import { wasmRuntime } from "./runtime.js";

type F32 = { [i: number]: number; length: number };

const MR = GEMM.MR;
const NR = 4 * GEMM.NV;
const KU = GEMM.KU;
const MIN_FLOPS_PER_THREAD = 2e6;

/** out[oo + i*N + j] = sum_k A[ao + i*sam + k*sak] * B[bo + k*sbk + j*sbn]. False when wasm is off. */
export function matmulF32(
  M: number, K: number, N: number,
  A: F32, ao: number, sam: number, sak: number,
  B: F32, bo: number, sbk: number, sbn: number,
  out: F32 & { fill?: unknown }, oo: number,
): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (M === 0 || N === 0) return true;
  if (K === 0) {
    for (let i = 0; i < M * N; i++) out[oo + i] = 0;
    return true;
  }
  const mp = Math.ceil(M / MR), np = Math.ceil(N / NR), Kp = Math.ceil(K / KU) * KU;
  const Mp = mp * MR, Np = np * NR;
  // a row pitch that is a multiple of 4 KiB makes the C tile's rows alias in L1
  const ldc = Np % 256 === 0 ? Np + 4 : Np;
  const { arena, memory } = rt;
  const ap = arena.alloc(Mp * Kp * 4), bp = arena.alloc(Np * Kp * 4), cp = arena.alloc(Mp * ldc * 4);
  try {
    const buf = memory.buffer;
    const Ap = new Float32Array(buf, ap, Mp * Kp);
    const Bp = new Float32Array(buf, bp, Np * Kp);
    const Cp = new Float32Array(buf, cp, Mp * ldc);
    packA(A, ao, sam, sak, M, K, Kp, Ap);
    packB(B, bo, sbk, sbn, K, N, Kp, Bp);
    Cp.fill(0);
    const perPanel = 2 * MR * Np * Kp;
    rt.pool.run(rt.fn.gemm!, mp, [ap, bp, cp, np, Kp, ldc * 4], 1, Math.ceil(MIN_FLOPS_PER_THREAD / perPanel));
    if (out instanceof Float32Array) {
      if (ldc === N) out.set(Cp.subarray(0, M * N), oo);
      else for (let i = 0; i < M; i++) out.set(Cp.subarray(i * ldc, i * ldc + N), oo + i * N);
    } else {
      for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) out[oo + i * N + j] = Cp[i * ldc + j]!;
    }
  } finally {
    arena.release(cp);
    arena.release(bp);
    arena.release(ap);
  }
  return true;
}

function packA(A: F32, ao: number, sam: number, sak: number, M: number, K: number, Kp: number, Ap: Float32Array): void {
  // Ap[(ip*Kp + k)*MR + r] = A[i = ip*MR + r, k]; padding stays zero
  Ap.fill(0);
  for (let i = 0; i < M; i++) {
    const ip = (i / MR) | 0, r = i - ip * MR;
    let dst = ip * Kp * MR + r;
    let src = ao + i * sam;
    for (let k = 0; k < K; k++, dst += MR, src += sak) Ap[dst] = A[src]!;
  }
}

function packB(B: F32, bo: number, sbk: number, sbn: number, K: number, N: number, Kp: number, Bp: Float32Array): void {
  // Bp[(jp*Kp + k)*NR + c] = B[k, j = jp*NR + c]
  if (N % NR !== 0 || Kp !== K) Bp.fill(0);
  const np = Math.ceil(N / NR);
  for (let jp = 0; jp < np; jp++) {
    const w = Math.min(NR, N - jp * NR);
    let dst = jp * Kp * NR;
    for (let k = 0; k < K; k++, dst += NR) {
      const src = bo + k * sbk + jp * NR * sbn;
      for (let c = 0; c < w; c++) Bp[dst + c] = B[src + c * sbn]!;
    }
  }
}
