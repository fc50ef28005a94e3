// ExportedProgram -> ONNX ModelProto (opset 17 and later), the message types coming from the
// `onnx-proto` package (ONNX's published onnx.proto compiled for protobufjs). Every core op maps
// to one or a few standard ONNX ops; dims that are dynamic become dim_params on the inputs and
// outputs, and integers computed from them (reshape targets, slice bounds, arange ends) are
// computed in the graph from Shape of the input that carries each dim.
import onnxPkg from "onnx-proto";
import { isFloating, resultType, scalarDtype, type DType, type PromoOperand } from "../../ir/dtype.js";
import type { Tensor } from "../../tensor.js";
import { hostBytes, tensorBytes } from "../bytes.js";
import { COMPARISONS } from "../core.js";
import { ExportError } from "../errors.js";
import { Folder } from "../fold.js";
import { argNumber, isSym, symToString, type Arg, type Node, type SymExpr, type SymInt } from "../graph.js";
import type { ExportedProgram } from "../program.js";

const { onnx } = onnxPkg;
type INode = onnxPkg.onnx.INodeProto;
type IAttr = onnxPkg.onnx.IAttributeProto;
type ITensor = onnxPkg.onnx.ITensorProto;
type IValueInfo = onnxPkg.onnx.IValueInfoProto;

const DT = onnx.TensorProto.DataType;
const ONNX_DTYPE: Record<DType, number> = {
  float32: DT.FLOAT, float64: DT.DOUBLE, float16: DT.FLOAT16, bfloat16: DT.BFLOAT16, int64: DT.INT64, int32: DT.INT32, int8: DT.INT8, uint8: DT.UINT8, bool: DT.BOOL,
};

type Attr = number | number[] | string | { tensor: ITensor } | { float: number };

function attr(name: string, v: Attr): IAttr {
  const A = onnx.AttributeProto.AttributeType;
  if (typeof v === "number") return Number.isInteger(v) ? { name, type: A.INT, i: v } : { name, type: A.FLOAT, f: v };
  if (Array.isArray(v)) return { name, type: A.INTS, ints: v };
  if (typeof v === "string") return { name, type: A.STRING, s: new TextEncoder().encode(v) };
  if ("float" in v) return { name, type: A.FLOAT, f: v.float };
  return { name, type: A.TENSOR, t: v.tensor };
}

import type { OnnxOptions } from "./options.js";
export type { OnnxOptions } from "./options.js";

/** An initializer: its proto (raw bytes inline) and its byte size, so the writer can move it to external data. */
export interface Initializer {
  proto: ITensor;
  bytes: Uint8Array;
}

export interface LoweredModel {
  model: onnxPkg.onnx.IModelProto;
  initializers: Initializer[];
}

function sanitize(path: string, prefix: string, fallback: string): string {
  const s = path.startsWith(prefix) ? path.slice(prefix.length) : path;
  const n = s.replace(/\[(\d+)\]/g, "_$1").replace(/^[._]+/, "").replace(/[^A-Za-z0-9_]+/g, "_");
  return n || fallback;
}

export function lowerToOnnx(ep: ExportedProgram, opts: OnnxOptions = {}): LoweredModel {
  return new Lowering(ep, opts).run();
}

class Lowering {
  private readonly nodes: INode[] = [];
  private readonly inits = new Map<string, Initializer>();
  private readonly names = new Map<number, string>();
  private readonly cache = new Map<string, string>();
  private readonly folder: Folder;
  private readonly opset: number;
  private uid = 0;
  private readonly inputNames: string[];
  private node: Node | null = null;

  constructor(
    private readonly ep: ExportedProgram,
    private readonly opts: OnnxOptions,
  ) {
    this.folder = new Folder(ep);
    this.opset = opts.opsetVersion ?? 17;
    if (!Number.isInteger(this.opset) || this.opset < 17 || this.opset > 21) throw new ExportError(`torch.onnx.export: opsetVersion must be between 17 and 21, got ${opts.opsetVersion}`);
    const users = ep.userInputs();
    this.inputNames = users.map((u, i) => opts.inputNames?.[i] ?? sanitize(u.name, "args", `input_${i}`).replace(/^(\d)/, "input_$1"));
    users.forEach((u, i) => this.names.set(u.value, this.inputNames[i]!));
  }

  private fresh(hint: string): string {
    return `${hint}_${this.uid++}`;
  }

