// Fused multi-node kernels (elementwise chains, and reductions with an elementwise prologue and
// epilogue): a JS kernel generated here, and in front of it, for the float32 patterns it covers,
// a wasm SIMD kernel generated at load time (wasm/fused_wasm.ts). Every intermediate is rounded
// to its dtype exactly as a typed-array store would round it, so fused results are bit-identical
// to strict eager in both.
import type { DType } from "../../ir/dtype.js";
import type { IRNode, PrimParams } from "../../ir/prims.js";
import { contiguousStrides } from "../../ir/shape.js";
import type { FusedGraph } from "../../runtime/fused_graph.js";
import { collapse, storeExpr, type Arr } from "./codegen.js";
import { BINARY, UNARY, castExpr } from "./kernels.js";
import { H } from "./math.js";
import { wasmRuntime } from "./wasm/runtime.js";
import { buildWasmFused } from "./wasm/fused_wasm.js";
import { strictUsesSumRows } from "./wasm/fused_reduce.js";
import { VMATH_OPS } from "./wasm/vmath.js";

export type FusedKernel = (outs: Arr[], ins: Arr[], offs: number[]) => void;

// float32 VMATH_OPS (exp/tanh/sigmoid/erf) are the wasm VMath approximations whenever the wasm backend is on
// (that is what strict eager runs); generated JS calls them through W, bound at load time.
interface WMath {
  on: boolean;
  exp(x: number): number;
  tanh(x: number): number;
  sigmoid(x: number): number;
  erf(x: number): number;
}
function wmath(): WMath {
  const rt = wasmRuntime();
  if (rt) return { on: true, exp: rt.exports.vm_exp!, tanh: rt.exports.vm_tanh!, sigmoid: rt.exports.vm_sigmoid!, erf: rt.exports.vm_erf! };
  return { on: false, exp: Math.exp, tanh: Math.tanh, sigmoid: (x) => 1 / (1 + Math.exp(-x)), erf: H.erf };
}

/** The value a typed array of dtype d would hold after storing expr. */
function roundExpr(expr: string, d: DType): string {
  switch (d) {
    case "float32":
      return `Math.fround(${expr})`;
    case "int32":
      return `((${expr})|0)`;
    case "int8":
      return `((${expr})<<24>>24)`;
    case "uint8":
      return `((${expr})&255)`;
    case "float64":
      return `(${expr})`;
    default:
      return `(${storeExpr(expr, d)})`; // f16/bf16/int64/bool store expressions already round
  }
}

const REDUCE_SPEC: Record<PrimParams["reduce"]["op"], [string, string]> = {
  sum: ["0", "acc+=x;"],
  prod: ["1", "acc*=x;"],
  max: ["-Infinity", "if(acc===acc&&(x>acc||x!==x))acc=x;"],
  min: ["Infinity", "if(acc===acc&&(x<acc||x!==x))acc=x;"],
  any: ["0", "if(x!==0)acc=1;"],
  all: ["1", "if(x===0)acc=0;"],
};

function nodeExpr(n: IRNode, xs: string[]): string {
  const d = n.inputs[0]!.dtype;
  switch (n.prim) {
    case "unary": {
      const op = (n as IRNode<"unary">).params.op;
      if (d === "float32" && VMATH_OPS.has(op)) return `W.${op}(${xs[0]})`;
      return UNARY[op](xs[0]!, d);
    }
    case "binary":
      return BINARY[(n as IRNode<"binary">).params.op](xs[0]!, xs[1]!, d);
    case "where":
      return `(${xs[0]}!==0?${xs[1]}:${xs[2]})`;
    case "cast":
      return castExpr(xs[0]!, d, n.out.dtype);
    default:
      throw new Error(`fused: ${n.prim} is not elementwise`);
  }
}

/**
 * Emit the statements computing nodes [from, to) at the current index; `idx(strides)` gives the
 * element offset (without base offset) of an external view for the current loop variables.
 */
