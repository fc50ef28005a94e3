// How an IR graph runs on webgpu: a list of steps, each a program over buffers named by Ref
// (an external input, an output, or a temporary). Fused graphs from the scheduler become one
// WGSL kernel (elementwise chains; reductions with their prologue/epilogue) whose intermediates
// stay in registers, rounded to their dtype exactly as strict eager stores them; any other
// multi-node graph runs its nodes in sequence through temporaries.
import { isFloating, type DType } from "../../ir/dtype.js";
import type { IRGraph, IRNode } from "../../ir/prims.js";
import { contiguousStrides, numel, type Shape } from "../../ir/shape.js";
import type { FusedGraph } from "../../runtime/fused_graph.js";
import { buildProgram, reduceAcc, stridedOffsets, type Pass } from "./codegen.js";
import { storageType } from "./dtypes.js";
import { MAX_OFFSETS } from "./shader.js";
import { binaryVal, loadVal, storeVal, unaryVal, type Val } from "./wgsl_ops.js";

export type Ref = { ext: number } | { out: number } | { tmp: number };
export interface Step {
  passes: Pass[];
  /** Buffers for the program's inputs (node input order), and its outputs. */
  ins: Ref[];
  outs: Ref[];
  check?: (s: readonly number[]) => void;
}
export interface Plan {
  steps: Step[];
  /** Element counts of the temporaries. */
  temps: number[];
  /** The node that names the kernel in errors. */
  node: IRNode;
}

const MAX_BUFFERS = 8; // storage buffers per shader stage guaranteed by every adapter

export function planSingle(g: IRGraph): Plan {
  if (g.nodes.length !== 1) throw new Error("webgpu: a multi-node graph must be a fused graph from the scheduler");
  const node = g.nodes[0]!;
  const prog = buildProgram(node);
  return {
    steps: [{ passes: prog.passes, ins: node.inputs.map((_, k) => ({ ext: k })), outs: [{ out: 0 }], check: prog.checkScalars }],
    temps: [],
    node,
  };
}

function numExt(g: FusedGraph): number {
  let m = 0;
  for (const s of g.srcs) for (const x of s) if ("ext" in x) m = Math.max(m, x.ext + 1);
  return m;
}

export function planFused(g: FusedGraph): Plan {
  const nExt = numExt(g);
  const node = g.nodes[g.nodes.length - 1]!;
  if (nExt <= MAX_OFFSETS && nExt + g.outputs.length <= MAX_BUFFERS) {
    const pass = g.kind === "elementwise" ? fusedElementwise(g, nExt) : g.kind === "reduction" ? fusedReduction(g, nExt) : null;
    if (pass)
      return {
        steps: [{ passes: [pass], ins: Array.from({ length: nExt }, (_, k) => ({ ext: k })), outs: g.outputs.map((_, q) => ({ out: q })) }],
        temps: [],
        node,
      };
  }
  return sequential(g);
}

/** Nodes one after another; values that are not outputs live in temporaries. */
function sequential(g: FusedGraph): Plan {
  const outIdx = new Map(g.outputs.map((j, q) => [j, q]));
  const tmpIdx = new Map<number, number>();
  const temps: number[] = [];
  const where = (j: number): Ref => {
    const q = outIdx.get(j);
    if (q !== undefined) return { out: q };
    let t = tmpIdx.get(j);
    if (t === undefined) {
      t = temps.length;
      tmpIdx.set(j, t);
      temps.push(numel(g.nodes[j]!.out.shape));
    }
    return { tmp: t };
  };
  const steps = g.nodes.map((n, j): Step => {
    const prog = buildProgram(n);
    return {
      passes: prog.passes,
      ins: g.srcs[j]!.map((s) => ("ext" in s ? { ext: s.ext } : where(s.node))),
      outs: [where(j)],
      check: prog.checkScalars,
    };
  });
  return { steps, temps, node: g.nodes[g.nodes.length - 1]! };
}

function nodeVal(n: IRNode, xs: Val[]): Val | null {
  switch (n.prim) {
    case "unary":
      return unaryVal((n as IRNode<"unary">).params.op, xs[0]!, n.inputs[0]!.dtype);
    case "binary":
      return binaryVal((n as IRNode<"binary">).params.op, xs[0]!, xs[1]!);
    case "where":
      return { e: `select(${xs[2]!.e}, ${xs[1]!.e}, ${xs[0]!.e} != 0)`, t: xs[1]!.t };
    case "cast":
      return xs[0]!;
    default:
      return null;
  }
}

interface Ctx {
  extTypes: (DType | null)[];
}

function extType(ctx: Ctx, k: number, d: DType): void {
  ctx.extTypes[k] ??= d;
}

