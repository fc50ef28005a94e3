// Scalar math that JavaScript's Math lacks, accurate to float64.
import { roundBF16, roundF16 } from "../../ir/dtype.js";

const TWO_OVER_SQRT_PI = 1.1283791670955126;

export function erf(x: number): number {
  if (x !== x) return NaN;
  const ax = Math.abs(x);
  if (ax < 2.5) {
    // Maclaurin series; terms shrink fast enough that cancellation costs < 1e-13 here.
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let n = 1; n < 200; n++) {
      term *= -x2 / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return TWO_OVER_SQRT_PI * sum;
  }
  if (ax > 6) return x > 0 ? 1 : -1;
  // erfc by continued fraction, evaluated bottom-up.
  let f = 0;
  for (let k = 60; k >= 1; k--) f = (k / 2) / (ax + f);
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / (ax + f);
  return x > 0 ? 1 - erfc : erfc - 1;
}

/** Round half to even, as torch.round (nearbyint). */
export function roundEven(x: number): number {
  if (!Number.isFinite(x)) return x;
  const r = Math.round(x);
  if (Math.abs(x - Math.trunc(x)) === 0.5) return 2 * Math.round(x / 2);
  return r;
}

export function sign(x: number): number {
  return x > 0 ? 1 : x < 0 ? -1 : x === 0 ? 0 : x; // NaN stays NaN
}

export const H = {
  erf,
  roundEven,
  sign,
  f16: roundF16,
  bf16: roundBF16,
};

// ---- Philox4x32-10: counter-based, so any element's random number is computable anywhere ----
function mulhilo(a: number, b: number, out: Uint32Array, i: number): void {
  const aH = a >>> 16;
  const aL = a & 0xffff;
  const bH = b >>> 16;
  const bL = b & 0xffff;
  const t = aL * bL;
  const m1 = aH * bL + (t >>> 16);
  const m2 = aL * bH + (m1 & 0xffff);
  out[i] = aH * bH + Math.floor(m1 / 65536) + Math.floor(m2 / 65536); // hi
  out[i + 1] = Math.imul(a, b); // lo
}

const tmp = new Uint32Array(4);
/** Philox4x32-10 of counter (c0..c3) under key (k0, k1), written to out[0..3]. */
export function philox(c0: number, c1: number, c2: number, c3: number, k0: number, k1: number, out: Uint32Array): void {
  let x0 = c0 >>> 0;
  let x1 = c1 >>> 0;
  let x2 = c2 >>> 0;
  let x3 = c3 >>> 0;
  let key0 = k0 >>> 0;
  let key1 = k1 >>> 0;
  for (let r = 0; r < 10; r++) {
    mulhilo(0xd2511f53, x0, tmp, 0);
    mulhilo(0xcd9e8d57, x2, tmp, 2);
    const n0 = (tmp[2]! ^ x1 ^ key0) >>> 0;
    const n1 = tmp[3]!;
    const n2 = (tmp[0]! ^ x3 ^ key1) >>> 0;
    const n3 = tmp[1]!;
    x0 = n0;
    x1 = n1;
    x2 = n2;
    x3 = n3;
    key0 = (key0 + 0x9e3779b9) >>> 0;
    key1 = (key1 + 0xbb67ae85) >>> 0;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}