  private emit(op: string, inputs: string[], attrs: Record<string, Attr> = {}, out?: string): string {
    const o = out ?? this.fresh(op.toLowerCase());
    this.nodes.push({ opType: op, input: inputs, output: [o], name: this.fresh(`n_${op}`), attribute: Object.entries(attrs).map(([k, v]) => attr(k, v)) });
    return o;
  }

  private initializer(name: string, dtype: DType, dims: number[], bytes: Uint8Array): string {
    if (!this.inits.has(name)) this.inits.set(name, { proto: { name, dims, dataType: ONNX_DTYPE[dtype], rawData: bytes }, bytes });
    return name;
  }

  /** A constant tensor from host values, shared by content. */
  private constant(dtype: DType, dims: number[], values: number[]): string {
    const key = `c:${dtype}:${dims.join("x")}:${values.join(",")}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const name = this.initializer(this.fresh("const"), dtype, dims, hostBytes(values, dtype));
    this.cache.set(key, name);
    return name;
  }

  private i64(values: number[]): string {
    return this.constant("int64", [values.length], values);
  }

  private scalar(v: number | boolean, dtype: DType): string {
    return this.constant(dtype, [], [Number(v)]);
  }

  private placeholderName(v: number): string | null {
    const i = this.ep.graph.inputs.find((x) => x.value === v);
    return i && i.kind !== "user_input" ? i.name : null;
  }

  /** The ONNX name of graph value v (an initializer when it folds to a constant). */
  private val(v: number): string {
    const n = this.names.get(v);
    if (n) return n;
    const c = this.folder.constant(v);
    if (!c) throw new ExportError(`torch.onnx.export: internal: value %${v} used before it was produced`);
    const name = this.initializer(this.placeholderName(v) ?? `folded_${v}`, c.dtype, [...c.shape], tensorBytes(c));
    this.names.set(v, name);
    return name;
  }

  private dtypeOf(v: number): DType {
    return this.ep.graph.values[v]!.dtype;
  }

  private castTo(name: string, from: DType, to: DType): string {
    return from === to ? name : this.emit("Cast", [name], { to: ONNX_DTYPE[to] });
  }

  /** A tensor or scalar operand, cast to `dtype`. */
  private operand(a: Arg, dtype: DType): string {
    if ("v" in a) return this.castTo(this.val(a.v), this.dtypeOf(a.v), dtype);
    if ("f" in a) return this.scalar(argNumber(a), dtype);
    if ("k" in a && typeof a.k === "boolean") return this.scalar(a.k, dtype);
    if ("s" in a) return this.castTo(this.emit("Squeeze", [this.symInt(a.s)]), "int64", dtype);
    throw this.fail(`unexpected operand ${JSON.stringify(a)}`);
  }

  private promo(args: Arg[]): DType {
    const ops: PromoOperand[] = args.map((a) => {
      if ("v" in a) {
        const m = this.ep.graph.values[a.v]!;
        return { dtype: m.dtype, kind: m.shape.length ? "tensor" : "zerodim" };
      }
      if ("k" in a && typeof a.k === "boolean") return { dtype: "bool", kind: "scalar" };
      return { dtype: scalarDtype("f" in a ? argNumber(a) : 1), kind: "scalar" };
    });
    return resultType(ops);
  }

  // ---- dynamic dims and symbolic ints (int64 [1] tensors) ----
  private dim(name: string): string {
    const key = `dim:${name}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const d = this.ep.graph.dims.find((x) => x.name === name);
    if (!d) throw this.fail(`unknown dim '${name}'`);
    const src = d.sources[0]!;
    const out = this.emit("Shape", [this.inputNames[src.input]!], { start: src.dim, end: src.dim + 1 });
    this.cache.set(key, out);
    return out;
  }

