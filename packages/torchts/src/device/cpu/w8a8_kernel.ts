// cpu kernel of the composite linearW8A8: int8 weights [N, K] with scales [N, K/gs] and int8
// activations quantized per row (token) on the fly:
//   sx[i] = max(max_k |x[i, k]| / 127, 2^-126), xq[i, k] = clamp(round_half_even(x[i, k] / sx[i]), -127, 127)
//   out[i, n] = (sum_g f32(sum_{k in g} xq[i, k] * q[n, k]) * s[n, g]) * sx[i] (+ bias[n])
// (the decomposition, nn/functional/quantized.ts, is linear(xq, q * s) * sx + bias).
// Few rows (decode): each row is quantized by wasm on the calling thread, then the exact integer
// dot products stream the weight across the threads (wasm/qdot.ts). Many rows (prefill): on
// AVX-512 VNNI CPUs the native int8 GEMM (native/w8a8.ts) computes the decode formula for all
// rows at once, bit for bit; elsewhere the quantized rows, q * sx in float32, go through the
// float GEMM with the dequantized weight (the same products up to float32 rounding).
// Without wasm a JS loop computes the decode formula bit for bit (same integers, same float32 steps).
import type { IRNode } from "../../ir/prims.js";
import type { Arr, Kernel } from "./codegen.js";
import { matmulF32 } from "./wasm/matmul.js";
import { MIN_ACT_SCALE, Q8_MAX_GROUP, actBytes } from "./wasm/qdot.js";
import { wasmRuntime, type WasmRuntime } from "./wasm/runtime.js";
import { addBias, check, inMem, ptrOf, stageRows } from "./quant_kernels.js";
import { nativeW8A8Fns, nativeW8A8Stats, Q8_ROWS, W8A8_MAX_GROUP, W8A8_MR, W8A8_SLAB } from "./native/w8a8.js";

const STREAM_MAX_M = 16;
const MIN_MACS_PER_THREAD = 1 << 16;
const f32 = Math.fround;

export function linearW8A8Kernel(n: IRNode<"composite">): Kernel {
  const { M, K, N, gs, hasBias } = check(n, 8);
  const [sam, sak] = n.inputs[0]!.strides as [number, number];
  return (O, ins, offs) => {
    if (M === 0 || N === 0) return;
    const rt = wasmRuntime();
    const wasmOk = rt && gs <= Q8_MAX_GROUP && inMem(rt, ins[1]) && inMem(rt, ins[2]) && (!hasBias || inMem(rt, ins[3]));
    if (!wasmOk) return jsW8A8(M, K, N, gs, ins, offs, sam, sak, hasBias, O);
    if (M > STREAM_MAX_M) return prefill(rt, M, K, N, gs, ins, offs, sam, sak, hasBias, O);
    decode(rt, M, K, N, gs, ins, offs, sam, sak, hasBias, O);
  };
}

function decode(
  rt: WasmRuntime, M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const x = stageRows(rt, ins[0]!, offs[0]!, M, K, sam, sak);
  const oDirect = inMem(rt, O) && O instanceof Float32Array;
  // the quantized row and its scale
  const rowBytes = actBytes(K);
  const qs = rt.arena.alloc(rowBytes + 16);
  const os = oDirect ? 0 : rt.arena.alloc(M * N * 4);
  try {
    const sxp = qs + rowBytes;
    const optr = oDirect ? ptrOf(O, 0) : os;
    const args = [ptrOf(ins[1]!, offs[1]!), ptrOf(ins[2]!, offs[2]!)];
    const bptr = hasBias ? ptrOf(ins[3]!, offs[3]!) : 0;
    // q8dotp needs groups that start at multiples of 16, q8dotp4 one group of whole 16-blocks
    const kernel = gs === K && K % 16 === 0 ? "q8dotp4" : gs % 16 === 0 || gs === K ? "q8dotp" : "q8dot";
    const act = rt.exports.q8act!, dot = rt.fn[kernel]!, align = kernel === "q8dotp4" ? 4 : 1;
    const minUnits = Math.ceil(MIN_MACS_PER_THREAD / (K * align));
    for (let i = 0; i < M; i++) {
      act(x.ptr + i * x.ld, K, qs, sxp);
      rt.pool.run(dot, N, [qs, sxp, ...args, optr + i * N * 4, K, gs, bptr], align, minUnits);
    }
    if (!oDirect) {
      const v = rt.view(Float32Array, os, M * N);
      for (let i = 0; i < M * N; i++) O[i] = v[i]!;
    }
  } finally {
    x.release();
    rt.arena.release(qs);
    if (!oDirect) rt.arena.release(os);
  }
}

