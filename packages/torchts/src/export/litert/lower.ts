// A static ExportedProgram (specialize.ts) -> one TFLite subgraph. PyTorch's NCHW convolutions
// become NHWC CONV_2D / DEPTHWISE_CONV_2D / pooling with their weights permuted on the host, and
// elementwise ops between them run in NHWC too (each value keeps whichever layouts were made,
// a TRANSPOSE is written only where an op needs the other one). matmul with a constant 2-D right
// side is FULLY_CONNECTED on the [out, in] weight (a following bias add is fused), otherwise
// BATCH_MATMUL (a transposed right side becomes adj_y). int64 values are INT32 tensors.
import { isFloating, resultType, scalarDtype, type DType, type PromoOperand } from "../../ir/dtype.js";
import type { Tensor } from "../../tensor.js";
import * as T from "../../index.js";
import { hostBytes } from "../bytes.js";
import { COMPARISONS } from "../core.js";
import { ExportError } from "../errors.js";
import { Folder } from "../fold.js";
import { argNumber, type Arg, type Node } from "../graph.js";
import type { ExportedProgram } from "../program.js";
import { Op, Padding, TensorType, type OperatorValue, type OptionsValue, type OpName, type QuantValue, type TensorValue } from "./schema.js";

export type Quantize = "int8" | "float16" | null;

/** Buffers and operator codes shared by every subgraph of one model (weights are stored once). */
export class ModelTables {
  readonly buffers: (Uint8Array | null)[] = [null];
  private readonly byContent = new Map<string, number[]>();
  readonly codes: number[] = [];
  private readonly codeIndex = new Map<number, number>();

  /** A content key (length and FNV-1a of the bytes), to find equal buffers without comparing them all. */
  static key(bytes: Uint8Array): string {
    let h = 2166136261;
    for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 16777619);
    return `${bytes.length}:${h >>> 0}`;
  }

  buffer(bytes: Uint8Array): number {
    const key = ModelTables.key(bytes);
    for (const i of this.byContent.get(key) ?? []) {
      const o = this.buffers[i]!;
      let same = true;
      for (let j = 0; j < o.length && same; j++) same = o[j] === bytes[j];
      if (same) return i;
    }
    this.buffers.push(bytes);
    const idx = this.buffers.length - 1;
    (this.byContent.get(key) ?? this.byContent.set(key, []).get(key)!).push(idx);
    return idx;
  }

  opcode(code: number): number {
    let i = this.codeIndex.get(code);
    if (i === undefined) {
      i = this.codes.length;
      this.codes.push(code);
      this.codeIndex.set(code, i);
    }
    return i;
  }
}

export interface SubgraphValue {
  tensors: TensorValue[];
  operators: OperatorValue[];
  inputs: number[];
  outputs: number[];
  inputNames: string[];
  outputNames: string[];
}

const TFL_TYPE: Partial<Record<DType, number>> = { float32: TensorType.FLOAT32, float16: TensorType.FLOAT16, int64: TensorType.INT32, int32: TensorType.INT32, bool: TensorType.BOOL, uint8: TensorType.UINT8, int8: TensorType.INT8 };
/** the dtype a value has in the file (int64 is stored and computed as int32) */
const fileDtype = (d: DType): DType => (d === "int64" ? "int32" : d);

const NCHW_TO_NHWC = [0, 2, 3, 1];
const NHWC_TO_NCHW = [0, 3, 1, 2];
/** weights with fewer elements stay float (as TFLite's converter: tiny tensors gain nothing) */
const QUANT_MIN = 1024;

const ELEMENTWISE = new Set(["neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "abs", "reciprocal", "floor", "ceil", "relu", "logicalNot", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logicalAnd", "logicalOr", "where", "cast", "gelu"]);

interface Layouts {
  nchw?: number;
  nhwc?: number;
}

export function sanitizeName(path: string, prefix: string, fallback: string): string {
  const s = path.startsWith(prefix) ? path.slice(prefix.length) : path;
  return s.replace(/\[(\d+)\]/g, "_$1").replace(/^[._]+/, "").replace(/[^A-Za-z0-9_]+/g, "_") || fallback;
}

export class SubgraphLowering {
  private readonly tensors: TensorValue[] = [];
  private readonly ops: OperatorValue[] = [];
  private readonly layouts = new Map<number, Layouts>();
  private readonly consts = new Map<string, number>();
  private readonly folder: Folder;
  private readonly consumers = new Map<number, Node[]>();
  /** add nodes fused into the FULLY_CONNECTED before them: their output is the FC's */
  private readonly fused = new Set<Node>();
  private node: Node | null = null;
  private hostIds = new WeakMap<Tensor, number>();
  private nextHostId = 0;

  constructor(
    private readonly ep: ExportedProgram,
    private readonly tables: ModelTables,
    private readonly quantize: Quantize,
  ) {
    this.folder = new Folder(ep);
    for (const n of ep.graph.nodes) for (const a of n.args) for (const v of valuesIn(a)) (this.consumers.get(v) ?? this.consumers.set(v, []).get(v)!).push(n);
  }

