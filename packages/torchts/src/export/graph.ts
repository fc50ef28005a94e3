// The exported graph: placeholders (user inputs, parameters, buffers, lifted constants), core-op
// nodes in execution order, and the outputs; every value has a dtype and a shape whose dims are
// ints or expressions over the declared dynamic dims. Plain JSON, so save/load is a stringify.
import type { DType } from "../ir/dtype.js";

/** One term of a symbolic int: (num / den) * product of the named dims. */
export interface SymTerm {
  num: number;
  den: number;
  syms: string[];
}
/** c + sum of terms; evaluates to an integer for every allowed value of the dims. */
export interface SymExpr {
  terms: SymTerm[];
  c: number;
}
export type SymInt = number | SymExpr;

export function isSym(x: unknown): x is SymExpr {
  return typeof x === "object" && x !== null && Array.isArray((x as SymExpr).terms);
}

export function evalSym(x: SymInt, env: ReadonlyMap<string, number> | Record<string, number>): number {
  if (typeof x === "number") return x;
  const get = (s: string) => (env instanceof Map ? env.get(s) : (env as Record<string, number>)[s]);
  let v = x.c;
  for (const t of x.terms) {
    let p = t.num;
    for (const s of t.syms) {
      const d = get(s);
      if (d === undefined) throw new Error(`torch.export: dim '${s}' is not bound`);
      p *= d;
    }
    v += p / t.den;
  }
  return Math.round(v);
}

export function symToString(x: SymInt): string {
  if (typeof x === "number") return String(x);
  const parts = x.terms.map((t) => {
    const prod = t.syms.join("*");
    const k = t.den === 1 ? (t.num === 1 ? "" : `${t.num}*`) : `${t.num}/${t.den}*`;
    return `${k}${prod}`;
  });
  if (x.c !== 0 || !parts.length) parts.push(String(x.c));
  return parts.join(" + ").replace(/\+ -/g, "- ");
}

/**
 * A node argument. Tensors are value ids; numbers stay numbers unless they vary with the
 * dynamic dims (then a SymExpr); lists hold either. Non-finite floats are strings.
 */
export type Arg =
  | { v: number } // a tensor value
  | { vs: number[] } // a list of tensor values (cat)
  | { s: SymExpr } // a symbolic int
  | { l: Arg[] } // a list (ints, possibly symbolic)
  | { k: string | boolean | null } // dtype names, flags, None
  | { f: number | "inf" | "-inf" | "nan" }; // a number

export interface Node {
  op: string;
  args: Arg[];
  outs: number[];
  /** where the user's code called the op that produced this node */
  site?: string;
}

export interface ValueMeta {
  dtype: DType;
  shape: SymInt[];
}

export type InputKind = "user_input" | "parameter" | "buffer" | "constant";
export interface InputSpec {
  kind: InputKind;
  /** user inputs: the argument path (`args[0]`, `args[1].mask`); others: the state/constant name */
  name: string;
  value: number;
}

export interface DimSpec {
  name: string;
  min: number;
  max: number;
  /** where the dim is read from at run time: the first user input (by input index) carrying it */
  sources: { input: number; dim: number }[];
  /** the size it had in the sample arguments (converters writing static shapes default to it) */
  sample?: number;
}

export interface GraphJSON {
  version: 1;
  inputs: InputSpec[];
  nodes: Node[];
  values: ValueMeta[];
  /** user outputs: value ids in the order of the output template's leaves */
  outputs: { name: string; value: number }[];
  /** the forward's return value with each tensor replaced by {"$out": i} */
  outputTemplate: unknown;
  /** the forward's arguments with each tensor replaced by {"$in": i} (i: user-input index) */
  inputTemplate: unknown;
  dims: DimSpec[];
}

export function numArg(x: number): Arg {
  if (Number.isFinite(x)) return { f: x };
  return { f: Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf" };
}

export function argNumber(a: { f: number | string }): number {
  const f = a.f;
  if (typeof f === "number") return f;
  return f === "inf" ? Infinity : f === "-inf" ? -Infinity : NaN;
}

/** A readable listing, in the spirit of PyTorch's `graph_module.print_readable()`. */
export function formatGraph(g: GraphJSON): string {
  const name = (v: number) => `%${v}`;
  const ty = (m: ValueMeta) => `${m.dtype}[${m.shape.map(symToString).join(", ")}]`;
  const arg = (a: Arg): string => {
    if ("v" in a) return name(a.v);
    if ("vs" in a) return `[${a.vs.map(name).join(", ")}]`;
    if ("s" in a) return symToString(a.s);
    if ("l" in a) return `[${a.l.map(arg).join(", ")}]`;
    if ("k" in a) return a.k === null ? "None" : typeof a.k === "string" ? JSON.stringify(a.k) : String(a.k);
    return String(argNumber(a));
  };
  const lines: string[] = [];
  if (g.dims.length) lines.push(`dims: ${g.dims.map((d) => `${d.name} in [${d.min}, ${d.max}]`).join(", ")}`);
  for (const i of g.inputs) lines.push(`${name(i.value)}: ${ty(g.values[i.value]!)} = ${i.kind}(${JSON.stringify(i.name)})`);
  for (const n of g.nodes) {
    const outs = n.outs.map((o) => `${name(o)}: ${ty(g.values[o]!)}`).join(", ");
    lines.push(`${outs} = ${n.op}(${n.args.map(arg).join(", ")})`);
  }
  lines.push(`return (${g.outputs.map((o) => `${o.name}=${name(o.value)}`).join(", ")})`);
  return lines.join("\n");
}
