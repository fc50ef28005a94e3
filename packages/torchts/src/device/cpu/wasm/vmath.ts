// Vectorized float32 math emitted inline into kernels: each function reads its argument from a
// v128 local and leaves the result on the stack. Accuracy is a few ulp (checked against
// Math.exp/Math.tanh (and erf against float64 erf) over wide ranges in test/device/cpu/wasm_kernels.test.ts and wasm_math.test.ts).
// Cost matters more than elegance here (these bound softmax and the fused activations): clamps
// use pmin/pmax (one x86 instruction each; an unordered compare keeps the first operand, so NaN
// still passes) instead of the NaN-canonicalizing min/max, and 2^n comes from the bits of the
// rounded sum x*log2(e) + 1.5*2^23 instead of nearest + trunc_sat (V8 lowers trunc_sat to ~7
// instructions).
import { Fn, SIMD, V128 } from "./emitter.js";

/**
 * The float32 unary ops whose values are VMath's whenever the wasm backend is on: every kernel computing
 * them (strict wasm, fused JS through the vm_* exports, fused wasm) agrees bit for bit.
 */
export const VMATH_OPS: ReadonlySet<string> = new Set(["exp", "tanh", "sigmoid", "erf"]);

const LOG2E = 1.4426950408889634;
const C1 = 0.693359375; // ln2 split in two so n*C1 is exact
const C2 = -2.12194440e-4;
// exp(r) = 1 + r*q(r) on [-ln2/2, ln2/2], relative minimax (Lawson), float32 coefficients,
// highest degree first; evaluated by Horner: 6 multiply-adds
const EXP_Q = [0.0013843653723597527, 0.00837415549904108, 0.04166800156235695, 0.16666431725025177, 0.4999999403953552, 1, 1];
/** x + MAGIC rounds x to an integer n (|n| < 2^22) whose bits are the low mantissa bits of the sum. */
const MAGIC = 12582912; // 1.5 * 2^23
// exp clamps: above EXP_HI the result overflows to +inf by itself (n = 128), below EXP_LO it
// rounds to 0 (n = -150, 2^n applied in two halves so the denormals come out right)
const EXP_HI = 88.8;
const EXP_LO = -104;
// expNonPos: n = -127 at the clamp, whose 2^n bits are those of +0 (a flush below ~-87.68)
const EXPN_LO = -88;
const TANH_CLAMP = 7.90531110763549805;
// erf (see VMath.erf): the split, the clamp, g's expansion point and the float32 coefficients
// (highest degree first) of q(x^2) ~ erf(x)/x - 1 and g(|x| - ERF_MID) ~ erfc(x)*exp(x^2)
const ERF_SPLIT = 0.875, ERF_HI = 4, ERF_MID = 2.4375;
const ERF_A = [8.675391291035339e-05, -0.000821110385004431, 0.005206747446209192, -0.026861583814024925,
  0.11283732950687408, -0.37612634897232056, 0.12837916612625122];
const ERF_B = [9.713853614812251e-06, 2.273601967317518e-05, 4.619076935341582e-05, -8.466002327622846e-05,
  0.00018477984122000635, -0.0008484939462505281, 0.0027160802856087685, -0.008636114187538624,
  0.026500804349780083, -0.07756106555461884, 0.21555238962173462];

const RELAXED_NMADD = 0x106; // f32x4.relaxed_nmadd: -(a*b) + c
const RELAXED_LANESELECT = 0x10b; // i32x4.relaxed_laneselect
const I32X4_SUB = 0xb1, I32X4_SHR_S = 0xac;

/** Scratch locals, allocated once per function and shared by every inline use. */
export class VMath {
  private readonly t: number[];
  constructor(
    private readonly f: Fn,
    private readonly fma = false,
  ) {
    this.t = Array.from({ length: 9 }, () => f.local(V128));
  }

  /** Stack [a] -> a*b + c (one relaxed madd when available). */
  private mulAdd(b: number, c: number): void {
    if (this.fma) this.f.get(b).f32x4(c).simd(SIMD.relaxedMadd);
    else this.f.get(b).simd(SIMD.f32x4mul).f32x4(c).simd(SIMD.f32x4add);
  }

  /** Stack [] -> c - a*b (c, a locals, b a constant). */
  private subMul(c: number, a: number, b: number): void {
    const f = this.f;
    if (this.fma) f.get(a).f32x4(b).get(c).simd(RELAXED_NMADD);
    else f.get(c).get(a).f32x4(b).simd(SIMD.f32x4mul).simd(SIMD.f32x4sub);
  }

  /** Stack [a, b, mask] -> a where mask, else b (masks are whole lanes, so relaxed is exact). */
  private select(): void {
    if (this.fma) this.f.simd(RELAXED_LANESELECT);
    else this.f.simd(SIMD.v128bitselect);
  }