  private fail(msg: string): ExportError {
    const n = this.node;
    return new ExportError(`torch.litert.convert: ${n ? `${n.op} (from ${n.site ?? "the forward"}): ` : ""}${msg}`);
  }

  private must<X>(x: X | null, msg: string): X {
    if (x === null) throw this.fail(msg);
    return x;
  }

  private meta(v: number): { dtype: DType; shape: number[] } {
    const m = this.ep.graph.values[v]!;
    return { dtype: m.dtype, shape: m.shape as number[] };
  }

  private tflType(d: DType): number {
    const t = TFL_TYPE[d];
    if (t === undefined) throw this.fail(`dtype ${d} has no LiteRT tensor type`);
    return t;
  }

  private tensor(shape: number[], dtype: DType, name: string, buffer = 0, quant: QuantValue | null = null): number {
    this.tensors.push({ shape, shapeSignature: null, type: this.tflType(dtype), buffer, name, quant });
    return this.tensors.length - 1;
  }

  private op(name: OpName, inputs: number[], outShape: number[], outDtype: DType, options: OptionsValue | null = null, outName?: string): number {
    const out = this.tensor(outShape, outDtype, outName ?? `t${this.tensors.length}_${name.toLowerCase()}`);
    this.ops.push({ opcodeIndex: this.tables.opcode(Op[name]), inputs, outputs: [out], options });
    return out;
  }

  // ---- constants ----
  private hostKey(t: Tensor): number {
    let id = this.hostIds.get(t);
    if (id === undefined) this.hostIds.set(t, (id = this.nextHostId++));
    return id;
  }

  /** A constant tensor from host values (cached by content). */
  private constHost(values: ArrayLike<number>, shape: number[], dtype: DType, name = "const"): number {
    const fd = fileDtype(dtype);
    const bytes = hostBytes(values, fd);
    const key = `${fd}:${shape.join("x")}:${bytes.length <= 64 ? Array.from(values).join(",") : ModelTables.key(bytes)}`;
    const hit = this.consts.get(key);
    if (hit !== undefined) return hit;
    const idx = this.storeConst(bytes, shape, fd, name, values);
    this.consts.set(key, idx);
    return idx;
  }

  /** Store constant bytes (float16 quantization: FLOAT16 data and a DEQUANTIZE to float32). */
  private storeConst(bytes: Uint8Array, shape: number[], dtype: DType, name: string, values: ArrayLike<number>): number {
    const n = shape.reduce((a, b) => a * b, 1);
    if (this.quantize === "float16" && dtype === "float32" && n >= QUANT_MIN) {
      const half = this.tensor(shape, "float16", `${name}_f16`, this.tables.buffer(hostBytes(values, "float16")));
      return this.op("DEQUANTIZE", [half], shape, "float32", null, name);
    }
    return this.tensor(shape, dtype, name, this.tables.buffer(bytes));
  }

  private constTensor(t: Tensor, name: string, perm: number[] | null = null): number {
    const key = `t:${this.hostKey(t)}:${perm?.join(",") ?? ""}`;
    const hit = this.consts.get(key);
    if (hit !== undefined) return hit;
    const x = perm ? T.permute(t, perm).contiguous() : t;
    const idx = this.constHost(x._contiguousHost() as ArrayLike<number>, [...x.shape], t.dtype, name);
    this.consts.set(key, idx);
    return idx;
  }

  private i32(values: number[], shape = [values.length]): number {
    return this.constHost(values, shape, "int32", "shape");
  }

  private scalar(v: number, dtype: DType): number {
    return this.constHost([v], [], dtype, "scalar");
  }

  /** Symmetric int8 weights, one scale per slice along `axis` (dynamic-range quantization). */
  private int8Weights(w: Tensor, name: string, axis: number): number {
    const key = `q8:${this.hostKey(w)}:${axis}`;
    const hit = this.consts.get(key);
    if (hit !== undefined) return hit;
    const data = w._contiguousHost() as ArrayLike<number>;
    const shape = [...w.shape];
    const outer = shape.slice(0, axis).reduce((a, b) => a * b, 1);
    const ch = shape[axis]!;
    const inner = shape.slice(axis + 1).reduce((a, b) => a * b, 1);
    const scale = new Array<number>(ch).fill(0);
    for (let o = 0; o < outer; o++) for (let c = 0; c < ch; c++) for (let i = 0; i < inner; i++) scale[c] = Math.max(scale[c]!, Math.abs(data[(o * ch + c) * inner + i]!));
    for (let c = 0; c < ch; c++) scale[c] = scale[c]! > 0 ? scale[c]! / 127 : 1;
    const q = new Int8Array(data.length);
    for (let o = 0; o < outer; o++)
      for (let c = 0; c < ch; c++)
        for (let i = 0; i < inner; i++) {
          const j = (o * ch + c) * inner + i;
          q[j] = Math.max(-127, Math.min(127, Math.round(data[j]! / scale[c]!)));
        }
    const idx = this.tensor(shape, "int8", `${name}_int8`, this.tables.buffer(new Uint8Array(q.buffer)), { scale, zeroPoint: scale.map(() => 0), quantizedDimension: axis });
    this.consts.set(key, idx);
    return idx;
  }