function emitNodes(g: FusedGraph, from: number, to: number, idx: (s: readonly number[]) => string, extVar: (k: number) => string, extOff: (k: number) => string): string {
  let code = "";
  for (let j = from; j < to; j++) {
    const n = g.nodes[j]!;
    const xs = g.srcs[j]!.map((s, i) => {
      if ("node" in s) return `v${s.node}`;
      return `${extVar(s.ext)}[${extOff(s.ext)}+${idx(n.inputs[i]!.strides)}]`;
    });
    code += `const v${j}=${roundExpr(nodeExpr(n, xs), n.out.dtype)};`;
  }
  return code;
}

function header(g: FusedGraph, numExt: number): string {
  let h = "";
  for (let k = 0; k < numExt; k++) h += `const I${k}=ins[${k}],o${k}=offs[${k}];`;
  g.outputs.forEach((_, q) => (h += `const O${q}=outs[${q}];`));
  return h;
}

function numExtOf(g: FusedGraph): number {
  let m = 0;
  for (const s of g.srcs) for (const x of s) if ("ext" in x) m = Math.max(m, x.ext + 1);
  return m;
}

function elementwiseSource(g: FusedGraph): string {
  const last = g.nodes[g.nodes.length - 1]!;
  const shape = last.out.shape;
  // collapse over every external view plus the (contiguous) output layout
  const ext: (readonly number[])[] = [];
  g.srcs.forEach((s, j) => s.forEach((x, i) => "ext" in x && (ext[x.ext] = g.nodes[j]!.inputs[i]!.strides)));
  for (let k = 0; k < numExtOf(g); k++) ext[k] ??= contiguousStrides(shape); // an argument this loop never reads
  const c = collapse(shape, [contiguousStrides(shape), ...ext]);
  const nd = c.shape.length;
  const colStrides = new Map<readonly number[], number[]>();
  ext.forEach((s, k) => colStrides.set(s, c.strides[k + 1]!));
  const idx = (s: readonly number[]) => {
    const cs = colStrides.get(s)!;
    return cs.map((v, d) => (v === 0 ? "" : `i${d}*${v}`)).filter(Boolean).join("+") || "0";
  };
  let body = emitNodes(g, 0, g.nodes.length, idx, (k) => `I${k}`, (k) => `o${k}`);
  g.outputs.forEach((j, q) => (body += `O${q}[p]=v${j};`));
  body += "p++;";
  for (let d = nd - 1; d >= 0; d--) body = `for(let i${d}=0;i${d}<${c.shape[d]};i${d}++){${body}}`;
  return `return function(outs,ins,offs){${header(g, numExtOf(g))}let p=0;${body}}`;
}

