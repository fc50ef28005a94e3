// Elementwise and row-wise kernels over float32 arrays in the shared memory. Signatures are
// (lo, hi, ...) over elements (or rows), so the pool can split them across threads. Vector
// loops may touch up to 3 floats past `hi`: arena blocks are padded to 16 bytes (see ops.ts).
import { F32, Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { VMath } from "./vmath.js";

export const UNARY_WASM = ["exp", "tanh", "sigmoid", "neg", "abs", "sqrt", "reciprocal", "identity"] as const;
export type UnaryWasm = (typeof UNARY_WASM)[number];

function unaryBody(op: UnaryWasm, f: Fn, m: VMath, x: number): void {
  switch (op) {
    case "exp": return m.exp(x);
    case "tanh": return m.tanh(x);
    case "sigmoid": return m.sigmoid(x);
    case "neg": f.get(x).simd(SIMD.f32x4neg); return;
    case "abs": f.get(x).simd(SIMD.f32x4abs); return;
    case "sqrt": f.get(x).simd(SIMD.f32x4sqrt); return;
    case "reciprocal": f.f32x4(1).get(x).simd(SIMD.f32x4div); return;
    case "identity": f.get(x); return;
  }
}

/** ew_<op>(lo, hi, src, dst, a, b): dst[i] = op(src[i]*a + b); a=1, b=0 skips nothing but is cheap. */
function unary(op: UnaryWasm, affine: boolean, fma: boolean): Fn {
  const f = new Fn(affine ? `ew_affine_${op}` : `ew_${op}`, affine ? [I32, I32, I32, I32, F32, F32] : [I32, I32, I32, I32]);
  const [lo, hi, src, dst] = [0, 1, 2, 3];
  const m = new VMath(f, fma);
  const x = f.local(V128), av = f.local(V128), bv = f.local(V128);
  const p = f.local(I32), q = f.local(I32), end = f.local(I32);
  if (affine) {
    f.get(4).simd(SIMD.f32x4splat).set(av);
    f.get(5).simd(SIMD.f32x4splat).set(bv);
  }
  f.get(src).get(lo).i32(2).op(OP.i32shl).op(OP.i32add).set(p);
  f.get(dst).get(lo).i32(2).op(OP.i32shl).op(OP.i32add).set(q);
  f.get(dst).get(hi).i32(2).op(OP.i32shl).op(OP.i32add).set(end);
  f.forLt(q, end, 16, () => {
    f.get(p).v128load();
    if (affine) f.get(av).simd(SIMD.f32x4mul).get(bv).simd(SIMD.f32x4add);
    f.set(x);
    f.get(q);
    unaryBody(op, f, m, x);
    f.v128store();
    f.get(p).i32(16).op(OP.i32add).set(p);
  });
  return f;
}

/** Horizontal reduction of a v128 local with a binary f32 op. */
function horizontal(f: Fn, v: number, op: number): void {
  f.get(v).lane(0).get(v).lane(1).op(op).get(v).lane(2).op(op).get(v).lane(3).op(op);
}

/** softmax_rows(r0, r1, src, dst, n): softmax over each contiguous row of length n. */
function softmaxRows(fma: boolean): Fn {
  const f = new Fn("softmax_rows", [I32, I32, I32, I32, I32]);
  const [r0, r1, src, dst, n] = [0, 1, 2, 3, 4];
  const m = new VMath(f, fma);
  const x = f.local(V128), acc = f.local(V128), mv = f.local(V128);
  const row = f.local(I32), s = f.local(I32), d = f.local(I32), p = f.local(I32), q = f.local(I32);
  const vend = f.local(I32), rend = f.local(I32), bytes = f.local(I32);
  const mx = f.local(F32), sum = f.local(F32), inv = f.local(F32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    rowBounds(f, src, row, bytes, n, s, vend, rend);
    f.get(dst).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(d);
    // pass 1: max
    rowMax(f, s, vend, rend, p, acc, mx);
    f.get(mx).simd(SIMD.f32x4splat).set(mv);
    // pass 2: e = exp(x - max), stored, summed
    f.f32x4(0).set(acc);
    f.get(s).set(p);
    f.get(d).set(q);
    f.forLt(p, vend, 16, () => {
      f.get(p).v128load().get(mv).simd(SIMD.f32x4sub).set(x);
      f.get(q);
      m.exp(x);
      f.set(x).get(x).v128store();
      f.get(acc).get(x).simd(SIMD.f32x4add).set(acc);
      f.get(q).i32(16).op(OP.i32add).set(q);
    });
    horizontal(f, acc, OP.f32add);
    f.set(sum);
    f.forLt(p, rend, 4, () => {
      f.get(p).mem(OP.f32load, 2).get(mx).op(OP.f32sub).simd(SIMD.f32x4splat).set(x);
      m.exp(x);
      f.set(x);
      f.get(q).get(x).lane(0).mem(OP.f32store, 2);
      f.get(sum).get(x).lane(0).op(OP.f32add).set(sum);
      f.get(q).i32(4).op(OP.i32add).set(q);
    });
    // pass 3: scale by 1/sum
    f.f32(1).get(sum).op(OP.f32div).set(inv);
    f.get(inv).simd(SIMD.f32x4splat).set(mv);
    f.get(d).get(vend).get(s).op(OP.i32sub).op(OP.i32add).set(vend);
    f.get(d).get(bytes).op(OP.i32add).set(rend);
    f.get(d).set(q);
    f.forLt(q, vend, 16, () => f.get(q).get(q).v128load().get(mv).simd(SIMD.f32x4mul).v128store());
    f.forLt(q, rend, 4, () => f.get(q).get(q).mem(OP.f32load, 2).get(inv).op(OP.f32mul).mem(OP.f32store, 2));
  });
  return f;
}

