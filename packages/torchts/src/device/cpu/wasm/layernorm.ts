// LayerNorm over the last dim of contiguous float32 rows, as three row kernels (PyTorch's
// native_layer_norm and native_layer_norm_backward): the forward, the input's gradient, and the
// weight's and bias's gradients. Each row's mean and 1/std come from the same two passes (sum,
// then the sum of squares about the mean) in the forward and in the backward, so the backward
// normalizes exactly as the forward did without storing the statistics. Float32 accumulation in
// two vector accumulators and a scalar tail; every row's arithmetic is independent of how the
// pool splits the rows, so results do not depend on the thread count.
import { F32, Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { horizontal, rowLoop } from "./elementwise.js";

const F32_CONVERT_I32_S = 0xb2;
const F32_SQRT = 0x91;

interface Locals {
  i: number;
  end: number;
  p: number;
  acc: [number, number];
  x: number;
  tail: number;
  mean: number;
  rstd: number;
  mv: number;
  rv: number;
  nf: number;
}

function locals(f: Fn): Locals {
  return {
    i: f.local(I32), end: f.local(I32), p: f.local(I32),
    acc: [f.local(V128), f.local(V128)], x: f.local(V128), tail: f.local(F32),
    mean: f.local(F32), rstd: f.local(F32), mv: f.local(V128), rv: f.local(V128), nf: f.local(F32),
  };
}

/** Sum of the row at s (n floats) into the f32 local `out`, from two vector accumulators and the tail. */
function rowSum(f: Fn, L: Locals, s: number, n: number, out: number, centered: boolean): void {
  const { i, end, p, acc, x, tail } = L;
  acc.forEach((a) => f.f32x4(0).set(a));
  f.f32(0).set(tail);
  f.get(s).set(p);
  let k = 0;
  rowLoop(f, i, n, end, [p], (off) => {
    const a = acc[k++ % 2]!;
    f.get(a).get(p).v128load(off);
    if (centered) f.get(L.mv).simd(SIMD.f32x4sub).tee(x).get(x).simd(SIMD.f32x4mul);
    f.simd(SIMD.f32x4add).set(a);
  }, () => {
    f.get(tail).get(p).mem(OP.f32load, 2);
    if (centered) f.get(L.mean).op(OP.f32sub).tee(L.rstd).get(L.rstd).op(OP.f32mul); // rstd: scratch until set below
    f.op(OP.f32add).set(tail);
  });
  f.get(acc[0]).get(acc[1]).simd(SIMD.f32x4add).set(acc[0]);
  horizontal(f, acc[0], OP.f32add);
  f.get(tail).op(OP.f32add).set(out);
}

/** mean and rstd = 1/sqrt(biased var + eps) of the row at s, and their splats mv, rv. */
function rowStats(f: Fn, L: Locals, s: number, n: number, eps: number): void {
  rowSum(f, L, s, n, L.mean, false);
  f.get(L.mean).get(L.nf).op(OP.f32div).tee(L.mean).simd(SIMD.f32x4splat).set(L.mv);
  rowSum(f, L, s, n, L.rstd, true);
  f.f32(1).get(L.rstd).get(L.nf).op(OP.f32div).get(eps).op(OP.f32add).op(F32_SQRT).op(OP.f32div).tee(L.rstd);
  f.simd(SIMD.f32x4splat).set(L.rv);
}

/** layernorm_rows(r0, r1, src, dst, n, w, b, eps): dst = (x - mean) * rstd * w + b per row. */
function forward(): Fn {
  const f = new Fn("layernorm_rows", [I32, I32, I32, I32, I32, I32, I32, F32]);
  const [r0, r1, src, dst, n, w, b, eps] = [0, 1, 2, 3, 4, 5, 6, 7];
  const L = locals(f);
  const row = f.local(I32), s = f.local(I32), q = f.local(I32), pw = f.local(I32), pb = f.local(I32), bytes = f.local(I32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(n).op(F32_CONVERT_I32_S).set(L.nf);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    f.get(src).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(s);
    rowStats(f, L, s, n, eps);
    f.get(s).set(L.p);
    f.get(dst).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(q);
    f.get(w).set(pw);
    f.get(b).set(pb);
    rowLoop(f, L.i, n, L.end, [L.p, q, pw, pb], (off) => {
      f.get(q).get(L.p).v128load(off).get(L.mv).simd(SIMD.f32x4sub).get(L.rv).simd(SIMD.f32x4mul);
      f.get(pw).v128load(off).simd(SIMD.f32x4mul).get(pb).v128load(off).simd(SIMD.f32x4add).v128store(off);
    }, () => {
      f.get(q).get(L.p).mem(OP.f32load, 2).get(L.mean).op(OP.f32sub).get(L.rstd).op(OP.f32mul);
      f.get(pw).mem(OP.f32load, 2).op(OP.f32mul).get(pb).mem(OP.f32load, 2).op(OP.f32add).mem(OP.f32store, 2);
    });
  });
  return f;
}

