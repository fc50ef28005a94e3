// Redistributing a DTensor's local pieces between placements, one mesh dimension at a time:
//   Shard(d) -> Replicate     all-gather along the mesh dim (short shards padded, then cut)
//   Partial  -> Replicate     all-reduce
//   Partial  -> Shard(d)      reduce-scatter
//   Shard(a) -> Shard(b)      all-to-all
//   Replicate -> Shard(d)     the local chunk (no communication)
//   Replicate -> Partial      sum: divided by the mesh size; avg/max/min: unchanged
// Mesh dims are independent unless two of them shard the same tensor dim (nested shards): then the
// inner ones are gathered first and split again after. In general the plan is: undo (to
// Replicate), last mesh dim first, every dim that changes (and the nested shards inside it); then
// apply the targets, first mesh dim first. The direct reduce-scatter and all-to-all are used
// where a mesh dim's change touches tensor dims no other mesh dim shards.
import { Function, FunctionCtx } from "../../autograd/function.js";
import { isGradEnabled, noGrad } from "../../autograd/grad_mode.js";
import { cat } from "../../ops/shape_ops.js";
import { zeros } from "../../ops/creation.js";
import type { Tensor } from "../../tensor.js";
import type { ProcessGroup } from "../process_group.js";
import { allGatherIntoTensor, allReduce, allToAll, reduceScatterTensor } from "../collectives.js";
import type { DeviceMesh } from "../device_mesh.js";
import { DistError } from "../errors.js";
import { DTensor, hooks, levelSize, type DTensorLike, type DTensorSpec } from "./dtensor.js";
import { chunkRange, Partial, type Placement, Replicate, Shard } from "./placement.js";

/** cat that skips empty pieces (the cpu cat kernel fails on them; torch.cat allows them). */
export function catParts(parts: Tensor[], d: number): Tensor {
  const shape = [...parts[0]!.shape];
  shape[d] = parts.reduce((a, p) => a + p.shape[d]!, 0);
  const full = parts.filter((p) => p.numel() > 0);
  if (!full.length || shape.some((x) => x === 0)) return zeros(shape, { dtype: parts[0]!.dtype });
  if (full.length === parts.length) return cat(parts, d);
  // a non-empty result: the empty pieces are empty along d only
  return full.length === 1 ? full[0]! : cat(full, d);
}

/** `x` padded with zeros along `d` to `size`. */
function padTo(x: Tensor, d: number, size: number): Tensor {
  if (x.shape[d] === size) return x;
  const shape = [...x.shape];
  shape[d] = size - x.shape[d]!;
  return catParts([x, zeros(shape, { dtype: x.dtype })], d);
}

interface State {
  local: Tensor;
  placements: Placement[];
}

class Planner {
  readonly coord: number[];
  constructor(
    readonly shape: readonly number[],
    readonly mesh: DeviceMesh,
  ) {
    this.coord = mesh.getCoordinate()!;
  }

  /** Mesh dim i from Shard(d) to Replicate. */
  gather(s: State, i: number): void {
    const d = (s.placements[i] as Shard).dim;
    const n = this.mesh.shape[i]!;
    const L = levelSize(this.shape, s.placements, this.mesh.shape, this.coord, d, i);
    const sizes = Array.from({ length: n }, (_, j) => chunkRange(L, n, j)[1]);
    const c = Math.ceil(L / n);
    const x = padTo(s.local.movedim(d, 0), 0, c).contiguous();
    const out = zeros([n * c, ...x.shape.slice(1)], { dtype: x.dtype });
    allGatherIntoTensor(out, x, { group: this.mesh.getGroup(i) });
    const full = catParts(sizes.map((sz, j) => out.narrow(0, j * c, sz)), 0);
    s.local = full.movedim(0, d).contiguous();
    s.placements[i] = new Replicate();
  }

  /** Mesh dim i from Partial to Replicate. */
  reduce(s: State, i: number): void {
    const p = s.placements[i] as Partial;
    const t = s.local.contiguous().clone();
    allReduce(t, { op: p.distOp, group: this.mesh.getGroup(i) });
    s.local = t;
    s.placements[i] = new Replicate();
  }

