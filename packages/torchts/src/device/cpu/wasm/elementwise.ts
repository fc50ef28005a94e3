// Elementwise and row-wise kernels over float32 arrays in the shared memory. Signatures are
// (lo, hi, ...) over elements (or rows), so the pool can split them across threads. Vector
// loops may touch up to 3 floats past `hi`: arena blocks are padded to 16 bytes (see ops.ts).
import { F32, Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { VMath } from "./vmath.js";

export const UNARY_WASM = ["exp", "tanh", "sigmoid", "erf", "neg", "abs", "sqrt", "reciprocal", "identity"] as const;
export type UnaryWasm = (typeof UNARY_WASM)[number];

function unaryBody(op: UnaryWasm, f: Fn, m: VMath, x: number): void {
  switch (op) {
    case "exp": return m.exp(x);
    case "tanh": return m.tanh(x);
    case "sigmoid": return m.sigmoid(x);
    case "erf": return m.erf(x);
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
export function horizontal(f: Fn, v: number, op: number): void {
  f.get(v).lane(0).get(v).lane(1).op(op).get(v).lane(2).op(op).get(v).lane(3).op(op);
}

/**
 * Row loops: whole vectors two at a time (two independent dependency chains, e.g. one
 * accumulator each), then at most one more vector, then the scalar tail. `vec(off)` emits one vector step at byte offset off from the
 * row pointers, `one()` one scalar step; `ptrs` advance by 4 bytes per element.
 */
export function rowLoop(f: Fn, i: number, n: number, end: number, ptrs: number[], vec: (off: number) => void, one: () => void): void {
  const step = (bytes: number) => ptrs.forEach((p) => f.get(p).i32(bytes).op(OP.i32add).set(p));
  f.i32(0).set(i);
  f.get(n).i32(-8).op(OP.i32and).set(end);
  f.forLt(i, end, 8, () => {
    vec(0);
    vec(16);
    step(32);
  });
  f.get(n).i32(4).op(OP.i32and).op(OP.if, 0x40);
  vec(0);
  step(16);
  f.op(OP.end);
  f.get(n).i32(-4).op(OP.i32and).set(i);
  f.forLt(i, n, 1, () => {
    one();
    step(4);
  });
}

/** Row max into `mx`. pmax skips NaN lanes (the exp pass turns a NaN element into a NaN row). */
function rowMax(f: Fn, s: number, n: number, i: number, end: number, p: number, acc: number[], mx: number): void {
  acc.forEach((a) => f.f32x4(-Infinity).set(a));
  f.get(s).set(p);
  let k = 0;
  rowLoop(f, i, n, end, [p], (off) => {
    const a = acc[k++ % 2]!;
    f.get(a).get(p).v128load(off).simd(SIMD.f32x4pmax).set(a);
  }, () => f.get(acc[0]!).get(p).f32splatLoad().simd(SIMD.f32x4pmax).set(acc[0]!));
  f.get(acc[0]!).get(acc[1]!).simd(SIMD.f32x4pmax).set(acc[0]!);
  horizontal(f, acc[0]!, OP.f32max);
  f.set(mx);
}

/**
 * Pass over a row: e = exp(x - max) (x - max <= 0, so VMath.expNonPos), summed into `sum`
 * (two vector accumulators, then the scalar tail's), and stored through q unless q is null.
 */
function expSum(f: Fn, m: VMath, s: number, q: number | null, n: number, i: number, end: number, p: number,
  mv: number, x: number, acc: number[], sum: number, tail: number): void {
  acc.forEach((a) => f.f32x4(0).set(a));
  f.f32(0).set(tail);
  f.get(s).set(p);
  let k = 0;
  const ptrs = q === null ? [p] : [p, q];
  rowLoop(f, i, n, end, ptrs, (off) => {
    const a = acc[k++ % 2]!;
    f.get(p).v128load(off).get(mv).simd(SIMD.f32x4sub).set(x);
    m.expNonPos(x);
    f.set(x);
    if (q !== null) f.get(q).get(x).v128store(off);
    f.get(a).get(x).simd(SIMD.f32x4add).set(a);
  }, () => {
    f.get(p).f32splatLoad().get(mv).simd(SIMD.f32x4sub).set(x);
    m.expNonPos(x);
    f.set(x);
    if (q !== null) f.get(q).get(x).lane(0).mem(OP.f32store, 2);
    f.get(tail).get(x).lane(0).op(OP.f32add).set(tail);
  });
  f.get(acc[0]!).get(acc[1]!).simd(SIMD.f32x4add).set(acc[0]!);
  horizontal(f, acc[0]!, OP.f32add);
  f.get(tail).op(OP.f32add).set(sum);
}

/** softmax_rows(r0, r1, src, dst, n): softmax over each contiguous row of length n. */
function softmaxRows(fma: boolean): Fn {
  const f = new Fn("softmax_rows", [I32, I32, I32, I32, I32]);
  const [r0, r1, src, dst, n] = [0, 1, 2, 3, 4];
  const m = new VMath(f, fma);
  const x = f.local(V128), mv = f.local(V128);
  const acc = [f.local(V128), f.local(V128)];
  const row = f.local(I32), s = f.local(I32), d = f.local(I32), p = f.local(I32), q = f.local(I32);
  const i = f.local(I32), end = f.local(I32), bytes = f.local(I32);
  const mx = f.local(F32), sum = f.local(F32), inv = f.local(F32), tail = f.local(F32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    f.get(src).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(s);
    f.get(dst).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(d);
    rowMax(f, s, n, i, end, p, acc, mx);
    f.get(mx).simd(SIMD.f32x4splat).set(mv);
    f.get(d).set(q);
    expSum(f, m, s, q, n, i, end, p, mv, x, acc, sum, tail);
    // scale by 1/sum, in place
    f.f32(1).get(sum).op(OP.f32div).tee(inv).simd(SIMD.f32x4splat).set(mv);
    f.get(d).set(q);
    rowLoop(f, i, n, end, [q], (off) => f.get(q).get(q).v128load(off).get(mv).simd(SIMD.f32x4mul).v128store(off),
      () => f.get(q).get(q).mem(OP.f32load, 2).get(inv).op(OP.f32mul).mem(OP.f32store, 2));
  });
  return f;
}

/**
 * logsoftmax_rows(r0, r1, src, dst, n): dst = (x - max) - log(sum(exp(x - max))) per row, in
 * one read of the row (the later passes hit the cache).
 */
function logSoftmaxRows(fma: boolean): Fn {
  const f = new Fn("logsoftmax_rows", [I32, I32, I32, I32, I32]);
  const [r0, r1, src, dst, n] = [0, 1, 2, 3, 4];
  const m = new VMath(f, fma);
  const x = f.local(V128), mv = f.local(V128), lv = f.local(V128);
  const acc = [f.local(V128), f.local(V128)];
  const row = f.local(I32), s = f.local(I32), p = f.local(I32), q = f.local(I32), i = f.local(I32), end = f.local(I32), bytes = f.local(I32);
  const mx = f.local(F32), sum = f.local(F32), tail = f.local(F32), lse = f.local(F32);
  f.get(n).i32(2).op(OP.i32shl).set(bytes);
  f.get(r0).set(row);
  f.forLt(row, r1, 1, () => {
    f.get(src).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(s);
    rowMax(f, s, n, i, end, p, acc, mx);
    f.get(mx).simd(SIMD.f32x4splat).set(mv);
    expSum(f, m, s, null, n, i, end, p, mv, x, acc, sum, tail);
    // sum >= 1 (the max's own term) unless a NaN made it NaN: + (sum - sum) keeps that NaN
    f.get(sum).simd(SIMD.f32x4splat).set(x);
    m.log(x);
    f.get(x).get(x).simd(SIMD.f32x4sub).simd(SIMD.f32x4add).tee(lv).lane(0).set(lse);
    f.get(s).set(p);
    f.get(dst).get(row).get(bytes).op(OP.i32mul).op(OP.i32add).set(q);
    rowLoop(f, i, n, end, [p, q], (off) => f.get(q).get(p).v128load(off).get(mv).simd(SIMD.f32x4sub).get(lv).simd(SIMD.f32x4sub).v128store(off),
      () => f.get(q).get(p).mem(OP.f32load, 2).get(mx).op(OP.f32sub).get(lse).op(OP.f32sub).mem(OP.f32store, 2));
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
function scalar(op: "exp" | "tanh" | "sigmoid" | "erf", fma: boolean): Fn {
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
    scalar("exp", fma), scalar("tanh", fma), scalar("sigmoid", fma), logSoftmaxRows(fma), scalar("erf", fma),
  ];
}