/**
 * layernorm_dx_rows(r0, r1, x, g, w, dst, n, stats, eps): per row, with gw = g*w and
 * xhat = (x - mean)*rstd, dst = rstd * ((gw - mean(gw)) - xhat * mean(gw*xhat)); the row's mean
 * and rstd go to stats[2r], stats[2r + 1] for the weight and bias pass.
 */
function inputGrad(): Fn {
  const f = new Fn("layernorm_dx_rows", [I32, I32, I32, I32, I32, I32, I32, I32, F32]);
  const [r0, r1, x, g, w, dst, n, stats, eps] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const L = locals(f);
  const row = f.local(I32), s = f.local(I32), pg = f.local(I32), pw = f.local(I32), q = f.local(I32), bytes = f.local(I32);
  const gw = f.local(V128), xh = f.local(V128), acc2 = [f.local(V128), f.local(V128)];
  const t1 = f.local(F32), t2 = f.local(F32), sg = f.local(F32), sx = f.local(F32), gs = f.local(F32), xs = f.local(F32);
  const av = f.local(V128), cv = f.local(V128);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(n).op(F32_CONVERT_I32_S).set(L.nf);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    f.get(row).get(bytes).op(OP.i32mul).set(q);
    f.get(x).get(q).op(OP.i32add).set(s);
    rowStats(f, L, s, n, eps);
    f.get(stats).get(row).i32(3).op(OP.i32shl).op(OP.i32add).get(L.mean).mem(OP.f32store, 2, 0);
    f.get(stats).get(row).i32(3).op(OP.i32shl).op(OP.i32add).get(L.rstd).mem(OP.f32store, 2, 4);
    // sums of gw and gw*xhat
    [...L.acc, ...acc2].forEach((a) => f.f32x4(0).set(a));
    f.f32(0).set(t1);
    f.f32(0).set(t2);
    f.get(s).set(L.p);
    f.get(g).get(q).op(OP.i32add).set(pg);
    f.get(w).set(pw);
    let k = 0;
    rowLoop(f, L.i, n, L.end, [L.p, pg, pw], (off) => {
      const j = k++ % 2;
      f.get(pg).v128load(off).get(pw).v128load(off).simd(SIMD.f32x4mul).set(gw);
      f.get(L.p).v128load(off).get(L.mv).simd(SIMD.f32x4sub).get(L.rv).simd(SIMD.f32x4mul).set(xh);
      f.get(L.acc[j]!).get(gw).simd(SIMD.f32x4add).set(L.acc[j]!);
      f.get(acc2[j]!).get(gw).get(xh).simd(SIMD.f32x4mul).simd(SIMD.f32x4add).set(acc2[j]!);
    }, () => {
      f.get(pg).mem(OP.f32load, 2).get(pw).mem(OP.f32load, 2).op(OP.f32mul).set(gs);
      f.get(L.p).mem(OP.f32load, 2).get(L.mean).op(OP.f32sub).get(L.rstd).op(OP.f32mul).set(xs);
      f.get(t1).get(gs).op(OP.f32add).set(t1);
      f.get(t2).get(gs).get(xs).op(OP.f32mul).op(OP.f32add).set(t2);
    });
    f.get(L.acc[0]).get(L.acc[1]).simd(SIMD.f32x4add).set(L.acc[0]);
    horizontal(f, L.acc[0], OP.f32add);
    f.get(t1).op(OP.f32add).get(L.nf).op(OP.f32div).tee(sg).simd(SIMD.f32x4splat).set(av);
    f.get(acc2[0]!).get(acc2[1]!).simd(SIMD.f32x4add).set(acc2[0]!);
    horizontal(f, acc2[0]!, OP.f32add);
    f.get(t2).op(OP.f32add).get(L.nf).op(OP.f32div).tee(sx).simd(SIMD.f32x4splat).set(cv);
    // dx = rstd * ((gw - a) - xhat * c)
    f.get(s).set(L.p);
    f.get(g).get(q).op(OP.i32add).set(pg);
    f.get(w).set(pw);
    f.get(dst).get(q).op(OP.i32add).set(q);
    rowLoop(f, L.i, n, L.end, [L.p, pg, pw, q], (off) => {
      f.get(q);
      f.get(pg).v128load(off).get(pw).v128load(off).simd(SIMD.f32x4mul).get(av).simd(SIMD.f32x4sub);
      f.get(L.p).v128load(off).get(L.mv).simd(SIMD.f32x4sub).get(L.rv).simd(SIMD.f32x4mul).get(cv).simd(SIMD.f32x4mul);
      f.simd(SIMD.f32x4sub).get(L.rv).simd(SIMD.f32x4mul).v128store(off);
    }, () => {
      f.get(q);
      f.get(pg).mem(OP.f32load, 2).get(pw).mem(OP.f32load, 2).op(OP.f32mul).get(sg).op(OP.f32sub);
      f.get(L.p).mem(OP.f32load, 2).get(L.mean).op(OP.f32sub).get(L.rstd).op(OP.f32mul).get(sx).op(OP.f32mul);
      f.op(OP.f32sub).get(L.rstd).op(OP.f32mul).mem(OP.f32store, 2);
    });
  });
  return f;
}

