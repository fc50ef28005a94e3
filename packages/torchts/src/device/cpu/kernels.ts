// One kernel builder per primitive. The Record type makes a missing primitive a type error.
import { isFloating, type DType } from "../../ir/dtype.js";
import type { BinaryOp, IRNode, PrimName, PrimParams, UnaryOp } from "../../ir/prims.js";
import { contiguousStrides, isContiguous, numel, type Shape } from "../../ir/shape.js";
import { collapse, elementwise, reduction, storeExpr, type Arr, type Kernel } from "./codegen.js";
import { H, philox } from "./math.js";
import { buildComposite } from "./composites.js";
import { addRowsF32, copyRowsF32, matmulBatchedF32, matmulF32, sumRowsF32, wasmRuntime } from "./wasm/index.js";
import { WASM_MIN_ELEMS } from "./wasm/ops.js";
import { wasmSingle, wasmSingleReduce } from "./wasm/fused_wasm.js";
import { VMATH_OPS } from "./wasm/vmath.js";

/** Batched float32 matmuls run as one taller product over a shared B (tests check which path ran). */
export const matmulFoldStats = { calls: 0 };

/** A view of the same kind over the whole of `a`'s buffer (cached per buffer and kind). */
const whole = new WeakMap<ArrayBufferLike, Map<unknown, ArrayBufferView>>();
function wholeView<T extends Float32Array>(a: T): T {
  let m = whole.get(a.buffer);
  if (!m) whole.set(a.buffer, (m = new Map()));
  const ctor = a.constructor as new (b: ArrayBufferLike) => T;
  let v = m.get(ctor) as T | undefined;
  if (!v || v.length * v.BYTES_PER_ELEMENT !== a.buffer.byteLength) m.set(ctor, (v = new ctor(a.buffer)));
  return v;
}

/**
 * When `a` and `b` are views of one kind over one buffer (the wasm arena) holding whole elements:
 * a view of that kind over the whole buffer, for copyWithin between them without a subarray per
 * row; else null.
 */
function sharedWholeView<T extends Float32Array>(a: T, b: ArrayLike<number>): T | null {
  const same = ArrayBuffer.isView(b) && a.buffer === b.buffer && a.constructor === b.constructor && a.buffer.byteLength % a.BYTES_PER_ELEMENT === 0;
  return same ? wholeView(a) : null;
}

// Below this many multiply-adds the JS kernel beats packing into wasm memory.
const WASM_MATMUL_MIN_MACS = 4096;
// float32 VMATH_OPS always run the wasm VMath approximations when wasm is on (any size, any layout).

/** Wraps a JS kernel with a wasm fast path; the JS kernel runs when wasm declines. */
function withWasm(js: Kernel, fast: (O: Arr, ins: Arr[], offs: number[]) => boolean): Kernel {
  return (O, ins, offs, S) => {
    if (!fast(O, ins, offs)) js(O, ins, offs, S);
  };
}

export const UNARY: Record<UnaryOp, (x: string, d: DType) => string> = {
  identity: (x) => x,
  neg: (x) => `-${x}`,
  exp: (x) => `Math.exp(${x})`,
  log: (x) => `Math.log(${x})`,
  sqrt: (x) => `Math.sqrt(${x})`,
  rsqrt: (x) => `1/Math.sqrt(${x})`,
  sin: (x) => `Math.sin(${x})`,
  cos: (x) => `Math.cos(${x})`,
  tan: (x) => `Math.tan(${x})`,
  tanh: (x) => `Math.tanh(${x})`,
  sigmoid: (x) => `1/(1+Math.exp(-${x}))`,
  abs: (x) => `Math.abs(${x})`,
  sign: (x) => `H.sign(${x})`,
  floor: (x) => `Math.floor(${x})`,
  ceil: (x) => `Math.ceil(${x})`,
  round: (x) => `H.roundEven(${x})`,
  trunc: (x) => `Math.trunc(${x})`,
  erf: (x) => `H.erf(${x})`,
  expm1: (x) => `Math.expm1(${x})`,
  log1p: (x) => `Math.log1p(${x})`,
  reciprocal: (x) => `1/${x}`,
  not: (x) => `(${x}===0)`,
  bitnot: (x, d) => (d === "bool" ? `(${x}===0)` : `~${x}`),
  isnan: (x) => `(${x}!==${x})`,
  isinf: (x) => `(${x}===Infinity||${x}===-Infinity)`,
  atan: (x) => `Math.atan(${x})`,
  asin: (x) => `Math.asin(${x})`,
  acos: (x) => `Math.acos(${x})`,
  sinh: (x) => `Math.sinh(${x})`,
  cosh: (x) => `Math.cosh(${x})`,
  asinh: (x) => `Math.asinh(${x})`,
  acosh: (x) => `Math.acosh(${x})`,
  atanh: (x) => `Math.atanh(${x})`,
  log2: (x) => `Math.log2(${x})`,
  exp2: (x) => `Math.pow(2,${x})`,
  frac: (x) => `(${x}-Math.trunc(${x}))`,
};

