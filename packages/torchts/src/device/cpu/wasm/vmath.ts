// Vectorized float32 math emitted inline into kernels: each function reads its argument from a
// v128 local and leaves the result on the stack. Accuracy is a few ulp (checked against
// Math.exp/Math.tanh over wide ranges in test/device/cpu/wasm_math.test.ts).
import { Fn, SIMD, V128 } from "./emitter.js";

const LOG2E = 1.4426950408889634;
const C1 = 0.693359375; // ln2 split in two so fx*C1 is exact
const C2 = -2.12194440e-4;
const EXP_P = [1.987569150e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
const EXP_HI = 88.72283935546875;
const EXP_LO = -103.97208;

/** Scratch locals, allocated once per function and shared by every inline use. */
export class VMath {
  private readonly t: number[];
  constructor(
    private readonly f: Fn,
    private readonly fma = false,
  ) {
    this.t = Array.from({ length: 8 }, () => f.local(V128));
  }

  /** Stack [a, b] -> a*b + c (one relaxed madd when available). */
  private mulAdd(b: number, c: number): void {
    if (this.fma) this.f.get(b).f32x4(c).simd(SIMD.relaxedMadd);
    else this.f.get(b).simd(SIMD.f32x4mul).f32x4(c).simd(SIMD.f32x4add);
  }

  /** exp(x): Cephes range reduction + degree-6 polynomial, 2^n applied as two factors so the
   * whole range down to the denormals is covered; +inf above EXP_HI, 0 below EXP_LO, NaN kept. */
  exp(x: number): void {
    const f = this.f;
    const [xc, fx, r, y, n] = this.t as [number, number, number, number, number];
    f.get(x).f32x4(EXP_LO).simd(SIMD.f32x4max).f32x4(EXP_HI).simd(SIMD.f32x4min).set(xc);
    f.get(xc).f32x4(LOG2E).simd(SIMD.f32x4mul).simd(SIMD.f32x4nearest).set(fx);
    f.get(xc).get(fx).f32x4(C1).simd(SIMD.f32x4mul).simd(SIMD.f32x4sub);
    f.get(fx).f32x4(C2).simd(SIMD.f32x4mul).simd(SIMD.f32x4sub).set(r);
    f.f32x4(EXP_P[0]!);
    for (let i = 1; i < EXP_P.length; i++) this.mulAdd(r, EXP_P[i]!);
    f.get(r).simd(SIMD.f32x4mul).get(r).simd(SIMD.f32x4mul).get(r).simd(SIMD.f32x4add).f32x4(1).simd(SIMD.f32x4add).set(y);
    // n = int(fx); 2^n = 2^(n>>1) * 2^(n - (n>>1)), each factor a normal float
    f.get(fx).simd(SIMD.i32x4truncSatF32x4S).set(n);
    f.get(y);
    f.get(n).i32(1).simd(SIMD.i32x4shrS).i32x4(127).simd(SIMD.i32x4add).i32(23).simd(SIMD.i32x4shl);
    f.simd(SIMD.f32x4mul);
    f.get(n).get(n).i32(1).simd(SIMD.i32x4shrS).simd(0xb1 /* i32x4.sub */).i32x4(127).simd(SIMD.i32x4add);
    f.i32(23).simd(SIMD.i32x4shl).simd(SIMD.f32x4mul);
    // overflow -> +inf, underflow -> 0 (comparisons with NaN are false, so NaN passes through)
    f.set(y);
    f.f32x4(Infinity).get(y).get(x).f32x4(EXP_HI).simd(SIMD.f32x4gt).simd(SIMD.v128bitselect);
    f.set(y);
    f.f32x4(0).get(y).get(x).f32x4(EXP_LO).simd(SIMD.f32x4lt).simd(SIMD.v128bitselect);
  }

  /** tanh(x): odd 13/6 rational approximation on [-7.9053, 7.9053] (Eigen's float tanh);
   * |x| < 4e-4 returns x, which is exact to float32 there. Beyond the clamp (only when some lane
   * is) 1 - 2/(1 + exp(2|x|)) with x's sign, so large |x| gives exactly +-1 as Math.tanh does. */
  tanh(x: number): void {
    const f = this.f;
    const [xc, x2, p] = this.t as [number, number, number];
    const A = [-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-8,
      1.48572235717979e-5, 6.37261928875436e-4, 4.89352455891786e-3];
    const B = [1.19825839466702e-6, 1.18534705686654e-4, 2.268434632439e-3, 4.89352518554385e-3];
    f.get(x).f32x4(-7.90531110763549805).simd(SIMD.f32x4max).f32x4(7.90531110763549805).simd(SIMD.f32x4min).set(xc);
    f.get(xc).get(xc).simd(SIMD.f32x4mul).set(x2);
    f.f32x4(A[0]!);
    for (let i = 1; i < A.length; i++) this.mulAdd(x2, A[i]!);
    f.get(xc).simd(SIMD.f32x4mul).set(p);
    f.get(p);
    f.f32x4(B[0]!);
    for (let i = 1; i < B.length; i++) this.mulAdd(x2, B[i]!);
    f.simd(SIMD.f32x4div).set(p);
    f.get(x).get(p).get(x).simd(SIMD.f32x4abs).f32x4(4e-4).simd(SIMD.f32x4lt).simd(SIMD.v128bitselect);
    const [r, ax] = [this.t[6]!, this.t[7]!];
    f.set(r);
    f.get(x).simd(SIMD.f32x4abs).f32x4(7.90531110763549805).simd(SIMD.f32x4gt).op(0xfd, 0x53 /* v128.any_true */);
    f.op(0x04, 0x40); // if
    f.get(x).simd(SIMD.f32x4abs).get(x).simd(SIMD.f32x4abs).simd(SIMD.f32x4add).set(ax);
    f.f32x4(1).f32x4(2).f32x4(1);
    this.exp(ax);
    f.simd(SIMD.f32x4add).simd(SIMD.f32x4div).simd(SIMD.f32x4sub);
    // copysign: magnitude bits from the result, sign bit from x
    f.get(x).i32x4(-0x80000000).simd(SIMD.v128and).simd(SIMD.v128or);
    f.get(r).get(x).simd(SIMD.f32x4abs).f32x4(7.90531110763549805).simd(SIMD.f32x4gt).simd(SIMD.v128bitselect).set(r);
    f.op(0x0b); // end
    f.get(r);
  }

  /** sigmoid(x) = 1 / (1 + exp(-x)). */
  sigmoid(x: number): void {
    const f = this.f;
    const nx = this.t[5]!;
    f.get(x).simd(SIMD.f32x4neg).set(nx);
    f.f32x4(1);
    f.f32x4(1);
    this.exp(nx);
    f.simd(SIMD.f32x4add).simd(SIMD.f32x4div);
  }
}

