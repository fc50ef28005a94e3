// Fused scaled-dot-product attention (flash-style online softmax) over float32 rows in the shared
// memory. One work unit is a tile of QB query rows of one (batch, kv head); with grouped-query
// attention the rows of all query heads sharing that kv head form one tile, so a decode step
// (L = 1) still reads each key once per tile. Keys are visited in blocks of BC: scores for a
// block go to a per-call scratch row, the running max/sum are updated and the output
// accumulator is rescaled, so nothing of size L x S is ever materialized. Causal tiles stop at
// their last visible key. The same loop can instead write the probabilities (the backward pass
// needs them; that skips the P V products). Parameters travel in a block in memory (the pool
// passes 8 args).
import { F32, Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { VMath } from "./vmath.js";

/** Byte offsets of the i32/f32 fields of the parameter block (ATTN_PARAM_BYTES in all). */
export const AP = {
  q: 0, k: 4, v: 8, mask: 12, out: 16, Hk: 20, nrep: 24, L: 28, S: 32, E: 36, Ev: 40,
  qsb: 44, qsh: 48, qsl: 52, ksb: 56, ksh: 60, kss: 64, vsb: 68, vsh: 72, vss: 76, msb: 80, msh: 84, msl: 88,
  causal: 92, scale: 96, slot: 100, scratch: 104, slotBytes: 108, T: 112, QB: 116, BC: 120, slots: 124,
  probs: 128, outRow: 132,
  // a second key/value segment (a KV cache's tail): keys [split, S) come from k2/v2
  split: 136, k2: 140, v2: 144, ksb2: 148, ksh2: 152, kss2: 156, vsb2: 160, vsh2: 164, vss2: 168,
  // attn_paged: per-sequence [qStart, qLen, cached] (i32 x 3), the block table (i32 rows of tsb bytes),
  // keys per cache block and the byte stride of one cache block (k and v caches share the layout)
  info: 172, table: 176, tsb: 180, bsz: 184, bstride: 188,
} as const;
export const ATTN_PARAM_BYTES = 192;

/** Scratch bytes one call needs: row pointers/ends, max/sum, a QB x BC score block, a QB x Ev accumulator. */
export function attnSlotBytes(QB: number, BC: number, Ev: number): number {
  return Math.ceil((QB * 24 + QB * BC * 4 + QB * Ev * 4) / 64) * 64;
}

const QK_UNROLL = 1; // head-dim vectors per step of the score loop (unrolling measured slower under V8)
const I32X4_LT_S = 0x39;
const SHUFFLE = 0x0d;
const ATOMIC_RMW_ADD = 0x1e;
const I32_DIV_U = 0x6e;
const I32_REM_U = 0x70;
const I32_STORE = 0x36;
const F32_EQ = 0x5b;
const F32_NE = 0x5c;

function lanes(idx: number[]): number[] {
  return idx.flatMap((l) => [4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3]);
}

/**
 * attn_fwd(lo, hi, prm): tiles [lo, hi) (unit = (b * Hk + hk) * T + tile). With `probs` set it
 * writes the probabilities softmax(q k^T * scale + mask) instead (rows of outRow bytes, a
 * multiple of 16; the backward pass uses them). Q/K/V rows must be
 * contiguous with E, Ev multiples of 4; the mask (optional, additive float32) needs its key
 * stride 1 and may be over-read by 3 floats past a row (arena blocks keep that slack).
 */
export function attentionFns(fma: boolean): Fn[] {
  return [attentionFn(fma, false), attentionFn(fma, true), copyRows()];
}

/**
 * attn_fwd, or with `paged` attn_paged(lo, hi, prm): varlen causal attention over a paged KV cache.
 * Batch row b is one sequence with qLen new query tokens packed at rows [qStart, qStart + qLen) of
 * q [T, Hq, E] (output [T, Hq, Ev] alike) that sees its `cached` keys in the cache, found through its
 * block table (cache block = [bsz keys, Hk, E] rows), then its own new keys k2/v2 [T, Hk, E] causally.
 * Key blocks never straddle a cache block or the cached/new boundary. No mask, no probs.
 */
function attentionFn(fma: boolean, paged: boolean): Fn {
  const f = new Fn(paged ? "attn_paged" : "attn_fwd", [I32, I32, I32]);
  const [lo, hi, prm] = [0, 1, 2];
  const vm = new VMath(f, fma);
  const L32 = () => f.local(I32);
  // parameters
  const q = L32(), k = L32(), v = L32(), mask = L32(), out = L32(), Hk = L32(), nrep = L32(), L = L32(), S = L32();
  const E4 = L32(), Ev4 = L32(), qsb = L32(), qsh = L32(), qsl = L32(), ksb = L32(), ksh = L32(), kss = L32();
  const vsb = L32(), vsh = L32(), vss = L32(), msb = L32(), msh = L32(), msl = L32(), causal = L32(), T = L32();
  const QB = L32(), BC = L32(), probs = L32(), outRow = L32(), pp = L32();
  const scaleV = f.local(V128), negInf = f.local(V128), iota = f.local(V128);
  // per call / per tile state
  const base = L32(), rq = L32(), ro = L32(), rm = L32(), re = L32(), mArr = L32(), lArr = L32(), sb = L32(), oa = L32();
  const sbRow = L32(), R = L32(), Hq = L32();
  const u = L32(), bh = L32(), b = L32(), hk = L32(), r0 = L32(), nr = L32(), nr2 = L32(), kbase = L32(), vbase = L32();
  const kend = L32(), i = L32(), ri = L32(), g = L32(), l = L32(), h = L32(), t = L32(), end = L32();
  const j0 = L32(), bc = L32(), c = L32(), e = L32(), p = L32(), p2 = L32(), q0 = L32(), q1 = L32();
  const kp = [L32(), L32(), L32(), L32()];
  const ke = [L32(), L32(), L32(), L32()], qe0 = L32(), qe1 = L32(), E16 = L32(), kq = L32(), klast = L32();
  const vc = L32(), ev16 = L32(), vp = L32(), o0 = L32(), o1 = L32(), bcBytes = L32();
  // the second segment, and the block's own segment: base pointers (key 0 of the segment's
  // numbering shifted to key `split`) and row strides
  const split = L32(), k2 = L32(), v2 = L32(), ksb2 = L32(), ksh2 = L32(), kss2 = L32(), vsb2 = L32(), vsh2 = L32(), vss2 = L32();
  const kbase2 = L32(), vbase2 = L32(), kb = L32(), vb = L32(), ksB = L32(), vsB = L32();
  const info = L32(), table = L32(), tsb = L32(), bsz = L32(), bstride = L32(), qStart = L32(), qbase = L32(), jb = L32();
  const acc = Array.from({ length: 8 }, () => f.local(V128));
  const x = f.local(V128), y = f.local(V128), z = f.local(V128), pa = f.local(V128), pb = f.local(V128);
  const mx = f.local(V128), sum = f.local(V128), mUseV = f.local(V128), alphaV = f.local(V128);
  const mOld = f.local(F32), mNew = f.local(F32), mUse = f.local(F32), alpha = f.local(F32);

  const ld = (off: number, dst: number) => f.get(prm).mem(OP.i32load, 2, off).set(dst);
  const fmaInto = (a: number, bb: number, dst: number) => {
    if (fma) f.get(a).get(bb).get(dst).simd(SIMD.relaxedMadd).set(dst);
    else f.get(dst).get(a).get(bb).simd(SIMD.f32x4mul).simd(SIMD.f32x4add).set(dst);
  };
  /** select(a, b, a < b); evaluates both operands twice (they are cheap local arithmetic). */
  const min = (a: () => void, bb: () => void) => {
    a(); bb(); a(); bb(); f.op(OP.i32lts).op(OP.select);
  };
  const shuffle = (a: number, bb: number, idx: number[]) => f.get(a).get(bb).op(0xfd, SHUFFLE, ...lanes(idx));
  /** [sum a, sum b, sum c, sum d] of four accumulators, left on the stack. */
  const reduce4 = (a: number, bb: number, cc: number, d: number) => {
    shuffle(a, bb, [0, 1, 4, 5]);
    shuffle(a, bb, [2, 3, 6, 7]).simd(SIMD.f32x4add).set(x);
    shuffle(cc, d, [0, 1, 4, 5]);
    shuffle(cc, d, [2, 3, 6, 7]).simd(SIMD.f32x4add).set(y);
    shuffle(x, y, [0, 2, 4, 6]);
    shuffle(x, y, [1, 3, 5, 7]).simd(SIMD.f32x4add);
  };

  /** Scores * scale of key quads for rows i (and i + 1 when `two`) of the tile. */
  const scoreRows = (two: boolean) => {
    f.i32(0).set(c);
    f.forLt(c, bc, 4, () => {
      // keys j0+c .. j0+c+3; past the last visible key, re-read that key (its score is hidden later)
      f.get(kq).set(kp[0]!);
      for (let xk = 1; xk < 4; xk++) {
        f.get(kp[xk - 1]!).get(ksB).op(OP.i32add).tee(kp[xk]!).get(klast);
        f.get(kp[xk]!).get(klast).op(OP.i32ltu).op(OP.select).set(kp[xk]!);
      }
      f.get(kq).get(ksB).i32(2).op(OP.i32shl).op(OP.i32add).set(kq);
      for (const a of two ? acc : acc.slice(0, 4)) f.f32x4(0).set(a);
      const dots = (nv: number) => {
        f.get(q0).get(e).op(OP.i32add).set(qe0);
        if (two) f.get(q1).get(e).op(OP.i32add).set(qe1);
        for (let xk = 0; xk < 4; xk++) f.get(kp[xk]!).get(e).op(OP.i32add).set(ke[xk]!);
        for (let u = 0; u < nv; u++) {
          f.get(qe0).v128load(16 * u).set(pa);
          if (two) f.get(qe1).v128load(16 * u).set(pb);
          for (let xk = 0; xk < 4; xk++) {
            f.get(ke[xk]!).v128load(16 * u).set(z);
            fmaInto(pa, z, acc[xk]!);
            if (two) fmaInto(pb, z, acc[4 + xk]!);
          }
        }
      };
      f.i32(0).set(e);
      f.forLt(e, E16, 16 * QK_UNROLL, () => dots(QK_UNROLL));
      f.forLt(e, E4, 16, () => dots(1));
      f.get(p2).get(c).i32(2).op(OP.i32shl).op(OP.i32add).tee(p);
      reduce4(acc[0]!, acc[1]!, acc[2]!, acc[3]!);
      f.get(scaleV).simd(SIMD.f32x4mul).v128store();
      if (!two) return;
      f.get(p).get(sbRow).op(OP.i32add);
      reduce4(acc[4]!, acc[5]!, acc[6]!, acc[7]!);
      f.get(scaleV).simd(SIMD.f32x4mul).v128store();
    });
  };

  for (const [off, dst] of [
    [AP.q, q], [AP.k, k], [AP.v, v], [AP.mask, mask], [AP.out, out], [AP.Hk, Hk], [AP.nrep, nrep], [AP.L, L], [AP.S, S],
    [AP.E, E4], [AP.Ev, Ev4], [AP.qsb, qsb], [AP.qsh, qsh], [AP.qsl, qsl], [AP.ksb, ksb], [AP.ksh, ksh], [AP.kss, kss],
    [AP.vsb, vsb], [AP.vsh, vsh], [AP.vss, vss], [AP.msb, msb], [AP.msh, msh], [AP.msl, msl], [AP.causal, causal],
    [AP.T, T], [AP.QB, QB], [AP.BC, BC], [AP.probs, probs], [AP.outRow, outRow],
    [AP.split, split], [AP.k2, k2], [AP.v2, v2], [AP.ksb2, ksb2], [AP.ksh2, ksh2], [AP.kss2, kss2],
    [AP.vsb2, vsb2], [AP.vsh2, vsh2], [AP.vss2, vss2],
    [AP.info, info], [AP.table, table], [AP.tsb, tsb], [AP.bsz, bsz], [AP.bstride, bstride],
  ] as const) ld(off, dst);
  f.get(E4).i32(2).op(OP.i32shl).set(E4); // bytes from here on
  f.get(Ev4).i32(2).op(OP.i32shl).set(Ev4);
  f.get(prm).mem(OP.f32load, 2, AP.scale).simd(SIMD.f32x4splat).set(scaleV);
  f.f32x4(-Infinity).set(negInf);
  f.op(0xfd, 0x0c, ...new Uint8Array(new Int32Array([0, 1, 2, 3]).buffer)).set(iota);
  // this call's scratch slot: calls of one job never share one
  f.get(prm).i32(1).op(0xfe, ATOMIC_RMW_ADD, 2, AP.slot).tee(base);
  // more calls than slots would share scratch: trap instead (the caller sizes slots by the pool)
  f.get(prm).mem(OP.i32load, 2, AP.slots).op(OP.i32geu).op(OP.if, 0x40).op(0x00 /* unreachable */).op(OP.end);
  f.get(base).get(prm).mem(OP.i32load, 2, AP.slotBytes).op(OP.i32mul);
  f.get(prm).mem(OP.i32load, 2, AP.scratch).op(OP.i32add).set(base);
  f.get(base).set(rq);
  f.get(QB).i32(4).op(OP.i32mul).set(t);
  f.get(rq).get(t).op(OP.i32add).set(ro);
  f.get(ro).get(t).op(OP.i32add).set(rm);
  f.get(rm).get(t).op(OP.i32add).set(re);
  f.get(re).get(t).op(OP.i32add).set(mArr);
  f.get(mArr).get(t).op(OP.i32add).set(lArr);
  f.get(lArr).get(t).op(OP.i32add).set(sb);
  f.get(BC).i32(4).op(OP.i32mul).set(sbRow);
  f.get(sb).get(QB).get(sbRow).op(OP.i32mul).op(OP.i32add).set(oa);
  f.get(nrep).get(L).op(OP.i32mul).set(R);
  f.get(Hk).get(nrep).op(OP.i32mul).set(Hq);
  f.get(Ev4).i32(-64).op(OP.i32and).set(ev16);
  f.get(E4).i32(-16 * QK_UNROLL).op(OP.i32and).set(E16);

  f.get(lo).set(u);
  f.forLt(u, hi, 1, () => {
    f.get(u).get(T).op(I32_DIV_U).set(bh);
    f.get(u).get(bh).get(T).op(OP.i32mul).op(OP.i32sub).get(QB).op(OP.i32mul).set(r0);
    f.get(bh).get(Hk).op(I32_DIV_U).set(b);
    f.get(bh).get(b).get(Hk).op(OP.i32mul).op(OP.i32sub).set(hk);
    if (paged) {
      // this sequence's rows and keys: L new tokens at qStart, S = cached + L keys, the new ones from `split` on
      f.get(info).get(b).i32(12).op(OP.i32mul).op(OP.i32add).set(p);
      f.get(p).mem(OP.i32load, 2).set(qStart);
      f.get(p).mem(OP.i32load, 2, 4).set(L);
      f.get(p).mem(OP.i32load, 2, 8).set(split);
      f.get(split).get(L).op(OP.i32add).set(S);
      f.get(nrep).get(L).op(OP.i32mul).set(R);
      f.get(q).get(qStart).get(qsl).op(OP.i32mul).op(OP.i32add).set(qbase);
    } else f.get(q).get(b).get(qsb).op(OP.i32mul).op(OP.i32add).set(qbase);
    min(() => f.get(QB), () => f.get(R).get(r0).op(OP.i32sub));
    f.set(nr);
    // paged: a tile past a short sequence's rows has none (the loops compare unsigned)
    if (paged) f.get(nr).i32(0).get(nr).i32(0).op(0x4a /* i32.gt_s */).op(OP.select).set(nr);
    f.get(nr).i32(1).op(OP.i32add).i32(-2).op(OP.i32and).set(nr2);
    f.get(k).get(b).get(ksb).op(OP.i32mul).op(OP.i32add).get(hk).get(ksh).op(OP.i32mul).op(OP.i32add).set(kbase);
    f.get(v).get(b).get(vsb).op(OP.i32mul).op(OP.i32add).get(hk).get(vsh).op(OP.i32mul).op(OP.i32add).set(vbase);
    // wraps below zero when split is large: i32 arithmetic is modular, key j >= split lands right
    f.get(k2).get(paged ? qStart : b).get(ksb2).op(OP.i32mul).op(OP.i32add).get(hk).get(ksh2).op(OP.i32mul).op(OP.i32add).get(split).get(kss2).op(OP.i32mul).op(OP.i32sub).set(kbase2);
    f.get(v2).get(paged ? qStart : b).get(vsb2).op(OP.i32mul).op(OP.i32add).get(hk).get(vsh2).op(OP.i32mul).op(OP.i32add).get(split).get(vss2).op(OP.i32mul).op(OP.i32sub).set(vbase2);
    f.i32(0).set(kend);
    // rows of the tile: pointers, visible key counts, fresh running state
    f.i32(0).set(i);
    f.forLt(i, nr2, 1, () => {
      min(() => f.get(r0).get(i).op(OP.i32add), () => f.get(R).i32(1).op(OP.i32sub));
      f.set(ri);
      f.get(ri).get(L).op(I32_DIV_U).set(g);
      f.get(ri).get(g).get(L).op(OP.i32mul).op(OP.i32sub).set(l);
      f.get(hk).get(nrep).op(OP.i32mul).get(g).op(OP.i32add).set(h);
      f.get(i).i32(2).op(OP.i32shl).set(t); // byte index of row i's i32/f32 fields
      f.get(rq).get(t).op(OP.i32add);
      f.get(qbase).get(h).get(qsh).op(OP.i32mul).op(OP.i32add).get(l).get(qsl).op(OP.i32mul).op(OP.i32add);
      f.mem(I32_STORE, 2);
      f.get(ro).get(t).op(OP.i32add);
      // output rows: [B, Hq, L, W], or packed tokens [T, Hq, Ev] (paged)
      if (paged) f.get(out).get(qStart).get(l).op(OP.i32add).get(Hq).op(OP.i32mul).get(h).op(OP.i32add).get(outRow).op(OP.i32mul).op(OP.i32add);
      else f.get(out).get(b).get(Hq).op(OP.i32mul).get(h).op(OP.i32add).get(L).op(OP.i32mul).get(l).op(OP.i32add).get(outRow).op(OP.i32mul).op(OP.i32add);
      f.mem(I32_STORE, 2);
      f.get(rm).get(t).op(OP.i32add);
      f.get(mask).get(b).get(msb).op(OP.i32mul).op(OP.i32add).get(h).get(msh).op(OP.i32mul).op(OP.i32add).get(l).get(msl).op(OP.i32mul).op(OP.i32add);
      f.mem(I32_STORE, 2);
      // causal (bottom-right aligned): row l sees keys j <= l + S - L
      f.get(l).get(S).op(OP.i32add).get(L).op(OP.i32sub).i32(1).op(OP.i32add).set(end);
      f.i32(0).get(end).get(end).i32(0).op(OP.i32lts).op(OP.select).set(end);
      f.get(end).get(S).get(end).get(S).op(OP.i32lts).op(OP.select).set(end);
      f.get(end).get(S).get(causal).op(OP.select).set(end);
      f.get(re).get(t).op(OP.i32add).get(end).mem(I32_STORE, 2);
      f.get(end).get(kend).get(end).get(kend).op(0x4a /* i32.gt_s */).op(OP.select).set(kend);
      f.get(mArr).get(t).op(OP.i32add).f32(-Infinity).mem(OP.f32store, 2);
      f.get(lArr).get(t).op(OP.i32add).f32(0).mem(OP.f32store, 2);
      f.get(oa).get(i).get(Ev4).op(OP.i32mul).op(OP.i32add).tee(p).get(Ev4).op(OP.i32add).set(end);
      f.forLt(p, end, 16, () => f.get(p).f32x4(0).v128store());
    });
    f.i32(0).set(j0);
    f.forLt(j0, kend, 0, () => {
      min(() => f.get(BC), () => f.get(kend).get(j0).op(OP.i32sub));
      f.set(bc);
      // the block's segment (blocks never straddle `split`: the caller makes BC divide it)
      f.get(j0).get(split).op(OP.i32ltu).op(OP.if, 0x40);
      if (paged) {
        // cached keys: up to the end of this cache block and of the cached keys; the block's rows via the table
        f.get(j0).get(bsz).op(I32_REM_U).set(jb);
        min(() => f.get(bc), () => f.get(bsz).get(jb).op(OP.i32sub));
        f.set(bc);
        min(() => f.get(bc), () => f.get(split).get(j0).op(OP.i32sub));
        f.set(bc);
        f.get(table).get(b).get(tsb).op(OP.i32mul).op(OP.i32add).get(j0).get(bsz).op(I32_DIV_U).i32(2).op(OP.i32shl).op(OP.i32add);
        f.mem(OP.i32load, 2).get(bstride).op(OP.i32mul).get(hk).get(ksh).op(OP.i32mul).op(OP.i32add);
        f.get(j0).get(jb).op(OP.i32sub).get(kss).op(OP.i32mul).op(OP.i32sub).set(t); // key j0 - jb of the block's numbering
        f.get(k).get(t).op(OP.i32add).set(kb); f.get(v).get(t).op(OP.i32add).set(vb); f.get(kss).set(ksB); f.get(vss).set(vsB);
      } else {
        f.get(kbase).set(kb); f.get(vbase).set(vb); f.get(kss).set(ksB); f.get(vss).set(vsB);
      }
      f.op(OP.else);
      f.get(kbase2).set(kb); f.get(vbase2).set(vb); f.get(kss2).set(ksB); f.get(vss2).set(vsB);
      f.op(OP.end);
      // the block's last key: past it the score loop re-reads it (their scores are hidden later)
      f.get(kb).get(j0).get(bc).op(OP.i32add).i32(1).op(OP.i32sub).get(ksB).op(OP.i32mul).op(OP.i32add).set(klast);
      f.get(bc).i32(2).op(OP.i32shl).set(bcBytes);
      // phase 1: raw scores * scale for row pairs x key quads
      f.i32(0).set(i);
      f.forLt(i, nr2, 2, () => {
        f.get(rq).get(i).i32(2).op(OP.i32shl).op(OP.i32add).tee(p).mem(OP.i32load, 2).set(q0);
        f.get(p).mem(OP.i32load, 2, 4).set(q1);
        f.get(sb).get(i).get(sbRow).op(OP.i32mul).op(OP.i32add).set(p2);
        f.get(kb).get(j0).get(ksB).op(OP.i32mul).op(OP.i32add).set(kq);
        // a lone last row (decode without grouped heads) gets a one-row body
        f.get(i).i32(1).op(OP.i32add).get(nr).op(OP.i32ltu).op(OP.if, 0x40);
        scoreRows(true);
        f.op(OP.else);
        scoreRows(false);
        f.op(OP.end);
      });
      // phase 2: mask, hide invisible keys, online softmax update, rescale the accumulator
      f.i32(0).set(i);
      f.forLt(i, nr, 1, () => {
        f.get(i).i32(2).op(OP.i32shl).set(t);
        f.get(sb).get(i).get(sbRow).op(OP.i32mul).op(OP.i32add).set(p);
        f.get(p).get(bcBytes).op(OP.i32add).set(end);
        f.get(rm).get(t).op(OP.i32add).mem(OP.i32load, 2).get(j0).i32(2).op(OP.i32shl).op(OP.i32add).set(p2);
        // visible keys of the row (paged blocks may end inside a quad: hide past the block too)
        if (paged) min(() => f.get(re).get(t).op(OP.i32add).mem(OP.i32load, 2), () => f.get(j0).get(bc).op(OP.i32add));
        else f.get(re).get(t).op(OP.i32add).mem(OP.i32load, 2);
        f.simd(SIMD.i32x4splat).set(y);
        f.get(j0).simd(SIMD.i32x4splat).get(iota).simd(SIMD.i32x4add).set(z);
        f.get(ro).get(t).op(OP.i32add).mem(OP.i32load, 2).get(j0).i32(2).op(OP.i32shl).op(OP.i32add).set(pp);
        f.get(negInf).set(mx);
        f.forLt(p, end, 16, () => {
          f.get(p).v128load().set(x);
          f.get(mask).op(OP.if, 0x40);
          f.get(x).get(p2).v128load().simd(SIMD.f32x4add).set(x);
          f.op(OP.end);
          f.get(x).get(negInf).get(z).get(y).simd(I32X4_LT_S).simd(SIMD.v128bitselect).set(x);
          f.get(p).get(x).v128store();
          f.get(probs).op(OP.if, 0x40);
          f.get(pp).get(x).v128store();
          f.get(pp).i32(16).op(OP.i32add).set(pp);
          f.op(OP.end);
          f.get(mx).get(x).simd(SIMD.f32x4max).set(mx);
          f.get(z).i32x4(4).simd(SIMD.i32x4add).set(z);
          f.get(p2).i32(16).op(OP.i32add).set(p2);
        });
        f.get(mx).lane(0).get(mx).lane(1).op(OP.f32max).get(mx).lane(2).op(OP.f32max).get(mx).lane(3).op(OP.f32max);
        f.get(mArr).get(t).op(OP.i32add).mem(OP.f32load, 2).tee(mOld).op(OP.f32max).set(mNew);
        f.get(mArr).get(t).op(OP.i32add).get(mNew).mem(OP.f32store, 2);
        // a row with nothing visible yet keeps p = 0 (exp(-inf - 0)) instead of exp(-inf + inf);
        // every exponent here is a score minus the running max, <= 0: expNonPos
        f.f32(0).get(mNew).get(mNew).f32(-Infinity).op(F32_EQ).op(OP.select).tee(mUse);
        f.simd(SIMD.f32x4splat).set(mUseV);
        f.get(mOld).get(mUse).op(OP.f32sub).simd(SIMD.f32x4splat).set(x);
        vm.expNonPos(x);
        f.tee(alphaV).lane(0).set(alpha);
        f.f32x4(0).set(sum);
        f.get(sb).get(i).get(sbRow).op(OP.i32mul).op(OP.i32add).set(p);
        f.forLt(p, end, 16, () => {
          f.get(p).v128load().get(mUseV).simd(SIMD.f32x4sub).set(x);
          f.get(p);
          vm.expNonPos(x);
          f.tee(x).v128store();
          f.get(sum).get(x).simd(SIMD.f32x4add).set(sum);
        });
        f.get(lArr).get(t).op(OP.i32add);
        f.get(lArr).get(t).op(OP.i32add).mem(OP.f32load, 2).get(alpha).op(OP.f32mul);
        f.get(sum).lane(0).get(sum).lane(1).op(OP.f32add).get(sum).lane(2).op(OP.f32add).get(sum).lane(3).op(OP.f32add);
        f.op(OP.f32add).mem(OP.f32store, 2);
        f.get(alpha).f32(1).op(F32_NE).op(OP.if, 0x40);
        f.get(oa).get(i).get(Ev4).op(OP.i32mul).op(OP.i32add).tee(p).get(Ev4).op(OP.i32add).set(end);
        f.forLt(p, end, 16, () => f.get(p).get(p).v128load().get(alphaV).simd(SIMD.f32x4mul).v128store());
        f.op(OP.end);
      });
      // phase 3: accumulator += P V for row pairs x (4 vectors, then 1) of the value width
      f.get(probs).op(OP.i32eqz).op(OP.if, 0x40);
      f.i32(0).set(i);
      f.forLt(i, nr2, 2, () => {
        f.get(sb).get(i).get(sbRow).op(OP.i32mul).op(OP.i32add).set(q0);
        f.get(q0).get(sbRow).op(OP.i32add).set(q1);
        f.get(oa).get(i).get(Ev4).op(OP.i32mul).op(OP.i32add).set(o0);
        f.get(o0).get(Ev4).op(OP.i32add).set(o1);
        f.get(q0).get(bcBytes).op(OP.i32add).set(end);
        const pv = (nv: number, two: boolean) => {
          for (let xv = 0; xv < nv; xv++) {
            f.get(o0).get(vc).op(OP.i32add).v128load(16 * xv).set(acc[xv]!);
            if (two) f.get(o1).get(vc).op(OP.i32add).v128load(16 * xv).set(acc[4 + xv]!);
          }
          f.get(vb).get(j0).get(vsB).op(OP.i32mul).op(OP.i32add).get(vc).op(OP.i32add).set(vp);
          f.get(q0).set(p);
          f.get(q1).set(p2);
          f.forLt(p, end, 4, () => {
            f.get(p).f32splatLoad().set(pa);
            if (two) f.get(p2).f32splatLoad().set(pb);
            for (let xv = 0; xv < nv; xv++) {
              f.get(vp).v128load(16 * xv).set(z);
              fmaInto(pa, z, acc[xv]!);
              if (two) fmaInto(pb, z, acc[4 + xv]!);
            }
            f.get(vp).get(vsB).op(OP.i32add).set(vp);
            if (two) f.get(p2).i32(4).op(OP.i32add).set(p2);
          });
          for (let xv = 0; xv < nv; xv++) {
            f.get(o0).get(vc).op(OP.i32add).get(acc[xv]!).v128store(16 * xv);
            if (two) f.get(o1).get(vc).op(OP.i32add).get(acc[4 + xv]!).v128store(16 * xv);
          }
        };
        f.i32(0).set(vc);
        f.get(i).i32(1).op(OP.i32add).get(nr).op(OP.i32ltu).op(OP.if, 0x40);
        f.forLt(vc, ev16, 64, () => pv(4, true));
        f.forLt(vc, Ev4, 16, () => pv(1, true));
        f.op(OP.else);
        f.forLt(vc, ev16, 64, () => pv(4, false));
        f.forLt(vc, Ev4, 16, () => pv(1, false));
        f.op(OP.end);
      });
      f.op(OP.end);
      f.get(j0).get(paged ? bc : BC).op(OP.i32add).set(j0);
    });
    // probabilities: exp(s - max) / sum over the kept scores, zeros past the tile's last key
    f.get(probs).op(OP.if, 0x40);
    f.i32(0).set(i);
    f.forLt(i, nr, 1, () => {
      f.get(i).i32(2).op(OP.i32shl).set(t);
      f.f32(1).get(lArr).get(t).op(OP.i32add).mem(OP.f32load, 2).op(OP.f32div).simd(SIMD.f32x4splat).set(pa);
      f.get(mArr).get(t).op(OP.i32add).mem(OP.f32load, 2).set(mNew);
      f.f32(0).get(mNew).get(mNew).f32(-Infinity).op(F32_EQ).op(OP.select).simd(SIMD.f32x4splat).set(mUseV);
      f.get(ro).get(t).op(OP.i32add).mem(OP.i32load, 2).tee(p).get(kend).i32(3).op(OP.i32add).i32(-4).op(OP.i32and);
      f.i32(2).op(OP.i32shl).op(OP.i32add).set(end);
      f.forLt(p, end, 16, () => {
        f.get(p).v128load().get(mUseV).simd(SIMD.f32x4sub).set(x);
        f.get(p);
        vm.expNonPos(x);
        f.get(pa).simd(SIMD.f32x4mul).v128store();
      });
      f.get(ro).get(t).op(OP.i32add).mem(OP.i32load, 2).get(outRow).op(OP.i32add).set(end);
      // 0 * (1 / sum): NaN for a row with no visible key, as softmax over only -inf gives
      f.forLt(p, end, 16, () => f.get(p).f32x4(0).get(pa).simd(SIMD.f32x4mul).v128store());
    });
    f.op(OP.else);
    // normalize and write the tile's real rows
    f.i32(0).set(i);
    f.forLt(i, nr, 1, () => {
      f.f32(1).get(lArr).get(i).i32(2).op(OP.i32shl).op(OP.i32add).mem(OP.f32load, 2).op(OP.f32div).simd(SIMD.f32x4splat).set(pa);
      f.get(ro).get(i).i32(2).op(OP.i32shl).op(OP.i32add).mem(OP.i32load, 2).set(p2);
      f.get(oa).get(i).get(Ev4).op(OP.i32mul).op(OP.i32add).tee(p).get(Ev4).op(OP.i32add).set(end);
      f.forLt(p, end, 16, () => {
        f.get(p2).get(p).v128load().get(pa).simd(SIMD.f32x4mul).v128store();
        f.get(p2).i32(16).op(OP.i32add).set(p2);
      });
    });
    f.op(OP.end);
  });
  return f;
}

/** Byte offsets of the copy_rows parameter block (i32 fields). */
export const CP = { src: 0, dst: 4, d1: 8, d2: 12, s0: 16, s1: 20, s2: 24, rowBytes: 28, pitch: 32 } as const;

/**
 * attn_copy_rows(lo, hi, prm): rows [lo, hi) of a strided [d0, d1, d2, n] view (last dim
 * contiguous) into dense rows of `pitch` bytes, zero-filled past the row: keys/values whose
 * rows lie far apart (heads split out of one projection) are gathered once so the attention
 * loop streams dense blocks instead of touching a page per key.
 */
function copyRows(): Fn {
  const f = new Fn("attn_copy_rows", [I32, I32, I32]);
  const [lo, hi, prm] = [0, 1, 2];
  const r = f.local(I32), i2 = f.local(I32), i01 = f.local(I32), i0 = f.local(I32), src = f.local(I32), dst = f.local(I32);
  const end = f.local(I32), vend = f.local(I32), pend = f.local(I32), d1 = f.local(I32), d2 = f.local(I32);
  const ld = (off: number) => f.get(prm).mem(OP.i32load, 2, off);
  ld(CP.d1).set(d1);
  ld(CP.d2).set(d2);
  f.get(lo).set(r);
  f.forLt(r, hi, 1, () => {
    f.get(r).get(d2).op(I32_DIV_U).tee(i01).get(d1).op(I32_DIV_U).set(i0);
    f.get(r).get(i01).get(d2).op(OP.i32mul).op(OP.i32sub).set(i2);
    f.get(i01).get(i0).get(d1).op(OP.i32mul).op(OP.i32sub).set(i01); // i1
    const mulAdd = () => f.op(OP.i32mul).op(OP.i32add);
    ld(CP.src);
    f.get(i0); ld(CP.s0); mulAdd();
    f.get(i01); ld(CP.s1); mulAdd();
    f.get(i2); ld(CP.s2); mulAdd();
    f.set(src);
    ld(CP.dst); f.get(r); ld(CP.pitch); mulAdd(); f.set(dst);
    f.get(dst); ld(CP.rowBytes); f.op(OP.i32add).set(end);
    f.get(dst); ld(CP.pitch); f.op(OP.i32add).set(pend);
    f.get(dst); ld(CP.rowBytes); f.i32(-16).op(OP.i32and).op(OP.i32add).set(vend);
    f.forLt(dst, vend, 16, () => {
      f.get(dst).get(src).v128load().v128store();
      f.get(src).i32(16).op(OP.i32add).set(src);
    });
    f.forLt(dst, end, 4, () => {
      f.get(dst).get(src).mem(OP.f32load, 2).mem(OP.f32store, 2);
      f.get(src).i32(4).op(OP.i32add).set(src);
    });
    f.forLt(dst, pend, 4, () => f.get(dst).f32(0).mem(OP.f32store, 2));
  });
  return f;
}