export const BINARY: Record<BinaryOp, (a: string, b: string, d: DType) => string> = {
  add: (a, b) => `${a}+${b}`,
  sub: (a, b) => `${a}-${b}`,
  mul: (a, b) => `${a}*${b}`,
  div: (a, b) => `${a}/${b}`,
  pow: (a, b) => `Math.pow(${a},${b})`,
  maximum: (a, b) => `((${a}!==${a}||${b}!==${b})?NaN:(${a}>${b}?${a}:${b}))`,
  minimum: (a, b) => `((${a}!==${a}||${b}!==${b})?NaN:(${a}<${b}?${a}:${b}))`,
  atan2: (a, b) => `Math.atan2(${a},${b})`,
  eq: (a, b) => `(${a}===${b})`,
  ne: (a, b) => `(${a}!==${b})`,
  lt: (a, b) => `(${a}<${b})`,
  le: (a, b) => `(${a}<=${b})`,
  gt: (a, b) => `(${a}>${b})`,
  ge: (a, b) => `(${a}>=${b})`,
  and: (a, b) => `(${a}!==0&&${b}!==0)`,
  or: (a, b) => `(${a}!==0||${b}!==0)`,
  xor: (a, b) => `((${a}!==0)!==(${b}!==0))`,
  bitand: (a, b) => `(${a}&${b})`,
  bitor: (a, b) => `(${a}|${b})`,
  bitxor: (a, b) => `(${a}^${b})`,
  fmod: (a, b) => `(${a}%${b})`,
  remainder: (a, b, d) =>
    isFloating(d) ? `(${a}-Math.floor(${a}/${b})*${b})` : `((${a}%${b})+(((${a}%${b})!==0&&((${a}<0)!==(${b}<0)))?${b}:0))`,
  floordiv: (a, b) => `Math.floor(${a}/${b})`,
  truncdiv: (a, b) => `Math.trunc(${a}/${b})`,
};

export function castExpr(x: string, from: DType, to: DType): string {
  if (to === "bool") return `(${x}!==0)`;
  if (!isFloating(to) && isFloating(from)) return `(Number.isFinite(${x})?Math.trunc(${x}):0)`;
  return x;
}

type Builder<P extends PrimName> = (n: IRNode<P>) => Kernel;

/**
 * float32 unary/binary nodes run a generated wasm SIMD kernel (strided and broadcast operands
 * included) from WASM_EW_MIN elements; exp/tanh/sigmoid/erf always do (their values are VMath's).
 */
function wasmOrJs(n: IRNode, js: Kernel, always: boolean): Kernel {
  if (!always && numel(n.out.shape) < WASM_EW_MIN) return js;
  const wk = wasmSingle(n);
  if (!wk) return js;
  const outs: Arr[] = [EMPTY_F32];
  return (O, ins, offs, S) => {
    outs[0] = O;
    if (!wk(outs, ins, offs)) js(O, ins, offs, S);
  };
}
const WASM_EW_MIN = 256;
const EMPTY_F32 = new Float32Array(0);

function odometer(shape: Shape, fn: (idx: number[]) => void): void {
  const nd = shape.length;
  const n = numel(shape);
  if (n === 0) return;
  const idx = new Array<number>(nd).fill(0);
  for (let p = 0; p < n; p++) {
    fn(idx);
    for (let d = nd - 1; d >= 0; d--) {
      if (++idx[d]! < shape[d]!) break;
      idx[d] = 0;
    }
  }
}

function dot(idx: number[], strides: Shape, skip = -1): number {
  let s = 0;
  for (let d = 0; d < idx.length; d++) if (d !== skip) s += idx[d]! * strides[d]!;
  return s;
}

function checkIndex(v: number, size: number, dim: number, op: string): number {
  if (!(v >= 0 && v < size))
    throw new RangeError(`${op}: index ${v} is out of bounds for dimension ${dim} with size ${size}`);
  return v;
}

/**
 * Walks `shape` (an index tensor's) row by row along its last dim, calling row(io, is, to, ts,
 * len, so, ss) with the row's start and step in the index (strides is), in a target indexed
 * like it with dim `skip` left out (strides ts), and in an optional third view (strides ss).
 */
function indexRows(
  shape: Shape, is: Shape, ts: Shape, skip: number, io0: number, to0: number,
  row: (io: number, is: number, to: number, ts: number, len: number, so: number, ss: number) => void,
  ss: Shape = [], so0 = 0,
): void {
  const nd = shape.length;
  if (nd === 0) return row(io0, 0, to0, 0, 1, so0, 0);
  const last = nd - 1;
  const tLast = last === skip ? 0 : ts[last]!;
  odometer(shape.slice(0, last), (ix) => {
    let io = io0, to = to0, so = so0;
    for (let d = 0; d < last; d++) {
      io += ix[d]! * is[d]!;
      if (d !== skip) to += ix[d]! * ts[d]!;
      so += ix[d]! * (ss[d] ?? 0);
    }
    row(io, is[last]!, to, tLast, shape[last]!, so, ss[last] ?? 0);
  });
}

