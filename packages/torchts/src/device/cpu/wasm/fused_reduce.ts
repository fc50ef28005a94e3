// Fused reductions in wasm: an elementwise prologue computed 4 elements at a time, a reduction
// over contiguous runs (the reduced dims trail the kept ones), and an epilogue per output.
// Accumulation mirrors strict eager exactly: the JS reduction adds in float64 in index order
// (here: lanes are added one by one, in order), max/min keep the first of equal values, and a
// float32 sum over the last contiguous dim of >= WASM_MIN_ELEMS elements is the 4-lane float32
// sum_rows kernel, whose order is reproduced.
import type { IRNode } from "../../../ir/prims.js";
import { contiguousStrides, isContiguous, numel } from "../../../ir/shape.js";
import type { FusedGraph } from "../../../runtime/fused_graph.js";
import { collapse } from "../codegen.js";
import { F32, Fn, I32, OP, SIMD, V128, type ValType } from "./emitter.js";
import { emitNode, I32_DIV_U, I32_REM_U, kernelFrame, numExt, type Ctx } from "./fused_wasm.js";
import { VMath } from "./vmath.js";
import { WASM_MIN_ELEMS } from "./ops.js";

const F64 = 0x7c as unknown as ValType;
const F64_ADD = 0xa0, F64_MUL = 0xa2, F64_PROMOTE = 0xbb, F32_DEMOTE = 0xb6, F32_GT = 0x5e, F32_LT = 0x5d, F32_NE = 0x5c;

export interface ReductionPlan {
  op: "sum" | "prod" | "max" | "min";
  n: number; // elements reduced per output
  outElems: number;
  inElems: number;
  kept: { size: number; dim: number }[]; // kept dims of size > 1, outermost first
  inner: number[]; // per external input: stride within a run (prologue inputs; 0 for epilogue ones)
  prologue: boolean[]; // per external input: read per input element (else per output element)
  strides: (readonly number[])[]; // per external input: its strides
  f32Lanes: boolean; // strict runs this sum as the 4-lane float32 sum_rows kernel
  /** rows: each output reduces a contiguous run; cols: kept dims trail, outputs are vectorized. */
  layout: "rows" | "cols";
  outer: number[]; // cols: per external input, its stride along the output index (within a row when rowLen)
  /**
   * cols, when some input's kept strides do not collapse to one (a [B, T, 1] statistic broadcast
   * over C in a layer norm's weight gradient): the kept index is rows of rowLen (a multiple of 4,
   * so a vector of outputs never straddles two), with stride outerRow per row; 0 otherwise.
   */
  rowLen: number;
  outerRow: number[];
}

/** True when strict eager sums this reduce with the wasm sum_rows kernel (float32 lanes). */
export function strictUsesSumRows(red: IRNode<"reduce">): boolean {
  const v = red.inputs[0]!;
  const nd = v.shape.length;
  return red.params.op === "sum" && v.dtype === "float32" && red.out.dtype === "float32" && red.params.axes.length === 1 &&
    red.params.axes[0] === nd - 1 && numel(v.shape) >= WASM_MIN_ELEMS && isContiguous(v.shape, v.strides);
}

