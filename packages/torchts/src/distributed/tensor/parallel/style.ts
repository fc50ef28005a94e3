// Tensor parallel styles (torch.distributed.tensor.parallel): how one module's parameters are
// sharded and how its inputs and outputs are laid out. Each wraps the module's forward: plain-tensor
// inputs become DTensors with `inputLayouts` (the local tensor is this rank's piece) and are
// redistributed to what the module wants; the output is redistributed to `outputLayouts` and, with
// `useLocalOutput`, handed on as its local tensor (so the code around it sees plain tensors).
//   ColwiseParallel:   Linear weight and bias Shard(0) (output features), Embedding weight Shard(1);
//                      input Replicate, output Shard(-1)
//   RowwiseParallel:   Linear weight Shard(1) (input features), bias Replicate, Embedding weight
//                      Shard(0); input Shard(-1) (Linear) or Replicate (Embedding), output Replicate
//   SequenceParallel:  norm modules: parameters Replicate, input and output Shard(sequenceDim)
//   PrepareModuleInput: only converts a module's inputs
import { Module } from "../../../nn/module.js";
import { Embedding } from "../../../nn/layers/sparse.js";
import { Linear } from "../../../nn/layers/basic.js";
import { Tensor } from "../../../tensor.js";
import type { DeviceMesh } from "../../device_mesh.js";
import { DistError } from "../../errors.js";
import { distributeTensor } from "../api.js";
import { DTensor, DTensorParameter, isDTensor, type DTensorLike } from "../dtensor.js";
import { type Placement, Replicate, Shard } from "../placement.js";

type Layout = Placement | null;

// nn.Linear / nn.Embedding, or a module of the same shape (transformers' own Linear and Embedding
// classes: a 2-d `weight`, with in/out features for a Linear)
function isLinear(m: Module): boolean {
  return m instanceof Linear || (m._parameters.get("weight")?.ndim === 2 && typeof (m as unknown as { inFeatures?: unknown }).inFeatures === "number");
}
function isEmbedding(m: Module): boolean {
  return m instanceof Embedding || (m.constructor.name === "Embedding" && m._parameters.get("weight")?.ndim === 2);
}

/** Replace module parameter `name` by a DTensor of it placed `placement`. */
function distributeParam(m: Module, name: string, mesh: DeviceMesh, placement: Placement): void {
  const p = m._parameters.get(name);
  if (!p || isDTensor(p)) return;
  m.registerParameter(name, new DTensorParameter(distributeTensor(p.detach(), mesh, [placement]), p.requiresGrad));
}

/** A plain input becomes a DTensor of layout `from` (its global shape from even pieces), then `to`. */
function prepareInput(x: unknown, from: Layout, to: Layout, mesh: DeviceMesh): unknown {
  if (!(x instanceof Tensor) || from === null) return x;
  let d: DTensorLike = isDTensor(x) ? x : DTensor.fromLocal(x, mesh, [from]);
  if (to && !d._spec.placements[0]!.equals(to)) d = d.redistribute(null, [to]);
  return d;
}

function prepareOutput(y: unknown, to: Layout, useLocal: boolean): unknown {
  if (!isDTensor(y)) return y;
  let d: DTensorLike = y;
  if (to && !d._spec.placements[0]!.equals(to)) d = d.redistribute(null, [to]);
  return useLocal ? d._local : d;
}

function wrapForward(m: Module, pre: (args: unknown[]) => unknown[], post: (out: unknown) => unknown): void {
  const inner = m.forward;
  Object.defineProperty(m, "forward", {
    configurable: true,
    writable: true,
    value: function tpForward(this: Module, ...args: unknown[]): unknown {
      return post((inner as (...a: unknown[]) => unknown).apply(this, pre(args)));
    },
  });
}

export abstract class ParallelStyle {
  /** @internal */
  abstract apply(module: Module, mesh: DeviceMesh): void;
}

interface LayoutOpts {
  inputLayouts?: Placement | null;
  outputLayouts?: Placement | null;
  useLocalOutput?: boolean;
}

function checkMesh(mesh: DeviceMesh, what: string): void {
  if (mesh.ndim !== 1) throw new DistError(`${what}: the tensor parallel mesh must be 1-d (pass mesh.get("tp") of a larger one)`);
}

export class ColwiseParallel extends ParallelStyle {
  readonly inputLayouts: Placement;
  readonly outputLayouts: Placement;
  readonly useLocalOutput: boolean;
  constructor(o: LayoutOpts = {}) {
    super();
    this.inputLayouts = o.inputLayouts ?? new Replicate();
    this.outputLayouts = o.outputLayouts ?? new Shard(-1);
    this.useLocalOutput = o.useLocalOutput ?? true;
  }
  apply(m: Module, mesh: DeviceMesh): void {
    checkMesh(mesh, "ColwiseParallel");
    if (isLinear(m)) {
      distributeParam(m, "weight", mesh, new Shard(0));
      distributeParam(m, "bias", mesh, new Shard(0));
    } else if (isEmbedding(m)) distributeParam(m, "weight", mesh, new Shard(1));
    else throw new DistError(`ColwiseParallel currently only support nn.Linear and nn.Embedding, got ${m.constructor.name}`);
    const out = this.outputLayouts instanceof Shard && this.outputLayouts.dim < 0 ? null : this.outputLayouts;
    wrapForward(
      m,
      (a) => [prepareInput(a[0], this.inputLayouts, new Replicate(), mesh), ...a.slice(1)],
      (y) => prepareOutput(y, out ?? new Shard((y as Tensor).ndim - 1), this.useLocalOutput),
    );
  }
}