type RowLoop = (
  O: Arr, X: Arr, I: Arr, p: number, io: number, is: number, xo: number, xs: number, len: number,
  so: number, ss: number, size: number, xd: number, dim: number,
) => number;

/** One index row of gather/scatter, generated per kernel so each copy sees one set of array types. */
/**
 * gather/scatter_add along dim 0 of a 2-D tensor whose index is constant along each row (an
 * expanded [n, 1] column: embedding, index_select, embedding's backward) and whose rows, `rows`,
 * are contiguous: each index picks or adds one whole row.
 */
function wholeRows(rows: IRNode["inputs"][0], idx: IRNode["inputs"][0], dim: number): boolean {
  return rows.shape.length === 2 && dim === 0 && idx.shape.length === 2 && idx.strides[1] === 0 && rows.strides[1] === 1 && idx.shape[1] === rows.shape[1];
}

function rowLoop(body: string, op: string): RowLoop {
  return new Function(
    "check",
    `return function(O, X, I, p, io, is, xo, xs, len, so, ss, size, xd, dim) {
      for (let i = 0; i < len; i++, io += is, xo += xs, so += ss) {
        const v = I[io];
        if (!(v >= 0 && v < size)) check(v, size, dim, ${JSON.stringify(op)});
        ${body}
      }
      return p;
    }`,
  )(checkIndex) as RowLoop;
}

/**
 * Copies a view of `v`'s layout into a contiguous output: one typed-array copy when the view is
 * contiguous in an array of the output's kind, one fill when it is a broadcast scalar (a zeros
 * tensor expanded), else a generated strided loop. scatter_add starts from its `self` this way:
 * a generated loop per element made the embedding's and cross-entropy's backward ~5x slower.
 */
function plainCopy(v: IRNode["inputs"][0], outDtype: DType): (O: Arr, I: Arr, off: number) => void {
  const total = numel(v.shape);
  const loop = elementwise(v.shape, [v.strides], ([x]) => x!, outDtype);
  const contiguous = v.dtype === outDtype && isContiguous(v.shape, v.strides);
  const scalar = v.dtype === outDtype && v.strides.every((s) => s === 0);
  return (O, I, off) => {
    if (total === 0) return;
    if (ArrayBuffer.isView(O) && ArrayBuffer.isView(I) && O.constructor === I.constructor) {
      const o = O as unknown as Float32Array, i = I as unknown as Float32Array;
      if (contiguous) return o.set(i.subarray(off, off + total));
      if (scalar) {
        o.fill(i[off]!, 0, total);
        return;
      }
    }
    loop(O, [I], [off], []);
  };
}

/**
 * Copies view `v` into the output slab starting at element `ob`, whose strides are `outStrides`
 * (cat), as wasm row copies: the view and slab collapsed together, the innermost dim a row (the
 * slab's is contiguous), the next one the rows of one call, the dims outside it walked here.
 * Null when the slab's innermost dim is not contiguous; the returned copy returns false (nothing
 * written) when an array is not in the wasm memory.
 */
function slabRows(v: IRNode["inputs"][0], outStrides: Shape): ((O: Float32Array, I: Float32Array, ob: number, ib: number) => boolean) | null {
  const c = collapse(v.shape, [outStrides.slice(0, v.shape.length), v.strides]);
  const nd = c.shape.length;
  if (nd === 0) {
    c.shape.push(1);
    c.strides[0]!.push(1);
    c.strides[1]!.push(0);
  }
  const m = c.shape.length;
  if (c.strides[0]![m - 1] !== 1) return null;
  const n = c.shape[m - 1]!, si = c.strides[1]![m - 1]!;
  const rows = m >= 2 ? c.shape[m - 2]! : 1, ds = m >= 2 ? c.strides[0]![m - 2]! : 0, ss = m >= 2 ? c.strides[1]![m - 2]! : 0;
  const outer = c.shape.slice(0, Math.max(0, m - 2));
  const os = c.strides[0]!.slice(0, outer.length), is = c.strides[1]!.slice(0, outer.length);
  const calls = numel(outer);
  return (O, I, ob, ib) => {
    const ix = outer.map(() => 0);
    for (let t = 0; t < calls; t++) {
      let o = ob, i = ib;
      for (let d = 0; d < outer.length; d++) {
        o += ix[d]! * os[d]!;
        i += ix[d]! * is[d]!;
      }
      if (!copyRowsF32(O, o, I, i, rows, n, ds, ss, si)) return false; // (only the first call can refuse)
      for (let d = outer.length - 1; d >= 0; d--) {
        if (++ix[d]! < outer[d]!) break;
        ix[d] = 0;
      }
    }
    return true;
  };
}

type RowAdder = (O: Arr, S: Arr, I: Arr, io: number, is: number, so: number, ss: number, rows: number, D: number, size: number, dim: number) => void;

