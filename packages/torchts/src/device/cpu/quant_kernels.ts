// cpu kernels of the weight-only quantized linears (composites linearInt8 / linearInt4):
// out[M, N] = x[M, K] @ dequant(W)^T (+ bias). Inputs: x [M, K] float32 (any strides), the
// quantized weight (int8 [N, K], or uint8 [N, K/2] with the even column in the low nibble and
// zero point 8), scales float32 [N, K/groupSize], optional bias float32 [N]; all but x contiguous.
// Few rows (decode) stream the quantized weight in wasm; many rows (prefill) dequantize it into
// a float32 scratch block and run the GEMM, which then matches the decomposition exactly.
// Without wasm (or with operands outside the shared memory) a plain JS loop does the same math.
import type { IRNode } from "../../ir/prims.js";
import type { Arr, Kernel } from "./codegen.js";
import { matmulF32 } from "./wasm/matmul.js";
import { PREMUL_MAX_GS, QROWS } from "./wasm/qgemv.js";
import { wasmRuntime, type WasmRuntime } from "./wasm/runtime.js";
import { QGEMV, nativeQ8GemvFn, nativeQ8GemvStats } from "./native/qgemv.js";
import { bridgeBlock } from "./native/blas.js";

/** Above this many rows the weight is dequantized once for the GEMM instead of streamed per 4 rows. */
const STREAM_MAX_M = 16;
const MIN_MACS_PER_THREAD = 1 << 16;

type Bits = 8 | 4;

export function inMem(rt: WasmRuntime, a: Arr | undefined): a is Arr & ArrayBufferView {
  return a !== undefined && ArrayBuffer.isView(a) && rt.buffers.has((a as ArrayBufferView).buffer);
}

export function check(n: IRNode<"composite">, bits: Bits): { M: number; K: number; N: number; gs: number; hasBias: boolean } {
  const [x, q, s, b] = n.inputs;
  const name = n.params.name;
  if (!x || !q || !s || x.shape.length !== 2) throw new Error(`cpu ${name}: expected a 2-d input and a weight`);
  const [M, K] = x.shape as [number, number];
  const N = q.shape[0]!;
  const G = s.shape[1]!;
  const gs = K / G;
  const contiguous = (v: { shape: readonly number[]; strides: readonly number[] }) => {
    let st = 1;
    for (let d = v.shape.length - 1; d >= 0; d--) {
      if (v.shape[d]! !== 1 && v.strides[d] !== st) return false;
      st *= v.shape[d]!;
    }
    return true;
  };
  const qk = bits === 8 ? K : K / 2;
  if (q.shape[1] !== qk || s.shape[0] !== N || !Number.isInteger(gs) || (bits === 4 && gs % 2 !== 0))
    throw new Error(`cpu ${name}: weight [${q.shape.join(", ")}] and scales [${s.shape.join(", ")}] do not fit an input of ${K} features`);
  if (!contiguous(q) || !contiguous(s) || (b && !contiguous(b))) throw new Error(`cpu ${name}: weight, scales and bias must be contiguous`);
  if (x.dtype !== "float32" || s.dtype !== "float32" || (b && b.dtype !== "float32") || n.out.dtype !== "float32")
    throw new Error(`cpu ${name}: float32 activations and scales only`);
  return { M, K, N, gs, hasBias: b !== undefined };
}

export function linearQuantKernel(bits: Bits): (n: IRNode<"composite">) => Kernel {
  return (n) => {
    const { M, K, N, gs, hasBias } = check(n, bits);
    const [sam, sak] = n.inputs[0]!.strides as [number, number];
    return (O, ins, offs) => {
      if (M === 0 || N === 0) return;
      const rt = wasmRuntime();
      const wasmOk = rt && (bits === 8 || gs % 32 === 0) && inMem(rt, ins[1]) && inMem(rt, ins[2]) && (!hasBias || inMem(rt, ins[3]));
      if (!wasmOk) return jsLinear(bits, M, K, N, gs, ins, offs, sam, sak, hasBias, O);
      if (M > STREAM_MAX_M) return dequantGemm(rt, bits, M, K, N, gs, ins, offs, sam, sak, hasBias, O);
      streamed(rt, bits, M, K, N, gs, ins, offs, sam, sak, hasBias, O);
    };
  };
}

/**
 * x [M, K] (any strides) as float32 rows in the wasm memory, `ld` bytes apart: x itself when it is
 * there with a contiguous last dim (and, with `dense`, rows K apart), else a staged copy whose
 * inputs are reordered by `perm` when given. release() frees the copy.
 */
export function stageRows(
  rt: WasmRuntime, X: Arr, xo: number, M: number, K: number, sam: number, sak: number,
  opts: { perm?: ((k: number) => number) | null; dense?: boolean } = {},
): { ptr: number; ld: number; release(): void } {
  const { perm, dense = false } = opts;
  if (!perm && inMem(rt, X) && X instanceof Float32Array && sak === 1 && (!dense || sam === K || M === 1))
    return { ptr: ptrOf(X, xo), ld: sam * 4, release: () => {} };
  const ptr = rt.arena.alloc(M * K * 4);
  const v = rt.view(Float32Array, ptr, M * K);
  for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) v[i * K + (perm ? perm(k) : k)] = X[xo + i * sam + k * sak]!;
  return { ptr, ld: K * 4, release: () => rt.arena.release(ptr) };
}

