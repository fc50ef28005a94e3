// One fullyShard call's parameters (PyTorch FSDP2's FSDPParamGroup): their shards (DTensors,
// Shard(0), torch.chunk's rows) live in the module between steps; unshard() all-gathers them into
// full parameters for forward and backward; the full parameters' gradients are reduce-scattered
// (AVG) into the shards' .grad; reshard() frees the full parameters again.
//
// The all-gather is one collective per group: every rank's shards padded to ceil(rows / N) rows
// and concatenated ("copy-in"), all-gathered, then cut into the full parameters ("copy-out"). It
// is issued early (prefetch) and copied out when needed; the output is pending on the transfer
// meanwhile. A full parameter freed after forward keeps its Storage (the autograd graph saved it):
// backward's all-gather writes the same values back into it before anything reads it. The
// reduce-scatter mirrors the all-gather; its output is pending, and the shards' gradients are
// views of it, so the optimizer's first read waits for it, not the backward.
import { getDevice } from "../../device/plugin.js";
import { hostArrayCtor, type DType, type HostArray } from "../../ir/dtype.js";
import { Parameter, type Module } from "../../nn/module.js";
import { empty, tensor, zeros } from "../../ops/creation.js";
import { holdBeyondScopes, type Tensor } from "../../tensor.js";
import { allGatherIntoTensor, reduceScatterTensor } from "../collectives.js";
import type { DeviceMesh } from "../device_mesh.js";
import { DistError } from "../errors.js";
import type { ProcessGroup } from "../process_group.js";
import { ReduceOp } from "../reduce_ops.js";
import { DTensor, DTensorParameter } from "../tensor/dtensor.js";
import { chunkRange, Shard } from "../tensor/placement.js";

export interface MixedPrecision {
  paramDtype: DType | null;
  reduceDtype: DType | null;
}

interface FsdpParam {
  /** Where the parameter sits (a tied parameter sits in several places). */
  places: { owner: Module; name: string }[];
  sharded: DTensorParameter;
  shape: number[];
  rowNumel: number;
  /** Padded rows per rank (ceil(rows / N)). */
  chunk: number;
  /** The full parameter of this iteration (null while resharded and not needed). */
  full: Parameter | null;
  /** Its storage's buffer was freed after forward; backward's all-gather refills it. */
  freed: boolean;
  gradDone: boolean;
}

const numelOf = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

export class ParamGroup {
  readonly params: FsdpParam[];
  readonly group: ProcessGroup;
  readonly n: number;
  readonly rank: number;
  /** Elements of one rank's padded flat shard (all parameters). */
  private readonly flatNumel: number;
  private readonly offsets: number[];
  private gather: Tensor | null = null;
  private gradsLeft = 0;
  /** Counters (tests read them). */
  readonly stats = { allGathers: 0, reduceScatters: 0, prefetched: 0 };
  reducedThisBackward = false;

  constructor(
    readonly module: Module,
    readonly mesh: DeviceMesh,
    entries: { param: Parameter; places: { owner: Module; name: string }[] }[],
    readonly mp: MixedPrecision,
  ) {
    this.group = mesh.getGroup(0);
    this.n = mesh.size();
    this.rank = mesh.getLocalRank();
    this.offsets = [];
    let at = 0;
    this.params = entries.map(({ param, places }) => {
      if (param.ndim === 0) throw new DistError("fullyShard: a 0-d parameter cannot be sharded on dim 0");
      if (param.dtype !== entries[0]!.param.dtype) throw new DistError(`fullyShard: the parameters of one call must share a dtype (${param.dtype} and ${entries[0]!.param.dtype}); shard the others in a call of their own`);
      const shape = [...param.shape];
      const rowNumel = numelOf(shape.slice(1));
      const chunk = Math.ceil(shape[0]! / this.n);
      const [start, rows] = chunkRange(shape[0]!, this.n, this.rank);
      const local = param.detach().narrow(0, start, rows).contiguous().clone();
      const sharded = new DTensorParameter(new DTensor(local, { mesh, placements: [new Shard(0)], shape }), param.requiresGrad);
      for (const { owner, name } of places) owner.registerParameter(name, sharded);
      this.offsets.push(at);
      at += chunk * rowNumel;
      return { places, sharded, shape, rowNumel, chunk, full: null, freed: false, gradDone: false };
    });
    this.flatNumel = at;
  }

  private get paramDtype(): DType {
    return this.mp.paramDtype ?? this.params[0]!.sharded.dtype;
  }

  /** Issue the all-gather (if it is not in flight and the full parameters are not there). */
  prefetch(): void {
    if (this.gather || this.params.every((p) => p.full && !p.freed)) return;
    const own = this.params[0]!.sharded.dtype;
    const flat = new (hostArrayCtor(own))(this.flatNumel);
    this.params.forEach((p, i) => {
      const host = p.sharded._local._contiguousHost();
      flat.set(host as never, this.offsets[i]!); // the padding rows stay zero
    });
    const dtype = this.paramDtype;
    let input = tensor(flat as never, { dtype: own });
    if (dtype !== own) input = input.to(dtype); // mixed precision: gathered in paramDtype
    const out = empty([this.n * this.flatNumel], { dtype });
    allGatherIntoTensor(out, input, { group: this.group });
    this.stats.allGathers++;
    this.gather = holdBeyondScopes(out); // a prefetch may land in the next step's scope
  }

