// JS entry points for the elementwise/row kernels. Operands already in the shared memory (cpu
// buffers allocated in the arena) are used in place; others are staged through scratch blocks.
import { UNARY_WASM, type UnaryWasm } from "./elementwise.js";
import { wasmRuntime, type WasmRuntime } from "./runtime.js";

type F32 = { [i: number]: number; length: number };
const MIN_PER_THREAD = 32768; // elements: below this, waking a worker costs more than it saves
/** Strict eager sends float32 row sums (and the like) to wasm from this many elements. */
export const WASM_MIN_ELEMS = 2048;

export function isWasmUnary(op: string): op is UnaryWasm {
  return (UNARY_WASM as readonly string[]).includes(op);
}

/** True when `a` is a float32 view of this runtime's shared memory (zero-copy operand). */
export function inArena(rt: WasmRuntime, a: unknown): a is Float32Array {
  return a instanceof Float32Array && rt.buffers.has(a.buffer);
}

interface Staged {
  ptr: number;
  scratch: boolean;
}

function stageIn(rt: WasmRuntime, a: F32, off: number, n: number): Staged {
  if (inArena(rt, a)) return { ptr: a.byteOffset + off * 4, scratch: false };
  const ptr = rt.arena.alloc(n * 4);
  const v = new Float32Array(rt.memory.buffer, ptr, n);
  if (a instanceof Float32Array) v.set(a.subarray(off, off + n));
  else for (let i = 0; i < n; i++) v[i] = a[off + i]!;
  return { ptr, scratch: true };
}

function stageOut(rt: WasmRuntime, out: F32, n: number): Staged {
  if (inArena(rt, out)) return { ptr: out.byteOffset, scratch: false };
  return { ptr: rt.arena.alloc(n * 4), scratch: true };
}

function finish(rt: WasmRuntime, out: F32, n: number, o: Staged, ...ins: Staged[]): void {
  if (o.scratch) {
    const v = new Float32Array(rt.memory.buffer, o.ptr, n);
    if (out instanceof Float32Array) out.set(v);
    else for (let i = 0; i < n; i++) out[i] = v[i]!;
    rt.arena.release(o.ptr);
  }
  for (const s of ins) if (s.scratch) rt.arena.release(s.ptr);
}

/** out[0..n) = op(x[off..off+n)); out must be a whole buffer (kernels may finish its last vector). */
export function unaryF32(op: UnaryWasm, x: F32, off: number, n: number, out: F32): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (n === 0) return true;
  const s = stageIn(rt, x, off, n), o = stageOut(rt, out, n);
  rt.pool.run(rt.fn[`ew_${op}`]!, n, [s.ptr, o.ptr], 4, MIN_PER_THREAD / 4);
  finish(rt, out, n, o, s);
  return true;
}

/** out = tanh(x*a + b), one pass (the fused elementwise benchmark's kernel). */
export function affineTanhF32(x: F32, off: number, n: number, a: number, b: number, out: F32): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (n === 0) return true;
  const s = stageIn(rt, x, off, n), o = stageOut(rt, out, n);
  rt.pool.run(rt.fn.ew_affine_tanh!, n, [s.ptr, o.ptr, a, b], 4, MIN_PER_THREAD / 4);
  finish(rt, out, n, o, s);
  return true;
}

/** Softmax over each of `rows` contiguous rows of length `n` (online max, exp, normalize). */
export function softmaxRowsF32(x: F32, off: number, rows: number, n: number, out: F32): boolean {
  return rowsF32("softmax_rows", x, off, rows, n, out);
}

/** Log-softmax over each of `rows` contiguous rows of length `n`: (x - max) - log(sum(exp(x - max))). */
export function logSoftmaxRowsF32(x: F32, off: number, rows: number, n: number, out: F32): boolean {
  return rowsF32("logsoftmax_rows", x, off, rows, n, out);
}

/** One row kernel fn(r0, r1, src, dst, n) over `rows` rows, operands staged when outside the memory. */
function rowsF32(fn: "softmax_rows" | "logsoftmax_rows", x: F32, off: number, rows: number, n: number, out: F32): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (rows * n === 0) return true;
  const s = stageIn(rt, x, off, rows * n), o = stageOut(rt, out, rows * n);
  rt.pool.run(rt.fn[fn]!, rows, [s.ptr, o.ptr, n], 1, Math.ceil(MIN_PER_THREAD / n));
  finish(rt, out, rows * n, o, s);
  return true;
}

/** A row of n copies of v in the shared memory (a LayerNorm without weight or bias); release it after. */
function constRow(rt: WasmRuntime, n: number, v: number): number {
  const ptr = rt.arena.alloc(Math.max(1, n) * 4);
  rt.view(Float32Array, ptr, n).fill(v);
  return ptr;
}

/**
 * LayerNorm over each of `rows` contiguous rows of n floats (PyTorch's native_layer_norm):
 * out = (x - mean) * rstd * w + b, rstd = 1/sqrt(biased var + eps); w, b null: 1 and 0.
 */
