// Register-tiled float32 GEMM on packed panels, generated for a tile of MR rows x NV vectors.
// A is packed as row panels [ip][k][r] (MR floats per k), B as column panels [jp][k][c] (4*NV
// floats per k), C is a padded row-major block. K is padded to a multiple of KU (zeros), so the
// unrolled inner loop needs no remainder. The driver loops (KC x MC cache blocking) are in wasm
// too, so one call computes a whole range of row panels with no JS round trips.
import { Fn, I32, OP, SIMD, V128 } from "./emitter.js";

export interface GemmShape {
  MR: number;
  NV: number;
  KU: number;
  KC: number;
  MC: number; // row panels per cache block
}

export const GEMM: GemmShape = { MR: 6, NV: 2, KU: 4, KC: 256, MC: 16 };

/** micro(a, b, c, kk, ldcBytes): C[MR x 4NV] += Apanel(kk) * Bpanel(kk). */
function micro(g: GemmShape, fma: boolean): Fn {
  const { MR, NV, KU } = g;
  const f = new Fn("gemm_micro", [I32, I32, I32, I32, I32]);
  const [a, b, c, kk, ldc] = [0, 1, 2, 3, 4];
  const rows = Array.from({ length: MR }, () => f.local(I32));
  const acc = Array.from({ length: MR * NV }, () => f.local(V128));
  const bv = Array.from({ length: NV }, () => f.local(V128));
  const av = f.local(V128);
  for (let r = 0; r < MR; r++) {
    if (r === 0) f.get(c).set(rows[0]!);
    else f.get(rows[r - 1]!).get(ldc).op(OP.i32add).set(rows[r]!);
    for (let v = 0; v < NV; v++) f.get(rows[r]!).v128load(16 * v).set(acc[r * NV + v]!);
  }
  f.loop(() => {
    for (let u = 0; u < KU; u++) {
      for (let v = 0; v < NV; v++) f.get(b).v128load(16 * (u * NV + v)).set(bv[v]!);
      for (let r = 0; r < MR; r++) {
        f.get(a).f32splatLoad(4 * (u * MR + r)).set(av);
        for (let v = 0; v < NV; v++) {
          const t = acc[r * NV + v]!;
          if (fma) f.get(av).get(bv[v]!).get(t).simd(SIMD.relaxedMadd).set(t);
          else f.get(t).get(av).get(bv[v]!).simd(SIMD.f32x4mul).simd(SIMD.f32x4add).set(t);
        }
      }
    }
    f.get(a).i32(4 * MR * KU).op(OP.i32add).set(a);
    f.get(b).i32(16 * NV * KU).op(OP.i32add).set(b);
    f.get(kk).i32(KU).op(OP.i32sub).tee(kk).op(OP.brIf, 0);
  });
  for (let r = 0; r < MR; r++)
    for (let v = 0; v < NV; v++) f.get(rows[r]!).get(acc[r * NV + v]!).v128store(16 * v);
  return f;
}

/**
 * gemm(ip0, ip1, ap, bp, c, npanels, K, ldcBytes): row panels [ip0, ip1) of C += A*B.
 * Loop order: kc block > row-panel block (MC) > column panel > row panel, so one B panel
 * (KC x 4NV) stays in L1 while the A block (MC*MR x KC) stays in L2.
 */
function driver(g: GemmShape, microIndex: number): Fn {
  const { MR, NV, KC, MC } = g;
  const NR = 4 * NV;
  const f = new Fn("gemm", [I32, I32, I32, I32, I32, I32, I32, I32]);
  const [ip0, ip1, ap, bp, c, np, K, ldc] = [0, 1, 2, 3, 4, 5, 6, 7];
  const k0 = f.local(I32), kk = f.local(I32), ib = f.local(I32), ibEnd = f.local(I32);
  const jp = f.local(I32), ip = f.local(I32);
  f.i32(0).set(k0);
  f.loop(() => {
    // kk = min(KC, K - k0)
    f.get(K).get(k0).op(OP.i32sub).tee(kk).i32(KC).get(kk).i32(KC).op(OP.i32lts).op(OP.select).set(kk);
    f.get(ip0).set(ib);
    f.loop(() => {
      f.get(ib).i32(MC).op(OP.i32add).tee(ibEnd).get(ip1).get(ibEnd).get(ip1).op(OP.i32lts).op(OP.select).set(ibEnd);
      f.i32(0).set(jp);
      f.loop(() => {
        f.get(ib).set(ip);
        f.loop(() => {
          // a = ap + (ip*K + k0)*MR*4 ; b = bp + (jp*K + k0)*NR*4 ; c = c + ip*MR*ldc + jp*NR*4
          f.get(ap).get(ip).get(K).op(OP.i32mul).get(k0).op(OP.i32add).i32(MR * 4).op(OP.i32mul).op(OP.i32add);
          f.get(bp).get(jp).get(K).op(OP.i32mul).get(k0).op(OP.i32add).i32(NR * 4).op(OP.i32mul).op(OP.i32add);
          f.get(c).get(ip).i32(MR).op(OP.i32mul).get(ldc).op(OP.i32mul).op(OP.i32add);
          f.get(jp).i32(NR * 4).op(OP.i32mul).op(OP.i32add);
          f.get(kk).get(ldc).op(OP.call, microIndex);
          f.get(ip).i32(1).op(OP.i32add).tee(ip).get(ibEnd).op(OP.i32lts).op(OP.brIf, 0);
        });
        f.get(jp).i32(1).op(OP.i32add).tee(jp).get(np).op(OP.i32lts).op(OP.brIf, 0);
      });
      f.get(ibEnd).tee(ib).get(ip1).op(OP.i32lts).op(OP.brIf, 0);
    });
    f.get(k0).i32(KC).op(OP.i32add).tee(k0).get(K).op(OP.i32lts).op(OP.brIf, 0);
  });
  return f;
}

/** Both functions; `microIndex` is the index the micro kernel will have in the module. */
export function gemmFns(g: GemmShape, fma: boolean, microIndex: number): Fn[] {
  return [micro(g, fma), driver(g, microIndex)];
}