  private symInt(e: SymExpr): string {
    const key = `sym:${JSON.stringify(e)}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    let acc: string | null = null;
    for (const t of e.terms) {
      let p = this.dim(t.syms[0]!);
      for (const s of t.syms.slice(1)) p = this.emit("Mul", [p, this.dim(s)]);
      if (t.num !== 1) p = this.emit("Mul", [p, this.i64([t.num])]);
      if (t.den !== 1) p = this.emit("Div", [p, this.i64([t.den])]);
      acc = acc ? this.emit("Add", [acc, p]) : p;
    }
    if (e.c !== 0 || !acc) acc = acc ? this.emit("Add", [acc, this.i64([e.c])]) : this.i64([e.c]);
    this.cache.set(key, acc);
    return acc;
  }

  private ints(a: Arg): SymInt[] {
    if ("l" in a) return a.l.map((x) => ("s" in x ? x.s : argNumber(x as { f: number })));
    if ("s" in a) return [a.s];
    if ("f" in a) return [argNumber(a)];
    throw this.fail(`expected an int list, got ${JSON.stringify(a)}`);
  }

  private staticInts(a: Arg, what: string): number[] {
    const v = this.ints(a);
    if (v.some(isSym)) throw this.fail(`${what} depends on a dynamic dim (${v.map(symToString).join(", ")}), which ONNX takes only as a constant attribute`);
    return v as number[];
  }

  /** An int64 1-D tensor of the list; static runs become constants, dynamic entries are computed. */
  private intList(v: SymInt[]): string {
    if (!v.some(isSym)) return this.i64(v as number[]);
    const parts: string[] = [];
    let run: number[] = [];
    for (const x of v) {
      if (typeof x === "number") run.push(x);
      else {
        if (run.length) parts.push(this.i64(run));
        run = [];
        parts.push(this.symInt(x));
      }
    }
    if (run.length) parts.push(this.i64(run));
    return parts.length === 1 ? parts[0]! : this.emit("Concat", parts, { axis: 0 });
  }

  private int(a: Arg): SymInt {
    if ("s" in a) return a.s;
    if ("f" in a) return argNumber(a);
    throw this.fail(`expected an int, got ${JSON.stringify(a)}`);
  }

  private fail(msg: string): ExportError {
    const n = this.node;
    return new ExportError(`torch.onnx.export: ${n ? `${n.op} (from ${n.site ?? "the forward"}): ` : ""}${msg}`);
  }

  private lowerNode(n: Node): string {
    const a = n.args;
    const out = this.dtypeOf(n.outs[0]!);
    const x = () => this.val((a[0] as { v: number }).v);
    const xType = () => this.dtypeOf((a[0] as { v: number }).v);
    const xCast = (d: DType = out) => this.castTo(x(), xType(), d);
    const unary: Record<string, string> = {
      neg: "Neg", exp: "Exp", log: "Log", sqrt: "Sqrt", sin: "Sin", cos: "Cos", tanh: "Tanh", sigmoid: "Sigmoid", abs: "Abs", erf: "Erf",
      reciprocal: "Reciprocal", floor: "Floor", ceil: "Ceil", relu: "Relu", logicalNot: "Not",
    };
    const arith: Record<string, string> = { add: "Add", sub: "Sub", mul: "Mul", div: "Div", pow: "Pow", maximum: "Max", minimum: "Min", logicalAnd: "And", logicalOr: "Or" };
    const compare: Record<string, string> = { eq: "Equal", lt: "Less", le: "LessOrEqual", gt: "Greater", ge: "GreaterOrEqual" };
    if (n.op in unary) return this.emit(unary[n.op]!, [xCast(n.op === "logicalNot" ? "bool" : out)]);
    if (n.op === "rsqrt") return this.emit("Reciprocal", [this.emit("Sqrt", [xCast()])]);
    if (n.op in arith) {
      const d = n.op === "logicalAnd" || n.op === "logicalOr" ? "bool" : out;
      return this.emit(arith[n.op]!, [this.operand(a[0]!, d), this.operand(a[1]!, n.op === "pow" && isFloating(d) ? d : d)]);
    }
    if (COMPARISONS.has(n.op)) {
      const d = this.promo(a.slice(0, 2));
      const r = this.emit(compare[n.op] ?? "Equal", [this.operand(a[0]!, d), this.operand(a[1]!, d)]);
      return n.op === "ne" ? this.emit("Not", [r]) : r;
    }
    switch (n.op) {
      case "where":
        return this.emit("Where", [this.operand(a[0]!, "bool"), this.operand(a[1]!, out), this.operand(a[2]!, out)]);
      case "cast":
        return this.emit("Cast", [x()], { to: ONNX_DTYPE[out] });
      case "clone":
        return x();
      case "matmul":
        return this.emit("MatMul", [this.operand(a[0]!, out), this.operand(a[1]!, out)]);
      case "gelu": {
        const xs = xCast();
        const half = this.emit("Mul", [xs, this.scalar(0.5, out)]);
        let inner: string;
        if ((a[1] as { k: string }).k === "tanh") {
          const cube = this.emit("Mul", [this.emit("Mul", [xs, xs]), xs]);
          const poly = this.emit("Add", [xs, this.emit("Mul", [cube, this.scalar(0.044715, out)])]);
          inner = this.emit("Tanh", [this.emit("Mul", [poly, this.scalar(Math.sqrt(2 / Math.PI), out)])]);
        } else inner = this.emit("Erf", [this.emit("Mul", [xs, this.scalar(Math.SQRT1_2, out)])]);
        return this.emit("Mul", [half, this.emit("Add", [inner, this.scalar(1, out)])]);
      }
      case "conv2d": {
        const [, w, b, stride, pad, dil, groups] = a as [Arg, { v: number }, Arg, Arg, Arg, Arg, Arg];
        const ws = this.ep.graph.values[w.v]!.shape as number[];
        const p = this.staticInts(pad, "padding");
        const ins = [xCast(), this.operand(w, out), ...("v" in b ? [this.operand(b, out)] : [])];
        return this.emit("Conv", ins, { kernel_shape: ws.slice(2), strides: this.staticInts(stride, "stride"), pads: [...p, ...p], dilations: this.staticInts(dil, "dilation"), group: argNumber(groups as { f: number }) });
      }
      case "convTranspose2d": {
        const [, w, b, stride, pad, outPad, groups, dil] = a as [Arg, { v: number }, Arg, Arg, Arg, Arg, Arg, Arg];
        const ws = this.ep.graph.values[w.v]!.shape as number[];
        const p = this.staticInts(pad, "padding");
        const ins = [xCast(), this.operand(w, out), ...("v" in b ? [this.operand(b, out)] : [])];
        return this.emit("ConvTranspose", ins, {
          kernel_shape: ws.slice(2), strides: this.staticInts(stride, "stride"), pads: [...p, ...p], dilations: this.staticInts(dil, "dilation"),
          output_padding: this.staticInts(outPad, "outputPadding"), group: argNumber(groups as { f: number }),
        });
      }
      case "maxPool2d": {
        const [, k, s, p, d, ceil] = a;
        const pp = this.staticInts(p!, "padding");
        return this.emit("MaxPool", [xCast()], { kernel_shape: this.staticInts(k!, "kernel"), strides: this.staticInts(s!, "stride"), pads: [...pp, ...pp], dilations: this.staticInts(d!, "dilation"), ceil_mode: (ceil as { k: boolean }).k ? 1 : 0 });
      }
      case "avgPool2d": {
        const [, k, s, p, ceil, incl] = a;
        const pp = this.staticInts(p!, "padding");
        return this.emit("AveragePool", [xCast()], { kernel_shape: this.staticInts(k!, "kernel"), strides: this.staticInts(s!, "stride"), pads: [...pp, ...pp], ceil_mode: (ceil as { k: boolean }).k ? 1 : 0, count_include_pad: (incl as { k: boolean }).k ? 1 : 0 });
      }
      case "softmax":
      case "logSoftmax":
        return this.emit(n.op === "softmax" ? "Softmax" : "LogSoftmax", [xCast()], { axis: argNumber(a[1] as { f: number }) });
      case "sum":
      case "mean":
      case "amax":
      case "amin": {
        const axes = this.staticInts(a[1]!, "reduction dims");
        const keep = (a[2] as { k: boolean }).k ? 1 : 0;
        const op = { sum: "ReduceSum", mean: "ReduceMean", amax: "ReduceMax", amin: "ReduceMin" }[n.op]!;
        // ReduceSum takes axes as an input from opset 13, the others from opset 18
        if (n.op === "sum" || this.opset >= 18) return this.emit(op, [xCast(), this.i64(axes)], { keepdims: keep });
        return this.emit(op, [xCast()], { axes, keepdims: keep });
      }
      case "argmax":
        return this.emit("ArgMax", [x()], { axis: argNumber(a[1] as { f: number }), keepdims: (a[2] as { k: boolean }).k ? 1 : 0 });
      case "cumsum":
        return this.emit("CumSum", [xCast(), this.constant("int64", [], [argNumber(a[1] as { f: number })])]);
      case "reshape":
        return this.emit("Reshape", [x(), this.intList(this.ints(a[1]!))]);
      case "permute":
        return this.emit("Transpose", [x()], { perm: this.staticInts(a[1]!, "permutation") });
      case "expand":
        return this.emit("Expand", [x(), this.intList(this.ep.graph.values[n.outs[0]!]!.shape)]);
      case "unsqueeze":
        return this.emit("Unsqueeze", [x(), this.i64([argNumber(a[1] as { f: number })])]);
      case "squeeze":
        return this.emit("Squeeze", [x(), this.i64([argNumber(a[1] as { f: number })])]);
      case "slice": {
        const [, dim, s, e, st] = a;
        return this.emit("Slice", [x(), this.intList([this.int(s!)]), this.intList([this.int(e!)]), this.i64([argNumber(dim as { f: number })]), this.intList([this.int(st!)])]);
      }
      case "select": {
        const i = this.int(a[2]!);
        const idx = typeof i === "number" ? this.constant("int64", [], [i]) : this.emit("Squeeze", [this.symInt(i), this.i64([0])]);
        return this.emit("Gather", [x(), idx], { axis: argNumber(a[1] as { f: number }) });
      }
      case "cat": {
        const vs = (a[0] as { vs: number[] }).vs;
        return this.emit("Concat", vs.map((v) => this.operand({ v }, out)), { axis: argNumber(a[1] as { f: number }) });
      }
      case "take":
        return this.emit("Gather", [x(), this.val((a[2] as { v: number }).v)], { axis: argNumber(a[1] as { f: number }) });
      case "gatherElements":
        return this.emit("GatherElements", [x(), this.val((a[2] as { v: number }).v)], { axis: argNumber(a[1] as { f: number }) });
      case "arange": {
        const sc = (s: Arg) => {
          const v = this.int(s);
          return typeof v === "number" ? this.scalar(v, out) : this.castTo(this.emit("Squeeze", [this.symInt(v), this.i64([0])]), "int64", out);
        };
        return this.emit("Range", [sc(a[0]!), sc(a[1]!), sc(a[2]!)]);
      }
      case "full":
      case "fullLike": {
        const shape = n.op === "full" ? this.intList(this.ints(a[0]!)) : this.emit("Shape", [x()]);
        const v = argNumber(a[1] as { f: number });
        const value: ITensor = { dims: [1], dataType: ONNX_DTYPE[out], rawData: hostBytes([v], out) };
        return this.emit("ConstantOfShape", [shape], { value: { tensor: value } });
      }
      case "pad": {
        const pads = this.staticInts(a[1]!, "pad");
        const rank = this.ep.graph.values[n.outs[0]!]!.shape.length;
        const begin = new Array<number>(rank).fill(0);
        const end = new Array<number>(rank).fill(0);
        for (let i = 0; i < pads.length / 2; i++) {
          begin[rank - 1 - i] = pads[2 * i]!;
          end[rank - 1 - i] = pads[2 * i + 1]!;
        }
        return this.emit("Pad", [xCast(), this.i64([...begin, ...end]), this.scalar(argNumber(a[2] as { f: number }), out)], { mode: "constant" });
      }
    }
    throw this.fail(`core op '${n.op}' has no ONNX mapping`);
  }

  private valueInfo(name: string, v: number): IValueInfo {
    const m = this.ep.graph.values[v]!;
    return {
      name,
      type: { tensorType: { elemType: ONNX_DTYPE[m.dtype], shape: { dim: m.shape.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: symToString(d).replace(/\s+/g, "") })) } } },
    };
  }

  run(): LoweredModel {
    const g = this.ep.graph;
    for (const n of g.nodes) {
      if (this.folder.isConstant(n.outs[0]!)) continue; // folded on first use
      this.node = n;
      const o = this.lowerNode(n);
      this.names.set(n.outs[0]!, o);
    }
    this.node = null;
    const outNames = g.outputs.map((o, i) => this.opts.outputNames?.[i] ?? sanitize(o.name, "out", g.outputs.length === 1 ? "output" : `output_${i}`));
    // graph outputs need their own names: an Identity renames (and separates an output that is an input)
    const outputs = g.outputs.map((o, i) => {
      this.emit("Identity", [this.val(o.value)], {}, outNames[i]!);
      return this.valueInfo(outNames[i]!, o.value);
    });
    const inputs = this.ep.userInputs().map((u, i) => this.valueInfo(this.inputNames[i]!, u.value));
    const initializers = [...this.inits.values()];
    const model: onnxPkg.onnx.IModelProto = {
      irVersion: 8,
      producerName: "torchts",
      producerVersion: "0.1.0",
      opsetImport: [{ domain: "", version: this.opset }],
      graph: { name: "main_graph", node: this.nodes, initializer: initializers.map((i) => i.proto), input: inputs, output: outputs },
    };
    return { model, initializers };
  }
}

export type { Tensor };
