// Row copies between float32 arrays in the shared memory: the data movement of cat (each input
// into its slab of the output, a transposed gradient included) and of scatter_add's whole-row
// adds (embedding's backward). JS did these one element, or one copyWithin per row, at a time:
// a cat of three [4, 64, 128] gradients took ~70 us, the embedding's backward ~90 us.
import { Fn, I32, OP } from "./emitter.js";

/**
 * copy_rows(lo, hi, dst, src, n, ds, ss, si): for each row r in [lo, hi), dst[r*ds + j] =
 * src[r*ss + j*si] for j < n (byte pointers, strides in elements). Contiguous source rows (si 1)
 * move a vector at a time; others one element at a time. Rows are independent: the pool may split them.
 */
function copyRows(): Fn {
  const f = new Fn("copy_rows", [I32, I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, dst, src, n, ds, ss, si] = [0, 1, 2, 3, 4, 5, 6, 7];
  const r = f.local(I32), p = f.local(I32), q = f.local(I32), end = f.local(I32), vend = f.local(I32), step = f.local(I32);
  f.get(si).i32(2).op(OP.i32shl).set(step);
  f.get(lo).set(r);
  f.forLt(r, hi, 1, () => {
    f.get(dst).get(r).get(ds).op(OP.i32mul).i32(2).op(OP.i32shl).op(OP.i32add).tee(p).get(n).i32(2).op(OP.i32shl).op(OP.i32add).set(end);
    f.get(src).get(r).get(ss).op(OP.i32mul).i32(2).op(OP.i32shl).op(OP.i32add).set(q);
    f.get(si).i32(1).op(OP.i32eq).op(OP.if, 0x40);
    {
      f.get(p).get(n).i32(-4).op(OP.i32and).i32(2).op(OP.i32shl).op(OP.i32add).set(vend);
      f.forLt(p, vend, 16, () => {
        f.get(p).get(q).v128load().v128store();
        f.get(q).i32(16).op(OP.i32add).set(q);
      });
    }
    f.op(OP.end);
    // the tail of a contiguous row, or the whole of a strided one
    f.forLt(p, end, 4, () => {
      f.get(p).get(q).mem(OP.f32load, 2).mem(OP.f32store, 2);
      f.get(q).get(step).op(OP.i32add).set(q);
    });
  });
  return f;
}

/**
 * add_rows(lo, hi, dst, src, offs, n, ss): for each row r in [lo, hi), dst[offs[r] + j] +=
 * src[r*ss + j] for j < n (offs: int32 element offsets). Two rows may add into one target, so
 * the rows run in order, on one thread; each sum is a float32 add, as JS's on a Float32Array.
 */
function addRows(): Fn {
  const f = new Fn("add_rows", [I32, I32, I32, I32, I32, I32, I32]);
  const [lo, hi, dst, src, offs, n, ss] = [0, 1, 2, 3, 4, 5, 6];
  const r = f.local(I32), p = f.local(I32), q = f.local(I32), end = f.local(I32), vend = f.local(I32);
  f.get(lo).set(r);
  f.forLt(r, hi, 1, () => {
    f.get(dst).get(offs).get(r).i32(2).op(OP.i32shl).op(OP.i32add).mem(OP.i32load, 2).i32(2).op(OP.i32shl).op(OP.i32add).tee(p);
    f.get(n).i32(2).op(OP.i32shl).op(OP.i32add).set(end);
    f.get(src).get(r).get(ss).op(OP.i32mul).i32(2).op(OP.i32shl).op(OP.i32add).set(q);
    f.get(p).get(n).i32(-4).op(OP.i32and).i32(2).op(OP.i32shl).op(OP.i32add).set(vend);
    f.forLt(p, vend, 16, () => {
      f.get(p).get(p).v128load().get(q).v128load().simd(0xe4 /* f32x4.add */).v128store();
      f.get(q).i32(16).op(OP.i32add).set(q);
    });
    f.forLt(p, end, 4, () => {
      f.get(p).get(p).mem(OP.f32load, 2).get(q).mem(OP.f32load, 2).op(OP.f32add).mem(OP.f32store, 2);
      f.get(q).i32(4).op(OP.i32add).set(q);
    });
  });
  return f;
}

export function copyFns(): Fn[] {
  return [copyRows(), addRows()];
}