  /** Mesh dim i from Replicate to `to` (Shard: the local chunk; Partial: a share of the value). */
  split(s: State, i: number, to: Placement): void {
    if (to instanceof Shard) {
      const L = levelSize(this.shape, s.placements, this.mesh.shape, this.coord, to.dim, i);
      const [o, len] = chunkRange(L, this.mesh.shape[i]!, this.coord[i]!);
      s.local = s.local.narrow(to.dim, o, len).contiguous().clone();
    } else if (to instanceof Partial) {
      s.local = to.reduceOp === "sum" ? s.local.div(this.mesh.shape[i]!) : s.local.clone();
    }
    s.placements[i] = to;
  }

  /** Mesh dim i from Partial to Shard(d) in one reduce-scatter. */
  reduceScatter(s: State, i: number, to: Shard): void {
    const p = s.placements[i] as Partial;
    const d = to.dim;
    const n = this.mesh.shape[i]!;
    const L = levelSize(this.shape, s.placements, this.mesh.shape, this.coord, d, i);
    const c = Math.ceil(L / n);
    const x = padTo(s.local.movedim(d, 0), 0, n * c).contiguous();
    const out = zeros([c, ...x.shape.slice(1)], { dtype: x.dtype });
    reduceScatterTensor(out, x, { op: p.distOp, group: this.mesh.getGroup(i) });
    const len = chunkRange(L, n, this.coord[i]!)[1];
    s.local = out.narrow(0, 0, len).movedim(0, d).contiguous();
    s.placements[i] = to;
  }

  /** Mesh dim i from Shard(a) to Shard(b) in one all-to-all. */
  allToAll(s: State, i: number, to: Shard): void {
    const a = (s.placements[i] as Shard).dim;
    const b = to.dim;
    const n = this.mesh.shape[i]!;
    const La = levelSize(this.shape, s.placements, this.mesh.shape, this.coord, a, i);
    const Lb = levelSize(this.shape, s.placements, this.mesh.shape, this.coord, b, i);
    const me = this.coord[i]!;
    // send piece j (my rows of a, j's part of b) to j; get from j its rows of a, my part of b
    const ins = Array.from({ length: n }, (_, j) => {
      const [o, len] = chunkRange(Lb, n, j);
      const piece = s.local.narrow(b, o, len);
      return piece.numel() ? piece.contiguous() : zeros(piece.shape, { dtype: piece.dtype }); // (an empty view may not count as contiguous)
    });
    const myB = chunkRange(Lb, n, me)[1];
    const outs = Array.from({ length: n }, (_, j) => {
      const shape = [...s.local.shape];
      shape[a] = chunkRange(La, n, j)[1];
      shape[b] = myB;
      return zeros(shape, { dtype: s.local.dtype });
    });
    allToAll(outs, ins, { group: this.mesh.getGroup(i) });
    s.local = catParts(outs, a);
    s.placements[i] = to;
  }
}

/** Whether tensor dim d is sharded by a mesh dim other than i, in `a` or `b`. */
function shardedElsewhere(d: number, i: number, a: readonly Placement[], b: readonly Placement[]): boolean {
  return [a, b].some((pl) => pl.some((p, k) => k !== i && p instanceof Shard && p.dim === d));
}

