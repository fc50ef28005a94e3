// Weight-only quantized products for few activation rows (decode), streaming the quantized weight
// in place: int8 per-channel/group-wise and int4 group-wise (two nibbles per byte, zero point 8).
// Weights are widened to f32 in registers (i8 -> i16 -> i32 -> f32, or for one row a byte shuffle
// to the top of each i32 lane and one convert) and multiplied with float32 activations. Long
// groups reduce their partial sums and scale them once; short ones (<= 64) scale the widened
// weights first (the dequantized weight's own rounding); int4 groups of 32 have a loop of their own.
// Also the dequantizers that expand the weight to float32 for the GEMM when there are many rows.
//   q8gemv<R>(lo, hi, x, q, s, out, ldo, K, gs, bias): out[r, n] = sum_g s[n, g] * sum_{k in g} x[r, k] * q[n, k] (+ bias[n])
//   q8gemvs<R>: the same with pre-scaled weights; q4gemv<R> / q4gemvs<R> / q4gemv32_<R>: packed
//   nibbles, with x permuted per 32 inputs (the 16 even ones, then the 16 odd ones: the byte order)
//   deq8(lo, hi, q, s, dst, K, gs) / deq4: dst[n, k] = q[n, k] * s[n, k / gs] for rows [lo, hi)
// x rows are contiguous (K floats apart); bias = 0 means none. int4 needs gs % 32 == 0.
import { Fn, I32, F32, OP, SIMD, V128 } from "./emitter.js";

const LOAD32_ZERO = 0x5c;
const I16_EXT_LO = 0x87, I16_EXT_HI = 0x88, I32_EXT_LO = 0xa7, I32_EXT_HI = 0xa8, CVT = 0xfa;
const I8_SHR_U = 0x6d, I8_SUB = 0x71, SHUFFLE = 0x0d, SWIZZLE = 0x0e, RELAXED_SWIZZLE = 0x100, I32_SHL = 0xab;
const I32_LOAD8_S = 0x2c, F32_CONVERT_I32_S = 0xb2, I32_DIV_U = 0x6e, I32_SHR_U = 0x76, F32_LOAD = 0x2a;
export const QROWS = 2;

function madd(f: Fn, fma: boolean, a: number, b: number, acc: number): void {
  if (fma) f.get(a).get(b).get(acc).simd(SIMD.relaxedMadd).set(acc);
  else f.get(acc).get(a).get(b).simd(SIMD.f32x4mul).simd(SIMD.f32x4add).set(acc);
}

/** c[0..4) = the 16 int8 lanes of `src` as four f32x4 (lanes 0-3, 4-7, 8-11, 12-15). */
function widen16(f: Fn, src: number, t16: number, c: number[]): void {
  f.get(src).simd(I16_EXT_LO).set(t16);
  f.get(t16).simd(I32_EXT_LO).simd(CVT).set(c[0]!);
  f.get(t16).simd(I32_EXT_HI).simd(CVT).set(c[1]!);
  f.get(src).simd(I16_EXT_HI).set(t16);
  f.get(t16).simd(I32_EXT_LO).simd(CVT).set(c[2]!);
  f.get(t16).simd(I32_EXT_HI).simd(CVT).set(c[3]!);
}

/**
 * c[j] = bytes 4j..4j+3 of `src` as f32x4, times 2^24: each byte is moved to the top of its i32
 * lane by a byte shuffle (index 0x80 gives 0 in both swizzles), so one shuffle and one convert
 * per 4 weights; the caller folds 2^-24 into the scale (exact).
 */
function spread16(f: Fn, src: number, c: number[], relaxed: boolean): void {
  for (let j = 0; j < 4; j++) {
    f.get(src);
    spreadMask(f, j);
    f.simd(relaxed ? RELAXED_SWIZZLE : SWIZZLE).simd(CVT).set(c[j]!);
  }
}

/** v128.const: the shuffle mask of spread16's vector j (inline, so it costs no register). */
function spreadMask(f: Fn, j: number): void {
  const bytes: number[] = [];
  for (let i = 0; i < 4; i++) bytes.push(0x80, 0x80, 0x80, 4 * j + i);
  f.op(0xfd, 0x0c, ...bytes);
}