  /** The full parameters, in place in the module (waits for the all-gather). */
  unshard(): void {
    if (this.gather) this.stats.prefetched++;
    this.prefetch();
    const out = this.gather;
    this.gather = null;
    if (out) this.copyOut(out._contiguousHost());
    for (const p of this.params) for (const { owner, name } of p.places) owner.registerParameter(name, p.full!);
  }

  private copyOut(all: HostArray): void {
    const dtype = this.paramDtype;
    const dev = getDevice("cpu");
    this.params.forEach((p, i) => {
      const rows = p.shape[0]!;
      const host = new (hostArrayCtor(dtype))(rows * p.rowNumel);
      for (let r = 0; r < this.n; r++) {
        const [start, len] = chunkRange(rows, this.n, r);
        const from = r * this.flatNumel + this.offsets[i]!;
        host.set(all.subarray(from, from + len * p.rowNumel) as never, start * p.rowNumel);
      }
      if (p.full && p.freed) {
        // backward: the same storage the autograd graph saved, refilled
        const st = p.full._storage;
        st.transfer = null;
        dev.write(st.allocate(), host);
        p.freed = false;
        return;
      }
      const t = tensor(host as never, { dtype }).reshape(p.shape);
      const full = new Parameter(t, p.sharded.requiresGrad);
      if (full.requiresGrad) full.registerPostAccumulateGradHook(() => this.onGrad(p));
      p.full = full;
      p.freed = false;
      p.gradDone = false;
    });
    this.gradsLeft = this.params.filter((p) => p.full!.requiresGrad && !p.gradDone).length;
  }

  /**
   * Put the shards back in the module. `free`: also give the full parameters' buffers back (after
   * forward, with backward to come: the graph keeps the storages, which backward refills).
   */
  reshard(free: boolean): void {
    for (const p of this.params) {
      for (const { owner, name } of p.places) owner.registerParameter(name, p.sharded);
      if (!p.full) continue;
      if (!free) {
        p.full = null;
        continue;
      }
      const st = p.full._storage;
      if (st.transfer) st.transfer.land();
      // a node left pending that reads the full value (through a stand-in) keeps the buffer
      st.freeBuffer();
      st.transfer = { land: () => this.landFreed(), landed: () => Promise.resolve() };
      p.freed = true;
    }
  }

  /** A freed full parameter is read: backward's all-gather must have been issued (pre-backward). */
  private landFreed(): void {
    if (!this.gather)
      throw new DistError("fullyShard: a parameter that was resharded after forward is used before its module's backward unsharded it (use the module's outputs in the loss, or reshardAfterForward: false)");
    this.unshard();
  }

  private onGrad(p: FsdpParam): void {
    if (p.gradDone) return;
    p.gradDone = true;
    if (--this.gradsLeft === 0) this.reduceGrads();
  }

  /** Reduce-scatter the full parameters' gradients (zeros for those without) into the shards' .grad. */
  reduceGrads(): void {
    if (this.reducedThisBackward) return;
    this.reducedThisBackward = true;
    const withGrad = this.params.filter((p) => p.full?.grad);
    if (!withGrad.length) return;
    const gradDtype = withGrad[0]!.full!.grad!.dtype;
    const dtype = this.mp.reduceDtype ?? gradDtype;
    const flat = new (hostArrayCtor(gradDtype))(this.n * this.flatNumel);
    this.params.forEach((p, i) => {
      const g = p.full?.grad;
      if (!g) return;
      const host = g._contiguousHost();
      const rows = p.shape[0]!;
      for (let r = 0; r < this.n; r++) {
        const [start, len] = chunkRange(rows, this.n, r);
        flat.set(host.subarray(start * p.rowNumel, (start + len) * p.rowNumel) as never, r * this.flatNumel + this.offsets[i]!);
      }
      p.full!.grad = null;
      g.dispose(); // nothing else holds the full gradient (the engine made it for this leaf)
    });
    let input = tensor(flat as never, { dtype: gradDtype });
    if (dtype !== gradDtype) input = input.to(dtype);
    const out = zeros([this.flatNumel], { dtype });
    reduceScatterTensor(out, input, { op: ReduceOp.AVG, group: this.group });
    this.stats.reduceScatters++;
    this.params.forEach((p, i) => {
      if (!p.full || !p.sharded.requiresGrad) return;
      const rows = chunkRange(p.shape[0]!, this.n, this.rank)[1];
      let g = out.narrow(0, this.offsets[i]!, rows * p.rowNumel).view([rows, ...p.shape.slice(1)]);
      if (g.dtype !== p.sharded.dtype) g = g.to(p.sharded.dtype);
      const prev = p.sharded._local.grad;
      p.sharded._local.grad = prev ? prev.add(g) : g;
    });
  }

  /** End of an iteration's backward: gradients no hook reported, then the shards go back and the full parameters are freed. */
  finishBackward(): void {
    this.reduceGrads();
    this.reshard(true);
    for (const p of this.params) {
      p.full = null;
      p.freed = false;
      p.gradDone = false;
    }
    this.reducedThisBackward = false;
  }

  /** Full parameters holding memory now (0 between steps). */
  liveFullParams(): number {
    return this.params.filter((p) => p.full?._storage.buf).length;
  }

  /** After a forward without grad: nothing to keep. */
  dropFull(): void {
    this.reshard(true);
    for (const p of this.params) {
      p.full = null;
      p.freed = false;
    }
  }
}
