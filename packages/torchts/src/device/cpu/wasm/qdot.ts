// int8 x int8 products for few activation rows (decode) with dynamic per-token activation
// quantization (the weights-and-activations-int8 scheme of llama.cpp's q8_0 and torchao's
// Int8DynamicActivationInt8Weight): each activation row is quantized to q in [-127, 127] with one
// scale, and every output is an exact int32 dot product of q with the int8 weight row, per group,
// converted and scaled once. An integer product instruction does 8 multiply-adds where the
// float weight widening of qgemv.ts needs a convert and an FMA per 4.
//   q8act(x, K, xa, sxp): quantize one row: sx = max(max|x| / 127, 2^-126) (stored at sxp),
//     q = clamp(round_half_even(x / sx), -127, 127), written at xa in the layout below
//   q8rows(lo, hi, x, ldx, K, dst): rows [lo, hi) of x quantized the same way, as float32 q * sx
//     (the input of the prefill GEMM)
//   q8dot / q8dotp / q8dotp4(lo, hi, xa, sxp, q, s, out, K, gs, bias): for weight rows n in [lo, hi)
//     out[n] = (sum_g f32(sum_{k in g} q_x[k] * q[n, k]) * s[n, g]) * sx (+ bias[n])
// Products: i32x4.dot_i16x8_s (plain SIMD). q8dot (any groups) widens 16 weight bytes to two
// int16 vectors against q as int16. q8dotp (groups that start at multiples of 16: gs % 16 == 0
// or one group per row) skips the widening: the 16 bytes read as 8 int16 lanes
// w = (w_even ^ 0x80) + 256 w_odd (one xor makes the low byte w_even + 128, unsigned) and
// w >> 8 = w_odd, so
//   dot(w, X) + dot(w >> 8, Y) with X = q_even, Y = q_odd - 256 q_even
// = sum w_even q_even + w_odd q_odd + 128 sum q_even, and the last term comes from prefix sums of
// q_even per 16 inputs (E). Intermediate int32 lanes may wrap; the exact total fits int32.
// q8dotp4 (one group of whole 16-blocks per row: per-channel int8) also finishes four rows at a
// time with vector ops. Measured (one thread, the bench model's 85 matrices, 88 MB, streamed from
// memory, through the pool): q8dot 3.9 ms per token, q8dotp 3.75, q8dotp4 3.2; the float-widening
// weight-only kernel (qgemv.ts q8gemv1) 6.5. The relaxed-SIMD byte products ran no faster than
// q8dot: i16x8.relaxed_dot_i8x16_i7x16_s + i32x4.extadd_pairwise on |q| with the weight's sign
// flipped by q's sign (exact, 7-bit operand); and i32x4.relaxed_dot_i8x16_i7x16_add_s returns
// twice the dot product and drops its accumulator in Node 20's V8 (11.3, experimental flag) on
// this AVX-VNNI cpu, so it is not used.
// Layout of a quantized row at xa (Kp = K rounded up to 16, K16 = K rounded down):
//   int16 q[Kp] (zeros past K) | per 16-block b < K16/16: int16 X[8], Y[8] | int32 E[K16/16 + 1],
//   E[b] = sum of q[k] over even k < 16b.
// An int32 group sum is exact while gs * 127 * 127 < 2^31 (Q8_MAX_GROUP).
import { Fn, I32, F32, OP, SIMD, V128 } from "./emitter.js";

export const Q8_MAX_GROUP = 131072;
/** The smallest normal float32: the activation scale's floor (an all-zero row quantizes to 0). */
export const MIN_ACT_SCALE = 2 ** -126;

const I16_NARROW = 0x85, I16_MIN_S = 0x96, I16_MAX_S = 0x98, I16_EXT_LO = 0x87, I16_EXT_HI = 0x88;
const I32_DOT16 = 0xba, I32_LANE = 0x1b, I32_SUB = 0xb1, I32_EXT_LO_S = 0xa7, I32_EXT_HI_S = 0xa8;
const F32_ABS = 0x8b, F32_NEAREST = 0x90, F32_MIN = 0x96, F32_CONVERT_I32_S = 0xb2;
const I32_LOAD8_S = 0x2c, I32_LOAD16_S = 0x2e, I32_STORE = 0x36, I32_STORE16 = 0x3b, I32_DIV_U = 0x6e, I32_SHR_U = 0x76;
const I16_SHL = 0x8b, I16_SHR_S = 0x8c, I16_SUB = 0x91, I32_EXTADD_I16 = 0x7e, SHUFFLE = 0x0d;
const U = 4; // 16-byte blocks per unrolled step (independent accumulators), measured vs 2 and 8