  /** A weight for FULLY_CONNECTED / CONV_2D: int8 per output channel when quantizing, else float. */
  private weight(t: Tensor, name: string, perm: number[] | null, axis: number): number {
    if (this.quantize !== "int8" || t.numel() < QUANT_MIN || t.dtype !== "float32") return this.constTensor(t, name, perm);
    return this.int8Weights(perm ? T.permute(t, perm).contiguous() : t, name, axis);
  }

  private placeholderName(v: number): string {
    const i = this.ep.graph.inputs.find((x) => x.value === v);
    return i ? i.name : `folded_${v}`;
  }

  // ---- values in either layout ----
  private lay(v: number): Layouts {
    let l = this.layouts.get(v);
    if (!l) this.layouts.set(v, (l = {}));
    return l;
  }

  /** The value as a tensor in PyTorch's layout. */
  private val(v: number): number {
    const l = this.lay(v);
    if (l.nchw !== undefined) return l.nchw;
    const c = this.folder.constant(v);
    if (c) return (l.nchw = this.constTensor(c, this.placeholderName(v)));
    if (l.nhwc === undefined) throw this.fail(`internal: value %${v} used before it was produced`);
    const m = this.meta(v);
    return (l.nchw = this.op("TRANSPOSE", [l.nhwc, this.i32(NHWC_TO_NCHW)], m.shape, fileDtype(m.dtype)));
  }

  /** A rank-4 value (or a constant broadcastable to rank 4) in NHWC. */
  private nhwc(v: number): number {
    const l = this.lay(v);
    if (l.nhwc !== undefined) return l.nhwc;
    const m = this.meta(v);
    const c = this.folder.constant(v);
    if (c) {
      const t4 = c.reshape([...new Array<number>(4 - c.ndim).fill(1), ...c.shape]);
      return (l.nhwc = this.constTensor(t4, `${this.placeholderName(v)}_nhwc`, NCHW_TO_NHWC));
    }
    if (m.shape.length !== 4) throw this.fail(`internal: NHWC of a rank-${m.shape.length} value`);
    const s = m.shape;
    return (l.nhwc = this.op("TRANSPOSE", [this.val(v), this.i32(NCHW_TO_NHWC)], [s[0]!, s[2]!, s[3]!, s[1]!], fileDtype(m.dtype)));
  }

  private castTo(t: number, from: DType, to: DType): number {
    const f = fileDtype(from);
    const d = fileDtype(to);
    if (f === d) return t;
    const shape = this.tensors[t]!.shape;
    return this.op("CAST", [t], shape, d, { type: "CastOptions", fields: [[0, "i8", this.tflType(f)], [1, "i8", this.tflType(d)]] });
  }

  private operand(a: Arg, dtype: DType, layout: "nchw" | "nhwc"): number {
    if ("v" in a) return this.castTo(layout === "nhwc" ? this.nhwc(a.v) : this.val(a.v), this.meta(a.v).dtype, dtype);
    if ("f" in a) return this.scalar(argNumber(a), fileDtype(dtype));
    if ("k" in a && typeof a.k === "boolean") return this.scalar(a.k ? 1 : 0, fileDtype(dtype));
    throw this.fail(`unexpected operand ${JSON.stringify(a)}`);
  }

  private promo(args: Arg[]): DType {
    const ops: PromoOperand[] = args.map((a) => {
      if ("v" in a) {
        const m = this.meta(a.v);
        return { dtype: m.dtype, kind: m.shape.length ? "tensor" : "zerodim" };
      }
      if ("k" in a && typeof a.k === "boolean") return { dtype: "bool", kind: "scalar" };
      return { dtype: scalarDtype("f" in a ? argNumber(a) : 1), kind: "scalar" };
    });
    return resultType(ops);
  }

  /** Whether an elementwise node should run in NHWC: its output is rank 4 and an input already is NHWC-only. */
  private wantsNhwc(n: Node): boolean {
    const out = this.meta(n.outs[0]!);
    if (out.shape.length !== 4) return false;
    let any = false;
    for (const a of n.args) {
      if (!("v" in a)) continue;
      const m = this.meta(a.v);
      if (this.folder.isConstant(a.v)) {
        if (m.shape.length > 4) return false;
        continue;
      }
      if (m.shape.length !== 4) return false;
      const l = this.lay(a.v);
      if (l.nhwc !== undefined && l.nchw === undefined) any = true;
    }
    return any;
  }

  private ints(a: Arg): number[] {
    if ("l" in a) return a.l.map((x) => argNumber(x as { f: number }));
    return [argNumber(a as { f: number })];
  }

  private int(a: Arg): number {
    return argNumber(a as { f: number });
  }

  private flag(a: Arg): boolean {
    return (a as { k: boolean }).k === true;
  }