/** Round half to even (torch.round), for values already rounded to float32. */
function roundEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Quantizes row i of x into q (integers) and returns its scale (the wasm q8act's float32 steps). */
function quantizeRow(X: Arr, base: number, sak: number, K: number, q: { [k: number]: number }, qo: number): number {
  let m = 0;
  for (let k = 0; k < K; k++) {
    const a = Math.abs(X[base + k * sak]!);
    // NaN propagates like wasm's f32.max
    m = a > m || Number.isNaN(a) ? a : m;
  }
  const sx = Number.isNaN(m) ? NaN : Math.max(f32(m / 127), MIN_ACT_SCALE);
  for (let k = 0; k < K; k++) {
    const v = roundEven(f32(X[base + k * sak]! / sx));
    q[qo + k] = Number.isNaN(v) ? 0 : Math.max(-127, Math.min(127, v));
  }
  return sx;
}

/** The prefill on the native int8 GEMM: rows quantized once, then column shares across the threads. */
function nativePrefill(
  rt: WasmRuntime, fn: { q8: number; slab: number }, M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const x = stageRows(rt, ins[0]!, offs[0]!, M, K, sam, sak);
  const Kp = Math.ceil(K / 4) * 4, Mp = Math.ceil(M / W8A8_MR) * W8A8_MR;
  const oDirect = inMem(rt, O) && O instanceof Float32Array;
  const xu = rt.arena.alloc(Mp * Kp), sx = rt.arena.alloc(M * 4);
  const pq = rt.arena.alloc(Q8_ROWS.words * 4), pw = rt.arena.alloc(W8A8_SLAB.words * 4);
  const os = oDirect ? 0 : rt.arena.alloc(M * N * 4);
  try {
    const Q = rt.view(Int32Array, pq, Q8_ROWS.words);
    Q.set([x.ptr, x.ld / 4, K, xu, Kp, Kp, sx, M]);
    rt.pool.run(fn.q8, M, [pq], 1, Math.ceil(16384 / K));
    // whole 32-column panels, at most 8 shares (each packs only its own columns)
    const share = Math.max(64, Math.ceil(Math.ceil(N / 8) / 32) * 32);
    const W = rt.view(Int32Array, pw, W8A8_SLAB.words);
    W.set([
      xu, Kp, Kp, M, Mp, N, K, gs, ptrOf(ins[1]!, offs[1]!), ptrOf(ins[2]!, offs[2]!), hasBias ? 1 : 0,
      hasBias ? ptrOf(ins[3]!, offs[3]!) : 0, oDirect ? ptrOf(O, 0) : os, N, sx, share,
    ]);
    nativeW8A8Stats.calls++;
    rt.pool.run(fn.slab, Math.ceil(N / share), [pw], 1, 1);
    if (!oDirect) {
      const v = rt.view(Float32Array, os, M * N);
      for (let i = 0; i < M * N; i++) O[i] = v[i]!;
    }
  } finally {
    x.release();
    for (const p of [xu, sx, pq, pw]) rt.arena.release(p);
    if (!oDirect) rt.arena.release(os);
  }
}

function prefill(
  rt: WasmRuntime, M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const nat = (gs % 4 === 0 || gs === K) && gs <= W8A8_MAX_GROUP && (!hasBias || ins[3] instanceof Float32Array) ? nativeW8A8Fns(rt) : null;
  if (nat) return nativePrefill(rt, nat, M, K, N, gs, ins, offs, sam, sak, hasBias, O);
  const x = stageRows(rt, ins[0]!, offs[0]!, M, K, sam, sak);
  const xp = rt.arena.alloc(M * K * 4), wp = rt.arena.alloc(N * K * 4);
  try {
    rt.pool.run(rt.fn.q8rows!, M, [x.ptr, x.ld, K, xp], 1, Math.ceil(16384 / K));
    rt.pool.run(rt.fn.deq8!, N, [ptrOf(ins[1]!, offs[1]!), ptrOf(ins[2]!, offs[2]!), wp, K, gs], 1, Math.ceil(32768 / K));
    matmulF32(M, K, N, rt.view(Float32Array, xp, M * K), 0, K, 1, rt.view(Float32Array, wp, N * K), 0, 1, K, O, 0);
    if (hasBias) addBias(O, M, N, ins[3]!, offs[3]!);
  } finally {
    x.release();
    rt.arena.release(xp);
    rt.arena.release(wp);
  }
}

/** The decode kernel's math in plain JS: exact integer sums, then the same float32 steps. */
function jsW8A8(
  M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const [X, Q, S] = ins as [Arr, Arr, Arr];
  const [xo, qo, so] = offs as [number, number, number];
  const B = hasBias ? ins[3]! : null, bo = offs[3] ?? 0;
  const G = K / gs;
  const xq = new Int32Array(K);
  for (let i = 0; i < M; i++) {
    const sx = quantizeRow(X, xo + i * sam, sak, K, xq, 0);
    for (let n = 0; n < N; n++) {
      let tot = 0;
      for (let g = 0; g < G; g++) {
        let d = 0;
        for (let k = g * gs; k < (g + 1) * gs; k++) d += xq[k]! * Q[qo + n * K + k]!;
        tot = f32(tot + f32(f32(d) * S[so + n * G + g]!));
      }
      O[i * N + n] = f32(f32(tot * sx) + (B ? B[bo + n]! : 0));
    }
  }
}