/** Bytes of a quantized row of K values (q8act's layout, a multiple of 16). */
export function actBytes(K: number): number {
  const Kp = Math.ceil(K / 16) * 16, K16 = K & ~15;
  return Math.ceil((2 * Kp + 2 * K16 + 4 * (K16 / 16 + 1)) / 16) * 16;
}

/** q8act(x, K, xa, sxp): one row for the integer products. */
function q8act(): Fn {
  const f = new Fn("q8act", [I32, I32, I32, I32]);
  const [x, K, xa, sxp] = [0, 1, 2, 3];
  quantizeRow(f, x, K, xa, sxp, false);
  return f;
}

/** q8rows(lo, hi, x, ldx, K, dst): rows [lo, hi) as float32 q * sx (the prefill GEMM's input); ldx in bytes. */
function q8rows(): Fn {
  const f = new Fn("q8rows", [I32, I32, I32, I32, I32, I32]);
  const [lo, hi, x, ldx, K, dst] = [0, 1, 2, 3, 4, 5];
  const r = f.local(I32), xr = f.local(I32), dr = f.local(I32), sxp = f.local(I32);
  f.get(lo).set(r);
  f.forLt(r, hi, 1, () => {
    f.get(x).get(r).get(ldx).op(OP.i32mul).op(OP.i32add).set(xr);
    f.get(dst).get(r).get(K).op(OP.i32mul).i32(2).op(OP.i32shl).op(OP.i32add).set(dr);
    quantizeRow(f, xr, K, dr, sxp, true);
  });
  return f;
}

/**
 * Emits the quantization of the row at x: scaled = false: q8act's layout at dst and sx at sxp;
 * scaled = true: float32 q * sx at dst (K values; sxp unused).
 */