  // ---- nodes ----
  private lowerElementwise(n: Node, layout: "nchw" | "nhwc"): number {
    const a = n.args;
    const out = this.meta(n.outs[0]!);
    const od = fileDtype(out.dtype);
    const s = layout === "nhwc" ? [out.shape[0]!, out.shape[2]!, out.shape[3]!, out.shape[1]!] : out.shape;
    const x = (d: DType) => this.operand(a[0]!, d, layout);
    const unary: Record<string, OpName> = { neg: "NEG", exp: "EXP", log: "LOG", sqrt: "SQRT", rsqrt: "RSQRT", sin: "SIN", cos: "COS", tanh: "TANH", sigmoid: "LOGISTIC", abs: "ABS", floor: "FLOOR", ceil: "CEIL", relu: "RELU" };
    if (n.op in unary) return this.op(unary[n.op]!, [x(od)], s, od);
    switch (n.op) {
      case "logicalNot":
        return this.op("LOGICAL_NOT", [x("bool")], s, "bool");
      case "reciprocal":
        return this.op("DIV", [this.scalar(1, od), x(od)], s, od, { type: "DivOptions", fields: [] });
      case "gelu":
        return this.op("GELU", [x(od)], s, od, { type: "GeluOptions", fields: [[0, "i8", (a[1] as { k: string }).k === "tanh" ? 1 : 0]] });
      case "cast":
        return this.castTo(layout === "nhwc" ? this.nhwc((a[0] as { v: number }).v) : this.val((a[0] as { v: number }).v), this.meta((a[0] as { v: number }).v).dtype, out.dtype);
      case "where":
        return this.op("SELECT_V2", [this.operand(a[0]!, "bool", layout), this.operand(a[1]!, od, layout), this.operand(a[2]!, od, layout)], s, od);
      case "pow": {
        const e = a[1]!;
        if ("f" in e && argNumber(e) === 2) {
          const b = x(od);
          return this.op("MUL", [b, b], s, od, { type: "MulOptions", fields: [] });
        }
        if ("f" in e && argNumber(e) === 0.5) return this.op("SQRT", [x(od)], s, od);
        return this.op("POW", [x(od), this.operand(e, od, layout)], s, od);
      }
    }
    const arith: Record<string, [OpName, OptionsValue | null]> = {
      add: ["ADD", { type: "AddOptions", fields: [] }], sub: ["SUB", { type: "SubOptions", fields: [] }], mul: ["MUL", { type: "MulOptions", fields: [] }],
      div: ["DIV", { type: "DivOptions", fields: [] }], maximum: ["MAXIMUM", null], minimum: ["MINIMUM", null], logicalAnd: ["LOGICAL_AND", null], logicalOr: ["LOGICAL_OR", null],
    };
    if (n.op in arith) {
      const d = n.op === "logicalAnd" || n.op === "logicalOr" ? "bool" : od;
      const [name, opts] = arith[n.op]!;
      return this.op(name, [this.operand(a[0]!, d, layout), this.operand(a[1]!, d, layout)], s, d, opts);
    }
    if (COMPARISONS.has(n.op)) {
      const d = this.promo(a.slice(0, 2));
      const cmp: Record<string, OpName> = { eq: "EQUAL", ne: "NOT_EQUAL", lt: "LESS", le: "LESS_EQUAL", gt: "GREATER", ge: "GREATER_EQUAL" };
      return this.op(cmp[n.op]!, [this.operand(a[0]!, d, layout), this.operand(a[1]!, d, layout)], s, "bool");
    }
    throw this.fail(`core op '${n.op}' has no LiteRT mapping`);
  }

  private conv(n: Node): number {
    const [xa, wa, ba, sa, pa, da, ga] = n.args as [{ v: number }, { v: number }, Arg, Arg, Arg, Arg, Arg];
    const w = this.folder.constant(wa.v);
    if (!w) throw this.fail("the convolution weight must be a constant (a parameter)");
    const [cout, cinG, kh, kw] = w.shape as [number, number, number, number];
    const [sh, sw] = this.ints(sa);
    const [ph, pw] = this.ints(pa);
    const [dh, dw] = this.ints(da);
    const groups = this.int(ga);
    const xs = this.meta(xa.v).shape;
    const cin = xs[1]!;
    let x = this.castTo(this.nhwc(xa.v), this.meta(xa.v).dtype, "float32");
    const out = this.meta(n.outs[0]!).shape;
    const sameStride1 = sh === 1 && sw === 1 && dh * (kh - 1) === 2 * ph && dw * (kw - 1) === 2 * pw;
    if (!sameStride1 && (ph || pw)) x = this.op("PAD", [x, this.i32([0, 0, ph!, ph!, pw!, pw!, 0, 0], [4, 2])], [xs[0]!, xs[2]! + 2 * ph!, xs[3]! + 2 * pw!, cin], "float32");
    const pad = sameStride1 ? Padding.SAME : Padding.VALID;
    // LiteRT's convolution kernels read a bias: a convolution without one gets zeros (as TFLite's converter writes)
    const bias = "v" in ba ? this.constTensor(this.must(this.folder.constant(ba.v), "the convolution bias must be a constant"), this.placeholderName(ba.v)) : this.constHost(new Array<number>(cout).fill(0), [cout], "float32", "zero_bias");
    const outNhwc = [out[0]!, out[2]!, out[3]!, out[1]!];
    if (groups === 1) {
      const wt = this.weight(w, this.placeholderName(wa.v), [0, 2, 3, 1], 0); // OIHW -> OHWI
      return this.op("CONV_2D", [x, wt, bias], outNhwc, "float32", {
        type: "Conv2DOptions", fields: [[0, "i8", pad], [1, "i32", sw!], [2, "i32", sh!], [4, "i32", dw!], [5, "i32", dh!]],
      });
    }
    if (groups === cin && cinG === 1) {
      const wt = this.weight(w, this.placeholderName(wa.v), [1, 2, 3, 0], 3); // [Cout, 1, kh, kw] -> [1, kh, kw, Cout]
      return this.op("DEPTHWISE_CONV_2D", [x, wt, bias], outNhwc, "float32", {
        type: "DepthwiseConv2DOptions", fields: [[0, "i8", pad], [1, "i32", sw!], [2, "i32", sh!], [3, "i32", cout / cin], [5, "i32", dw!], [6, "i32", dh!]],
      });
    }
    throw this.fail(`grouped convolution (groups=${groups}, not depthwise) has no LiteRT mapping`);
  }

