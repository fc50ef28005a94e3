// ExportedProgram: the frozen forward (core-op graph with a signature), its state and constants.
// `.module()` gives an nn.Module that interprets the graph with torchts (in whatever eager mode
// is set), checking the inputs against the signature and binding the dynamic dims from them.
// save/load write one safetensors file: the tensors, with the graph as JSON in its metadata.
import { Tensor } from "../tensor.js";
import { Module, Parameter } from "../nn/module.js";
import * as safetensors from "../io/safetensors.js";
import { CORE_OPS, type CoreOp } from "./core.js";
import { ExportError } from "./errors.js";
import { argNumber, evalSym, formatGraph, symToString, type Arg, type GraphJSON, type InputSpec } from "./graph.js";
import { flatten, unflatten, type Leaf } from "./tracer.js";

const FORMAT = "torchts.export/1";
const CONST_PREFIX = "__constants__.";

export interface InputSpecInfo {
  kind: InputSpec["kind"];
  name: string;
  shape: string[];
  dtype: string;
}

export class ExportedProgram {
  constructor(
    readonly graph: GraphJSON,
    /** parameters and buffers by their state-dict names */
    readonly stateDict: Map<string, Tensor>,
    /** lifted constants by placeholder name */
    readonly constants: Map<string, Tensor>,
  ) {
    for (const i of graph.inputs) if (i.kind !== "user_input" && !this.tensorOf(i)) throw new ExportError(`ExportedProgram: no tensor for ${i.kind} '${i.name}'`);
  }

  /** inputs and outputs in order, with symbolic shapes (PyTorch's graph_signature) */
  get graphSignature(): { inputSpecs: InputSpecInfo[]; outputSpecs: { name: string; shape: string[]; dtype: string }[] } {
    const meta = (v: number) => ({ shape: this.graph.values[v]!.shape.map(symToString), dtype: this.graph.values[v]!.dtype });
    return {
      inputSpecs: this.graph.inputs.map((i) => ({ kind: i.kind, name: i.name, ...meta(i.value) })),
      outputSpecs: this.graph.outputs.map((o) => ({ name: o.name, ...meta(o.value) })),
    };
  }

  /** each dynamic dim's allowed sizes (PyTorch's range_constraints) */
  get rangeConstraints(): Record<string, { min: number; max: number }> {
    return Object.fromEntries(this.graph.dims.map((d) => [d.name, { min: d.min, max: d.max }]));
  }

  /** the ops of the graph and how often each occurs */
  opCounts(): Map<string, number> {
    const m = new Map<string, number>();
    for (const n of this.graph.nodes) m.set(n.op, (m.get(n.op) ?? 0) + 1);
    return m;
  }

  tensorOf(i: InputSpec): Tensor | undefined {
    return i.kind === "constant" ? this.constants.get(i.name) : this.stateDict.get(i.name);
  }

  userInputs(): InputSpec[] {
    return this.graph.inputs.filter((i) => i.kind === "user_input");
  }

  /** Check the user's input tensors against the signature and bind the dynamic dims. */
  bindDims(inputs: readonly Tensor[]): Map<string, number> {
    const users = this.userInputs();
    if (inputs.length !== users.length) throw new ExportError(`ExportedProgram: expected ${users.length} input tensors, got ${inputs.length}`);
    const env = new Map<string, number>();
    for (const d of this.graph.dims) {
      const src = d.sources[0]!;
      const size = inputs[src.input]!.shape[src.dim];
      if (size === undefined) throw new ExportError(`ExportedProgram: input ${users[src.input]!.name} has no dim ${src.dim}`);
      const what = `${users[src.input]!.name}.shape[${src.dim}] (dim '${d.name}')`;
      if (size < d.min) throw new ExportError(`ExportedProgram: expected ${what} to be >= ${d.min}, but got ${size}`);
      if (size > d.max) throw new ExportError(`ExportedProgram: expected ${what} to be <= ${d.max}, but got ${size}`);
      env.set(d.name, size);
    }
    users.forEach((u, i) => {
      const x = inputs[i]!;
      const m = this.graph.values[u.value]!;
      if (x.dtype !== m.dtype) throw new ExportError(`ExportedProgram: expected ${u.name} to be ${m.dtype}, got ${x.dtype}`);
      if (x.ndim !== m.shape.length) throw new ExportError(`ExportedProgram: expected ${u.name} to have ${m.shape.length} dims, got shape [${x.shape.join(", ")}]`);
      m.shape.forEach((s, d) => {
        const want = evalSym(s, env);
        if (x.shape[d] !== want)
          throw new ExportError(`ExportedProgram: expected ${u.name}.shape[${d}] to be ${typeof s === "number" ? want : `${symToString(s)} = ${want}`}, but got ${x.shape[d]}`);
      });
    });
    return env;
  }

