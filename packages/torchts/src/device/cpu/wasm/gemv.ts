// Skinny float32 products (M <= 8 rows of activations) that stream the weight in place from the
// shared memory: decode is memory-bound, so each weight byte must be read once per pass of up to
// 4 activation rows, with no packing. Two layouts:
//   gemv_t<R>: out[r, n] = sum_k x[r, k] * W[n, k]   (x @ W^T, W rows contiguous in k: nn.Linear)
//   gemv_n<R>: out[r, j] = sum_k x[r, k] * B[k, j]   (x @ B, B rows contiguous in j: Conv1D, attn @ V)
// Both are split over the output columns across threads, so every output has one summation order
// whatever the thread count.
import { Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { inArena } from "./ops.js";
import { wasmRuntime, type WasmRuntime } from "./runtime.js";

type F32 = { [i: number]: number; length: number };

const LOAD32_ZERO = 0x5c;
export const GEMV_MAX_M = 8;
const ROWS = 4; // activation rows per pass
const MIN_MACS_PER_THREAD = 1 << 16;

/** acc = a * b + acc (fused when relaxed SIMD is available). */
function madd(f: Fn, fma: boolean, a: number, b: number, acc: number): void {
  if (fma) f.get(a).get(b).get(acc).simd(SIMD.relaxedMadd).set(acc);
  else f.get(acc).get(a).get(b).simd(SIMD.f32x4mul).simd(SIMD.f32x4add).set(acc);
}

/** Pushes the sum of the four lanes of v, ((l0 + l1) + l2) + l3. */
function hsum(f: Fn, v: number): void {
  f.get(v).lane(0).get(v).lane(1).op(OP.f32add).get(v).lane(2).op(OP.f32add).get(v).lane(3).op(OP.f32add);
}

/** while (i + step <= end) { body; i += step } */
function whileFits(f: Fn, i: number, end: number, step: number, body: () => void): void {
  f.loop(() => {
    f.get(i).i32(step).op(OP.i32add).get(end).op(0x4b /* i32.gt_u */).op(OP.brIf, 1);
    body();
    f.get(i).i32(step).op(OP.i32add).set(i).op(OP.br, 0);
  });
}

/**
 * gemv_t<R>(lo, hi, x, ldx, w, ldw, out, ldo, K) for weight rows n in [lo, hi); byte pointers and
 * strides. NB weight rows at a time x U vectors of k, so R*NB*U independent accumulators.
 */
function gemvT(R: number, NB: number, U: number, fma: boolean): Fn {
  const f = new Fn(`gemv_t${R}`, [I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, x, ldx, w, ldw, out, ldo, K] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const n = f.local(I32), kb = f.local(I32), kU = f.local(I32), k4 = f.local(I32), kEnd = f.local(I32), o = f.local(I32);
  const xr = Array.from({ length: R }, () => f.local(I32));
  const wp = Array.from({ length: NB }, () => f.local(I32));
  const acc = Array.from({ length: R * NB * U }, () => f.local(V128));
  const xv = Array.from({ length: R }, () => f.local(V128));
  const wv = f.local(V128);
  const A = (r: number, j: number, u: number) => acc[(r * NB + j) * U + u]!;
  for (let r = 0; r < R; r++) f.get(x).get(ldx).i32(r).op(OP.i32mul).op(OP.i32add).set(xr[r]!);
  f.get(K).i32(2).op(OP.i32shl).tee(kEnd).i32(-16 * U).op(OP.i32and).set(kU);
  f.get(kEnd).i32(-16).op(OP.i32and).set(k4);
  f.get(lo).set(n);
  const block = (nb: number) => {
    for (let j = 0; j < nb; j++) {
      f.get(w).get(n).get(ldw).op(OP.i32mul).op(OP.i32add);
      if (j > 0) f.get(ldw).i32(j).op(OP.i32mul).op(OP.i32add);
      f.set(wp[j]!);
    }
    for (let r = 0; r < R; r++) for (let j = 0; j < nb; j++) for (let u = 0; u < U; u++) f.f32x4(0).set(A(r, j, u));
    const step = (u: number, zero: boolean) => {
      const load = () => (zero ? f.simd(LOAD32_ZERO, { align: 2, offset: 0 }) : f.v128load(16 * u));
      for (let r = 0; r < R; r++) {
        f.get(xr[r]!).get(kb).op(OP.i32add);
        load();
        f.set(xv[r]!);
      }
      for (let j = 0; j < nb; j++) {
        f.get(wp[j]!).get(kb).op(OP.i32add);
        load();
        f.set(wv);
        for (let r = 0; r < R; r++) madd(f, fma, xv[r]!, wv, A(r, j, u));
      }
    };
    f.i32(0).set(kb);
    f.forLt(kb, kU, 16 * U, () => {
      for (let u = 0; u < U; u++) step(u, false);
    });
    if (U > 1) f.forLt(kb, k4, 16, () => step(0, false));
    f.forLt(kb, kEnd, 4, () => step(0, true));
    for (let r = 0; r < R; r++)
      for (let j = 0; j < nb; j++) {
        for (let u = 1; u < U; u++) f.get(A(r, j, 0)).get(A(r, j, u)).simd(SIMD.f32x4add).set(A(r, j, 0));
        f.get(out).get(ldo).i32(r).op(OP.i32mul).op(OP.i32add).get(n).i32(j).op(OP.i32add).i32(2).op(OP.i32shl).op(OP.i32add).set(o);
        f.get(o);
        hsum(f, A(r, j, 0));
        f.mem(OP.f32store, 2);
      }
  };
  whileFits(f, n, hi, NB, () => block(NB));
  f.forLt(n, hi, 1, () => block(1));
  return f;
}

/**
 * gemv_n<R>(lo, hi, x, ldx, b, ldb, out, ldo, K) for output columns j in [lo, hi): NV vectors of
 * columns per block; column tails run one vector, then one float (load32_zero), at a time.
 */
function gemvN(R: number, NV: number, fma: boolean): Fn {
  const f = new Fn(`gemv_n${R}`, [I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, x, ldx, b, ldb, out, ldo, K] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const j = f.local(I32), bp = f.local(I32), xo = f.local(I32), xEnd = f.local(I32), o = f.local(I32);
  const xr = Array.from({ length: R }, () => f.local(I32));
  const acc = Array.from({ length: R * NV }, () => f.local(V128));
  const xs = Array.from({ length: R }, () => f.local(V128));
  const bv = f.local(V128);
  for (let r = 0; r < R; r++) f.get(x).get(ldx).i32(r).op(OP.i32mul).op(OP.i32add).set(xr[r]!);
  f.get(K).i32(2).op(OP.i32shl).set(xEnd);
  f.get(lo).set(j);
  const block = (nv: number, scalar: boolean) => {
    for (let a = 0; a < R * nv; a++) f.f32x4(0).set(acc[a]!);
    f.get(b).get(j).i32(2).op(OP.i32shl).op(OP.i32add).set(bp);
    f.i32(0).set(xo);
    f.forLt(xo, xEnd, 4, () => {
      for (let r = 0; r < R; r++) f.get(xr[r]!).get(xo).op(OP.i32add).f32splatLoad().set(xs[r]!);
      for (let v = 0; v < nv; v++) {
        f.get(bp);
        if (scalar) f.simd(LOAD32_ZERO, { align: 2, offset: 0 });
        else f.v128load(16 * v);
        f.set(bv);
        for (let r = 0; r < R; r++) madd(f, fma, xs[r]!, bv, acc[r * nv + v]!);
      }
      f.get(bp).get(ldb).op(OP.i32add).set(bp);
    });
    for (let r = 0; r < R; r++) {
      f.get(out).get(ldo).i32(r).op(OP.i32mul).op(OP.i32add).get(j).i32(2).op(OP.i32shl).op(OP.i32add).set(o);
      for (let v = 0; v < nv; v++) {
        if (scalar) f.get(o).get(acc[r * nv + v]!).lane(0).mem(OP.f32store, 2);
        else f.get(o).get(acc[r * nv + v]!).v128store(16 * v);
      }
    }
  };
  whileFits(f, j, hi, 4 * NV, () => block(NV, false));
  whileFits(f, j, hi, 4, () => block(1, false));
  f.forLt(j, hi, 1, () => block(1, true));
  return f;
}

/**
 * NB/U (x @ W^T) and NV (x @ B) per row count: about 8 accumulators, few enough to stay in registers.
 * One activation row reads one weight row at a time, 4 vectors per step: a single weight stream per
 * loop read 335 MB of decode weights at 25-31 GB/s on 2 threads, 4 interleaved rows at 20-22.
 */
const T_TILE: Record<number, [number, number]> = { 1: [1, 4], 2: [4, 1], 3: [2, 1], 4: [2, 1] };
const N_NV: Record<number, number> = { 1: 8, 2: 4, 3: 2, 4: 2 };

export function gemvFns(fma: boolean): Fn[] {
  const fns: Fn[] = [];
  for (let R = 1; R <= ROWS; R++) fns.push(gemvT(R, T_TILE[R]![0], T_TILE[R]![1], fma), gemvN(R, N_NV[R]!, fma));
  return fns;
}

/**
 * out[oo + i*N + j] = sum_k A[ao + i*sam + k*sak] * B[bo + k*sbk + j*sbn] for M <= GEMV_MAX_M when
 * B is a float32 view of the shared memory that is contiguous along k (sbk = 1) or along n
 * (sbn = 1); false otherwise (the caller runs the GEMM). A and out are staged when needed.
 */
export function gemvF32(
  M: number, K: number, N: number,
  A: F32, ao: number, sam: number, sak: number,
  B: F32, bo: number, sbk: number, sbn: number,
  out: F32, oo: number,
): boolean {
  if (M > GEMV_MAX_M || M === 0 || N === 0 || K === 0) return false;
  const rt = wasmRuntime();
  if (!rt || !inArena(rt, B)) return false;
  const trans = sbk === 1 && (sbn !== 1 || N === 1); // W rows along k
  if (!trans && sbn !== 1) return false;
  const bptr = B.byteOffset + bo * 4;
  run(rt, trans, M, K, N, A, ao, sam, sak, bptr, (trans ? sbn : sbk) * 4, out, oo);
  return true;
}

/** Passes of up to ROWS rows for any A/out (staged when needed); `ldb`: byte stride of W rows (trans) or B rows. */
function run(
  rt: WasmRuntime, trans: boolean, M: number, K: number, N: number,
  A: F32, ao: number, sam: number, sak: number, bptr: number, ldb: number, out: F32, oo: number,
): void {
  const aDirect = inArena(rt, A) && sak === 1;
  const oDirect = inArena(rt, out);
  const ap = aDirect ? 0 : rt.arena.alloc(M * K * 4);
  const op = oDirect ? 0 : rt.arena.alloc(M * N * 4);
  try {
    let xptr: number, ldx: number;
    if (aDirect) {
      xptr = (A as Float32Array).byteOffset + ao * 4;
      ldx = sam * 4;
    } else {
      const v = rt.view(Float32Array, ap, M * K);
      for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) v[i * K + k] = A[ao + i * sam + k * sak]!;
      xptr = ap;
      ldx = K * 4;
    }
    const optr = oDirect ? (out as Float32Array).byteOffset + oo * 4 : op;
    const minUnits = Math.ceil(MIN_MACS_PER_THREAD / (K * Math.min(M, ROWS)));
    for (let r0 = 0; r0 < M; r0 += ROWS) {
      const R = Math.min(ROWS, M - r0);
      const args = [xptr + r0 * ldx, ldx, bptr, ldb, optr + r0 * N * 4, N * 4, K];
      if (trans) rt.pool.run(rt.fn[`gemv_t${R}`]!, N, args, T_TILE[R]![0], Math.ceil(minUnits / T_TILE[R]![0]));
      else rt.pool.run(rt.fn[`gemv_n${R}`]!, N, args, 4 * N_NV[R]!, Math.ceil(minUnits / (4 * N_NV[R]!)));
    }
    if (!oDirect) {
      const v = rt.view(Float32Array, op, M * N);
      if (out instanceof Float32Array) out.set(v, oo);
      else for (let i = 0; i < M * N; i++) out[oo + i] = v[i]!;
    }
  } finally {
    if (!aDirect) rt.arena.release(ap);
    if (!oDirect) rt.arena.release(op);
  }
}
