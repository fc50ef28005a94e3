// Merge traces of one forward at different sizes of the dynamic dims into one graph. The traces
// must agree on everything but integers; an integer that differs (a reshape target, a slice
// bound, a value's dim) is fitted as an expression over the dims from the traces where one dim
// changed alone, then checked against the trace where all changed. Anything else that differs
// (the ops run, a float computed from a size, a constant built on the host from the sizes or
// the input values) is an ExportError naming the op and the user's call site.
import type { Tensor } from "../tensor.js";
import { ExportError } from "./errors.js";
import { argNumber, evalSym, symToString, type Arg, type SymExpr, type SymInt, type SymTerm } from "./graph.js";
import type { RawTrace } from "./tracer.js";

/** The traces and the dim sizes each ran with: [0] the sample, [1..k] dim k-1 changed alone, [k+1] all changed. */
export interface TraceSet {
  traces: RawTrace[];
  envs: Map<string, number>[];
  dims: string[];
}

function gcd(a: number, b: number): number {
  a = Math.abs(a);
  b = Math.abs(b);
  while (b) [a, b] = [b, a % b];
  return a || 1;
}

function rational(num: number, den: number): { num: number; den: number } {
  if (den < 0) [num, den] = [-num, -den];
  const g = gcd(num, den);
  return { num: num / g, den: den / g };
}

function holds(e: SymExpr, values: number[], envs: Map<string, number>[]): boolean {
  return values.every((v, i) => {
    let x = e.c;
    for (const t of e.terms) {
      let p = t.num;
      for (const s of t.syms) p *= envs[i]!.get(s)!;
      x += p / t.den;
    }
    return Math.abs(x - v) < 1e-9;
  });
}

/** An integer that takes `values` in the traces, as a constant or an expression over the dims. */
export function fitInt(values: number[], set: TraceSet): SymInt | null {
  const v0 = values[0]!;
  if (values.every((v) => v === v0)) return v0;
  const { envs, dims } = set;
  const moved = dims.filter((_, j) => values[j + 1] !== v0);
  const candidates: SymExpr[] = [];
  // affine: v0 + sum_j dv_j / ds_j * (s_j - s_j0)
  {
    const terms: SymTerm[] = [];
    let c = v0;
    for (const d of moved) {
      const j = dims.indexOf(d);
      const ds = envs[j + 1]!.get(d)! - envs[0]!.get(d)!;
      const r = rational(values[j + 1]! - v0, ds);
      terms.push({ ...r, syms: [d] });
      c -= (r.num * envs[0]!.get(d)!) / r.den;
    }
    if (Number.isInteger(c) || Math.abs(c - Math.round(c)) < 1e-9) candidates.push({ terms, c: Math.round(c) });
  }
  // a product of the moved dims (B * T * C): v = k * prod(s)
  if (moved.length >= 2) {
    const p0 = moved.reduce((p, d) => p * envs[0]!.get(d)!, 1);
    candidates.push({ terms: [{ ...rational(v0, p0), syms: moved }], c: 0 });
  }
  for (const e of candidates) if (holds(e, values, envs)) return e;
  return null;
}

function sameJSON(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Merge one argument across the traces; `where` names the node for errors. */
function mergeArg(as: Arg[], set: TraceSet, where: string): Arg {
  const a = as[0]!;
  if ("f" in a) {
    const vs = as.map((x) => ("f" in x ? argNumber(x) : NaN));
    if (vs.every((v) => Object.is(v, vs[0]))) return a;
    if (!vs.every((v) => Number.isInteger(v)))
      throw new ExportError(`torch.export: ${where}: a non-integer argument changes with the dynamic dims (${vs.join(" vs ")}); compute it inside the graph instead of on the host`);
    const e = fitInt(vs, set);
    if (e === null) throw new ExportError(`torch.export: ${where}: an integer argument (${vs.join(", ")} in the traces) is not an expression export can write over the dims ${set.dims.join(", ")}`);
    return typeof e === "number" ? { f: e } : { s: e };
  }
  if ("l" in a) {
    if (!as.every((x) => "l" in x && x.l.length === a.l.length)) throw new ExportError(`torch.export: ${where}: a list argument changes length with the dynamic dims`);
    return { l: a.l.map((_, i) => mergeArg(as.map((x) => (x as { l: Arg[] }).l[i]!), set, where)) };
  }
  if (!as.every((x) => sameJSON(x, a))) throw new ExportError(`torch.export: ${where}: the graph is wired differently when the dynamic dims change (${JSON.stringify(a)} vs ${JSON.stringify(as.find((x) => !sameJSON(x, a)))})`);
  return a;
}

function sameData(a: Tensor, b: Tensor): boolean {
  if (a === b) return true;
  if (a.dtype !== b.dtype || a.shape.join() !== b.shape.join()) return false;
  const [x, y] = [a._contiguousHost(), b._contiguousHost()];
  for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) return false;
  return true;
}