export function reductionPlan(g: FusedGraph): ReductionPlan | null {
  const r = g.reduceAt;
  const red = g.nodes[r] as IRNode<"reduce">;
  const op = red.params.op;
  if (op !== "sum" && op !== "prod" && op !== "max" && op !== "min") return null;
  const shape = red.inputs[0]!.shape;
  const axes = red.params.axes;
  const inElems = numel(shape);
  if (inElems === 0) return null;
  const kept: { size: number; dim: number }[] = [];
  let sawReduced = false, sawKeptAfter = false, sawReducedAfter = false;
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    if (axes.includes(d)) {
      sawReduced = true;
      if (sawKeptAfter) sawReducedAfter = true;
    } else {
      if (sawReduced) sawKeptAfter = true;
      kept.push({ size: shape[d]!, dim: d });
    }
  }
  if (sawReducedAfter) return null; // reduced, kept, reduced: neither layout
  const layout = sawKeptAfter ? "cols" : "rows";
  if (layout === "cols" && kept[0]!.dim < shape.findIndex((s, d) => s !== 1 && axes.includes(d))) return null;
  let n = 1;
  for (const a of axes) n *= shape[a]!;
  const K = numExt(g);
  const inner: number[] = new Array<number>(K).fill(0);
  const prologue: boolean[] = new Array<boolean>(K).fill(false);
  const outer: number[] = new Array<number>(K).fill(0);
  const strides: (readonly number[])[] = [];
  const redShape = shape.map((s, d) => (axes.includes(d) ? s : 1));
  const keptShape = shape.map((s, d) => (axes.includes(d) ? 1 : s));
  let ok = true;
  // the one stride of `st` over the dims of `sub` (null when they do not collapse to one)
  const single = (sub: number[], st: readonly number[]) => {
    const c = collapse(sub, [contiguousStrides(sub), st]);
    if (c.shape.length > 1) return null;
    return c.shape.length === 0 ? 0 : c.strides[1]![0]!;
  };
  let oneStride = true;
  g.srcs.forEach((s, j) =>
    s.forEach((x, i) => {
      if (!("ext" in x)) return;
      const st = g.nodes[j]!.inputs[i]!.strides;
      strides[x.ext] = st;
      if (layout === "cols") {
        const b = single(keptShape, st);
        if (b === null) oneStride = false;
        else outer[x.ext] = b;
      }
      if (j > r) return;
      prologue[x.ext] = true;
      const a = single(redShape, st);
      if (a === null) ok = false;
      else inner[x.ext] = a;
    }),
  );
  if (!ok) return null;
  // kept strides that need two levels: rows x a run of rowLen outputs, jointly for every input
  let rowLen = 0;
  const outerRow: number[] = new Array<number>(K).fill(0);
  if (!oneStride) {
    const exts = strides.map((st, k) => [k, st] as const).filter(([, st]) => st !== undefined);
    const c = collapse(keptShape, [contiguousStrides(keptShape), ...exts.map(([, st]) => st!)]);
    if (c.shape.length !== 2 || c.shape[1]! % 4 !== 0) return null;
    rowLen = c.shape[1]!;
    exts.forEach(([k], q) => {
      outerRow[k] = c.strides[q + 1]![0]!;
      outer[k] = c.strides[q + 1]![1]!;
    });
  }
  return { op, n, outElems: inElems / n, inElems, kept, inner, prologue, strides, f32Lanes: strictUsesSumRows(red), layout, outer, rowLen, outerRow };
}

/** k(lo, hi, argp): outputs [lo, hi) of the reduction (each a run of n input elements). */
export function emitReduction(g: FusedGraph, P: ReductionPlan, fma: boolean): Fn {
  return P.layout === "cols" ? emitCols(g, P, fma) : emitRows(g, P, fma);
}

/** kernelFrame plus what both layouts need: the emit context, the reduced value's local, and
 * the outputs before (prologue) and from (epilogue) the reduction, as [node, output index]. */
function reductionFrame(g: FusedGraph, fma: boolean) {
  const fr = kernelFrame(g, fma);
  const r = g.reduceAt;
  const src = g.srcs[r]![0]!;
  const ctx: Ctx = { f: fr.f, m: fr.m, ext: (k) => fr.e[k]!, val: fr.val };
  const outs = g.outputs.map((j, q) => [j, q] as const);
  return {
    ...fr,
    ctx,
    redIn: "node" in src ? fr.val[src.node]! : fr.e[src.ext]!,
    proOut: outs.filter(([j]) => j < r),
    epiOut: outs.filter(([j]) => j >= r),
  };
}