  private convTranspose(n: Node): number {
    const [xa, wa, ba, sa, pa, _opa, ga, da] = n.args as [{ v: number }, { v: number }, Arg, Arg, Arg, Arg, Arg, Arg];
    const w = this.folder.constant(wa.v);
    if (!w) throw this.fail("the convolution weight must be a constant (a parameter)");
    if (this.int(ga) !== 1) throw this.fail("grouped transposed convolution has no LiteRT mapping");
    if (this.ints(da).some((d) => d !== 1)) throw this.fail("dilated transposed convolution has no LiteRT mapping");
    const [, cout, kh, kw] = w.shape as [number, number, number, number];
    const [sh, sw] = this.ints(sa);
    const [ph, pw] = this.ints(pa);
    const xs = this.meta(xa.v).shape;
    const full = [xs[0]!, (xs[2]! - 1) * sh! + kh, (xs[3]! - 1) * sw! + kw, cout];
    const x = this.castTo(this.nhwc(xa.v), this.meta(xa.v).dtype, "float32");
    const wt = this.constTensor(w, this.placeholderName(wa.v), [1, 2, 3, 0]); // [Cin, Cout, kh, kw] -> [Cout, kh, kw, Cin]
    let y = this.op("TRANSPOSE_CONV", [this.i32(full), wt, x], full, "float32", { type: "TransposeConvOptions", fields: [[0, "i8", Padding.VALID], [1, "i32", sw!], [2, "i32", sh!]] });
    const out = this.meta(n.outs[0]!).shape;
    const outNhwc = [out[0]!, out[2]!, out[3]!, out[1]!];
    if (ph || pw || outNhwc[1] !== full[1] || outNhwc[2] !== full[2])
      y = this.op("STRIDED_SLICE", [y, this.i32([0, ph!, pw!, 0]), this.i32([outNhwc[0]!, ph! + outNhwc[1]!, pw! + outNhwc[2]!, outNhwc[3]!]), this.i32([1, 1, 1, 1])], outNhwc, "float32", { type: "StridedSliceOptions", fields: [] });
    if ("v" in ba) y = this.op("ADD", [y, this.constTensor(this.must(this.folder.constant(ba.v), "the bias must be a constant"), this.placeholderName(ba.v))], outNhwc, "float32", { type: "AddOptions", fields: [] });
    return y;
  }

  private pool(n: Node): number {
    const max = n.op === "maxPool2d";
    const a = n.args;
    const [kh, kw] = this.ints(a[1]!);
    const [sh, sw] = this.ints(a[2]!);
    const [ph, pw] = this.ints(a[3]!);
    if (max && this.ints(a[4]!).some((d) => d !== 1)) throw this.fail("dilated max pooling has no LiteRT mapping");
    if (!max && !this.flag(a[5]!) && (ph || pw)) throw this.fail("average pooling with padding and countIncludePad=false has no LiteRT mapping");
    const xv = (a[0] as { v: number }).v;
    const xs = this.meta(xv).shape;
    const out = this.meta(n.outs[0]!).shape;
    const floorH = Math.floor((xs[2]! + 2 * ph! - kh!) / sh!) + 1;
    const floorW = Math.floor((xs[3]! + 2 * pw! - kw!) / sw!) + 1;
    if (floorH !== out[2] || floorW !== out[3]) throw this.fail("ceilMode pooling that adds a window has no LiteRT mapping");
    let x = this.castTo(this.nhwc(xv), this.meta(xv).dtype, "float32");
    if (ph || pw) {
      const padded = [xs[0]!, xs[2]! + 2 * ph!, xs[3]! + 2 * pw!, xs[1]!];
      // max pooling pads with the lowest float, so a padded element never wins (as PyTorch's -inf)
      x = this.op("PADV2", [x, this.i32([0, 0, ph!, ph!, pw!, pw!, 0, 0], [4, 2]), this.scalar(max ? -3.4028234663852886e38 : 0, "float32")], padded, "float32");
    }
    return this.op(max ? "MAX_POOL_2D" : "AVERAGE_POOL_2D", [x], [out[0]!, out[2]!, out[3]!, out[1]!], "float32", {
      type: "Pool2DOptions", fields: [[0, "i8", Padding.VALID], [1, "i32", sw!], [2, "i32", sh!], [3, "i32", kw!], [4, "i32", kh!]],
    });
  }