function reductionSource(g: FusedGraph): string {
  const r = g.reduceAt;
  const red = g.nodes[r] as IRNode<"reduce">;
  const shape = red.inputs[0]!.shape;
  const { op, axes } = red.params;
  const kept = shape.map((_, d) => d).filter((d) => !axes.includes(d));
  let n = 1;
  for (const a of axes) n *= shape[a]!;
  const idx = (s: readonly number[]) => s.map((v, d) => (v === 0 || shape[d] === 1 ? "" : `i${d}*${v}`)).filter(Boolean).join("+") || "0";
  const cs = contiguousStrides(shape);
  const outIdx = new Map(g.outputs.map((j, q) => [j, q]));
  // prologue: computed per input element; its materialized values land at the element's linear index
  let inner = emitNodes(g, 0, r, idx, (k) => `I${k}`, (k) => `o${k}`);
  for (let j = 0; j < r; j++) if (outIdx.has(j)) inner += `O${outIdx.get(j)}[${idx(cs)}]=v${j};`;
  const src = g.srcs[r]![0]!;
  const lanes = strictUsesSumRows(red);
  // strict's wasm sum_rows: 4 float32 lanes over the vector part, combined, then the tail in order
  const combine = lanes
    ? `if(!W.on){acc+=x;}else if(j<vend){const l=j&3;L[l]=Math.fround(L[l]+x);if(j===vend-1)acc=Math.fround(Math.fround(Math.fround(L[0]+L[1])+L[2])+L[3]);}else acc=Math.fround(acc+x);j++;`
    : REDUCE_SPEC[op][1];
  inner += `const x=${"node" in src ? `v${src.node}` : `I${src.ext}[o${src.ext}+${idx(red.inputs[0]!.strides)}]`};${combine}`;
  for (let k = axes.length - 1; k >= 0; k--) {
    const d = axes[k]!;
    inner = `for(let i${d}=0;i${d}<${shape[d]};i${d}++){${inner}}`;
  }
  // epilogue: at the output element (reduced dims are size 1 there, index 0)
  let epi = axes.map((d) => `const i${d}=0;`).join("") + `const v${r}=${roundExpr("acc", red.out.dtype)};`;
  epi += emitNodes(g, r + 1, g.nodes.length, idx, (k) => `I${k}`, (k) => `o${k}`);
  for (let j = r; j < g.nodes.length; j++) if (outIdx.has(j)) epi += `O${outIdx.get(j)}[p]=v${j};`;
  const init = lanes ? "L[0]=L[1]=L[2]=L[3]=0;let j=0;" : "";
  let code = `let acc=${REDUCE_SPEC[op][0]};${init}${inner}{${epi}}p++;`;
  for (let k = kept.length - 1; k >= 0; k--) {
    const d = kept[k]!;
    code = `for(let i${d}=0;i${d}<${shape[d]};i${d}++){${code}}`;
  }
  const decl = lanes ? `const L=new Float64Array(4),vend=${n & ~3};` : "";
  return `${decl}return function(outs,ins,offs){${header(g, numExtOf(g))}const n=${n};let p=0;${code}}`;
}

/**
 * A matmul group runs the device's own matmul kernel (wasm GEMM for large float32) into a
 * scratch buffer, then its elementwise epilogue as one loop that reads the product as an
 * extra external input. This is the epilogue-only graph: node 0 replaced by input `ext`.
 */
function matmulEpilogue(g: FusedGraph): FusedGraph {
  let numExt = 0;
  for (const s of g.srcs) for (const x of s) if ("ext" in x) numExt = Math.max(numExt, x.ext + 1);
  return {
    kind: "elementwise",
    reduceAt: -1,
    nodes: g.nodes.slice(1),
    srcs: g.srcs.slice(1).map((s) => s.map((x) => ("ext" in x ? x : x.node === 0 ? { ext: numExt } : { node: x.node - 1 }))),
    outputs: g.outputs.filter((j) => j > 0).map((j) => j - 1),
  };
}

const SPEC = "//wasm:";

/**
 * The source of a fused kernel (what the disk cache stores): the JS kernel, preceded by the
 * graph as a JSON comment from which loadFused generates the wasm kernel when wasm is on.
 */
export function fusedSource(g: FusedGraph): string {
  const body = g.kind === "matmul" ? matmulEpilogue(g) : g;
  const js = body.kind === "reduction" ? reductionSource(body) : elementwiseSource(body);
  const spec = { kind: body.kind, reduceAt: body.reduceAt, nodes: body.nodes, srcs: body.srcs, outputs: body.outputs };
  return `${SPEC}${JSON.stringify(spec)}\n${js}`;
}

/** The JS kernel of a source, with the wasm kernel in front of it when one can be built. */
export function loadFused(source: string): FusedKernel {
  const js = new Function("H", "W", source)(H, wmath()) as FusedKernel;
  if (!source.startsWith(SPEC) || !wasmRuntime()) return js;
  const g = JSON.parse(source.slice(SPEC.length, source.indexOf("\n"))) as FusedGraph;
  const wk = buildWasmFused(g);
  if (!wk) return js;
  return (outs, ins, offs) => {
    if (!wk(outs, ins, offs)) js(outs, ins, offs);
  };
}