function emitRows(g: FusedGraph, P: ReductionPlan, fma: boolean): Fn {
  const r = g.reduceAt;
  const { f, K, Q, base, p, e, val, ctx, redIn, proOut, epiOut } = reductionFrame(g, fma);
  const [lo, hi] = [0, 1];
  const o = f.local(I32), j = f.local(I32), vend = f.local(I32), rem = f.local(I32), idx = f.local(I32), n = f.local(I32);
  const accV = f.local(V128), acc64 = f.local(F64), acc32 = f.local(F32), x = f.local(F32);
  const op = P.op;
  const seq = !P.f32Lanes; // scalar accumulation in index order

  const accumulateLane = (lane: number) => {
    if (op === "sum" || op === "prod") {
      f.get(acc64).get(redIn).lane(lane).op(F64_PROMOTE).op(op === "sum" ? F64_ADD : F64_MUL).set(acc64);
    } else {
      // JS: if (acc === acc && (x > acc || x !== x)) acc = x
      f.get(redIn).lane(lane).set(x);
      f.get(acc32).get(acc32).op(0x5b /* f32.eq */);
      f.get(x).get(acc32).op(op === "max" ? F32_GT : F32_LT).get(x).get(x).op(F32_NE).op(0x72 /* i32.or */);
      f.op(OP.i32and).op(OP.if, 0x40).get(x).set(acc32).op(OP.end);
    }
  };
  const step = (vector: boolean) => {
    for (let k = 0; k < K; k++) {
      if (!P.prologue[k] || P.inner[k] === 0) continue;
      const s = P.inner[k]!;
      if (!vector) f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
      else if (s === 1) f.get(p[k]!).v128load();
      else {
        f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
        for (let l = 1; l < 4; l++) f.get(p[k]!).mem(OP.f32load, 2, 4 * s * l).op(0xfd, 0x20, l);
      }
      f.set(e[k]!);
    }
    for (let q = 0; q < r; q++) emitNode(g, ctx, q);
    for (const [jj, q] of proOut) {
      if (vector) f.get(p[K + q]!).get(val[jj]!).v128store();
      else f.get(p[K + q]!).get(val[jj]!).lane(0).mem(OP.f32store, 2);
    }
    if (!seq && vector) f.get(accV).get(redIn).simd(SIMD.f32x4add).set(accV);
    else if (!seq) f.get(acc32).get(redIn).lane(0).op(OP.f32add).set(acc32);
    else for (let l = 0; l < (vector ? 4 : 1); l++) accumulateLane(l);
    const w = vector ? 16 : 4;
    for (let k = 0; k < K; k++) if (P.prologue[k] && P.inner[k] !== 0) f.get(p[k]!).i32(w * P.inner[k]!).op(OP.i32add).set(p[k]!);
    for (const [, q] of proOut) f.get(p[K + q]!).i32(w).op(OP.i32add).set(p[K + q]!);
  };

  f.i32(P.n).set(n);
  f.get(lo).set(o);
  f.forLt(o, hi, 1, () => {
    // operand offsets of this output's run (prologue) / element (epilogue)
    for (let k = 0; k < K; k++) f.get(base[k]!).set(p[k]!);
    f.get(o).set(rem);
    for (let d = P.kept.length - 1; d >= 0; d--) {
      const { size, dim } = P.kept[d]!;
      if (d === 0) f.get(rem).set(idx);
      else {
        f.get(rem).i32(size).op(I32_REM_U).set(idx);
        f.get(rem).i32(size).op(I32_DIV_U).set(rem);
      }
      for (let k = 0; k < K; k++) {
        const st = P.strides[k]?.[dim] ?? 0;
        if (st !== 0) f.get(p[k]!).get(idx).i32(4 * st).op(OP.i32mul).op(OP.i32add).set(p[k]!);
      }
    }
    for (const [, q] of proOut) f.get(base[K + q]!).get(o).i32(4 * P.n).op(OP.i32mul).op(OP.i32add).set(p[K + q]!);
    // prologue inputs constant along the run, and every epilogue input: one splat
    for (let k = 0; k < K; k++) if (P.strides[k] && (!P.prologue[k] || P.inner[k] === 0)) f.get(p[k]!).simd(0x09, { align: 2, offset: 0 }).set(e[k]!);
    if (op === "sum") f.f32x4(0).set(accV);
    f.op(0x44, ...f64bytes(op === "prod" ? 1 : 0)).set(acc64);
    f.f32(op === "max" ? -Infinity : op === "min" ? Infinity : 0).set(acc32);
    f.i32(0).set(j);
    f.get(n).i32(-4).op(OP.i32and).set(vend);
    f.forLt(j, vend, 4, () => step(true));
    if (!seq) {
      // sum_rows: lanes combined ((l0 + l1) + l2) + l3, then the tail added in order
      f.get(accV).lane(0).get(accV).lane(1).op(OP.f32add).get(accV).lane(2).op(OP.f32add).get(accV).lane(3).op(OP.f32add).set(acc32);
    }
    f.forLt(j, n, 1, () => step(false));
    // the reduced value, rounded to float32, then the epilogue at this output element
    if (op === "sum" || op === "prod") {
      if (seq) f.get(acc64).op(F32_DEMOTE).set(acc32);
    }
    f.get(acc32).simd(SIMD.f32x4splat).set(val[r]!);
    for (let q = r + 1; q < g.nodes.length; q++) emitNode(g, ctx, q);
    for (const [jj, q] of epiOut) f.get(base[K + q]!).get(o).i32(4).op(OP.i32mul).op(OP.i32add).get(val[jj]!).lane(0).mem(OP.f32store, 2);
  });
  return f;
}

const SHUF_HI = [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];
const SHUF_JOIN = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];

/**
 * Kept dims trailing (a column sum such as a bias gradient): 4 adjacent outputs per vector, each
 * lane accumulating its own outputs' elements in index order (float64 pairs for sum/prod).
 */
