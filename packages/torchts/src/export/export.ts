// torch.export.export(module, args, { dynamicShapes }): trace the forward (tracer.ts, capture.ts)
// at the sample sizes, and when dims are dynamic once per dim at another size and once with all
// changed and the inputs shuffled; merge the traces (symbolic.ts) into an ExportedProgram.
import { Tensor } from "../tensor.js";
import type { Module } from "../nn/module.js";
import { CAPTURES } from "./capture.js";
import { parseDynamicShapes, otherSize, resizeArgs, sampleSizes, type DimUse } from "./dims.js";
import { ExportError } from "./errors.js";
import type { DimSpec, GraphJSON } from "./graph.js";
import { ExportedProgram } from "./program.js";
import { checkConstants, merge, type TraceSet } from "./symbolic.js";
import { Tracer, flatten, type Leaf, type RawTrace } from "./tracer.js";

export interface ExportOptions {
  /** per positional argument: null, or per tensor { dim: Dim } / [Dim | null, ...] (nested like the arguments) */
  dynamicShapes?: unknown[];
}

/** An nn.Module (or anything with forward, optionally namedParameters/namedBuffers), or a function. */
export type Exportable = { forward(...a: any[]): unknown } | ((...a: any[]) => unknown);
type Forward = { forward: (...a: unknown[]) => unknown } & Partial<Pick<Module, "namedParameters" | "namedBuffers" | "training">>;

function traceOnce(target: Exportable, args: readonly unknown[]): RawTrace {
  const tr = new Tracer(CAPTURES);
  return tr.run(() => {
    const leaves: Leaf[] = [];
    const inputTemplate = flatten([...args], "$in", leaves);
    const seen = new Set<Tensor>();
    for (const l of leaves) {
      if (seen.has(l.t)) throw new ExportError(`torch.export: the same tensor is passed twice (args${l.path}); pass distinct tensors`);
      seen.add(l.t);
      tr.placeholder("user_input", `args${l.path}`, l.t);
    }
    const mod = typeof target === "function" ? null : (target as Forward);
    if (mod?.namedParameters) for (const [n, p] of mod.namedParameters()) tr.placeholder("parameter", n, p);
    if (mod?.namedBuffers) for (const [n, b] of mod.namedBuffers()) tr.placeholder("buffer", n, b);
    tr.op = "forward";
    tr.site = "the forward's return value";
    const result = mod ? ((mod as { call?: (...a: unknown[]) => unknown }).call ?? mod.forward).apply(mod, [...args]) : (target as (...a: unknown[]) => unknown)(...args);
    if (result instanceof Promise) throw new ExportError("torch.export: the forward returned a Promise; export needs a synchronous forward");
    const outs: Leaf[] = [];
    const outputTemplate = flatten(result, "$out", outs);
    const outputs = outs.map((o) => ({ name: `out${o.path}`, value: tr.ref(o.t) }));
    return {
      values: tr.values,
      inputs: tr.inputs,
      nodes: tr.nodes,
      placeholders: tr.placeholders,
      constantSites: tr.constantSites,
      outputs,
      outputTemplate,
      inputTemplate,
      result,
    };
  });
}

/** torch.export.export: the module's forward on `args`, frozen into a core-op graph with a signature. */
export function exportProgram(target: Exportable, args: readonly unknown[], opts: ExportOptions = {}): ExportedProgram {
  if (!Array.isArray(args)) throw new TypeError("torch.export.export: args must be an array of the forward's positional arguments");
  if (typeof target !== "function" && typeof target?.forward !== "function") throw new TypeError("torch.export.export: expected an nn.Module or a function");
  const { uses, tensors } = parseDynamicShapes(args, opts.dynamicShapes);
  for (const t of tensors) if (t.device !== "cpu") throw new ExportError(`torch.export: inputs must be cpu tensors (got one on ${t.device}); export traces on cpu`);
  const sizes = sampleSizes(uses, tensors);
  const names = [...sizes.keys()];
  const sample = new Map(names.map((n) => [n, sizes.get(n)!.size]));
  const envs = [sample];
  for (const n of names) {
    const e = new Map(sample);
    e.set(n, otherSize(sizes.get(n)!.sym, sample.get(n)!, [sample.get(n)!]));
    envs.push(e);
  }
  if (names.length) envs.push(new Map(names.map((n, j) => [n, otherSize(sizes.get(n)!.sym, sample.get(n)!, [sample.get(n)!, envs[j + 1]!.get(n)!])])));
  const traces = envs.map((env, i) => {
    const a = i === 0 ? args : resizeArgs(args, tensors, uses, env, i === envs.length - 1 ? 12345 : null);
    try {
      return traceOnce(target, a);
    } catch (e) {
      if (i > 0 && e instanceof Error && !(e instanceof ExportError))
        e.message = `torch.export: the forward fails with ${[...env].map(([k, v]) => `${k}=${v}`).join(", ")} (export traces other sizes of the dynamic dims; narrow their range with Dim(min, max, multipleOf)): ${e.message}`;
      throw e;
    }
  });
  const set: TraceSet = { traces, envs, dims: names };
  const merged = merge(set);
  checkConstants(set);
  const base = traces[0]!;
  const dims: DimSpec[] = names.map((n) => {
    const sym = sizes.get(n)!.sym;
    return { name: n, min: sym.min, max: sym.max, sources: uses.filter((u: DimUse) => u.sym.name === n).map((u) => ({ input: u.input, dim: u.dim })), sample: sample.get(n)! };
  });
  const graph: GraphJSON = {
    version: 1,
    inputs: base.inputs,
    nodes: merged.nodes,
    values: base.values.map((v, i) => ({ dtype: v.dtype, shape: merged.shapes[i]! })),
    outputs: base.outputs,
    outputTemplate: base.outputTemplate,
    inputTemplate: base.inputTemplate,
    dims,
  };
  const state = new Map<string, Tensor>();
  const consts = new Map<string, Tensor>();
  for (const i of base.inputs) {
    const t = base.placeholders.get(i.value)!;
    if (i.kind === "parameter" || i.kind === "buffer") state.set(i.name, t);
    else if (i.kind === "constant") consts.set(i.name, t);
  }
  return new ExportedProgram(graph, state, consts);
}