  /** matmul: FULLY_CONNECTED for a constant 2-D right side (bias add fused), else BATCH_MATMUL. */
  private matmul(n: Node): number {
    const [aa, ba] = n.args as [{ v: number }, { v: number }];
    const out = this.meta(n.outs[0]!);
    const lhs = this.castTo(this.val(aa.v), this.meta(aa.v).dtype, "float32");
    const bm = this.meta(ba.v);
    const prod = this.folder.producer.get(ba.v);
    const isT2 = prod?.op === "permute" && bm.shape.length === 2 && this.ints(prod.args[1]!).join() === "1,0";
    const wT = isT2 ? this.folder.constant((prod!.args[0] as { v: number }).v) : null;
    const rhsConst = this.folder.constant(ba.v);
    if (bm.shape.length === 2 && (wT || rhsConst) && this.meta(aa.v).shape.length >= 2) {
      // FULLY_CONNECTED wants [out, in]: the weight under the transpose, or the constant transposed here
      const name = wT ? this.placeholderName((prod!.args[0] as { v: number }).v) : this.placeholderName(ba.v);
      const w = wT ? this.weight(wT, name, null, 0) : this.weight(rhsConst!, name, [1, 0], 0);
      let bias = -1;
      let outName: string | undefined;
      const users = this.consumers.get(n.outs[0]!) ?? [];
      if (users.length === 1 && users[0]!.op === "add") {
        const add = users[0]!;
        const other = add.args.find((x) => !("v" in x && x.v === n.outs[0]));
        const bv = other && "v" in other ? other.v : -1;
        const b = bv >= 0 ? this.folder.constant(bv) : null;
        if (b && b.ndim === 1 && b.shape[0] === bm.shape[1] && b.dtype === "float32" && this.meta(add.outs[0]!).shape.join() === out.shape.join()) {
          bias = this.constTensor(b, this.placeholderName(bv));
          this.fused.add(add);
          outName = `t_fc_${add.outs[0]}`;
          const fc = this.fc(lhs, w, bias, out.shape, outName);
          this.lay(add.outs[0]!).nchw = fc;
          return fc;
        }
      }
      return this.fc(lhs, w, bias, out.shape, outName);
    }
    const swapLast = prod?.op === "permute" && isSwapLast(this.ints(prod.args[1]!));
    const rhs = swapLast ? this.val((prod!.args[0] as { v: number }).v) : this.val(ba.v);
    const rhsType = swapLast ? this.meta((prod!.args[0] as { v: number }).v).dtype : bm.dtype;
    if (this.meta(aa.v).shape.length < 2 || bm.shape.length < 2) throw this.fail("matmul of a vector has no LiteRT mapping (reshape it to a matrix)");
    return this.op("BATCH_MATMUL", [lhs, this.castTo(rhs, rhsType, "float32")], out.shape, "float32", { type: "BatchMatMulOptions", fields: [[0, "i8", 0], [1, "i8", swapLast ? 1 : 0]] });
  }

  private fc(x: number, w: number, bias: number, outShape: number[], name?: string): number {
    const q = this.quantize === "int8" && this.tensors[w]!.quant !== null;
    return this.op("FULLY_CONNECTED", [x, w, bias], outShape, "float32", { type: "FullyConnectedOptions", fields: [[2, "i8", 1], ...(q ? ([[3, "i8", 1]] as [number, "i8", number][]) : [])] }, name);
  }

  private reduce(n: Node): number {
    const a = n.args;
    const xv = (a[0] as { v: number }).v;
    const m = this.meta(xv);
    const dims = this.ints(a[1]!);
    const keep = this.flag(a[2]!);
    const out = this.meta(n.outs[0]!);
    const name = ({ sum: "SUM", mean: "MEAN", amax: "REDUCE_MAX", amin: "REDUCE_MIN" } as const)[n.op as "sum"]!;
    const od = fileDtype(out.dtype);
    // a spatial reduction of an NHWC value stays NHWC (global average pooling)
    const l = this.lay(xv);
    if (m.shape.length === 4 && l.nhwc !== undefined && l.nchw === undefined && dims.every((d) => d === 2 || d === 3)) {
      const ax = dims.map((d) => (d === 2 ? 1 : 2));
      const s = [m.shape[0]!, ...(dims.includes(2) ? (keep ? [1] : []) : [m.shape[2]!]), ...(dims.includes(3) ? (keep ? [1] : []) : [m.shape[3]!]), m.shape[1]!];
      const r = this.op(name, [this.castTo(l.nhwc, m.dtype, od), this.i32(ax)], s, od, { type: "ReducerOptions", fields: [[0, "i8", keep ? 1 : 0]] });
      if (keep) {
        this.lay(n.outs[0]!).nhwc = r;
        return -1;
      }
      return s.length === out.shape.length && dims.length === 2 ? r : this.op("TRANSPOSE", [r, this.i32(s.length === 3 ? [0, 2, 1] : [0, 1])], out.shape, od);
    }
    return this.op(name, [this.castTo(this.val(xv), m.dtype, od), this.i32(dims)], out.shape, od, { type: "ReducerOptions", fields: [[0, "i8", keep ? 1 : 0]] });
  }