export const ptrOf = (a: Arr, off: number) => (a as unknown as ArrayBufferView).byteOffset + off * (a as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;

function kernelName(bits: Bits, gs: number, R: number): string {
  if (bits === 4 && gs === 32) return `q4gemv32_${R}`;
  return `q${bits}gemv${gs <= PREMUL_MAX_GS ? "s" : ""}${R}`;
}

function streamed(
  rt: WasmRuntime, bits: Bits, M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const oDirect = inMem(rt, O) && O instanceof Float32Array;
  // int4: per 32 inputs, the even ones then the odd ones (the nibble order of the weight)
  const int4Order = (k: number) => (k & ~31) | ((k & 1) << 4) | ((k & 31) >> 1);
  const x = stageRows(rt, ins[0]!, offs[0]!, M, K, sam, sak, { perm: bits === 4 ? int4Order : null, dense: true });
  const os = oDirect ? 0 : rt.arena.alloc(M * N * 4);
  try {
    const xptr = x.ptr;
    const optr = oDirect ? ptrOf(O, 0) : os;
    const args = [ptrOf(ins[1]!, offs[1]!), ptrOf(ins[2]!, offs[2]!)];
    const bptr = hasBias ? ptrOf(ins[3]!, offs[3]!) : 0;
    // one row stays on wasm under the AVX2 kernel: its byte-shuffle widening ran 10-30% faster on
    // an AVX2 EPYC, where the native kernel took 2-8 rows 1.2-1.7x faster; the AVX-512 kernel
    // takes every row count (bench/transformers/int8_gemv.ts)
    const nat = bits === 8 ? nativeQ8GemvFn(rt) : null;
    if (nat !== null && (M >= 2 || nat.kernel === 1)) nativeStreamed(rt, nat.fn, nat.kernel, M, K, N, gs, xptr, args, hasBias, bptr, optr);
    else
      for (let r0 = 0; r0 < M; r0 += QROWS) {
        const R = Math.min(QROWS, M - r0);
        rt.pool.run(rt.fn[kernelName(bits, gs, R)]!, N, [xptr + r0 * K * 4, ...args, optr + r0 * N * 4, N * 4, K, gs, bptr], 1, Math.ceil(MIN_MACS_PER_THREAD / (K * R)));
      }
    if (!oDirect) {
      const v = rt.view(Float32Array, os, M * N);
      for (let i = 0; i < M * N; i++) O[i] = v[i]!;
    }
  } finally {
    x.release();
    if (!oDirect) rt.arena.release(os);
  }
}

/** int8 rows on a native kernel (0 AVX2, 1 AVX-512): all M rows per weight row, weight rows across the threads. */
function nativeStreamed(
  rt: WasmRuntime, fn: number, kernel: 0 | 1, M: number, K: number, N: number, gs: number,
  xptr: number, args: number[], hasBias: boolean, bptr: number, optr: number,
): void {
  const b = bridgeBlock(rt, "q8Gemv", QGEMV.words);
  const w = b.words;
  w[QGEMV.x] = xptr; w[QGEMV.ldx] = K; w[QGEMV.M] = M; w[QGEMV.K] = K; w[QGEMV.gs] = gs; w[QGEMV.q] = args[0]!; w[QGEMV.s] = args[1]!;
  w[QGEMV.hasBias] = hasBias ? 1 : 0; w[QGEMV.bias] = bptr; w[QGEMV.out] = optr; w[QGEMV.ldo] = N; w[QGEMV.N] = N; w[QGEMV.kernel] = kernel;
  nativeQ8GemvStats.calls++;
  rt.pool.run(fn, N, [b.ptr], 1, Math.ceil(MIN_MACS_PER_THREAD / (K * M)));
}

function dequantGemm(
  rt: WasmRuntime, bits: Bits, M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const wp = rt.arena.alloc(N * K * 4);
  try {
    rt.pool.run(rt.fn[`deq${bits}`]!, N, [ptrOf(ins[1]!, offs[1]!), ptrOf(ins[2]!, offs[2]!), wp, K, gs], 1, Math.ceil(32768 / K));
    const W = rt.view(Float32Array, wp, N * K);
    matmulF32(M, K, N, ins[0]!, offs[0]!, sam, sak, W, 0, 1, K, O, 0);
    if (hasBias) addBias(O, M, N, ins[3]!, offs[3]!);
  } finally {
    rt.arena.release(wp);
  }
}

export function addBias(O: Arr, M: number, N: number, B: Arr, bo: number): void {
  for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) O[i * N + j] = O[i * N + j]! + B[bo + j]!;
}

/** The decomposition's math in plain JS: dequantize one weight row (float32), float64 dot products. */
function jsLinear(
  bits: Bits, M: number, K: number, N: number, gs: number,
  ins: Arr[], offs: number[], sam: number, sak: number, hasBias: boolean, O: Arr,
): void {
  const [X, Q, S] = ins as [Arr, Arr, Arr];
  const [xo, qo, so] = offs as [number, number, number];
  const G = K / gs;
  const w = new Float32Array(K);
  for (let n = 0; n < N; n++) {
    for (let k = 0; k < K; k++) {
      let qv: number;
      if (bits === 8) qv = Q[qo + n * K + k]!;
      else {
        const byte = Q[qo + ((n * K + k) >> 1)]!;
        qv = ((k & 1) === 0 ? byte & 15 : byte >> 4) - 8;
      }
      w[k] = qv * S[so + n * G + Math.floor(k / gs)]!;
    }
    for (let i = 0; i < M; i++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += X[xo + i * sam + k * sak]! * w[k]!;
      O[i * N + n] = Math.fround(acc);
    }
  }
  if (hasBias) addBias(O, M, N, ins[3]!, offs[3]!);
}