function quantizeRow(f: Fn, x: number, K: number, dst: number, sxp: number, scaled: boolean): void {
  const k = f.local(I32), K16 = f.local(I32), K4 = f.local(I32), Kp = f.local(I32), qs = f.local(I32);
  const m = f.local(V128), sv = f.local(V128), t = f.local(V128);
  const ms = f.local(F32), sx = f.local(F32);
  f.get(K).i32(-4).op(OP.i32and).set(K4);
  f.get(K).i32(-16).op(OP.i32and).set(K16);
  if (scaled) f.get(K).set(Kp);
  else f.get(K).i32(15).op(OP.i32add).i32(-16).op(OP.i32and).set(Kp);
  // max |x|: exact, so any order gives the decomposition's amax
  f.f32x4(0).set(m);
  f.i32(0).set(k);
  f.forLt(k, K4, 4, () => {
    f.get(m).get(x).get(k).i32(2).op(OP.i32shl).op(OP.i32add).v128load().simd(SIMD.f32x4abs).simd(SIMD.f32x4max).set(m);
  });
  f.get(m).lane(0).get(m).lane(1).op(OP.f32max).get(m).lane(2).op(OP.f32max).get(m).lane(3).op(OP.f32max).set(ms);
  f.forLt(k, K, 1, () => {
    f.get(ms).get(x).get(k).i32(2).op(OP.i32shl).op(OP.i32add).mem(OP.f32load, 2).op(F32_ABS).op(OP.f32max).set(ms);
  });
  f.get(ms).f32(127).op(OP.f32div).f32(MIN_ACT_SCALE).op(OP.f32max).set(sx);
  if (!scaled) f.get(sxp).get(sx).mem(OP.f32store, 2);
  f.get(sx).simd(SIMD.f32x4splat).set(sv);
  // 8 values: round(x / sx) as i32 (saturating), narrowed to i16 (saturating), clamped to +-127
  const q8 = (off: number) => {
    for (const o of [off, off + 16]) {
      f.get(x).get(k).i32(2).op(OP.i32shl).op(OP.i32add).v128load(o).get(sv).simd(SIMD.f32x4div);
      f.simd(SIMD.f32x4nearest).simd(SIMD.i32x4truncSatF32x4S);
    }
    f.simd(I16_NARROW).i32x4(0x007f007f).simd(I16_MIN_S).i32x4(0xff81ff81 | 0).simd(I16_MAX_S);
  };
  // the paired layout's X, Y per 16-block and the prefix sums E of the even q
  const xy = f.local(I32), e = f.local(I32), es = f.local(I32), ta = f.local(V128), tb = f.local(V128), tx = f.local(V128);
  if (!scaled) {
    f.get(dst).get(Kp).i32(1).op(OP.i32shl).op(OP.i32add).tee(xy).get(K16).i32(1).op(OP.i32shl).op(OP.i32add).set(e);
    f.i32(0).set(es);
  }
  f.i32(0).set(k);
  f.forLt(k, K16, 16, () => {
    if (!scaled) {
      const at = (base: number) => f.get(base).get(k).i32(1).op(OP.i32shl).op(OP.i32add);
      at(dst);
      q8(0);
      f.tee(ta).v128store(0);
      at(dst);
      q8(32);
      f.tee(tb).v128store(16);
      // even / odd int16 lanes of the 16 values
      f.get(ta).get(tb).simd(SHUFFLE).op(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29).set(tx);
      at(xy).get(tx).v128store(0);
      at(xy).get(ta).get(tb).simd(SHUFFLE).op(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
      f.get(tx).i32(8).simd(I16_SHL).simd(I16_SUB).v128store(16);
      f.get(e).get(k).i32(2).op(I32_SHR_U).op(OP.i32add).get(es).mem(I32_STORE, 2);
      f.get(tx).simd(I32_EXTADD_I16).set(tx);
      f.get(es).get(tx).op(0xfd, I32_LANE, 0).op(OP.i32add).get(tx).op(0xfd, I32_LANE, 1).op(OP.i32add);
      f.get(tx).op(0xfd, I32_LANE, 2).op(OP.i32add).get(tx).op(0xfd, I32_LANE, 3).op(OP.i32add).set(es);
      return;
    }
    for (const off of [0, 32]) {
      q8(off);
      f.set(t);
      for (const [ext, o] of [[I32_EXT_LO_S, 0], [I32_EXT_HI_S, 16]] as const) {
        f.get(dst).get(k).i32(2).op(OP.i32shl).op(OP.i32add);
        f.get(t).simd(ext).simd(SIMD.f32x4convertI32x4S).get(sv).simd(SIMD.f32x4mul).v128store(off + o);
      }
    }
  });
  if (!scaled) f.get(e).get(K16).i32(2).op(I32_SHR_U).op(OP.i32add).get(es).mem(I32_STORE, 2);
  f.forLt(k, Kp, 1, () => {
    // the tail, then (int16) zeros up to Kp
    f.i32(0).set(qs);
    f.get(k).get(K).op(OP.i32ltu).op(OP.if, 0x40);
    f.get(x).get(k).i32(2).op(OP.i32shl).op(OP.i32add).mem(OP.f32load, 2).get(sx).op(OP.f32div).op(F32_NEAREST);
    f.f32(127).op(F32_MIN).f32(-127).op(OP.f32max).op(0xfc, 0x00 /* i32.trunc_sat_f32_s */).set(qs);
    f.op(OP.end);
    if (!scaled) f.get(dst).get(k).i32(1).op(OP.i32shl).op(OP.i32add).get(qs).mem(I32_STORE16, 1);
    else f.get(dst).get(k).i32(2).op(OP.i32shl).op(OP.i32add).get(qs).op(F32_CONVERT_I32_S).get(sx).op(OP.f32mul).mem(OP.f32store, 2);
  });
}

/**
 * q8dot / q8dotp / q8dotp4(lo, hi, xa, sxp, q, s, out, K, gs, bias). q8dotp4 (one group per row,
 * K % 16 == 0) runs rows four at a time, one after the other, and finishes the four sums
 * together (lanes transposed, converted, scaled and stored as vectors: the same float32 steps).
 */
function q8dot(paired: boolean, batch4 = false): Fn {
  const f = new Fn(batch4 ? "q8dotp4" : paired ? "q8dotp" : "q8dot", [I32, I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, xa, sxp, q, s, out, K, gs, bias] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const n = f.local(I32), kb = f.local(I32), gEnd = f.local(I32), gV = f.local(I32), gU = f.local(I32);
  const qp = f.local(I32), sp = f.local(I32), gBytes = f.local(I32), o = f.local(I32), g0 = f.local(I32);
  const xy = f.local(I32), e = f.local(I32);
  const tot = f.local(F32);
  const acc = Array.from({ length: U }, () => f.local(V128));
  const w = f.local(V128);
  f.get(K).get(gs).op(I32_DIV_U).i32(2).op(OP.i32shl).set(gBytes);
  if (paired) {
    f.get(K).i32(15).op(OP.i32add).i32(-16).op(OP.i32and).i32(1).op(OP.i32shl).get(xa).op(OP.i32add).tee(xy);
    f.get(K).i32(-16).op(OP.i32and).i32(1).op(OP.i32shl).op(OP.i32add).set(e);
  }
  const xk = () => f.get(xa).get(kb).i32(1).op(OP.i32shl).op(OP.i32add);
  /** acc[u] += the 16 products at kb + 16u */
  const block = (u: number) => {
    const a = acc[u]!;
    f.get(qp).get(kb).op(OP.i32add).v128load(16 * u);
    if (paired) {
      f.i32x4(0x00800080).simd(SIMD.v128xor).set(w);
      const xyk = () => f.get(xy).get(kb).i32(1).op(OP.i32shl).op(OP.i32add);
      f.get(a).get(w);
      xyk().v128load(32 * u).simd(I32_DOT16).simd(SIMD.i32x4add);
      f.get(w).i32(8).simd(I16_SHR_S);
      xyk().v128load(32 * u + 16).simd(I32_DOT16).simd(SIMD.i32x4add).set(a);
      return;
    }
    f.set(w);
    f.get(a).get(w).simd(I16_EXT_LO);
    xk().v128load(32 * u).simd(I32_DOT16).simd(SIMD.i32x4add);
    f.get(w).simd(I16_EXT_HI);
    xk().v128load(32 * u + 16).simd(I32_DOT16).simd(SIMD.i32x4add).set(a);
  };
  f.get(lo).set(n);
  if (batch4) rows4(f, { n, hi, q, s, out, K, bias, sxp, e, kb, qp, acc, block });
  f.forLt(n, hi, 1, () => {
    f.get(q).get(n).get(K).op(OP.i32mul).op(OP.i32add).set(qp);
    f.get(s).get(n).get(gBytes).op(OP.i32mul).op(OP.i32add).set(sp);
    f.f32(0).set(tot);
    f.i32(0).set(kb);
    f.loop(() => {
      f.get(kb).tee(g0).get(gs).op(OP.i32add).set(gEnd);
      f.get(kb).get(gs).i32(-16).op(OP.i32and).op(OP.i32add).set(gV);
      f.get(kb).get(gs).i32(-16 * U).op(OP.i32and).op(OP.i32add).set(gU);
      for (const a of acc) f.i32x4(0).set(a);
      f.forLt(kb, gU, 16 * U, () => {
        for (let u = 0; u < U; u++) block(u);
      });
      f.forLt(kb, gV, 16, () => block(0));
      for (let u = 1; u < U; u++) f.get(acc[0]!).get(acc[u]!).simd(SIMD.i32x4add).set(acc[0]!);
      // the group's integer sum: lanes, then the tail
      const a0 = acc[0]!;
      f.get(a0).op(0xfd, I32_LANE, 0).get(a0).op(0xfd, I32_LANE, 1).op(OP.i32add);
      f.get(a0).op(0xfd, I32_LANE, 2).op(OP.i32add).get(a0).op(0xfd, I32_LANE, 3).op(OP.i32add);
      if (paired) {
        // - 128 * (sum of the even q over [g0, gV)): E[gV / 16] - E[g0 / 16]
        f.get(e).get(gV).i32(2).op(I32_SHR_U).op(OP.i32add).mem(OP.i32load, 2);
        f.get(e).get(g0).i32(2).op(I32_SHR_U).op(OP.i32add).mem(OP.i32load, 2).op(OP.i32sub);
        f.i32(7).op(OP.i32shl).op(OP.i32sub);
      }
      f.set(o);
      f.forLt(kb, gEnd, 1, () => {
        f.get(o);
        xk().mem(I32_LOAD16_S, 1);
        f.get(qp).get(kb).op(OP.i32add).mem(I32_LOAD8_S, 0).op(OP.i32mul).op(OP.i32add).set(o);
      });
      f.get(tot).get(o).op(F32_CONVERT_I32_S).get(sp).mem(OP.f32load, 2).op(OP.f32mul).op(OP.f32add).set(tot);
      f.get(sp).i32(4).op(OP.i32add).set(sp);
      f.get(kb).get(K).op(OP.i32ltu).op(OP.brIf, 0);
    });
    f.get(out).get(n).i32(2).op(OP.i32shl).op(OP.i32add);
    f.get(tot).get(sxp).mem(OP.f32load, 2).op(OP.f32mul);
    // bias[n], or 0 (the load at address 4n when bias = 0 is harmless: the control block)
    f.get(bias).get(n).i32(2).op(OP.i32shl).op(OP.i32add).mem(OP.f32load, 2).f32(0).get(bias).op(OP.select);
    f.op(OP.f32add).mem(OP.f32store, 2);
  });
  return f;
}

/**
 * q8dotp4's loop over rows [n, n + ((hi - n) & ~3)), leaving n after them. One copy of the row
 * loop for all rows, the last four sums kept in a shift register: with the loop emitted once per
 * row of four, each copy's loads saw a stream that skips three rows, and streaming from memory
 * ran ~20% slower (faster in cache), presumably the cpu's per-instruction stride prefetchers.
 */
function rows4(
  f: Fn,
  v: { n: number; hi: number; q: number; s: number; out: number; K: number; bias: number; sxp: number; e: number; kb: number; qp: number; acc: number[]; block: (u: number) => void },
): void {
  const { n, hi, q, s, out, K, bias, sxp, e, kb, qp, acc, block } = v;
  const n0 = f.local(I32), hi4 = f.local(I32), KU = f.local(I32), o = f.local(I32);
  const sr = Array.from({ length: 4 }, () => f.local(V128)); // sr[j]: the sum of row n - j
  const p01 = f.local(V128);
  f.get(n).set(n0);
  f.get(hi).get(n).op(OP.i32sub).i32(-4).op(OP.i32and).get(n).op(OP.i32add).set(hi4);
  f.get(K).i32(-16 * U).op(OP.i32and).set(KU);
  /** [a0 + a2, b0 + b2, a1 + a3, b1 + b3] of the rows' i32x4 sums a, b */
  const pairSum = (a: number, b: number) => {
    f.get(a).get(b).simd(SHUFFLE).op(...lanes(0, 4, 1, 5));
    f.get(a).get(b).simd(SHUFFLE).op(...lanes(2, 6, 3, 7)).simd(SIMD.i32x4add);
  };
  f.forLt(n, hi4, 1, () => {
    f.get(q).get(n).get(K).op(OP.i32mul).op(OP.i32add).set(qp);
    for (const a of acc) f.i32x4(0).set(a);
    f.i32(0).set(kb);
    f.forLt(kb, KU, 16 * U, () => {
      for (let u = 0; u < U; u++) block(u);
    });
    f.forLt(kb, K, 16, () => block(0));
    for (let j = 3; j > 0; j--) f.get(sr[j - 1]!).set(sr[j]!);
    f.get(acc[0]!);
    for (let u = 1; u < U; u++) f.get(acc[u]!).simd(SIMD.i32x4add);
    f.set(sr[0]!);
    f.get(n).get(n0).op(OP.i32sub).i32(3).op(OP.i32and).i32(3).op(0x46 /* i32.eq */).op(OP.if, 0x40);
    {
      // rows n - 3 .. n: [row sums] - 128 * (E[K / 16] - E[0]) (one group: one correction)
      pairSum(sr[3]!, sr[2]!);
      f.set(p01);
      pairSum(sr[1]!, sr[0]!);
      f.set(sr[1]!);
      f.get(p01).get(sr[1]!).simd(SHUFFLE).op(...lanes(0, 1, 4, 5));
      f.get(p01).get(sr[1]!).simd(SHUFFLE).op(...lanes(2, 3, 6, 7)).simd(SIMD.i32x4add);
      f.get(e).get(K).i32(2).op(I32_SHR_U).op(OP.i32add).mem(OP.i32load, 2).get(e).mem(OP.i32load, 2).op(OP.i32sub);
      f.i32(7).op(OP.i32shl).simd(SIMD.i32x4splat).simd(I32_SUB).simd(SIMD.f32x4convertI32x4S);
      // ((0 + f32(sum) * s) * sx) + (bias or 0), as the one-row loop
      f.get(n).i32(3).op(OP.i32sub).i32(2).op(OP.i32shl).set(o);
      f.get(s).get(o).op(OP.i32add).v128load().simd(SIMD.f32x4mul).f32x4(0).simd(SIMD.f32x4add);
      f.get(sxp).f32splatLoad().simd(SIMD.f32x4mul);
      f.get(bias).get(o).op(OP.i32add).v128load().f32x4(0).get(bias).op(OP.select);
      f.simd(SIMD.f32x4add).set(p01);
      f.get(out).get(o).op(OP.i32add).get(p01).v128store();
    }
    f.op(OP.end);
  });
}

/** i8x16.shuffle byte indices of four i32 lanes (0-3 from the first operand, 4-7 the second). */
function lanes(...l: number[]): number[] {
  return l.flatMap((i) => [4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3]);
}

export function qdotFns(): Fn[] {
  return [q8act(), q8rows(), q8dot(false), q8dot(true), q8dot(true, true)];
}