/** Row `row` of n floats at src: its start s, the end of its whole vectors vend, its end rend. */
function rowBounds(f: Fn, src: number, row: number, bytes: number, n: number, s: number, vend: number, rend: number): void {
  f.get(src).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(s);
  f.get(s).get(bytes).op(OP.i32add).set(rend);
  f.get(s).get(n).i32(-4).op(OP.i32and).i32(2).op(OP.i32shl).op(OP.i32add).set(vend);
}

/** Row max of [s, s + n floats) into `mx` (vector part then the scalar tail). */
function rowMax(f: Fn, s: number, vend: number, rend: number, p: number, acc: number, mx: number): void {
  f.f32x4(-Infinity).set(acc);
  f.get(s).set(p);
  f.forLt(p, vend, 16, () => f.get(acc).get(p).v128load().simd(SIMD.f32x4max).set(acc));
  horizontal(f, acc, OP.f32max);
  f.set(mx);
  f.get(vend).set(p);
  f.forLt(p, rend, 4, () => f.get(mx).get(p).mem(OP.f32load, 2).op(OP.f32max).set(mx));
}

/**
 * lse_rows(r0, r1, src, stats, n): stats[2r] = max of row r, stats[2r+1] = sum(exp(x - max)).
 * The caller turns the sum into its log (JS Math.log), then sub_rows2 writes the log-softmax.
 */
function lseRows(fma: boolean): Fn {
  const f = new Fn("lse_rows", [I32, I32, I32, I32, I32]);
  const [r0, r1, src, stats, n] = [0, 1, 2, 3, 4];
  const m = new VMath(f, fma);
  const x = f.local(V128), acc = f.local(V128), mv = f.local(V128);
  const row = f.local(I32), s = f.local(I32), p = f.local(I32), vend = f.local(I32), rend = f.local(I32), bytes = f.local(I32);
  const mx = f.local(F32), sum = f.local(F32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    rowBounds(f, src, row, bytes, n, s, vend, rend);
    rowMax(f, s, vend, rend, p, acc, mx);
    f.get(mx).simd(SIMD.f32x4splat).set(mv);
    f.f32x4(0).set(acc);
    f.get(s).set(p);
    f.forLt(p, vend, 16, () => {
      f.get(p).v128load().get(mv).simd(SIMD.f32x4sub).set(x);
      f.get(acc);
      m.exp(x);
      f.simd(SIMD.f32x4add).set(acc);
    });
    horizontal(f, acc, OP.f32add);
    f.set(sum);
    f.forLt(p, rend, 4, () => {
      f.get(p).mem(OP.f32load, 2).get(mx).op(OP.f32sub).simd(SIMD.f32x4splat).set(x);
      m.exp(x);
      f.set(x);
      f.get(sum).get(x).lane(0).op(OP.f32add).set(sum);
    });
    f.get(stats).get(row).i32(3).op(OP.i32shl).op(OP.i32add).tee(p).get(mx).mem(OP.f32store, 2);
    f.get(p).get(sum).mem(OP.f32store, 2, 4);
  });
  return f;
}