export function layerNormRowsF32(x: F32, xOff: number, w: F32 | null, wOff: number, b: F32 | null, bOff: number, rows: number, n: number, eps: number, out: F32): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (rows * n === 0) return true;
  const s = stageIn(rt, x, xOff, rows * n), o = stageOut(rt, out, rows * n);
  const ws: Staged = w ? stageIn(rt, w, wOff, n) : { ptr: constRow(rt, n, 1), scratch: true };
  const bs: Staged = b ? stageIn(rt, b, bOff, n) : { ptr: constRow(rt, n, 0), scratch: true };
  rt.pool.run(rt.fn.layernorm_rows!, rows, [s.ptr, o.ptr, n, ws.ptr, bs.ptr, eps], 1, Math.ceil(MIN_PER_THREAD / n));
  finish(rt, out, rows * n, o, s, ws, bs);
  return true;
}

/**
 * LayerNorm's backward over `rows` contiguous rows of n floats, into out's (rows + 2) rows: the
 * input's gradient, then the weight's (sum of g * xhat over the rows) and the bias's (sum of g).
 * The statistics are recomputed as the forward computed them.
 */
export function layerNormBackwardF32(x: F32, xOff: number, g: F32, gOff: number, w: F32 | null, wOff: number, rows: number, n: number, eps: number, out: F32): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (rows * n === 0) {
    for (let i = 0; i < out.length; i++) out[i] = 0;
    return true;
  }
  const xs = stageIn(rt, x, xOff, rows * n), gs = stageIn(rt, g, gOff, rows * n), o = stageOut(rt, out, (rows + 2) * n);
  const ws: Staged = w ? stageIn(rt, w, wOff, n) : { ptr: constRow(rt, n, 1), scratch: true };
  const stats: Staged = { ptr: rt.arena.alloc(rows * 8), scratch: true };
  rt.pool.run(rt.fn.layernorm_dx_rows!, rows, [xs.ptr, gs.ptr, ws.ptr, o.ptr, n, stats.ptr, eps], 1, Math.ceil(MIN_PER_THREAD / n));
  const dw = o.ptr + rows * n * 4;
  rt.pool.run(rt.fn.layernorm_wb_cols!, n, [xs.ptr, gs.ptr, stats.ptr, dw, dw + n * 4, n, rows], 4, Math.ceil(MIN_PER_THREAD / (4 * rows)));
  finish(rt, out, (rows + 2) * n, o, xs, gs, ws, stats);
  return true;
}

/** out[r] = sum of row r (float32 accumulation in 4 lanes). */
export function sumRowsF32(x: F32, off: number, rows: number, n: number, out: F32): boolean {
  const rt = wasmRuntime();
  if (!rt) return false;
  if (rows === 0) return true;
  const s = stageIn(rt, x, off, rows * n), o = stageOut(rt, out, rows);
  rt.pool.run(rt.fn.sum_rows!, rows, [s.ptr, o.ptr, n], 1, Math.ceil(MIN_PER_THREAD / Math.max(1, n)));
  finish(rt, out, rows, o, s);
  return true;
}

// Below this many elements a copy stays on the calling thread.
const COPY_MIN_PER_THREAD = 65536;
/** Calls of the wasm row copies (tests check that cat and scatter_add take them). */
export const wasmCopyStats = { copyRows: 0, addRows: 0 };

/**
 * dst[dOff + r*ds + j] = src[sOff + r*ss + j*si] for r < rows, j < n, in place in the shared
 * memory; false (nothing written) when either array is not a float32 view of it.
 */
export function copyRowsF32(dst: F32, dOff: number, src: F32, sOff: number, rows: number, n: number, ds: number, ss: number, si: number): boolean {
  const rt = wasmRuntime();
  if (!rt || !inArena(rt, dst) || !inArena(rt, src)) return false;
  if (rows * n === 0) return true;
  wasmCopyStats.copyRows++;
  const args = [dst.byteOffset + dOff * 4, src.byteOffset + sOff * 4, n, ds, ss, si];
  rt.pool.run(rt.fn.copy_rows!, rows, args, 1, Math.ceil(COPY_MIN_PER_THREAD / n));
  return true;
}

/**
 * dst[offs[r] + j] += src[sOff + r*ss + j] for r < offs.length, j < n, rows in order (float32
 * adds); false (nothing written) when either array is not a float32 view of the shared memory.
 * The offsets must be in range (the caller checks them).
 */
export function addRowsF32(dst: F32, src: F32, sOff: number, offs: ArrayLike<number>, n: number, ss: number): boolean {
  const rt = wasmRuntime();
  if (!rt || !inArena(rt, dst) || !inArena(rt, src)) return false;
  const rows = offs.length;
  if (rows * n === 0) return true;
  wasmCopyStats.addRows++;
  const op = rt.arena.alloc(rows * 4);
  try {
    rt.view(Int32Array, op, rows).set(offs);
    rt.exports.add_rows!(0, rows, dst.byteOffset, src.byteOffset + sOff * 4, op, n, ss);
  } finally {
    rt.arena.release(op);
  }
  return true;
}

/** A Float32Array of n elements inside the shared memory (zero-copy operand); release() frees it. */
export function arenaF32(n: number): { data: Float32Array; release(): void } | null {
  const rt = wasmRuntime();
  if (!rt) return null;
  const ptr = rt.arena.alloc(Math.max(1, n) * 4);
  return { data: rt.view(Float32Array, ptr, n), release: () => rt.arena.release(ptr) };
}