  private softmaxLike(n: Node): number {
    const xv = (n.args[0] as { v: number }).v;
    const m = this.meta(xv);
    const r = m.shape.length;
    let d = this.int(n.args[1]!);
    if (d < 0) d += r;
    const op: OpName = n.op === "softmax" ? "SOFTMAX" : "LOG_SOFTMAX";
    const opts: OptionsValue | null = n.op === "softmax" ? { type: "SoftmaxOptions", fields: [[0, "f32", 1]] } : null;
    let x = this.castTo(this.val(xv), m.dtype, "float32");
    if (d === r - 1) return this.op(op, [x], m.shape, "float32", opts);
    const perm = [...Array(r).keys()];
    perm[d] = r - 1;
    perm[r - 1] = d;
    const ps = perm.map((p) => m.shape[p]!);
    x = this.op("TRANSPOSE", [x, this.i32(perm)], ps, "float32");
    const y = this.op(op, [x], ps, "float32", opts);
    return this.op("TRANSPOSE", [y, this.i32(perm)], m.shape, "float32");
  }

  private lowerNode(n: Node): number {
    const a = n.args;
    const out = this.meta(n.outs[0]!);
    const od = fileDtype(out.dtype);
    const xv = () => (a[0] as { v: number }).v;
    const x = () => this.val(xv());
    if (ELEMENTWISE.has(n.op)) {
      if (this.wantsNhwc(n)) {
        this.lay(n.outs[0]!).nhwc = this.lowerElementwise(n, "nhwc");
        return -1;
      }
      return this.lowerElementwise(n, "nchw");
    }
    switch (n.op) {
      case "clone": {
        // no in-place writes are left in the graph: the copy is the same tensor
        const l = this.lay(xv());
        if (l.nchw === undefined && l.nhwc !== undefined) {
          this.lay(n.outs[0]!).nhwc = l.nhwc;
          return -1;
        }
        return x();
      }
      case "matmul":
        return this.matmul(n);
      case "conv2d":
      case "convTranspose2d":
      case "maxPool2d":
      case "avgPool2d":
        this.lay(n.outs[0]!).nhwc = n.op === "conv2d" ? this.conv(n) : n.op === "convTranspose2d" ? this.convTranspose(n) : this.pool(n);
        return -1;
      case "softmax":
      case "logSoftmax":
        return this.softmaxLike(n);
      case "sum":
      case "mean":
      case "amax":
      case "amin":
        return this.reduce(n);
      case "argmax": {
        const m = this.meta(xv());
        let d = this.int(a[1]!);
        if (d < 0) d += m.shape.length;
        const red = m.shape.filter((_, i) => i !== d);
        const r = this.op("ARG_MAX", [this.castTo(x(), m.dtype, "float32"), this.i32([d])], red, "int32", { type: "ArgMaxOptions", fields: [[0, "i8", TensorType.INT32]] });
        return this.flag(a[2]!) ? this.op("RESHAPE", [r, this.i32(out.shape)], out.shape, "int32") : r;
      }
      case "cumsum":
        return this.op("CUMSUM", [this.castTo(x(), this.meta(xv()).dtype, od), this.constHost([this.int(a[1]!)], [], "int32")], out.shape, od, { type: "CumsumOptions", fields: [] });
      case "reshape":
      case "unsqueeze":
      case "squeeze":
        return this.op("RESHAPE", [x(), this.i32(out.shape)], out.shape, od, { type: "ReshapeOptions", fields: [[0, "i32[]", out.shape]] });
      case "permute": {
        const perm = this.ints(a[1]!);
        const l = this.lay(xv());
        // NHWC already is this permutation of NCHW
        if (perm.join() === NCHW_TO_NHWC.join() && l.nhwc !== undefined) return l.nhwc;
        return this.op("TRANSPOSE", [x(), this.i32(perm)], out.shape, od, { type: "TransposeOptions", fields: [] });
      }
      case "expand":
        return this.op("BROADCAST_TO", [x(), this.i32(out.shape)], out.shape, od);
      case "slice": {
        const m = this.meta(xv());
        const d = this.int(a[1]!);
        const begin = m.shape.map(() => 0);
        const end = [...m.shape];
        const strides = m.shape.map(() => 1);
        begin[d] = this.int(a[2]!);
        end[d] = this.int(a[3]!);
        strides[d] = this.int(a[4]!);
        return this.op("STRIDED_SLICE", [x(), this.i32(begin), this.i32(end), this.i32(strides)], out.shape, od, { type: "StridedSliceOptions", fields: [] });
      }
      case "select":
        return this.op("GATHER", [x(), this.constHost([this.int(a[2]!)], [], "int32")], out.shape, od, { type: "GatherOptions", fields: [[0, "i32", this.int(a[1]!)]] });
      case "take":
        return this.op("GATHER", [x(), this.castTo(this.val((a[2] as { v: number }).v), this.meta((a[2] as { v: number }).v).dtype, "int32")], out.shape, od, { type: "GatherOptions", fields: [[0, "i32", this.int(a[1]!)]] });
      case "gatherElements":
        return this.gatherElements(n);
      case "cat": {
        const vs = (a[0] as { vs: number[] }).vs;
        let d = this.int(a[1]!);
        if (d < 0) d += out.shape.length;
        // a channel concat of NHWC values stays NHWC
        if (out.shape.length === 4 && d === 1 && vs.some((v) => this.lay(v).nhwc !== undefined && this.lay(v).nchw === undefined)) {
          const ins = vs.map((v) => this.castTo(this.nhwc(v), this.meta(v).dtype, od));
          this.lay(n.outs[0]!).nhwc = this.op("CONCATENATION", ins, [out.shape[0]!, out.shape[2]!, out.shape[3]!, out.shape[1]!], od, { type: "ConcatenationOptions", fields: [[0, "i32", 3]] });
          return -1;
        }
        return this.op("CONCATENATION", vs.map((v) => this.castTo(this.val(v), this.meta(v).dtype, od)), out.shape, od, { type: "ConcatenationOptions", fields: [[0, "i32", d]] });
      }
      case "arange": {
        const [s, e, st] = [this.int(a[0]!), this.int(a[1]!), this.int(a[2]!)];
        return this.op("RANGE", [this.scalar(s, od), this.scalar(e, od), this.scalar(st, od)], out.shape, od);
      }
      case "full":
      case "fullLike":
        return this.op("FILL", [this.i32(out.shape), this.scalar(argNumber(a[1] as { f: number }), od)], out.shape, od);
      case "pad": {
        const pads = this.ints(a[1]!);
        const r = out.shape.length;
        const p = new Array<number>(2 * r).fill(0);
        for (let i = 0; i < pads.length / 2; i++) {
          p[2 * (r - 1 - i)] = pads[2 * i]!;
          p[2 * (r - 1 - i) + 1] = pads[2 * i + 1]!;
        }
        return this.op("PADV2", [this.castTo(x(), this.meta(xv()).dtype, od), this.i32(p, [r, 2]), this.scalar(argNumber(a[2] as { f: number }), od)], out.shape, od);
      }
    }
    throw this.fail(`core op '${n.op}' has no LiteRT mapping`);
  }