/** lo = (v & 15) - 8, hi = (v >> 4) - 8 as int8 lanes. */
function nibbles(f: Fn, v: number, lo: number, hi: number): void {
  f.get(v).i32x4(0x0f0f0f0f).simd(SIMD.v128and).i32x4(0x08080808).simd(I8_SUB).set(lo);
  f.get(v).i32(4).simd(I8_SHR_U).i32x4(0x08080808).simd(I8_SUB).set(hi);
}

/**
 * Accumulators per activation row, by bits and rows per pass (measured). Passes of 3-4 rows ran
 * slower per row than passes of 2 (the accumulators no longer fit the 16 vector registers).
 */
const ACC: Record<8 | 4, Record<number, number>> = { 8: { 1: 4, 2: 2 }, 4: { 1: 4, 2: 4 } };

/**
 * One kernel variant. `premul`: the widened weights are multiplied by their group's scale before
 * the FMA (the rounding of the dequantized weight; best for small groups, no per-group reduction);
 * otherwise each group's partial sums are reduced and scaled once (best for long groups).
 * `spread`: the shuffle widening (fewer instructions, measured faster for one row, slower for 4).
 */
function qgemv(name: string, bits: 8 | 4, R: number, fma: boolean, premul: boolean, spread: boolean, gs32 = false): Fn {
  const f = new Fn(name, [I32, I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, x, q, s, out, ldo, K, gs, bias] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const NA = ACC[bits][R]!;
  const BLK = bits === 8 ? 16 : 32;
  const widened = spread ? (bits === 8 ? 2 ** 24 : 2 ** 28) : 1; // the widened weight is q * widened
  const n = f.local(I32), kb = f.local(I32), gEnd = f.local(I32), gV = f.local(I32), qp = f.local(I32), sp = f.local(I32);
  const gBytes = f.local(I32), rowBytes = f.local(I32), o = f.local(I32);
  const xr = Array.from({ length: R }, () => f.local(I32));
  const tot = premul ? [] : Array.from({ length: R }, () => f.local(V128));
  const acc = Array.from({ length: R * NA }, () => f.local(V128));
  const c = Array.from({ length: 4 }, () => f.local(V128));
  const v = f.local(V128), t16 = f.local(V128), nlo = f.local(V128), nhi = f.local(V128), sc = f.local(V128);
  const xv = f.local(V128);
  for (let r = 0; r < R; r++) f.get(x).get(K).i32(4 * r).op(OP.i32mul).op(OP.i32add).set(xr[r]!);
  f.get(K).get(gs).op(I32_DIV_U).i32(2).op(OP.i32shl).set(gBytes); // scale row stride
  if (bits === 8) f.get(K).set(rowBytes);
  else f.get(K).i32(1).op(I32_SHR_U).set(rowBytes);
  const scale = () => {
    f.get(sp).f32splatLoad();
    if (widened !== 1) f.f32x4(1 / widened).simd(SIMD.f32x4mul); // exact: a power of two
    f.set(sc);
    f.get(sp).i32(4).op(OP.i32add).set(sp);
  };
  const widen = (src: number) => {
    if (spread) spread16(f, src, c, fma);
    else widen16(f, src, t16, c);
    if (premul) for (const ci of c) f.get(ci).get(sc).simd(SIMD.f32x4mul).set(ci);
  };
  /** acc[r][*] += x[r, kb + xoff/4 + 4i] * c[i] */
  const fmas = (xoff: number) => {
    for (let r = 0; r < R; r++)
      for (let i = 0; i < 4; i++) {
        f.get(xr[r]!).get(kb).i32(2).op(OP.i32shl).op(OP.i32add).v128load(xoff + 16 * i).set(xv);
        madd(f, fma, xv, c[i]!, acc[r * NA + ((i + xoff / 16) % NA)]!);
      }
  };
  f.get(lo).set(n);
  f.forLt(n, hi, 1, () => {
    f.get(q).get(n).get(rowBytes).op(OP.i32mul).op(OP.i32add).set(qp);
    f.get(s).get(n).get(gBytes).op(OP.i32mul).op(OP.i32add).set(sp);
    for (const t of premul ? acc : tot) f.f32x4(0).set(t);
    const block = () => {
      if (bits === 8) {
        f.get(qp).get(kb).op(OP.i32add).v128load().set(v);
        widen(v);
        fmas(0);
      } else {
        f.get(qp).get(kb).i32(1).op(I32_SHR_U).op(OP.i32add).v128load().set(v);
        if (spread) {
          // each nibble n, xor 8, in the high half of its byte: (n - 8) * 2^28 once at the top of an i32
          f.get(v).i32x4(0x88888888 | 0).simd(SIMD.v128xor).set(v);
          f.get(v).i32(4).simd(I32_SHL).i32x4(0xf0f0f0f0 | 0).simd(SIMD.v128and).set(nlo);
          f.get(v).i32x4(0xf0f0f0f0 | 0).simd(SIMD.v128and).set(nhi);
        } else nibbles(f, v, nlo, nhi);
        widen(nlo);
        fmas(0);
        widen(nhi);
        fmas(64);
      }
    };
    f.i32(0).set(kb);
    if (gs32) {
      // one group of 32 per block (q4_0's layout): no group loop
      f.forLt(kb, K, BLK, () => {
        scale();
        block();
      });
    } else {
      f.loop(() => {
        f.get(kb).get(gs).op(OP.i32add).set(gEnd);
        f.get(kb).get(gs).i32(-BLK).op(OP.i32and).op(OP.i32add).set(gV);
        if (premul) scale();
        else for (const a of acc) f.f32x4(0).set(a);
        f.forLt(kb, gV, BLK, () => {
          block();
        });
        if (bits === 8)
          f.forLt(kb, gEnd, 1, () => {
            f.get(qp).get(kb).op(OP.i32add).mem(I32_LOAD8_S, 0).op(F32_CONVERT_I32_S).f32(widened).op(OP.f32mul).simd(SIMD.f32x4splat);
            if (premul) f.get(sc).simd(SIMD.f32x4mul);
            f.set(c[0]!);
            for (let r = 0; r < R; r++) {
              f.get(xr[r]!).get(kb).i32(2).op(OP.i32shl).op(OP.i32add).simd(LOAD32_ZERO, { align: 2, offset: 0 }).set(xv);
              madd(f, fma, xv, c[0]!, acc[r * NA]!);
            }
          });
        if (!premul) {
          scale();
          for (let r = 0; r < R; r++) {
            const a0 = acc[r * NA]!;
            for (let i = 1; i < NA; i++) f.get(a0).get(acc[r * NA + i]!).simd(SIMD.f32x4add).set(a0);
            madd(f, fma, a0, sc, tot[r]!);
          }
        }
        f.get(kb).get(K).op(OP.i32ltu).op(OP.brIf, 0);
      });
    }
    for (let r = 0; r < R; r++) {
      let t: number;
      if (premul) {
        t = acc[r * NA]!;
        for (let i = 1; i < NA; i++) f.get(t).get(acc[r * NA + i]!).simd(SIMD.f32x4add).set(t);
      } else t = tot[r]!;
      f.get(out).get(ldo).i32(r).op(OP.i32mul).op(OP.i32add).get(n).i32(2).op(OP.i32shl).op(OP.i32add).set(o);
      f.get(o);
      f.get(t).lane(0).get(t).lane(1).op(OP.f32add).get(t).lane(2).op(OP.f32add).get(t).lane(3).op(OP.f32add);
      // bias[n], or 0 (the load at address 4n when bias = 0 is harmless: the control block)
      f.get(bias).get(n).i32(2).op(OP.i32shl).op(OP.i32add).mem(F32_LOAD, 2).f32(0).get(bias).op(OP.select);
      f.op(OP.f32add).mem(OP.f32store, 2);
    }
  });
  return f;
}

/** deq8/deq4(lo, hi, q, s, dst, K, gs): rows [lo, hi) of the float32 weight. */
function dequant(bits: 8 | 4): Fn {
  const f = new Fn(`deq${bits}`, [I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, q, s, dst, K, gs] = [0, 1, 2, 3, 4, 5, 6];
  const BLK = bits === 8 ? 16 : 32;
  const n = f.local(I32), kb = f.local(I32), gEnd = f.local(I32), gV = f.local(I32), qp = f.local(I32), sp = f.local(I32);
  const dp = f.local(I32), gBytes = f.local(I32), rowBytes = f.local(I32);
  const ss = f.local(F32);
  const c = Array.from({ length: 4 }, () => f.local(V128));
  const v = f.local(V128), t16 = f.local(V128), nlo = f.local(V128), nhi = f.local(V128), sc = f.local(V128), e = f.local(V128);
  f.get(K).get(gs).op(I32_DIV_U).i32(2).op(OP.i32shl).set(gBytes);
  if (bits === 8) f.get(K).set(rowBytes);
  else f.get(K).i32(1).op(I32_SHR_U).set(rowBytes);
  const store = (off: number) => {
    for (let i = 0; i < 4; i++) f.get(dp).get(kb).i32(2).op(OP.i32shl).op(OP.i32add).get(c[i]!).get(sc).simd(SIMD.f32x4mul).v128store(off + 16 * i);
  };
  f.get(lo).set(n);
  f.forLt(n, hi, 1, () => {
    f.get(q).get(n).get(rowBytes).op(OP.i32mul).op(OP.i32add).set(qp);
    f.get(s).get(n).get(gBytes).op(OP.i32mul).op(OP.i32add).set(sp);
    f.get(dst).get(n).get(K).op(OP.i32mul).i32(2).op(OP.i32shl).op(OP.i32add).set(dp);
    f.i32(0).set(kb);
    f.loop(() => {
      f.get(kb).get(gs).op(OP.i32add).set(gEnd);
      f.get(kb).get(gs).i32(-BLK).op(OP.i32and).op(OP.i32add).set(gV);
      f.get(sp).mem(F32_LOAD, 2).tee(ss).simd(SIMD.f32x4splat).set(sc);
      f.get(sp).i32(4).op(OP.i32add).set(sp);
      f.forLt(kb, gV, BLK, () => {
        if (bits === 8) {
          f.get(qp).get(kb).op(OP.i32add).v128load().set(v);
          widen16(f, v, t16, c);
          store(0);
        } else {
          f.get(qp).get(kb).i32(1).op(I32_SHR_U).op(OP.i32add).v128load().set(v);
          nibbles(f, v, nlo, nhi);
          // low nibbles are the even columns: interleave back to column order
          f.get(nlo).get(nhi).simd(SHUFFLE).op(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23).set(e);
          widen16(f, e, t16, c);
          store(0);
          f.get(nlo).get(nhi).simd(SHUFFLE).op(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31).set(e);
          widen16(f, e, t16, c);
          store(64);
        }
      });
      if (bits === 8)
        f.forLt(kb, gEnd, 1, () => {
          f.get(dp).get(kb).i32(2).op(OP.i32shl).op(OP.i32add);
          f.get(qp).get(kb).op(OP.i32add).mem(I32_LOAD8_S, 0).op(F32_CONVERT_I32_S).get(ss).op(OP.f32mul).mem(OP.f32store, 2);
        });
      f.get(kb).get(K).op(OP.i32ltu).op(OP.brIf, 0);
    });
  });
  return f;
}

/** Groups up to this long use the pre-scaled variant (`q<bits>gemvs<R>`). */
export const PREMUL_MAX_GS = 64;
/** Row counts that use the shuffle widening (measured: faster for 1 row, slower for 4). */
const SPREAD = [1];

export function qgemvFns(fma: boolean): Fn[] {
  const fns: Fn[] = [dequant(8), dequant(4)];
  for (let R = 1; R <= QROWS; R++)
    for (const bits of [8, 4] as const) {
      const spread = SPREAD.includes(R);
      fns.push(qgemv(`q${bits}gemv${R}`, bits, R, fma, false, spread), qgemv(`q${bits}gemvs${R}`, bits, R, fma, true, spread));
    }
  for (let R = 1; R <= QROWS; R++) fns.push(qgemv(`q4gemv32_${R}`, 4, R, fma, true, SPREAD.includes(R), true));
  return fns;
}