  /** Run the graph on flat input tensors; returns the output tensors in signature order. */
  run(inputs: readonly Tensor[]): Tensor[] {
    const env = this.bindDims(inputs);
    const vals: (Tensor | undefined)[] = new Array(this.graph.values.length);
    let u = 0;
    for (const i of this.graph.inputs) vals[i.value] = i.kind === "user_input" ? inputs[u++] : this.tensorOf(i);
    const dec = (a: Arg): unknown => {
      if ("v" in a) return vals[a.v];
      if ("vs" in a) return a.vs.map((v) => vals[v]);
      if ("s" in a) return evalSym(a.s, env);
      if ("l" in a) return a.l.map(dec);
      if ("k" in a) return a.k;
      return argNumber(a);
    };
    for (const n of this.graph.nodes) {
      const f = CORE_OPS[n.op as CoreOp] as ((...a: unknown[]) => Tensor) | undefined;
      if (!f) throw new ExportError(`ExportedProgram: unknown core op '${n.op}'`);
      vals[n.outs[0]!] = f(...n.args.map(dec));
    }
    return this.graph.outputs.map((o) => vals[o.value]!);
  }

  /** Call with the forward's arguments (same structure as at export); returns its structure. */
  call(...args: unknown[]): unknown {
    const leaves: Leaf[] = [];
    const tmpl = flatten(args, "$in", leaves);
    const want = JSON.stringify(this.graph.inputTemplate);
    if (JSON.stringify(tmpl) !== want) throw new ExportError(`ExportedProgram: the arguments do not match the exported signature: expected ${want}, got ${JSON.stringify(tmpl)}`);
    const outs = this.run(leaves.map((l) => l.t));
    return unflatten(this.graph.outputTemplate, "$out", (i) => outs[i]);
  }

  /** An nn.Module running this program; its parameters and buffers keep their state-dict names. */
  module(): Module {
    return new ExportedModule(this);
  }

  toString(): string {
    return `ExportedProgram:\n${formatGraph(this.graph).replace(/^/gm, "  ")}`;
  }

  /** The file's bytes: a safetensors file with the graph in its metadata. */
  serialize(): Uint8Array {
    const tensors: Record<string, Tensor> = {};
    for (const [k, t] of this.stateDict) tensors[k] = t.detach().contiguous();
    for (const [k, t] of this.constants) tensors[CONST_PREFIX + k] = t.detach().contiguous();
    return safetensors.save(tensors, { format: FORMAT, graph: JSON.stringify(this.graph) });
  }

  static deserialize(bytes: Uint8Array, source = "<bytes>"): ExportedProgram {
    const meta = safetensors.loadMetadata(bytes, source);
    if (meta.format !== FORMAT || !meta.graph) throw new ExportError(`torch.export.load: ${source} is not a torchts exported program (format ${meta.format ?? "missing"})`);
    const graph = JSON.parse(meta.graph) as GraphJSON;
    const all = safetensors.load(bytes, source);
    const state = new Map<string, Tensor>();
    const consts = new Map<string, Tensor>();
    for (const i of graph.inputs) {
      if (i.kind === "user_input") continue;
      const key = i.kind === "constant" ? CONST_PREFIX + i.name : i.name;
      const t = all[key];
      if (!t) throw new ExportError(`torch.export.load: ${source} lacks the tensor '${key}'`);
      (i.kind === "constant" ? consts : state).set(i.name, t);
    }
    return new ExportedProgram(graph, state, consts);
  }
}

/** The module ExportedProgram.module() returns: the state as a module tree, forward = the graph. */
class ExportedModule extends Module {
  constructor(private readonly program: ExportedProgram) {
    super();
    for (const i of program.graph.inputs) {
      if (i.kind !== "parameter" && i.kind !== "buffer") continue;
      const parts = i.name.split(".");
      let m: Module = this;
      for (const p of parts.slice(0, -1)) {
        let c = m._modules.get(p);
        if (!c) m.addModule(p, (c = new Module()));
        m = c;
      }
      const t = program.stateDict.get(i.name)!;
      const leaf = parts[parts.length - 1]!;
      if (i.kind === "parameter") m.registerParameter(leaf, t instanceof Parameter ? t : new Parameter(t, false));
      else m.registerBuffer(leaf, t);
    }
  }
  override forward(...args: unknown[]): unknown {
    return this.program.call(...args);
  }
}
