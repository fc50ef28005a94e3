// GPTQ (Frantar et al., 2022): round a Linear's weight one input column at a time and push each
// column's rounding error onto the columns not yet rounded, weighted by the inverse Hessian of the
// layer's squared output error, H = 2/n * sum x x^T over calibration inputs x. Round-to-nearest
// minimises each weight's own error; GPTQ minimises the error of W x on inputs like the
// calibration set's, which is what the logits see. Host math in float64; O(out * in^2).

/** Accumulates H = 2/n * sum x x^T for one layer from batches of inputs x [rows, in]. */
export class HessianAccumulator {
  readonly h: Float64Array;
  private n = 0;
  constructor(readonly inFeatures: number) {
    this.h = new Float64Array(inFeatures * inFeatures);
  }
  add(x: ArrayLike<number>, rows: number): void {
    const I = this.inFeatures;
    // running mean so that batches of any size weigh by their row count
    const total = this.n + rows;
    const keep = this.n / total;
    const w = 2 / total;
    const h = this.h;
    for (let i = 0; i < h.length; i++) h[i]! *= keep;
    for (let r = 0; r < rows; r++) {
      const base = r * I;
      for (let i = 0; i < I; i++) {
        const xi = x[base + i]! * w;
        if (xi === 0) continue;
        const row = i * I;
        for (let j = 0; j < I; j++) h[row + j]! += xi * x[base + j]!;
      }
    }
    this.n = total;
  }
  get rows(): number {
    return this.n;
  }
}

/** In-place lower Cholesky factor of a symmetric positive definite n x n matrix; throws if it is not. */
function cholesky(a: Float64Array, n: number): Float64Array {
  for (let j = 0; j < n; j++) {
    let d = a[j * n + j]!;
    for (let k = 0; k < j; k++) d -= a[j * n + k]! ** 2;
    if (!(d > 0)) throw new RangeError("gptq: the calibration Hessian is not positive definite (raise dampPercent)");
    const ljj = Math.sqrt(d);
    a[j * n + j] = ljj;
    for (let i = j + 1; i < n; i++) {
      let s = a[i * n + j]!;
      for (let k = 0; k < j; k++) s -= a[i * n + k]! * a[j * n + k]!;
      a[i * n + j] = s / ljj;
    }
    for (let k = j + 1; k < n; k++) a[j * n + k] = 0;
  }
  return a;
}

/** Upper factor U with U^T U = H^-1 (H is damped first), the form GPTQ's column updates read. */
export function inverseHessianFactor(h: Float64Array, n: number, dampPercent: number): Float64Array {
  const a = Float64Array.from(h);
  let mean = 0;
  for (let i = 0; i < n; i++) mean += a[i * n + i]!;
  mean /= n;
  const damp = dampPercent * (mean > 0 ? mean : 1);
  for (let i = 0; i < n; i++) a[i * n + i]! += damp;
  const l = cholesky(a, n);
  // inv(L) by forward substitution, column by column
  const li = new Float64Array(n * n);
  for (let c = 0; c < n; c++) {
    for (let i = c; i < n; i++) {
      let s = i === c ? 1 : 0;
      for (let k = c; k < i; k++) s -= l[i * n + k]! * li[k * n + c]!;
      li[i * n + c] = s / l[i * n + i]!;
    }
  }
  // H^-1 = inv(L)^T inv(L)
  const hinv = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j <= i; j++) {
      let s = 0;
      for (let k = i; k < n; k++) s += li[k * n + i]! * li[k * n + j]!;
      hinv[i * n + j] = s;
      hinv[j * n + i] = s;
    }
  const lo = cholesky(hinv, n); // H^-1 = lo lo^T, so U = lo^T
  const u = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) u[j * n + i] = lo[i * n + j]!;
  return u;
}

/**
 * Rounds w [O, I] (float64, modified in place) column by column; `round(o, i, v)` returns the
 * dequantized value chosen for weight (o, i) given its error-corrected value v, and records it.
 * With `actOrder`, columns go in order of decreasing H diagonal (the inputs with the most energy
 * first, GPTQ's desc_act), so that the large ones are not left to absorb everyone's error.
 * Input columns that never saw a non-zero calibration value are rounded as they are.
 */
export function gptqRound(w: Float64Array, O: number, I: number, hessian: Float64Array, dampPercent: number, round: (o: number, i: number, v: number) => number, actOrder = false): void {
  const perm = Array.from({ length: I }, (_, i) => i);
  if (actOrder) perm.sort((a, b) => hessian[b * I + b]! - hessian[a * I + a]! || a - b);
  const h = new Float64Array(I * I);
  for (let i = 0; i < I; i++) for (let j = 0; j < I; j++) h[i * I + j] = hessian[perm[i]! * I + perm[j]!]!;
  for (let i = 0; i < I; i++) if (h[i * I + i] === 0) h[i * I + i] = 1; // dead input: no error to move
  const u = inverseHessianFactor(h, I, dampPercent);
  for (let i = 0; i < I; i++) {
    const d = u[i * I + i]!;
    const col = perm[i]!;
    for (let o = 0; o < O; o++) {
      const row = o * I;
      const v = w[row + col]!;
      const err = (v - round(o, col, v)) / d;
      if (err === 0) continue;
      for (let j = i + 1; j < I; j++) w[row + perm[j]!]! -= err * u[i * I + j]!;
    }
  }
}