export class RowwiseParallel extends ParallelStyle {
  readonly inputLayouts: Placement;
  readonly outputLayouts: Placement;
  readonly useLocalOutput: boolean;
  constructor(o: LayoutOpts = {}) {
    super();
    this.inputLayouts = o.inputLayouts ?? new Shard(-1);
    this.outputLayouts = o.outputLayouts ?? new Replicate();
    this.useLocalOutput = o.useLocalOutput ?? true;
  }
  apply(m: Module, mesh: DeviceMesh): void {
    checkMesh(mesh, "RowwiseParallel");
    let desired: Placement;
    if (isLinear(m)) {
      distributeParam(m, "weight", mesh, new Shard(1));
      distributeParam(m, "bias", mesh, new Replicate());
      desired = new Shard(-1);
    } else if (isEmbedding(m)) {
      distributeParam(m, "weight", mesh, new Shard(0));
      desired = new Replicate();
    } else throw new DistError(`RowwiseParallel currently only support nn.Linear and nn.Embedding, got ${m.constructor.name}`);
    const norm = (p: Placement, x: unknown) => (p instanceof Shard && p.dim < 0 && x instanceof Tensor ? new Shard(p.dim + x.ndim) : p);
    wrapForward(
      m,
      (a) => [prepareInput(a[0], norm(this.inputLayouts, a[0]), norm(desired, a[0]), mesh), ...a.slice(1)],
      (y) => prepareOutput(y, norm(this.outputLayouts, y), this.useLocalOutput),
    );
  }
}

export class SequenceParallel extends ParallelStyle {
  readonly sequenceDim: number;
  readonly useLocalOutput: boolean;
  constructor(o: { sequenceDim?: number; useLocalOutput?: boolean } = {}) {
    super();
    this.sequenceDim = o.sequenceDim ?? 1;
    this.useLocalOutput = o.useLocalOutput ?? false;
  }
  apply(m: Module, mesh: DeviceMesh): void {
    checkMesh(mesh, "SequenceParallel");
    for (const [name] of m._parameters) distributeParam(m, name, mesh, new Replicate());
    const seq = new Shard(this.sequenceDim);
    wrapForward(
      m,
      (a) => [prepareInput(a[0], seq, seq, mesh), ...a.slice(1)],
      (y) => prepareOutput(y, seq, this.useLocalOutput),
    );
  }
}

export class PrepareModuleInput extends ParallelStyle {
  readonly inputLayouts: Layout[];
  readonly desiredInputLayouts: Layout[];
  readonly useLocalOutput: boolean;
  constructor(o: { inputLayouts?: Layout | Layout[]; desiredInputLayouts?: Layout | Layout[]; useLocalOutput?: boolean } = {}) {
    super();
    const list = (v: Layout | Layout[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
    this.inputLayouts = list(o.inputLayouts);
    this.desiredInputLayouts = list(o.desiredInputLayouts);
    if (this.inputLayouts.length !== this.desiredInputLayouts.length) throw new DistError("PrepareModuleInput: inputLayouts and desiredInputLayouts should have same length!");
    this.useLocalOutput = o.useLocalOutput ?? false;
  }
  apply(m: Module, mesh: DeviceMesh): void {
    checkMesh(mesh, "PrepareModuleInput");
    wrapForward(
      m,
      (a) =>
        a.map((x, i) => {
          const d = prepareInput(x, this.inputLayouts[i] ?? null, this.desiredInputLayouts[i] ?? null, mesh);
          return this.useLocalOutput && isDTensor(d) ? d._local : d;
        }),
      (y) => y,
    );
  }
}

/**
 * parallelizeModule(module, mesh, plan): apply a style to the module, or a plan of styles to its
 * submodules by name ("layers.0.attention.wq"; "*" matches one name part).
 */
export function parallelizeModule<M extends Module>(module: M, deviceMesh: DeviceMesh, parallelizePlan: ParallelStyle | Record<string, ParallelStyle>): M {
  if (parallelizePlan instanceof ParallelStyle) {
    parallelizePlan.apply(module, deviceMesh);
    return module;
  }
  for (const [pattern, style] of Object.entries(parallelizePlan)) {
    if (!(style instanceof ParallelStyle)) throw new TypeError(`parallelizeModule: the plan's entry '${pattern}' is not a ParallelStyle`);
    const re = new RegExp(`^${pattern.split(".").map((p) => (p === "*" ? "[^.]+" : p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("\\.")}$`);
    const hits = [...module.namedModules()].filter(([n]) => re.test(n));
    if (!hits.length) throw new DistError(`parallelizeModule: no submodule matches '${pattern}'`);
    for (const [, m] of hits) style.apply(m, deviceMesh);
  }
  return module;
}