export interface Merged {
  nodes: RawTrace["nodes"];
  shapes: SymInt[][];
}

/** Merge the traces' nodes and value shapes (constants are compared by checkConstants). */
export function merge(set: TraceSet): Merged {
  const [base, ...rest] = set.traces as [RawTrace, ...RawTrace[]];
  for (const [i, tr] of rest.entries()) {
    const at = () => `with ${[...set.envs[i + 1]!].map(([k, v]) => `${k}=${v}`).join(", ")}`;
    if (!sameJSON(tr.inputs, base.inputs)) throw new ExportError(`torch.export: the forward reads other state or constants ${at()} than at the sample sizes`);
    const n = Math.min(tr.nodes.length, base.nodes.length);
    for (let k = 0; k < n; k++)
      if (tr.nodes[k]!.op !== base.nodes[k]!.op || tr.nodes[k]!.args.length !== base.nodes[k]!.args.length)
        throw new ExportError(
          `torch.export: the forward runs other ops ${at()}: node ${k} is ${tr.nodes[k]!.op} (at ${tr.nodes[k]!.site}) instead of ${base.nodes[k]!.op} (at ${base.nodes[k]!.site}); control flow that depends on a dynamic size cannot be exported`,
        );
    if (tr.nodes.length !== base.nodes.length) throw new ExportError(`torch.export: the forward runs ${tr.nodes.length} ops ${at()} and ${base.nodes.length} at the sample sizes; control flow that depends on a dynamic size cannot be exported`);
    if (!sameJSON(tr.outputTemplate, base.outputTemplate)) throw new ExportError(`torch.export: the forward returns a different structure ${at()}`);
    if (!sameJSON(tr.outputs, base.outputs)) throw new ExportError(`torch.export: the forward returns other values ${at()}`);
  }
  // a lifted constant whose shape moves with the sizes was built on the host from them
  for (const inp of base.inputs) {
    if (inp.kind !== "constant") continue;
    const shapes = set.traces.map((tr) => tr.values[inp.value]!.shape.join(","));
    if (shapes.some((x) => x !== shapes[0])) throw constantError(base, inp.value);
  }
  const nodes = base.nodes.map((nd, k) => ({
    ...nd,
    args: nd.args.map((_, i) => mergeArg(set.traces.map((tr) => tr.nodes[k]!.args[i]!), set, `${nd.op} (node ${k}, argument ${i}, from ${nd.site})`)),
  }));
  const shapes = base.values.map((v, id) =>
    v.shape.map((_, d) => {
      const vs = set.traces.map((tr) => tr.values[id]!.shape[d]!);
      const e = fitInt(vs, set);
      if (e === null) {
        const n = base.nodes.find((x) => x.outs.includes(id));
        throw new ExportError(`torch.export: dim ${d} of %${id}${n ? ` (${n.op} at ${n.site})` : ""} takes sizes ${vs.join(", ")} in the traces, which is not an expression over ${set.dims.join(", ")}`);
      }
      return e;
    }),
  );
  return { nodes, shapes };
}

function constantError(base: RawTrace, v: number): ExportError {
  return new ExportError(
    `torch.export: a tensor used by ${base.constantSites.get(v)} was not made by a traced op and changes with the input sizes or values; build it from the inputs with tensor ops (or pass it as an input)`,
  );
}

/** Lifted constants must be the same tensor in every trace (else they depend on the inputs). */
export function checkConstants(set: TraceSet): void {
  const base = set.traces[0]!;
  for (const inp of base.inputs) {
    if (inp.kind !== "constant") continue;
    for (const tr of set.traces.slice(1)) {
      if (!sameData(base.placeholders.get(inp.value)!, tr.placeholders.get(inp.value)!)) throw constantError(base, inp.value);
    }
  }
}

export { evalSym, symToString };