/**
 * layernorm_wb_cols(c0, c1, x, g, stats, dw, db, n, rows): for columns [c0, c1) (c0 a multiple
 * of 4), dw = sum over rows of g * xhat and db = sum of g, rows in order, from the statistics
 * layernorm_dx_rows stored.
 */
function weightGrads(): Fn {
  const f = new Fn("layernorm_wb_cols", [I32, I32, I32, I32, I32, I32, I32, I32, I32]);
  const [c0, c1, x, g, stats, dw, db, n, rows] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const row = f.local(I32), c = f.local(I32), vend = f.local(I32), px = f.local(I32), pg = f.local(I32), off = f.local(I32);
  const mv = f.local(V128), rv = f.local(V128), gv = f.local(V128), mean = f.local(F32), rstd = f.local(F32), gs = f.local(F32);
  // columns c0 .. vend in vectors, vend .. c1 one at a time
  f.get(c0).get(c1).get(c0).op(OP.i32sub).i32(-4).op(OP.i32and).op(OP.i32add).set(vend);
  // zero the outputs' columns
  f.get(c0).set(c);
  f.forLt(c, c1, 1, () => {
    f.get(dw).get(c).i32(2).op(OP.i32shl).op(OP.i32add).f32(0).mem(OP.f32store, 2);
    f.get(db).get(c).i32(2).op(OP.i32shl).op(OP.i32add).f32(0).mem(OP.f32store, 2);
  });
  f.i32(0).set(row);
  f.forLt(row, rows, 1, () => {
    f.get(stats).get(row).i32(3).op(OP.i32shl).op(OP.i32add).mem(OP.f32load, 2, 0).tee(mean).simd(SIMD.f32x4splat).set(mv);
    f.get(stats).get(row).i32(3).op(OP.i32shl).op(OP.i32add).mem(OP.f32load, 2, 4).tee(rstd).simd(SIMD.f32x4splat).set(rv);
    f.get(row).get(n).op(OP.i32mul).i32(2).op(OP.i32shl).set(off);
    f.get(c0).set(c);
    f.forLt(c, vend, 4, () => {
      f.get(c).i32(2).op(OP.i32shl).tee(px).get(off).op(OP.i32add).set(pg); // pg: byte offset in the row-major operands
      f.get(g).get(pg).op(OP.i32add).v128load().set(gv);
      f.get(dw).get(px).op(OP.i32add);
      f.get(dw).get(px).op(OP.i32add).v128load();
      f.get(gv).get(x).get(pg).op(OP.i32add).v128load().get(mv).simd(SIMD.f32x4sub).get(rv).simd(SIMD.f32x4mul).simd(SIMD.f32x4mul);
      f.simd(SIMD.f32x4add).v128store();
      f.get(db).get(px).op(OP.i32add);
      f.get(db).get(px).op(OP.i32add).v128load().get(gv).simd(SIMD.f32x4add).v128store();
    });
    f.forLt(c, c1, 1, () => {
      f.get(c).i32(2).op(OP.i32shl).tee(px).get(off).op(OP.i32add).set(pg);
      f.get(g).get(pg).op(OP.i32add).mem(OP.f32load, 2).set(gs);
      f.get(dw).get(px).op(OP.i32add);
      f.get(dw).get(px).op(OP.i32add).mem(OP.f32load, 2);
      f.get(gs).get(x).get(pg).op(OP.i32add).mem(OP.f32load, 2).get(mean).op(OP.f32sub).get(rstd).op(OP.f32mul).op(OP.f32mul);
      f.op(OP.f32add).mem(OP.f32store, 2);
      f.get(db).get(px).op(OP.i32add);
      f.get(db).get(px).op(OP.i32add).mem(OP.f32load, 2).get(gs).op(OP.f32add).mem(OP.f32store, 2);
    });
  });
  return f;
}

export function layerNormFns(): Fn[] {
  return [forward(), inputGrad(), weightGrads()];
}