/**
 * Adds row S[so + r*ss ..][0, D) to row I[io + r*is] of O for each r (embedding's backward), in
 * row order. A fresh function per kernel, so that the typed-array accesses of its loop see one
 * kind of array each (a shared closure's loop saw them all and ran several times slower).
 */
function rowAdder(): RowAdder {
  return new Function(
    "check",
    `return function(O, S, I, io, is, so, ss, rows, D, size, dim) {
      for (let r = 0; r < rows; r++, io += is, so += ss) {
        const v = I[io];
        if (!(v >= 0 && v < size)) check(v, size, dim, "scatter_add");
        const base = v * D;
        for (let c = 0; c < D; c++) O[base + c] += S[so + c];
      }
    }`,
  )(checkIndex) as RowAdder;
}

const builders: { [P in PrimName]: Builder<P> } = {
  unary: (n) => {
    const x = n.inputs[0]!;
    const d = x.dtype;
    const js = elementwise(n.out.shape, [x.strides], ([v]) => UNARY[n.params.op](v!, d), n.out.dtype);
    const op = n.params.op;
    return wasmOrJs(n, js, VMATH_OPS.has(op));
  },
  binary: (n) => {
    const d = n.inputs[0]!.dtype;
    const js = elementwise(
      n.out.shape,
      n.inputs.map((v) => v.strides),
      ([a, b]) => BINARY[n.params.op](a!, b!, d),
      n.out.dtype,
    );
    return wasmOrJs(n, js, false);
  },
  where: (n) =>
    wasmOrJs(n, elementwise(n.out.shape, n.inputs.map((v) => v.strides), ([c, a, b]) => `(${c}!==0?${a}:${b})`, n.out.dtype), false),
  cast: (n) =>
    wasmOrJs(n, elementwise(n.out.shape, [n.inputs[0]!.strides], ([x]) => castExpr(x!, n.inputs[0]!.dtype, n.out.dtype), n.out.dtype), false),
  reduce: (n) => {
    const { op, axes } = n.params;
    const v = n.inputs[0]!;
    const spec: Record<typeof op, [string, string, string]> = {
      sum: ["0", "acc+=x;", "acc"],
      prod: ["1", "acc*=x;", "acc"],
      max: ["-Infinity", "if(acc===acc&&(x>acc||x!==x))acc=x;", "acc"],
      min: ["Infinity", "if(acc===acc&&(x<acc||x!==x))acc=x;", "acc"],
      any: ["0", "if(x!==0)acc=1;", "acc"],
      all: ["1", "if(x===0)acc=0;", "acc"],
    };
    const [init, comb, fin] = spec[op];
    const js = reduction(v.shape, v.strides, axes, init, comb, fin, n.out.dtype);
    const nd = v.shape.length;
    const total = numel(v.shape);
    if (op === "sum" && v.dtype === "float32" && n.out.dtype === "float32" && axes.length === 1 && axes[0] === nd - 1 &&
        total >= WASM_MIN_ELEMS && isContiguous(v.shape, v.strides) && wasmRuntime()) {
      const cols = v.shape[nd - 1]!;
      return withWasm(js, (O, ins, offs) => sumRowsF32(ins[0]!, offs[0]!, total / cols, cols, O));
    }
    // the other float32 reductions (a bias gradient's sum over the leading dims, a max over
    // rows) as the fused eager wasm reducer does them: it reproduces this JS loop's float64
    // accumulation order exactly, so the modes stay bit-identical
    const wk = total >= WASM_MIN_ELEMS ? wasmSingleReduce(n) : null;
    if (wk) return withWasm(js, (O, ins, offs) => wk([O], ins, offs));
    return js;
  },
  argreduce: (n) => {
    const v = n.inputs[0]!;
    const cmp = n.params.op === "argmax" ? ">" : "<";
    // first occurrence wins; NaN counts as the extreme (as PyTorch)
    const comb = `if(best===best&&(x${cmp}best||x!==x)){best=x;acc=j;}j++;`;
    const { shape, strides } = v;
    const ax = n.params.axis;
    const kept = shape.map((_, d) => d).filter((d) => d !== ax);
    const idx = ["o0", ...shape.map((_, d) => `i${d}*${strides[d]}`)].join("+");
    let code = `let acc=0,best=${cmp === ">" ? "-Infinity" : "Infinity"},j=0;for(let i${ax}=0;i${ax}<${shape[ax]};i${ax}++){const x=I0[${idx}];${comb}}O[p++]=acc;`;
    for (let k = kept.length - 1; k >= 0; k--) {
      const d = kept[k]!;
      code = `for(let i${d}=0;i${d}<${shape[d]};i${d}++){${code}}`;
    }
    return new Function(`return function(O, ins, offs){const I0=ins[0], o0=offs[0]; let p=0;${code}}`)() as Kernel;
  },
  matmul: (n) => {
    const [a, b] = n.inputs as [IRNode["inputs"][0], IRNode["inputs"][0]];
    const nd = a.shape.length;
    const M = a.shape[nd - 2]!;
    const K = a.shape[nd - 1]!;
    const N = b.shape[nd - 1]!;
    const batch = n.out.shape.slice(0, nd - 2);
    const [sam, sak] = [a.strides[nd - 2]!, a.strides[nd - 1]!];
    const [sbk, sbn] = [b.strides[nd - 2]!, b.strides[nd - 1]!];
    const abs = a.strides.slice(0, nd - 2);
    const bbs = b.strides.slice(0, nd - 2);
    /** One M x N product per batch index: `one(ao, bo, p)` gets A's and B's offsets and the output's. */
    const batched =
      (one: (O: Arr, ins: Arr[], offs: number[], ao: number, bo: number, p: number) => void): Kernel =>
      (O, ins, offs) => {
        let p = 0;
        const at = (idx: number[]) => {
          one(O, ins, offs, offs[0]! + dot(idx, abs), offs[1]! + dot(idx, bbs), p);
          p += M * N;
        };
        if (batch.length === 0) at([]);
        else odometer(batch, at);
      };
    const f32 = a.dtype === "float32" && b.dtype === "float32" && n.out.dtype === "float32";
    if (f32 && M * N * K >= WASM_MATMUL_MIN_MACS && wasmRuntime()) {
      // A batch of A's over one shared B whose rows follow each other at the row stride
      // ([B, T, C] @ [C, N]) is one taller product: better tiles and one pool job, same sums.
      // Batch dims of size 1 may have any stride; a one-row A (a decode step's per-head query
      // times a rotary matrix) has its rows at the innermost batch stride.
      const nb = batch.reduce((x, y) => x * y, 1);
      let inner = batch.length - 1;
      while (inner >= 0 && batch[inner]! === 1) inner--;
      const rs = M === 1 && inner >= 0 ? abs[inner]! : sam;
      let rowStride = rs * M;
      let fold = nb > 1 && bbs.every((s, d) => s === 0 || batch[d] === 1);
      for (let d = batch.length - 1; fold && d >= 0; d--) {
        if (batch[d]! > 1 && abs[d] !== rowStride) fold = false;
        rowStride *= batch[d]!;
      }
      if (fold)
        return (O, ins, offs) => {
          matmulFoldStats.calls++;
          matmulF32(M * nb, K, N, ins[0]!, offs[0]!, rs, sak, ins[1]!, offs[1]!, sbk, sbn, O, 0);
        };
      const one = batched((O, ins, _offs, ao, bo, p) => matmulF32(M, K, N, ins[0]!, ao, sam, sak, ins[1]!, bo, sbk, sbn, O, p));
      if (nb < 2) return one;
      // small products (attention's per-head matmuls): one pool job over the batch when it applies
      const aRel = new Array<number>(nb), bRel = new Array<number>(nb);
      let q = 0;
      odometer(batch, (idx) => {
        aRel[q] = dot(idx, abs);
        bRel[q++] = dot(idx, bbs);
      });
      const aAt = new Array<number>(nb), bAt = new Array<number>(nb);
      return (O, ins, offs, scalars) => {
        for (let i = 0; i < nb; i++) {
          aAt[i] = offs[0]! + aRel[i]!;
          bAt[i] = offs[1]! + bRel[i]!;
        }
        if (!matmulBatchedF32(M, K, N, ins[0]!, aAt, sam, sak, ins[1]!, bAt, sbk, sbn, O, 0)) one(O, ins, offs, scalars);
      };
    }
    // Generated per shape: B is packed into a contiguous float64 panel so the inner loop
    // is a unit-stride axpy that V8 optimizes well; 4 rows of A share each pass over B.
    const src = `
      const Bp = new Float64Array(${K * N});
      const acc = new Float64Array(${4 * N});
      return function(O, ins, offs, ao, bo, p) {
        const A = ins[0], B = ins[1];
        for (let k = 0; k < ${K}; k++) for (let j = 0; j < ${N}; j++) Bp[k*${N}+j] = B[bo + k*${sbk} + j*${sbn}];
        for (let i0 = 0; i0 < ${M}; i0 += 4) {
          const rows = Math.min(4, ${M} - i0);
          acc.fill(0);
          for (let r = 0; r < rows; r++) {
            const ai = ao + (i0 + r) * ${sam};
            const ro = r * ${N};
            for (let k = 0; k < ${K}; k++) {
              const av = A[ai + k * ${sak}];
              const bk = k * ${N};
              for (let j = 0; j < ${N}; j++) acc[ro + j] += av * Bp[bk + j];
            }
          }
          for (let q = 0; q < rows * ${N}; q++) O[p + i0 * ${N} + q] = ${storeExpr("acc[q]", n.out.dtype)};
        }
      };`;
    const mk = new Function("H", src) as (h: typeof H) => (O: Arr, ins: Arr[], offs: number[], ao: number, bo: number, p: number) => void;
    return batched(mk(H));
  },
  gather: (n) => {
    const [x, idx] = n.inputs as [IRNode["inputs"][0], IRNode["inputs"][0]];
    const dim = n.params.dim;
    const size = x.shape[dim]!;
    const xd = x.strides[dim] ?? 0;
    const loop = rowLoop("O[p++] = X[xo + v * xd];", "gather");
    const general: Kernel = (O, ins, offs) => {
      const X = ins[0]!,
        I = ins[1]!;
      let p = 0;
      // rows of the index's last dim: offsets are updated by strides, not recomputed per element
      indexRows(idx.shape, idx.strides, x.strides, dim, offs[1]!, offs[0]!, (io, is, xo, xs, len) => {
        p = loop(O, X, I, p, io, is, xo, xs, len, 0, 0, size, xd, dim);
      });
    };
    // embedding and index_select: an index constant along a contiguous row of x picks whole rows
    if (!wholeRows(x, idx, dim)) return general;
    const R = idx.shape[0]!, D = x.shape[1]!, is0 = idx.strides[0]!;
    return (O, ins, offs, S) => {
      const X = ins[0]!, I = ins[1]!;
      if (!(O instanceof Float32Array && X instanceof Float32Array)) return general(O, ins, offs, S);
      // both in the wasm arena (the usual case): copyWithin on one view of it, no subarray per row
      // (256 rows of an embedding: ~5x faster)
      const W = sharedWholeView(O, X);
      const ob = O.byteOffset >> 2, xb = X.byteOffset >> 2;
      for (let r = 0, io = offs[1]!; r < R; r++, io += is0) {
        const v = I[io]!;
        if (!(v >= 0 && v < size)) checkIndex(v, size, dim, "gather");
        const at = offs[0]! + v * xd;
        if (W) W.copyWithin(ob + r * D, xb + at, xb + at + D);
        else O.set(X.subarray(at, at + D), r * D);
      }
    };
  },
  scatterAdd: (n) => {
    const [self, idx, src] = n.inputs as [IRNode["inputs"][0], IRNode["inputs"][0], IRNode["inputs"][0]];
    const dim = n.params.dim;
    const outStrides = contiguousStrides(self.shape);
    const size = self.shape[dim]!;
    const od = outStrides[dim] ?? 0;
    const copy = plainCopy(self, n.out.dtype);
    const loop = rowLoop("O[xo + v * xd] += X[so];", "scatter_add");
    // embedding's backward: an index constant along contiguous rows adds whole rows (same order)
    const rows = wholeRows(src, idx, dim) && idx.shape[1] === self.shape[1];
    const R = idx.shape[0] ?? 0, D = self.shape[1] ?? 0, is0 = idx.strides[0] ?? 0, ss0 = src.strides[0] ?? 0;
    const addRows = rows ? rowAdder() : null;
    const f32Rows = self.dtype === "float32" && src.dtype === "float32";
    return (O, ins, offs) => {
      copy(O, ins[0]!, offs[0]!);
      const I = ins[1]!,
        S = ins[2]!;
      if (addRows) {
        if (f32Rows && O instanceof Float32Array && S instanceof Float32Array) {
          // the whole rows in wasm, once every index is checked (an error leaves O as copied)
          const at = new Int32Array(R);
          for (let r = 0, io = offs[1]!; r < R; r++, io += is0) {
            const v = I[io]!;
            if (!(v >= 0 && v < size)) checkIndex(v, size, dim, "scatter_add");
            at[r] = v * D;
          }
          if (addRowsF32(O, S, offs[2]!, at, D, ss0)) return;
        }
        addRows(O, S, I, offs[1]!, is0, offs[2]!, ss0, R, D, size, dim);
        return;
      }
      indexRows(idx.shape, idx.strides, outStrides, dim, offs[1]!, 0, (io, is, oo, os, len, so, ss) => {
        loop(O, S, I, 0, io, is, oo, os, len, so, ss, size, od, dim);
      }, src.strides, offs[2]!);
    };
  },
  stridedScatter: (n) => {
    const src = n.inputs[0]!;
    const { shape, strides, offset } = n.params;
    // a zero-filled output plus one generated loop nest (the gradient of views: transpose, split,
    // select), adding so that overlapping windows accumulate
    const c = collapse(shape, [strides, src.strides]);
    const o = [String(offset), ...c.shape.map((_, d) => `i${d}*${c.strides[0]![d]}`)].join("+");
    const q = ["q0", ...c.shape.map((_, d) => `i${d}*${c.strides[1]![d]}`)].join("+");
    let code = `O[${o}]+=S[${q}];`;
    for (let d = c.shape.length - 1; d >= 0; d--) code = `for(let i${d}=0;i${d}<${c.shape[d]};i${d}++){${code}}`;
    if (n.inputs.length === 1) {
      const body = `return function(O, ins, offs){const S=ins[0], q0=offs[0];O.fill(0);${code}}`;
      return new Function(body)() as Kernel;
    }
    // onto a copy of the base, replacing (a view of a real tensor never overlaps itself)
    const base = n.inputs[1]!;
    const copy = elementwise(base.shape, [base.strides], ([x]) => x!, n.out.dtype);
    const plain = isContiguous(base.shape, base.strides) && base.dtype === n.out.dtype;
    const write = new Function(`return function(O, S, q0){${code.replace("+=", "=")}}`)() as (O: Arr, S: Arr, q0: number) => void;
    return (O, ins, offs, sc) => {
      if (plain && ArrayBuffer.isView(O) && ArrayBuffer.isView(ins[1])) (O as Float32Array).set((ins[1] as Float32Array).subarray(offs[1]!, offs[1]! + O.length));
      else copy(O, [ins[1]!], [offs[1]!], sc);
      write(O, ins[0]!, offs[0]!);
    };
  },
  scan: (n) => {
    const x = n.inputs[0]!;
    const { op, dim } = n.params;
    const outStrides = contiguousStrides(x.shape);
    const L = x.shape[dim]!;
    const outer = x.shape.map((s, d) => (d === dim ? 1 : s));
    const store = new Function("H", `return (x)=>${storeExpr("x", n.out.dtype)}`)(H) as (x: number) => number;
    return (O, ins, offs) => {
      const X = ins[0]!;
      odometer(outer, (ix) => {
        let acc = op === "sum" ? 0 : 1;
        const xo = offs[0]! + dot(ix, x.strides);
        const oo = dot(ix, outStrides);
        for (let i = 0; i < L; i++) {
          const v = X[xo + i * x.strides[dim]!]!;
          acc = op === "sum" ? acc + v : acc * v;
          acc = store(acc);
          O[oo + i * outStrides[dim]!] = acc;
        }
      });
    };
  },
  argsort: (n) => {
    const x = n.inputs[0]!;
    const { dim, descending } = n.params;
    const outStrides = contiguousStrides(x.shape);
    const L = x.shape[dim]!;
    const outer = x.shape.map((s, d) => (d === dim ? 1 : s));
    return (O, ins, offs) => {
      const X = ins[0]!;
      const ids = Array.from({ length: L }, (_, i) => i);
      const vals = new Float64Array(L);
      odometer(outer, (ix) => {
        const xo = offs[0]! + dot(ix, x.strides);
        for (let i = 0; i < L; i++) {
          vals[i] = X[xo + i * x.strides[dim]!]!;
          ids[i] = i;
        }
        // NaN sorts as the largest value, as in PyTorch; Array.prototype.sort is stable.
        const key = (v: number) => (v !== v ? Infinity : v);
        ids.sort((i, j) => {
          const a = vals[i]!,
            b = vals[j]!;
          if (a !== a || b !== b) {
            const an = a !== a ? 1 : 0,
              bn = b !== b ? 1 : 0;
            return descending ? bn - an : an - bn;
          }
          return descending ? key(b) - key(a) : key(a) - key(b);
        });
        const oo = dot(ix, outStrides);
        for (let i = 0; i < L; i++) O[oo + i * outStrides[dim]!] = ids[i]!;
      });
    };
  },
  rand: (n) => {
    const total = numel(n.out.shape);
    const dist = n.params.dist;
    const d = n.out.dtype;
    const store = new Function("H", `return (x)=>${storeExpr("x", d)}`)(H) as (x: number) => number;
    const wide = d === "float64";
    return (O, _ins, _offs, S) => {
      const [seedLo, seedHi, offLo, offHi] = S as [number, number, number, number];
      const w = new Uint32Array(4);
      for (let i = 0; i < total; i++) {
        // counter = 64-bit offset + i, carried into the high word
        const lo = offLo + i;
        philox(lo >>> 0, (offHi + Math.floor(lo / 4294967296)) >>> 0, 0, 0, seedLo, seedHi, w);
        const u0 = wide ? ((w[0]! >>> 5) * 67108864 + (w[1]! >>> 6)) / 9007199254740992 : (w[0]! >>> 8) / 16777216;
        if (dist === "uniform") O[i] = store(u0);
        else {
          const u1 = ((w[2]! >>> 5) * 67108864 + (w[3]! >>> 6)) / 9007199254740992;
          O[i] = store(Math.sqrt(-2 * Math.log(1 - u0)) * Math.cos(2 * Math.PI * u1));
        }
      }
    };
  },
  full: (n) => {
    const total = numel(n.out.shape);
    const store = new Function("H", `return (x)=>${storeExpr("x", n.out.dtype)}`)(H) as (x: number) => number;
    return (O, _i, _o, S) => {
      const v = store(S[0]!);
      if (ArrayBuffer.isView(O)) (O as Float32Array).fill(v, 0, total); // typed arrays fill natively
      else for (let i = 0; i < total; i++) O[i] = v;
    };
  },
  arange: (n) => {
    const total = numel(n.out.shape);
    const store = new Function("H", `return (x)=>${storeExpr("x", n.out.dtype)}`)(H) as (x: number) => number;
    return (O, _i, _o, S) => {
      for (let i = 0; i < total; i++) O[i] = store(S[0]! + i * S[1]!);
    };
  },
  cat: (n) => {
    const dim = n.params.dim;
    const outStrides = contiguousStrides(n.out.shape);
    // an input that does not land as whole rows is written into its slab of the output by one
    // generated strided loop nest (the slab's offset comes in at run time)
    const copies = n.inputs.map((v) => {
      const c = collapse(v.shape, [outStrides, v.strides]);
      const o = ["ob", ...c.shape.map((_, d) => `i${d}*${c.strides[0]![d]}`)].join("+");
      const q = ["ib", ...c.shape.map((_, d) => `i${d}*${c.strides[1]![d]}`)].join("+");
      let code = `O[${o}]=${castExpr(`I[${q}]`, v.dtype, n.out.dtype)};`;
      for (let d = c.shape.length - 1; d >= 0; d--) code = `for(let i${d}=0;i${d}<${c.shape[d]};i${d}++){${code}}`;
      return new Function("H", `return function(O, I, ob, ib){${code}}`)(H) as (O: Arr, I: Arr, ob: number, ib: number) => void;
    });
    // an input of the output's dtype whose dims from `dim` on are contiguous lands as whole rows
    // (typed-array copy, no temporary): one row per index of the dims before `dim`
    const inner = outStrides[dim]!;
    const outer = n.out.shape.slice(0, dim);
    const rowOut = n.out.shape[dim]! * inner;
    const rows = numel(outer);
    const plain = n.inputs.map((v) => v.dtype === n.out.dtype && isContiguous(v.shape.slice(dim), v.strides.slice(dim)));
    // float32 in the wasm memory: each input is a few row copies in wasm (copyRowsF32)
    const wasmRows = n.out.dtype === "float32" && wasmRuntime() ? n.inputs.map((v) => (v.dtype === "float32" ? slabRows(v, outStrides) : null)) : [];
    return (O, ins, offs) => {
      let start = 0;
      n.inputs.forEach((v, k) => {
        const w = wasmRows[k];
        if (w && O instanceof Float32Array && ins[k] instanceof Float32Array && w(O, ins[k], start * outStrides[dim]!, offs[k]!)) {
          start += v.shape[dim]!;
          return;
        }
        if (plain[k]) {
          const len = v.shape[dim]! * inner;
          const I = ins[k]!;
          const typed = ArrayBuffer.isView(O) && ArrayBuffer.isView(I);
          // views of one kind over one buffer (the wasm arena): copyWithin on a view of the
          // whole buffer, no subarray per row (twice as fast for RoPE's 32-float rows)
          const o = O as Float32Array, i = I as Float32Array;
          const W = typed ? sharedWholeView(o, i) : null;
          const ob = W ? o.byteOffset / o.BYTES_PER_ELEMENT : 0;
          const ib = W ? i.byteOffset / o.BYTES_PER_ELEMENT : 0;
          // the rows in order: an odometer over the dims before `dim`, the source offset kept
          // incrementally (no index array or dot product per row)
          const ix = outer.map(() => 0);
          let src = offs[k]!;
          for (let r = 0, dst = start * inner; r < rows; r++, dst += rowOut) {
            if (W) W.copyWithin(ob + dst, ib + src, ib + src + len);
            else if (typed) o.set(i.subarray(src, src + len), dst);
            else for (let j = 0; j < len; j++) O[dst + j] = I[src + j]!;
            for (let d = outer.length - 1; d >= 0; d--) {
              src += v.strides[d]!;
              if (++ix[d]! < outer[d]!) break;
              src -= ix[d]! * v.strides[d]!;
              ix[d] = 0;
            }
          }
          start += v.shape[dim]!;
          return;
        }
        copies[k]!(O, ins[k]!, start * outStrides[dim]!, offs[k]!);
        start += v.shape[dim]!;
      });
    };
  },
  pad: (n) => {
    const x = n.inputs[0]!;
    const pads = n.params.pads;
    const outStrides = contiguousStrides(n.out.shape);
    const total = numel(n.out.shape);
    const base = pads.reduce((s, _, i) => (i % 2 === 0 ? s + pads[i]! * outStrides[i / 2]! : s), 0);
    const store = new Function("H", `return (x)=>${storeExpr("x", n.out.dtype)}`)(H) as (x: number) => number;
    return (O, ins, offs, S) => {
      const v = store(S[0]!);
      for (let i = 0; i < total; i++) O[i] = v;
      const X = ins[0]!;
      odometer(x.shape, (ix) => {
        O[base + dot(ix, outStrides)] = X[offs[0]! + dot(ix, x.strides)]!;
      });
    };
  },
  composite: (n) => buildComposite(n),
};


export function buildKernel(node: IRNode): Kernel {
  return (builders[node.prim] as Builder<PrimName>)(node);
}

export type { PrimParams };