/** sub_rows2(r0, r1, src, dst, stats, n): dst = (x - stats[2r]) - stats[2r+1] per row. */
function subRows2(): Fn {
  const f = new Fn("sub_rows2", [I32, I32, I32, I32, I32, I32]);
  const [r0, r1, src, dst, stats, n] = [0, 1, 2, 3, 4, 5];
  const mv = f.local(V128), lv = f.local(V128);
  const row = f.local(I32), p = f.local(I32), q = f.local(I32), vend = f.local(I32), rend = f.local(I32), bytes = f.local(I32);
  const mx = f.local(F32), lse = f.local(F32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    f.get(stats).get(row).i32(3).op(OP.i32shl).op(OP.i32add).tee(p).mem(OP.f32load, 2).set(mx);
    f.get(p).mem(OP.f32load, 2, 4).set(lse);
    f.get(mx).simd(SIMD.f32x4splat).set(mv);
    f.get(lse).simd(SIMD.f32x4splat).set(lv);
    f.get(src).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(p);
    f.get(dst).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(q);
    f.get(q).get(bytes).op(OP.i32add).set(rend);
    f.get(q).get(n).i32(-4).op(OP.i32and).i32(2).op(OP.i32shl).op(OP.i32add).set(vend);
    f.forLt(q, vend, 16, () => {
      f.get(q).get(p).v128load().get(mv).simd(SIMD.f32x4sub).get(lv).simd(SIMD.f32x4sub).v128store();
      f.get(p).i32(16).op(OP.i32add).set(p);
    });
    f.forLt(q, rend, 4, () => {
      f.get(q).get(p).mem(OP.f32load, 2).get(mx).op(OP.f32sub).get(lse).op(OP.f32sub).mem(OP.f32store, 2);
      f.get(p).i32(4).op(OP.i32add).set(p);
    });
  });
  return f;
}

/** sum_rows(r0, r1, src, dst, n): dst[r] = sum of the contiguous row r (4 lanes x 2 accumulators). */
function sumRows(): Fn {
  const f = new Fn("sum_rows", [I32, I32, I32, I32, I32]);
  const [r0, r1, src, dst, n] = [0, 1, 2, 3, 4];
  const acc = f.local(V128);
  const row = f.local(I32), p = f.local(I32), vend = f.local(I32), rend = f.local(I32), bytes = f.local(I32);
  const sum = f.local(F32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    f.get(src).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).tee(p).get(bytes).op(OP.i32add).set(rend);
    f.get(p).get(n).i32(-4).op(OP.i32and).i32(2).op(OP.i32shl).op(OP.i32add).set(vend);
    f.f32x4(0).set(acc);
    f.forLt(p, vend, 16, () => f.get(acc).get(p).v128load().simd(SIMD.f32x4add).set(acc));
    horizontal(f, acc, OP.f32add);
    f.set(sum);
    f.forLt(p, rend, 4, () => f.get(sum).get(p).mem(OP.f32load, 2).op(OP.f32add).set(sum));
    f.get(dst).get(row).i32(2).op(OP.i32shl).op(OP.i32add).get(sum).mem(OP.f32store, 2);
  });
  return f;
}

/** vm_<op>(x: f32) -> f32: one lane of the vector kernel, so JS code computes bit-identical values. */
function scalar(op: "exp" | "tanh" | "sigmoid", fma: boolean): Fn {
  const f = new Fn(`vm_${op}`, [F32], [F32]);
  const m = new VMath(f, fma);
  const x = f.local(V128);
  f.get(0).simd(SIMD.f32x4splat).set(x);
  unaryBody(op, f, m, x);
  f.lane(0);
  return f;
}

export function elementwiseFns(fma: boolean): Fn[] {
  return [
    ...UNARY_WASM.map((op) => unary(op, false, fma)), unary("tanh", true, fma), softmaxRows(fma), sumRows(),
    scalar("exp", fma), scalar("tanh", fma), scalar("sigmoid", fma), lseRows(fma), subRows2(),
  ];
}
