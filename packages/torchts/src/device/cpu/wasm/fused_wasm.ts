// Fused float32 kernels compiled to wasm SIMD at run time: one small module per kernel over the
// shared memory, its function added to the worker pool. Each node computes exactly what strict
// eager computes for it (f32 ops round like Math.fround; exp/tanh/sigmoid/erf are the VMath
// approximations the strict wasm kernels use), so results stay bit-identical. Patterns or ops
// not handled here return null and the caller keeps the JS fused kernel.
import type { IRNode } from "../../../ir/prims.js";
import { contiguousStrides, numel } from "../../../ir/shape.js";
import type { FusedGraph } from "../../../runtime/fused_graph.js";
import { collapse, type Arr } from "../codegen.js";
import { emitModule, Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { VMath, VMATH_OPS } from "./vmath.js";
import { wasmRuntime, type WasmRuntime } from "./runtime.js";
import { emitReduction, reductionPlan, type ReductionPlan } from "./fused_reduce.js";

const UNARY_OK = new Set(["identity", "neg", "abs", "sqrt", "rsqrt", "reciprocal", "exp", "tanh", "sigmoid", "erf", "floor", "ceil", "trunc", "round"]);
const BINARY_OK = new Set(["add", "sub", "mul", "div", "maximum", "minimum"]);
/**
 * Elements per thread below which waking workers costs more than it saves (cheap ops need more).
 * At most 16384: the small training step's [256, 128]-[256, 512] gradients, layer norms and bias
 * sums ran on one thread under the earlier 65536, and splitting them took ~0.13 ms off its
 * 3.0 ms compiled step (bench/RESULTS.md, session 18). A late worker costs little: the caller
 * claims the chunks it has not.
 */
function minElemsPerThread(g: FusedGraph): number {
  let cost = 0;
  for (const n of g.nodes) cost += n.prim === "unary" && VMATH_OPS.has((n as IRNode<"unary">).params.op) ? 12 : 1;
  return Math.min(16384, Math.max(4096, Math.floor(131072 / cost)));
}

const COMPARE: Record<string, number> = { eq: 0x41, ne: 0x42, lt: 0x43, gt: 0x44, le: 0x45, ge: 0x46 }; // f32x4.*

// bool values live in registers as lane masks (0 / all ones), in memory as bytes (0 / 1)
function nodeOk(n: IRNode): boolean {
  if (n.inputs.some((v) => v.strides.some((s) => s < 0))) return false;
  const f32 = (d: string) => d === "float32";
  if (n.prim === "where") {
    const [c, a, b] = n.inputs as [IRNode["inputs"][0], IRNode["inputs"][0], IRNode["inputs"][0]];
    return c.dtype === "bool" && f32(a.dtype) && f32(b.dtype) && f32(n.out.dtype);
  }
  if (n.prim === "cast") {
    const from = n.inputs[0]!.dtype, to = n.out.dtype;
    return (f32(from) || from === "bool") && (f32(to) || to === "bool");
  }
  if (n.prim === "binary" && COMPARE[(n as IRNode<"binary">).params.op] !== undefined)
    return n.out.dtype === "bool" && n.inputs.every((v) => f32(v.dtype));
  if (!f32(n.out.dtype) || n.inputs.some((v) => !f32(v.dtype))) return false;
  switch (n.prim) {
    case "unary":
      return UNARY_OK.has((n as IRNode<"unary">).params.op);
    case "binary":
      return BINARY_OK.has((n as IRNode<"binary">).params.op);
    case "reduce":
      return true; // checked by reductionPlan
    default:
      return false;
  }
}

/** Where a node operand comes from while emitting: a v128 local. */
export interface Ctx {
  f: Fn;
  m: VMath | null;
  /** v128 local holding external input k's value at the current element(s). */
  ext: (k: number) => number;
  /** v128 local of node j's value. */
  val: number[];
}

function operand(g: FusedGraph, c: Ctx, j: number, i: number): number {
  const s = g.srcs[j]![i]!;
  return "node" in s ? c.val[s.node]! : c.ext(s.ext);
}

/** Emit node j: its value ends in c.val[j]. */
export function emitNode(g: FusedGraph, c: Ctx, j: number): void {
  const f = c.f;
  const n = g.nodes[j]!;
  const a = operand(g, c, j, 0);
  const out = c.val[j]!;
  if (n.prim === "cast") {
    const from = n.inputs[0]!.dtype, to = n.out.dtype;
    if (from === to) f.get(a);
    else if (to === "bool") f.get(a).f32x4(0).simd(0x42); // JS: x !== 0 (NaN too)
    else f.get(a).f32x4(1).simd(SIMD.v128and); // true -> 1.0
    f.set(out);
    return;
  }
  if (n.prim === "where") {
    // JS: c !== 0 ? x : y
    f.get(operand(g, c, j, 1)).get(operand(g, c, j, 2)).get(a).simd(SIMD.v128bitselect).set(out);
    return;
  }
  if (n.prim === "binary" && COMPARE[(n as IRNode<"binary">).params.op] !== undefined) {
    f.get(a).get(operand(g, c, j, 1)).simd(COMPARE[(n as IRNode<"binary">).params.op]!).set(out);
    return;
  }
  if (n.prim === "binary") {
    const b = operand(g, c, j, 1);
    const op = (n as IRNode<"binary">).params.op;
    const simple: Record<string, number> = { add: SIMD.f32x4add, sub: SIMD.f32x4sub, mul: SIMD.f32x4mul, div: SIMD.f32x4div };
    if (simple[op] !== undefined) f.get(a).get(b).simd(simple[op]!);
    else {
      // JS: NaN if either is NaN, else (a > b ? a : b) — keeps b on ties (signed zeros)
      const cmp = op === "maximum" ? SIMD.f32x4gt : SIMD.f32x4lt;
      f.get(a).get(b).simd(SIMD.f32x4add);
      f.get(a).get(b).get(a).get(b).simd(cmp).simd(SIMD.v128bitselect);
      f.get(a).get(a).simd(F32X4_NE).get(b).get(b).simd(F32X4_NE).simd(SIMD.v128or);
      f.simd(SIMD.v128bitselect);
    }
    f.set(out);
    return;
  }
  const op = (n as IRNode<"unary">).params.op;
  switch (op) {
    case "identity": f.get(a); break;
    case "neg": f.get(a).simd(SIMD.f32x4neg); break;
    case "abs": f.get(a).simd(SIMD.f32x4abs); break;
    case "sqrt": f.get(a).simd(SIMD.f32x4sqrt); break;
    case "reciprocal": f.f32x4(1).get(a).simd(SIMD.f32x4div); break;
    case "floor": f.get(a).simd(SIMD.f32x4floor); break;
    case "ceil": f.get(a).simd(F32X4_CEIL); break;
    case "trunc": f.get(a).simd(F32X4_TRUNC); break;
    case "round": f.get(a).simd(SIMD.f32x4nearest); break;
    case "exp": c.m!.exp(a); break;
    case "tanh": c.m!.tanh(a); break;
    case "sigmoid": c.m!.sigmoid(a); break;
    case "erf": c.m!.erf(a); break;
    case "rsqrt": rsqrtF64(f, a); break;
    default: throw new Error(`fused wasm: unary ${op}`);
  }
  f.set(out);
}

/** JS computes 1/Math.sqrt(x) in float64 and rounds once: the same in two f64x2 halves. */
function rsqrtF64(f: Fn, a: number): void {
  // (1 / s): push 1 first, then s
  f.op(0xfd, 0x0c, ...new Uint8Array(new Float64Array([1, 1]).buffer));
  f.get(a).simd(0x5f).simd(0xef).simd(0xf3).simd(0x5e); // lo: f32x4.demote_f64x2_zero
  f.op(0xfd, 0x0c, ...new Uint8Array(new Float64Array([1, 1]).buffer));
  f.get(a).get(a).op(0xfd, 0x0d, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
  f.simd(0x5f).simd(0xef).simd(0xf3).simd(0x5e); // hi
  f.op(0xfd, 0x0d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23); // [lo0 lo1 hi0 hi1]
}

const F32X4_NE = 0x42, F32X4_CEIL = 0x67, F32X4_TRUNC = 0x69, F32X4_REPLACE_LANE = 0x20;

export function needsVMath(g: FusedGraph): boolean {
  return g.nodes.some((n) => n.prim === "unary" && VMATH_OPS.has((n as IRNode<"unary">).params.op));
}

/** Loads the K external pointers then Q output pointers from the argument block at `argp`. */
export function loadPtrs(f: Fn, argp: number, count: number): number[] {
  const ptrs: number[] = [];
  for (let k = 0; k < count; k++) {
    const l = f.local(I32);
    f.get(argp).mem(OP.i32load, 2, 4 * k).set(l);
    ptrs.push(l);
  }
  return ptrs;
}

/**
 * The (lo, hi, argp) function every generated kernel starts from: VMath scratch when an op
 * needs it, the argument pointers (K external inputs, then Q outputs) and a moving pointer for
 * each, and a vector local per external input and per node.
 */
export function kernelFrame(g: FusedGraph, fma: boolean) {
  const K = numExt(g), Q = g.outputs.length;
  const f = new Fn("k", [I32, I32, I32]);
  const m = needsVMath(g) ? new VMath(f, fma) : null;
  const base = loadPtrs(f, 2, K + Q);
  const p = base.map(() => f.local(I32));
  const e = Array.from({ length: K }, () => f.local(V128));
  const val = g.nodes.map(() => f.local(V128));
  return { f, m, K, Q, base, p, e, val };
}

/**
 * Elementwise: the output is contiguous; dims collapse over every operand. The innermost dim is
 * vectorized (unit stride: v128 loads, stride 0: one splat per row, other strides: lane
 * gathers); a scalar tail runs the same vector code on splatted values and stores lane 0.
 */
function elementwiseFn(g: FusedGraph, fma: boolean): { fn: Fn; rows: number; inner: number } {
  const shape = g.nodes[g.nodes.length - 1]!.out.shape;
  const K = numExt(g);
  const ext: (readonly number[])[] = [];
  g.srcs.forEach((s, j) => s.forEach((x, i) => "ext" in x && (ext[x.ext] = g.nodes[j]!.inputs[i]!.strides)));
  // an argument no node reads (a matmul epilogue's own operands): stride 0, never loaded
  const unused = Array.from({ length: K }, (_, k) => ext[k] === undefined);
  for (let k = 0; k < K; k++) ext[k] ??= shape.map(() => 0);
  const c = collapse(shape, [contiguousStrides(shape), ...ext]);
  if (c.shape.length === 0) {
    c.shape.push(1);
    c.strides.forEach((s) => s.push(0));
  }
  const nd = c.shape.length;
  const L = c.shape[nd - 1]!;
  const rows = numel(shape) / L;
  const { f, m, Q, base, p, e, val } = kernelFrame(g, fma);
  const [lo, hi] = [0, 1];
  const sk = Array.from({ length: K }, (_, k) => c.strides[k + 1]![nd - 1]!);
  const bytes = extBytes(g);
  const obytes = g.outputs.map((j) => (g.nodes[j]!.out.dtype === "bool" ? 1 : 4));
  const j = f.local(I32), n = f.local(I32), vend = f.local(I32), r = f.local(I32), rem = f.local(I32), idx = f.local(I32);
  const ctx: Ctx = { f, m, ext: (k) => e[k]!, val };

  const body = (vector: boolean) => {
    for (let k = 0; k < K; k++) {
      const s = sk[k]!;
      if (s === 0) continue; // splatted once per row
      if (bytes[k] === 1) loadMask(f, p[k]!, vector ? s : 0);
      else if (!vector) f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
      else if (s === 1) f.get(p[k]!).v128load();
      else {
        f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
        for (let l = 1; l < 4; l++) f.get(p[k]!).mem(OP.f32load, 2, 4 * s * l).op(0xfd, F32X4_REPLACE_LANE, l);
      }
      f.set(e[k]!);
    }
    for (let q = 0; q < g.nodes.length; q++) emitNode(g, ctx, q);
    g.outputs.forEach((o, q) => {
      const qp = p[K + q]!;
      if (obytes[q] === 1) storeMask(f, qp, val[o]!, vector);
      else if (vector) f.get(qp).get(val[o]!).v128store();
      else f.get(qp).get(val[o]!).lane(0).mem(OP.f32store, 2);
    });
    const w = vector ? 4 : 1;
    for (let k = 0; k < K; k++) if (sk[k] !== 0) f.get(p[k]!).i32(w * bytes[k]! * sk[k]!).op(OP.i32add).set(p[k]!);
    for (let q = 0; q < Q; q++) f.get(p[K + q]!).i32(obytes[q]! * w).op(OP.i32add).set(p[K + q]!);
  };
  const inner = () => {
    for (let k = 0; k < K; k++) {
      if (sk[k] !== 0 || unused[k]) continue;
      if (bytes[k] === 1) loadMask(f, p[k]!, 0);
      else f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
      f.set(e[k]!);
    }
    f.i32(0).set(j);
    f.get(n).i32(-4).op(OP.i32and).set(vend);
    f.forLt(j, vend, 4, () => body(true));
    f.forLt(j, n, 1, () => body(false));
  };
  if (nd === 1) {
    // lo/hi are elements
    for (let k = 0; k < K; k++) f.get(base[k]!).get(lo).i32(bytes[k]! * sk[k]!).op(OP.i32mul).op(OP.i32add).set(p[k]!);
    for (let q = 0; q < Q; q++) f.get(base[K + q]!).get(lo).i32(obytes[q]!).op(OP.i32mul).op(OP.i32add).set(p[K + q]!);
    f.get(hi).get(lo).op(OP.i32sub).set(n);
    inner();
  } else {
    // lo/hi are rows; each row's operand offsets come from its outer index
    f.i32(L).set(n);
    f.get(lo).set(r);
    f.forLt(r, hi, 1, () => {
      for (let k = 0; k < K; k++) f.get(base[k]!).set(p[k]!);
      f.get(r).set(rem);
      for (let d = nd - 2; d >= 0; d--) {
        const size = c.shape[d]!;
        // the outermost index is what remains (its size stays out of the code, so it is shared)
        if (d === 0) f.get(rem).set(idx);
        else {
          f.get(rem).i32(size).op(I32_REM_U).set(idx);
          f.get(rem).i32(size).op(I32_DIV_U).set(rem);
        }
        for (let k = 0; k < K; k++) {
          const st = c.strides[k + 1]![d]!;
          if (st !== 0) f.get(p[k]!).get(idx).i32(bytes[k]! * st).op(OP.i32mul).op(OP.i32add).set(p[k]!);
        }
      }
      for (let q = 0; q < Q; q++) f.get(base[K + q]!).get(r).i32(obytes[q]! * L).op(OP.i32mul).op(OP.i32add).set(p[K + q]!);
      inner();
    });
  }
  return { fn: f, rows: nd === 1 ? 0 : rows, inner: L };
}

export const I32_DIV_U = 0x6e, I32_REM_U = 0x70;

/** Bytes per element of each external input (1: a bool mask, else float32). */
function extBytes(g: FusedGraph): number[] {
  const out = new Array<number>(numExt(g)).fill(4);
  g.srcs.forEach((s, j) => s.forEach((x, i) => "ext" in x && g.nodes[j]!.inputs[i]!.dtype === "bool" && (out[x.ext] = 1)));
  return out;
}

/** Pushes the lane masks of 4 bool bytes (stride s; 0: one byte splatted). */
function loadMask(f: Fn, p: number, s: number): void {
  if (s === 0) f.get(p).simd(0x07, { align: 0, offset: 0 }); // v128.load8_splat
  else if (s === 1) f.get(p).simd(0x5c, { align: 0, offset: 0 }).simd(0x89).simd(0xa9); // load32_zero, u8 -> u16 -> u32
  else {
    f.get(p).simd(0x07, { align: 0, offset: 0 });
    for (let l = 1; l < 4; l++) f.get(p).mem(0x2d /* i32.load8_u */, 0, s * l).op(0xfd, 0x1c, l); // i32x4.replace_lane
  }
  f.i32x4(0).simd(0x38); // i32x4.ne: nonzero -> all ones
}

/** Stores mask lanes as bool bytes: 4 (vector) or lane 0 only. */
function storeMask(f: Fn, q: number, v: number, vector: boolean): void {
  for (let l = 0; l < (vector ? 4 : 1); l++) f.get(q).get(v).op(0xfd, 0x1b, l).i32(1).op(OP.i32and).mem(0x3a /* i32.store8 */, 0, l);
}

export function numExt(g: FusedGraph): number {
  let m = 0;
  for (const s of g.srcs) for (const x of s) if ("ext" in x) m = Math.max(m, x.ext + 1);
  return m;
}

export type WasmFusedKernel = (outs: Arr[], ins: Arr[], offs: number[]) => boolean;

/** The extent (elements past the view offset) each external input may read. */
function extents(g: FusedGraph): number[] {
  const out: number[] = [];
  g.srcs.forEach((s, j) =>
    s.forEach((x, i) => {
      if (!("ext" in x)) return;
      const v = g.nodes[j]!.inputs[i]!;
      let e = 1;
      v.shape.forEach((d, k) => (e += (d - 1) * v.strides[k]!));
      out[x.ext] = numel(v.shape) === 0 ? 0 : e;
    }),
  );
  for (let k = 0; k < numExt(g); k++) out[k] ??= -1; // not read
  return out;
}

/** Sizes of the output buffers, in output order. */
function outSizes(g: FusedGraph, red: ReductionPlan | null): number[] {
  return g.outputs.map((j) => (red && j < g.reduceAt ? red.inElems : numel(g.nodes[j]!.out.shape)));
}

/** Strict eager's wasm kernel for one float32 unary/binary/where/cast node (any strides, broadcasting). */
export function wasmSingle(n: IRNode): WasmFusedKernel | null {
  if (!(n.prim === "unary" || n.prim === "binary" || n.prim === "where" || n.prim === "cast") || !nodeOk(n) || !wasmRuntime()) return null;
  return build({ kind: "elementwise", reduceAt: -1, nodes: [n], srcs: [n.inputs.map((_, i) => ({ ext: i }))], outputs: [0] });
}

/**
 * Strict eager's wasm kernel for one float32 reduce node (sum/prod/max/min, any kept and reduced
 * dims the fused reducer's two layouts cover): the fused reducer reproduces the JS reduction's
 * float64 accumulation order, so the value is the JS kernel's to the bit.
 */
export function wasmSingleReduce(n: IRNode<"reduce">): WasmFusedKernel | null {
  if (n.params.op === "any" || n.params.op === "all" || !wasmRuntime()) return null;
  return build({ kind: "reduction", reduceAt: 0, nodes: [n], srcs: [[{ ext: 0 }]], outputs: [0] });
}

/** Kernels built / declined (JS kernel kept) / run in wasm: tests check the wasm path is taken. */
export const wasmFusedStats = { built: 0, declined: 0, runs: 0 };

/** A wasm kernel for g, or null when some op or pattern is not supported. */
export function buildWasmFused(g: FusedGraph): WasmFusedKernel | null {
  const k = build(g);
  if (k) wasmFusedStats.built++;
  else wasmFusedStats.declined++;
  return k;
}

function build(g: FusedGraph): WasmFusedKernel | null {
  const maybe = wasmRuntime();
  if (!maybe) return null;
  const rt: WasmRuntime = maybe;
  if (g.kind === "matmul" || !g.nodes.every(nodeOk)) return null;
  let fn: Fn, units: number, align: number, minPer: number;
  let red: ReductionPlan | null = null;
  const bytes = extBytes(g);
  const obytes = g.outputs.map((j) => (g.nodes[j]!.out.dtype === "bool" ? 1 : 4));
  if (g.kind === "reduction") {
    if (g.nodes.some((n) => n.out.dtype !== "float32" || n.inputs.some((v) => v.dtype !== "float32"))) return null;
    red = reductionPlan(g);
    if (!red) return null;
    fn = emitReduction(g, red, rt.features.relaxedSimd);
    units = red.outElems;
    align = red.layout === "cols" ? 4 : 1;
    minPer = Math.ceil(minElemsPerThread(g) / Math.max(1, red.n * align));
  } else {
    const total = numel(g.nodes[g.nodes.length - 1]!.out.shape);
    if (total === 0) return null;
    const e = elementwiseFn(g, rt.features.relaxedSimd);
    fn = e.fn;
    if (e.rows === 0) {
      units = total;
      align = 4;
      minPer = minElemsPerThread(g) / 4;
    } else {
      units = e.rows;
      align = 1;
      minPer = Math.ceil(minElemsPerThread(g) / e.inner);
    }
  }
  let index: number;
  try {
    index = addKernel(rt, fn);
  } catch {
    return null; // e.g. a browser main thread refusing to compile a large module synchronously
  }
  const K = numExt(g);
  const ext = extents(g);
  const sizes = outSizes(g, red);
  const argp = rt.arena.alloc(4 * (K + sizes.length));
  const argv = rt.view(Int32Array, argp, K + sizes.length);
  const arena = rt.arena;
  return (outs, ins, offs) => {
    if (wasmRuntime() !== rt) return false; // the backend was switched since this was built
    const scratch: number[] = [];
    const staged: [number, number][] = [];
    try {
      if (!stage(outs, ins, offs, scratch, staged)) return release(arena, scratch, false);
    } catch (e) {
      if (e instanceof RangeError) return release(arena, scratch, false); // the memory cannot grow: JS kernel
      throw e;
    }
    rt.pool.run(index, units, [argp], align, minPer);
    wasmFusedStats.runs++;
    for (const [q, ptr] of staged) (outs[q] as Float32Array).set(rt.view((obytes[q] === 1 ? Uint8Array : Float32Array) as typeof Float32Array, ptr, sizes[q]!));
    return release(arena, scratch, true);
  };

  /** Argument pointers; operands outside the shared memory are copied into scratch blocks. */
  function stage(outs: Arr[], ins: Arr[], offs: number[], scratch: number[], staged: [number, number][]): boolean {
    for (let k = 0; k < K; k++) {
      if (ext[k] === -1) {
        argv[k] = 0;
        continue;
      }
      const a = ins[k]! as Float32Array | Uint8Array;
      const Ctor = bytes[k] === 1 ? Uint8Array : Float32Array;
      if (!(a instanceof Ctor)) return false;
      if (rt.buffers.has(a.buffer)) argv[k] = a.byteOffset + bytes[k]! * offs[k]!;
      else {
        const ptr = arena.alloc(bytes[k]! * Math.max(1, ext[k]!));
        rt.view(Ctor as typeof Float32Array, ptr, ext[k]!).set(a.subarray(offs[k]!, offs[k]! + ext[k]!) as never);
        scratch.push(ptr);
        argv[k] = ptr;
      }
    }
    for (let q = 0; q < sizes.length; q++) {
      const o = outs[q]! as Float32Array | Uint8Array;
      if (!(o instanceof (obytes[q] === 1 ? Uint8Array : Float32Array))) return false;
      if (rt.buffers.has(o.buffer)) argv[K + q] = o.byteOffset;
      else {
        const ptr = arena.alloc(obytes[q]! * Math.max(1, sizes[q]!));
        scratch.push(ptr);
        staged.push([q, ptr]);
        argv[K + q] = ptr;
      }
    }
    return true;
  }
}

function release(arena: WasmRuntime["arena"], blocks: number[], ok: boolean): boolean {
  for (const b of blocks) arena.release(b);
  return ok;
}

// Identical code is compiled once: flat (contiguous or scalar-broadcast) kernels carry no sizes,
// so the same op chain over tensors of any length (growing sequence lengths...) reuses one module.
const compiled = new WeakMap<WasmRuntime, Map<string, number>>();

function addKernel(rt: WasmRuntime, fn: Fn): number {
  const bytes = emitModule([fn], { initial: 32, maximum: 65536 });
  let key = "";
  for (let i = 0; i < bytes.length; i += 4096) key += String.fromCharCode(...bytes.subarray(i, i + 4096));
  let byCode = compiled.get(rt);
  if (!byCode) compiled.set(rt, (byCode = new Map()));
  const hit = byCode.get(key);
  if (hit !== undefined) return hit;
  const index = compileKernel(rt, bytes);
  byCode.set(key, index);
  return index;
}

/** One module per kernel, exporting "k"; the pool gets its function (workers load it lazily). */
function compileKernel(rt: WasmRuntime, bytes: Uint8Array): number {
  const module = new WebAssembly.Module(bytes as BufferSource);
  const inst = new WebAssembly.Instance(module, { env: { memory: rt.memory as unknown as WebAssembly.Memory } });
  return rt.pool.addModule(module, ["k"], [(inst.exports as Record<string, (...a: number[]) => void>).k!]);
}