/** Statements computing nodes [from, to); `load(k, strides)` is the element expression of external view k. */
function emitNodes(g: FusedGraph, from: number, to: number, ctx: Ctx, load: (k: number, strides: Shape) => string): string | null {
  let code = "";
  for (let j = from; j < to; j++) {
    const n = g.nodes[j]!;
    const xs = g.srcs[j]!.map((s, i) => {
      if ("node" in s) return loadVal(`v${s.node}`, g.nodes[s.node]!.out.dtype);
      const v = n.inputs[i]!;
      extType(ctx, s.ext, v.dtype);
      return loadVal(load(s.ext, v.strides), v.dtype);
    });
    const val = nodeVal(n, xs);
    if (!val) return null;
    code += `let v${j} = ${storeVal(val, n.out.dtype)};`;
  }
  return code;
}

function finish(g: FusedGraph, ctx: Ctx, nExt: number, body: string, threads: number): Pass | null {
  const inTypes = Array.from({ length: nExt }, (_, k) => ctx.extTypes[k]);
  if (inTypes.some((t) => !t)) return null;
  return {
    body,
    bind: inTypes.map((_, k) => k),
    inTypes: inTypes.map((t) => storageType(t!)),
    outType: storageType(g.nodes[g.outputs[0]!]!.out.dtype),
    outTypes: g.outputs.map((j) => storageType(g.nodes[j]!.out.dtype)),
    threads,
  };
}

function fusedElementwise(g: FusedGraph, nExt: number): Pass | null {
  const shape = g.nodes[g.nodes.length - 1]!.out.shape;
  // one offset variable per distinct (external input, strides) use
  const views = new Map<string, { k: number; strides: Shape; name: string }>();
  const load = (k: number, strides: Shape) => {
    const key = `${k}:${strides.join(",")}`;
    let v = views.get(key);
    if (!v) views.set(key, (v = { k, strides, name: `p${views.size}` }));
    return `I${k}[${v.name}]`;
  };
  const ctx: Ctx = { extTypes: [] };
  const nodes = emitNodes(g, 0, g.nodes.length, ctx, load);
  if (nodes === null) return null;
  const vs = [...views.values()];
  let body = stridedOffsets(shape, vs.map((v) => v.strides), vs.map((v) => `off(${v.k}u)`), vs.map((v) => v.name));
  body += nodes;
  g.outputs.forEach((j, q) => (body += `O${q}[i] = v${j};`));
  return finish(g, ctx, nExt, body, numel(shape));
}

function fusedReduction(g: FusedGraph, nExt: number): Pass | null {
  const r = g.reduceAt;
  const red = g.nodes[r] as IRNode<"reduce">;
  if (red.prim !== "reduce") return null;
  const shape = red.inputs[0]!.shape;
  const outShape = red.out.shape;
  const { op, axes } = red.params;
  const idx = (s: Shape) => s.map((v, d) => (v === 0 || shape[d] === 1 ? "" : `i${d} * ${v}`)).filter(Boolean).join(" + ") || "0";
  const load = (k: number, s: Shape) => `I${k}[off(${k}u) + ${idx(s)}]`;
  const ctx: Ctx = { extTypes: [] };
  const outIdx = new Map(g.outputs.map((j, q) => [j, q]));
  const cs = contiguousStrides(shape);
  let inner = emitNodes(g, 0, r, ctx, load);
  if (inner === null) return null;
  for (let j = 0; j < r; j++) if (outIdx.has(j)) inner += `O${outIdx.get(j)}[${idx(cs)}] = v${j};`;
  const src = g.srcs[r]![0]!;
  let x: string;
  if ("node" in src) x = `v${src.node}`;
  else {
    extType(ctx, src.ext, red.inputs[0]!.dtype);
    x = load(src.ext, red.inputs[0]!.strides);
  }
  const { init, step, t } = reduceAcc(op, isFloating(red.inputs[0]!.dtype));
  inner += `let x = ${x};${step}`;
  for (let k = axes.length - 1; k >= 0; k--) {
    const a = axes[k]!;
    inner = `for (var i${a} = 0; i${a} < ${shape[a]}; i${a}++) { ${inner} }`;
  }
  let epi = axes.map((a) => `let i${a} = 0;`).join("") + `let v${r} = ${storeVal({ e: "acc", t }, red.out.dtype)};`;
  const tail = emitNodes(g, r + 1, g.nodes.length, ctx, load);
  if (tail === null) return null;
  epi += tail;
  for (let j = r; j < g.nodes.length; j++) if (outIdx.has(j)) epi += `O${outIdx.get(j)}[i] = v${j};`;
  // thread i is one output element; its kept coordinates name the loop variables of kept dims
  let body = `var r_ = i;`;
  for (let d = outShape.length - 1; d >= 0; d--)
    body += d > 0 ? `let i${d}_ = r_ % ${outShape[d]}; r_ = r_ / ${outShape[d]};` : `let i${d}_ = r_;`;
  body += shape.map((_, d) => (axes.includes(d) ? "" : `let i${d} = i${d}_;`)).join("");
  body += `${init}${inner}{ ${epi} }`;
  return finish(g, ctx, nExt, body, numel(outShape));
}