  /** torch.gather as GATHER_ND: the coordinates of every output element, the gathered dim's from the index. */
  private gatherElements(n: Node): number {
    const [xa, da, ia] = n.args as [{ v: number }, Arg, { v: number }];
    const out = this.meta(n.outs[0]!);
    const r = out.shape.length;
    let d = this.int(da);
    if (d < 0) d += r;
    const count = out.shape.reduce((p, q) => p * q, 1);
    const idx = this.op("RESHAPE", [this.castTo(this.val(ia.v), this.meta(ia.v).dtype, "int32"), this.i32([...out.shape, 1])], [...out.shape, 1], "int32");
    const parts: number[] = [];
    for (let j = 0; j < r; j++) {
      if (j === d) {
        parts.push(idx);
        continue;
      }
      const grid = new Array<number>(count);
      const stride = out.shape.slice(j + 1).reduce((p, q) => p * q, 1);
      for (let i = 0; i < count; i++) grid[i] = Math.floor(i / stride) % out.shape[j]!;
      parts.push(this.constHost(grid, [...out.shape, 1], "int32", "coords"));
    }
    const coords = this.op("CONCATENATION", parts, [...out.shape, r], "int32", { type: "ConcatenationOptions", fields: [[0, "i32", r]] });
    return this.op("GATHER_ND", [this.val(xa.v), coords], out.shape, fileDtype(out.dtype));
  }

  run(inputNames: string[], outputNames: string[]): SubgraphValue {
    const g = this.ep.graph;
    const users = this.ep.userInputs();
    const inputs = users.map((u, i) => {
      const m = this.meta(u.value);
      const t = this.tensor(m.shape, fileDtype(m.dtype), inputNames[i]!);
      this.lay(u.value).nchw = t;
      return t;
    });
    for (const n of g.nodes) {
      if (this.fused.has(n) || this.folder.isConstant(n.outs[0]!)) continue;
      this.node = n;
      const t = this.lowerNode(n);
      if (t >= 0) this.lay(n.outs[0]!).nchw = t;
    }
    this.node = null;
    // outputs are distinct tensors in PyTorch's layout (an output that is an input or a constant is copied)
    const taken = new Set<number>(inputs);
    const outputs = g.outputs.map((o, i) => {
      let t = this.val(o.value);
      const m = this.meta(o.value);
      if (taken.has(t) || this.tensors[t]!.buffer !== 0) t = this.op("RESHAPE", [t, this.i32(m.shape)], m.shape, fileDtype(m.dtype));
      taken.add(t);
      this.tensors[t]!.name = outputNames[i]!;
      return t;
    });
    return { tensors: this.tensors, operators: this.ops, inputs, outputs, inputNames, outputNames };
  }
}

function isSwapLast(perm: number[]): boolean {
  const r = perm.length;
  if (r < 2) return false;
  return perm.every((p, i) => (i < r - 2 ? p === i : i === r - 2 ? p === r - 1 : p === r - 2));
}

function valuesIn(a: Arg): number[] {
  if ("v" in a) return [a.v];
  if ("vs" in a) return a.vs;
  if ("l" in a) return a.l.flatMap(valuesIn);
  return [];
}

export { isFloating };