function emitCols(g: FusedGraph, P: ReductionPlan, fma: boolean): Fn {
  const r = g.reduceAt;
  const M = P.outElems;
  const { f, K, Q, base, p, e, val, ctx, redIn, proOut, epiOut } = reductionFrame(g, fma);
  const [lo, hi] = [0, 1];
  const o = f.local(I32), i = f.local(I32), vhi = f.local(I32), n = f.local(I32);
  const a0 = f.local(V128), a1 = f.local(V128), am = f.local(V128);
  const op = P.op;
  const used = (k: number) => P.strides[k] !== undefined;
  const load = (k: number, vector: boolean) => {
    const b = P.outer[k]!;
    if (!vector || b === 0) f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
    else if (b === 1) f.get(p[k]!).v128load();
    else {
      f.get(p[k]!).simd(0x09, { align: 2, offset: 0 });
      for (let l = 1; l < 4; l++) f.get(p[k]!).mem(OP.f32load, 2, 4 * b * l).op(0xfd, 0x20, l);
    }
    f.set(e[k]!);
  };
  // an input's address at output o: o * outer, or with rows (o / rowLen) * outerRow + (o % rowLen) * outer
  const atOutput = (k: number) => {
    f.get(base[k]!);
    if (P.rowLen === 0) f.get(o).i32(4 * P.outer[k]!).op(OP.i32mul).op(OP.i32add);
    else {
      f.get(o).i32(P.rowLen).op(I32_DIV_U).i32(4 * P.outerRow[k]!).op(OP.i32mul).op(OP.i32add);
      f.get(o).i32(P.rowLen).op(I32_REM_U).i32(4 * P.outer[k]!).op(OP.i32mul).op(OP.i32add);
    }
    f.set(p[k]!);
  };
  const block = (vector: boolean) => {
    for (let k = 0; k < K; k++) if (used(k) && P.prologue[k]) atOutput(k);
    for (const [, q] of proOut) f.get(base[K + q]!).get(o).i32(4).op(OP.i32mul).op(OP.i32add).set(p[K + q]!);
    if (op === "sum" || op === "prod") {
      f.op(0xfd, 0x0c, ...f64bytes(op === "prod" ? 1 : 0), ...f64bytes(op === "prod" ? 1 : 0)).tee(a0).set(a1);
    } else f.f32x4(op === "max" ? -Infinity : Infinity).set(am);
    f.i32(0).set(i);
    f.forLt(i, n, 1, () => {
      for (let k = 0; k < K; k++) if (used(k) && P.prologue[k]) load(k, vector);
      for (let q = 0; q < r; q++) emitNode(g, ctx, q);
      for (const [jj, q] of proOut) {
        if (vector) f.get(p[K + q]!).get(val[jj]!).v128store();
        else f.get(p[K + q]!).get(val[jj]!).lane(0).mem(OP.f32store, 2);
        f.get(p[K + q]!).i32(4 * M).op(OP.i32add).set(p[K + q]!);
      }
      if (op === "sum" || op === "prod") {
        const fop = op === "sum" ? 0xf0 : 0xf2; // f64x2.add / f64x2.mul
        f.get(a0).get(redIn).simd(0x5f).simd(fop).set(a0);
        f.get(a1).get(redIn).get(redIn).op(0xfd, 0x0d, ...SHUF_HI).simd(0x5f).simd(fop).set(a1);
      } else {
        // JS: if (acc === acc && (x > acc || x !== x)) acc = x, per lane
        f.get(redIn).get(am);
        f.get(am).get(am).simd(0x41 /* f32x4.eq */);
        f.get(redIn).get(am).simd(op === "max" ? SIMD.f32x4gt : SIMD.f32x4lt).get(redIn).get(redIn).simd(0x42).simd(SIMD.v128or);
        f.simd(SIMD.v128and).simd(SIMD.v128bitselect).set(am);
      }
      for (let k = 0; k < K; k++) if (used(k) && P.prologue[k] && P.inner[k] !== 0) f.get(p[k]!).i32(4 * P.inner[k]!).op(OP.i32add).set(p[k]!);
    });
    if (op === "sum" || op === "prod") f.get(a0).simd(0x5e).get(a1).simd(0x5e).op(0xfd, 0x0d, ...SHUF_JOIN).set(val[r]!);
    else f.get(am).set(val[r]!);
    for (let k = 0; k < K; k++) if (used(k) && !P.prologue[k]) {
      atOutput(k);
      load(k, vector);
    }
    for (let q = r + 1; q < g.nodes.length; q++) emitNode(g, ctx, q);
    for (const [jj, q] of epiOut) {
      f.get(base[K + q]!).get(o).i32(4).op(OP.i32mul).op(OP.i32add);
      if (vector) f.get(val[jj]!).v128store();
      else f.get(val[jj]!).lane(0).mem(OP.f32store, 2);
    }
  };
  f.i32(P.n).set(n);
  f.get(lo).set(o);
  f.get(hi).get(lo).op(OP.i32sub).i32(-4).op(OP.i32and).get(lo).op(OP.i32add).set(vhi);
  f.forLt(o, vhi, 4, () => block(true));
  f.forLt(o, hi, 1, () => block(false));
  return f;
}

function f64bytes(v: number): number[] {
  return [...new Uint8Array(new Float64Array([v]).buffer)];
}