  /** exp(x) over the whole float32 range (down to the denormals): Cody-Waite reduction to
   * r = x - n*ln2, exp(r) by polynomial, times 2^n; +inf above ~88.72, 0 below ~-103.97, NaN kept. */
  exp(x: number): void {
    const f = this.f;
    const [xc, t, r, y, s] = this.t as [number, number, number, number, number];
    f.get(x).f32x4(EXP_LO).simd(SIMD.f32x4pmax).f32x4(EXP_HI).simd(SIMD.f32x4pmin).set(xc);
    this.reduce(xc, t, r, MAGIC);
    this.poly(r);
    f.set(y);
    // 2^n = 2^(n>>1) * 2^(n - (n>>1)), both halves normal floats. T = n << 23: the magic's bits
    // shift out; (T >> 1) with bit 22 cleared is (n >> 1) << 23.
    f.get(t).i32(23).simd(SIMD.i32x4shl).set(t);
    f.get(t).i32(1).simd(I32X4_SHR_S).i32x4(-0x800000).simd(SIMD.v128and).set(s);
    f.get(y).get(s).i32x4(0x3f800000).simd(SIMD.i32x4add).simd(SIMD.f32x4mul);
    f.get(t).get(s).simd(I32X4_SUB).i32x4(0x3f800000).simd(SIMD.i32x4add).simd(SIMD.f32x4mul);
  }

  /**
   * exp(x) for x <= 0 (or NaN), e.g. x - max in softmax: one clamp below and a single 2^n
   * factor; results below 2^-126.5 (x < ~-87.68) flush to 0, -inf gives 0, NaN stays NaN.
   * Same reduction and polynomial as exp, so values agree with exp to an ulp outside the
   * flushed range, with no upper clamp and one 2^n factor (cheaper by about a third).
   */
  expNonPos(x: number): void {
    const f = this.f;
    const [xc, t, r, y] = this.t as [number, number, number, number];
    f.get(x).f32x4(EXPN_LO).simd(SIMD.f32x4pmax).set(xc);
    // bias 127: the integer bits of t are n + 127, so t << 23 is 2^n (+0 at n = -127)
    this.reduce(xc, t, r, MAGIC + 127);
    this.poly(r);
    f.set(y);
    f.get(y).get(t).i32(23).simd(SIMD.i32x4shl).simd(SIMD.f32x4mul);
  }

  /** t = xc*log2e + magic (rounded to an integer n + bias in its low bits), r = xc - n*ln2. */
  private reduce(xc: number, t: number, r: number, magic: number): void {
    const f = this.f;
    const fx = this.t[5]!;
    f.get(xc);
    if (this.fma) f.f32x4(LOG2E).f32x4(magic).simd(SIMD.relaxedMadd);
    else f.f32x4(LOG2E).simd(SIMD.f32x4mul).f32x4(magic).simd(SIMD.f32x4add);
    f.set(t);
    f.get(t).f32x4(magic).simd(SIMD.f32x4sub).set(fx);
    this.subMul(xc, fx, C1);
    f.set(r);
    this.subMul(r, fx, C2);
    f.set(r);
  }

  /** Stack [] -> exp(r) for |r| <= ln2/2: a degree-6 minimax polynomial (about an ulp). */
  private poly(r: number): void {
    const f = this.f;
    f.f32x4(EXP_Q[0]!);
    for (let i = 1; i < EXP_Q.length; i++) this.mulAdd(r, EXP_Q[i]!);
  }