/** The local tensor of `x` redistributed to `target` (no autograd). */
function redistributeRaw(x: DTensorLike, mesh: DeviceMesh, target: Placement[]): Tensor {
  const src = x._spec.placements;
  const P = new Planner(x._spec.shape, mesh);
  const s: State = { local: x._local, placements: [...src] };
  noGrad(() => {
    // direct transitions where a mesh dim's change stands alone
    for (let i = 0; i < target.length; i++) {
      const from = s.placements[i]!;
      const to = target[i]!;
      if (from.equals(to)) continue;
      if (from instanceof Partial && to instanceof Shard && !shardedElsewhere(to.dim, i, s.placements, target)) P.reduceScatter(s, i, to);
      else if (from instanceof Shard && to instanceof Shard && !shardedElsewhere(from.dim, i, s.placements, target) && !shardedElsewhere(to.dim, i, s.placements, target)) P.allToAll(s, i, to);
    }
    // undo what changes (and the shards nested inside it), last mesh dim first
    const undo = new Set<number>();
    for (let i = 0; i < target.length; i++) {
      const from = s.placements[i]!;
      const to = target[i]!;
      if (from.equals(to)) continue;
      if (!(from instanceof Replicate)) undo.add(i);
      for (const p of [from, to])
        if (p instanceof Shard) for (let j = i + 1; j < target.length; j++) if (s.placements[j]!.isShard(p.dim)) undo.add(j);
    }
    for (let i = target.length - 1; i >= 0; i--) {
      if (!undo.has(i)) continue;
      const p = s.placements[i]!;
      if (p instanceof Shard) P.gather(s, i);
      else if (p instanceof Partial) P.reduce(s, i);
    }
    for (let i = 0; i < target.length; i++) {
      const to = target[i]!;
      if (s.placements[i]!.equals(to)) continue;
      if (!(s.placements[i] instanceof Replicate)) throw new DistError(`redistribute: internal: mesh dim ${i} is ${s.placements[i]} on the way to ${to}`);
      if (!(to instanceof Replicate)) P.split(s, i, to);
    }
  });
  return s.local;
}

const noPartial = (pl: readonly Placement[]) => pl.map((p) => (p instanceof Partial ? new Replicate() : p));

/**
 * Redistribution as an autograd op on the local tensors. Gradients follow one convention: the
 * gradient of a Replicate or Partial DTensor is the whole gradient on every rank, that of a Shard the
 * rank's chunk. So the backward of from -> to is the gradient redistributed to -> from with Partial
 * read as Replicate: a gather's backward takes the chunk, a chunk's backward gathers, an
 * all-reduce's is the identity, a reduce-scatter's gathers.
 */
class Redistribute extends Function {
  static override forward(ctx: FunctionCtx, local: Tensor, spec: DTensorSpec, target: Placement[]): Tensor {
    // (the DTensor is rebuilt here: passed itself, autograd would take it for an input)
    ctx.spec = { mesh: spec.mesh, from: noPartial(spec.placements), to: noPartial(target), shape: spec.shape };
    return redistributeRaw(new DTensor(local, spec), spec.mesh, target);
  }
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const { mesh, from, to, shape } = ctx.spec as { mesh: DeviceMesh; from: Placement[]; to: Placement[]; shape: number[] };
    if (from.every((p, k) => p.equals(to[k]!))) return g;
    return redistributeRaw(new DTensor(g.contiguous(), { mesh, placements: to, shape }), mesh, from);
  }
}

export function redistributeLocal(x: DTensorLike, mesh: DeviceMesh, target: Placement[]): DTensor {
  const differentiable = isGradEnabled() && x._local.requiresGrad;
  const local = differentiable ? Redistribute.apply<Tensor>(x._local, x._spec, target) : redistributeRaw(x, mesh, target);
  return new DTensor(local, { mesh, placements: target, shape: x._spec.shape });
}

/** Identity forward; the gradient all-reduced (SUM) over a mesh dim's group (Megatron's f). */
class SumGradients extends Function {
  static override forward(ctx: FunctionCtx, local: Tensor, group: ProcessGroup): Tensor {
    ctx.group = group;
    return local;
  }
  static override backward(ctx: FunctionCtx, g: Tensor): Tensor {
    const t = g.contiguous().clone();
    allReduce(t, { group: ctx.group as ProcessGroup });
    return t;
  }
}

/**
 * The local tensor of an argument placed `arg`, for an op whose output is placed `out`: on a mesh dim
 * where the argument is replicated but the output is not (each rank computes a different part
 * from it), the argument's local gradient is only this rank's share, so the backward sums it.
 */
export function forOutput(local: Tensor, arg: readonly Placement[], out: readonly Placement[], mesh: DeviceMesh): Tensor {
  if (!isGradEnabled() || !local.requiresGrad) return local;
  let t = local;
  arg.forEach((p, k) => {
    if (p instanceof Replicate && !(out[k] instanceof Replicate) && mesh.shape[k]! > 1) t = SumGradients.apply<Tensor>(t, mesh.getGroup(k));
  });
  return t;
}

hooks.redistribute = redistributeLocal;
