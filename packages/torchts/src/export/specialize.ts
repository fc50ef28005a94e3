// An ExportedProgram with its dynamic dims fixed to sizes: every symbolic int becomes a number,
// so a converter that writes static shapes (LiteRT: one signature per shape) lowers plain ints
// and constant-folds shape-only subgraphs (masks, position ids built from a static length).
import { ExportError } from "./errors.js";
import { evalSym, isSym, type Arg, type GraphJSON, type SymInt } from "./graph.js";
import { ExportedProgram } from "./program.js";

function fix(a: Arg, env: Map<string, number>): Arg {
  if ("s" in a) return { f: evalSym(a.s, env) };
  if ("l" in a) return { l: a.l.map((x) => fix(x, env)) };
  return a;
}

export function specialize(ep: ExportedProgram, env: Map<string, number>): ExportedProgram {
  for (const d of ep.graph.dims) {
    const v = env.get(d.name);
    if (v === undefined) throw new ExportError(`specialize: no size for dim '${d.name}'`);
    if (v < d.min || v > d.max) throw new ExportError(`specialize: size ${v} of dim '${d.name}' is outside [${d.min}, ${d.max}]`);
  }
  const num = (s: SymInt) => (isSym(s) ? evalSym(s, env) : s);
  const g: GraphJSON = {
    ...ep.graph,
    nodes: ep.graph.nodes.map((n) => ({ ...n, args: n.args.map((a) => fix(a, env)) })),
    values: ep.graph.values.map((v) => ({ dtype: v.dtype, shape: v.shape.map(num) })),
    dims: [],
  };
  return new ExportedProgram(g, ep.stateDict, ep.constants);
}

/** The dim sizes a call with these flat input tensors binds (checked against the signature). */
export function sizesOf(ep: ExportedProgram, inputs: readonly { shape: readonly number[] }[]): Map<string, number> {
  const env = new Map<string, number>();
  for (const d of ep.graph.dims) {
    const s = d.sources[0]!;
    const size = inputs[s.input]?.shape[s.dim];
    if (size === undefined) throw new ExportError(`sizesOf: input ${s.input} has no dim ${s.dim}`);
    env.set(d.name, size);
  }
  return env;
}