  /**
   * log(x) for positive normal finite x (Cephes logf: x = m * 2^e with m in [sqrt(1/2),
   * sqrt(2)), degree-8 polynomial in m - 1). Zero, denormals, inf and NaN are not handled
   * (log-softmax adds sum - sum to its row sum's log, so a NaN sum stays NaN).
   */
  log(x: number): void {
    const f = this.f;
    const [m, e, z, lt] = this.t as [number, number, number, number];
    const L = [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
      -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1];
    // m in [0.5, 1): the mantissa with the exponent of 0.5; e = the exponent + 1
    f.get(x).i32x4(0x807fffff).simd(SIMD.v128and).i32x4(0x3f000000).simd(SIMD.v128or).set(m);
    f.get(x).i32(23).simd(I32X4_SHR_S).i32x4(126).simd(I32X4_SUB).simd(SIMD.f32x4convertI32x4S).set(e);
    // m < sqrt(1/2): use 2m - 1 and e - 1, else m - 1 (lt is all ones or zero per lane)
    f.get(m).f32x4(Math.SQRT1_2).simd(SIMD.f32x4lt).set(lt);
    f.get(e).get(lt).f32x4(1).simd(SIMD.v128and).simd(SIMD.f32x4sub).set(e);
    f.get(m).get(m).get(lt).simd(SIMD.v128and).simd(SIMD.f32x4add).f32x4(1).simd(SIMD.f32x4sub).set(m);
    f.get(m).get(m).simd(SIMD.f32x4mul).set(z);
    f.f32x4(L[0]!);
    for (let i = 1; i < L.length; i++) this.mulAdd(m, L[i]!);
    f.get(m).simd(SIMD.f32x4mul).get(z).simd(SIMD.f32x4mul);
    // y + e*C2 - z/2, then m + y + e*C1 (C1 + C2 = ln2, e*C1 exact)
    f.get(e).f32x4(C2).simd(SIMD.f32x4mul).simd(SIMD.f32x4add);
    f.get(z).f32x4(0.5).simd(SIMD.f32x4mul).simd(SIMD.f32x4sub);
    f.get(m).simd(SIMD.f32x4add);
    f.get(e).f32x4(C1).simd(SIMD.f32x4mul).simd(SIMD.f32x4add);
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
    const [r, ax] = [this.t[8]!, this.t[7]!]; // exp(ax) below uses t[0..6]
    f.get(x).f32x4(-TANH_CLAMP).simd(SIMD.f32x4pmax).f32x4(TANH_CLAMP).simd(SIMD.f32x4pmin).set(xc);
    f.get(xc).get(xc).simd(SIMD.f32x4mul).set(x2);
    f.f32x4(A[0]!);
    for (let i = 1; i < A.length; i++) this.mulAdd(x2, A[i]!);
    f.get(xc).simd(SIMD.f32x4mul).set(p);
    f.get(p);
    f.f32x4(B[0]!);
    for (let i = 1; i < B.length; i++) this.mulAdd(x2, B[i]!);
    f.simd(SIMD.f32x4div).set(p);
    f.get(x).simd(SIMD.f32x4abs).set(ax);
    f.get(x).get(p).get(ax).f32x4(4e-4).simd(SIMD.f32x4lt);
    this.select();
    f.set(r);
    f.get(ax).f32x4(TANH_CLAMP).simd(SIMD.f32x4gt).op(0xfd, 0x53 /* v128.any_true */);
    f.op(0x04, 0x40); // if
    f.get(ax).get(ax).simd(SIMD.f32x4add).set(ax);
    f.f32x4(1).f32x4(2).f32x4(1);
    this.exp(ax);
    f.simd(SIMD.f32x4add).simd(SIMD.f32x4div).simd(SIMD.f32x4sub);
    // copysign: magnitude bits from the result, sign bit from x
    f.get(x).i32x4(-0x80000000).simd(SIMD.v128and).simd(SIMD.v128or);
    f.get(r).get(x).simd(SIMD.f32x4abs).f32x4(TANH_CLAMP).simd(SIMD.f32x4gt);
    this.select();
    f.set(r);
    f.op(0x0b); // end
    f.get(r);
  }

  /**
   * erf(x), within about an ulp of float64 erf over the whole float32 range (checked in
   * wasm_math.test.ts). Both pieces are computed for every lane and one is selected:
   * |x| < 0.875: x + x*q(x^2), q a degree-6 relative minimax fit of erf(x)/x - 1 (the final
   * multiply-add keeps q's rounding an order below the result's); otherwise 1 - exp(-x^2)*g(|x|)
   * with x's sign, g a degree-10 polynomial in |x| - 2.4375 fitted to erfc(x)*exp(x^2) on
   * [0.875, 4] (weighted by exp(-x^2), i.e. absolute error on erf). |x| is clamped at 4, where
   * erf already rounds to +-1 (inf too); NaN passes through both pieces; +-0 gives +-0.
   */
  erf(x: number): void {
    const f = this.f;
    const [ax, u, pa] = [this.t[6]!, this.t[7]!, this.t[8]!]; // expNonPos below uses t[0..5]
    f.get(x).simd(SIMD.f32x4abs).f32x4(ERF_HI).simd(SIMD.f32x4pmin).set(ax);
    // small |x|: x + x*q(x^2)
    f.get(x).get(x).simd(SIMD.f32x4mul).set(u);
    f.f32x4(ERF_A[0]!);
    for (let i = 1; i < ERF_A.length; i++) this.mulAdd(u, ERF_A[i]!);
    if (this.fma) f.get(x).get(x).simd(SIMD.relaxedMadd);
    else f.get(x).simd(SIMD.f32x4mul).get(x).simd(SIMD.f32x4add);
    f.set(pa);
    // large |x|: 1 - exp(-x^2)*g(|x|), sign from x
    if (!this.fma) f.f32x4(1);
    f.get(ax).get(ax).simd(SIMD.f32x4mul).simd(SIMD.f32x4neg).set(u);
    this.expNonPos(u);
    f.get(ax).f32x4(ERF_MID).simd(SIMD.f32x4sub).set(u);
    f.f32x4(ERF_B[0]!);
    for (let i = 1; i < ERF_B.length; i++) this.mulAdd(u, ERF_B[i]!);
    if (this.fma) f.f32x4(1).simd(RELAXED_NMADD);
    else f.simd(SIMD.f32x4mul).simd(SIMD.f32x4sub);
    f.get(x).i32x4(-0x80000000).simd(SIMD.v128and).simd(SIMD.v128or).set(u);
    f.get(pa).get(u).get(ax).f32x4(ERF_SPLIT).simd(SIMD.f32x4lt);
    this.select();
  }

  /** sigmoid(x) = 1 / (1 + exp(-x)). */
  sigmoid(x: number): void {
    const f = this.f;
    const nx = this.t[7]!;
    f.get(x).simd(SIMD.f32x4neg).set(nx);
    f.f32x4(1);
    f.f32x4(1);
    this.exp(nx);
    f.simd(SIMD.f32x4add).simd(SIMD.f32x4div);
  }
}
