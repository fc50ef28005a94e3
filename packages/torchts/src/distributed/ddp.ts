// nn.parallel.DistributedDataParallel, as PyTorch's (1.13 behaviour): construction broadcasts
// rank 0's parameters and buffers; every forward with grad sync arms the reducer; during
// backward each parameter's post-accumulate-grad hook copies its gradient into its bucket, and a
// bucket whose gradients are all in is all-reduced (AVG) at once, in bucket order on every rank,
// while backward keeps computing the rest (the all-reduce runs on the communication thread, and
// the gradients become views of the bucket that are pending on it: reading one waits for it).
//
// Buckets: the first iteration uses one bucket per dtype (PyTorch does, when unused-parameter
// detection is off, since the order in which gradients arrive is not known yet); the next forward
// rebuilds them from the order the gradients arrived, capped at 1 MB for the first bucket and
// bucketCapMb for the others, with rank 0's assignment broadcast so every rank agrees. With
// findUnusedParameters the buckets are fixed at construction (reverse parameter order), and each
// forward walks the autograd graph from the outputs to find the parameters it did not use.
import { isGradEnabled, noGrad } from "../autograd/grad_mode.js";
import { AccumulateGrad, type Node } from "../autograd/node.js";
import { itemSize, type DType } from "../ir/dtype.js";
import { Module, type Parameter } from "../nn/module.js";
import { tensor, zeros } from "../ops/creation.js";
import { cat } from "../ops/shape_ops.js";
import { holdBeyondScopes, Tensor } from "../tensor.js";
import { describe } from "./args.js";
import { allReduce, broadcast } from "./collectives.js";
import { computeBucketAssignmentBySize } from "./ddp_buckets.js";
import { DistError } from "./errors.js";
import { groupArg, type ProcessGroup } from "./process_group.js";
import { ReduceOp } from "./reduce_ops.js";
import type { Work } from "./work.js";

const MB = 1024 * 1024;
/** dist._DEFAULT_FIRST_BUCKET_BYTES */
export const DEFAULT_FIRST_BUCKET_BYTES = MB;
/** Coalesced broadcasts of the module's state are at most this large (PyTorch's broadcast_bucket_size). */
const BROADCAST_BUCKET_BYTES = 250 * MB;

export interface DistributedDataParallelOptions {
  processGroup?: ProcessGroup | null;
  /** Bucket size in MiB (default 25). */
  bucketCapMb?: number;
  /** Walk the autograd graph after each forward to find unused parameters (default false). */
  findUnusedParameters?: boolean;
  /** Broadcast rank 0's buffers at every forward (default true). */
  broadcastBuffers?: boolean;
  /** Gradients are views into persistent buckets (default false: a fresh bucket each iteration). */
  gradientAsBucketView?: boolean;
  /** Accepted for PyTorch compatibility: cpu modules take no device ids. */
  deviceIds?: null;
  outputDevice?: null;
  dim?: 0;
}
const OPTION_NAMES = ["processGroup", "bucketCapMb", "findUnusedParameters", "broadcastBuffers", "gradientAsBucketView", "deviceIds", "outputDevice", "dim"];

function boolOpt(name: string, v: unknown, d: boolean): boolean {
  if (v === undefined || v === null) return d;
  if (typeof v !== "boolean") throw new TypeError(`DistributedDataParallel(): argument '${name}' must be bool, got ${describe(v)}`);
  return v;
}

/** Every tensor in a forward's output (a tensor, or arrays, plain objects and Maps of them). */
function* findTensors(v: unknown, seen = new Set<unknown>()): Generator<Tensor> {
  if (v instanceof Tensor) return yield v;
  if (v === null || typeof v !== "object" || seen.has(v)) return;
  seen.add(v);
  const items = Array.isArray(v) ? v : v instanceof Map ? [...v.values()] : Object.getPrototypeOf(v) === Object.prototype ? Object.values(v) : [];
  for (const x of items) yield* findTensors(x, seen);
}

/** The leaves the autograd graph of `outputs` reaches (what a backward from them would accumulate into). */
function reachedLeaves(outputs: Tensor[]): Set<Tensor> {
  const leaves = new Set<Tensor>();
  const seen = new Set<Node>();
  const stack: Node[] = [];
  for (const t of outputs) {
    if (t.gradFn) stack.push(t.gradFn);
    else if (t.requiresGrad) leaves.add(t);
  }
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    if (n instanceof AccumulateGrad) leaves.add(n.variable);
    for (const e of n.next) if (e) stack.push(e.node);
  }
  return leaves;
}

interface Bucket {
  /** Parameter indices, in the order their gradients are laid out. */
  params: number[];
  offsets: number[];
  numel: number;
  dtype: DType;
  buffer: Tensor | null;
  pending: number;
  work: Work | null;
}

/** The gradient bookkeeping of one DDP module (PyTorch's Reducer). */
class Reducer {
  buckets: Bucket[] = [];
  private bucketOf: number[] = [];
  private slotOf: number[] = [];
  private ready: boolean[];
  private locallyUsed: boolean[];
  /** A forward with grad sync ran: the next backward's hooks reduce. */
  armed = false;
  /** A gradient was marked ready in the armed iteration (its reduction must be finished before the next forward). */
  requireFinalize = false;
  private nextBucket = 0;
  private unused: number[] = [];
  private markedUnused = false;
  /** The order gradients became ready in (recorded until the buckets are rebuilt). */
  private readyOrder: number[] = [];
  hasRebuiltBuckets = false;
  private warnedNoUnused = false;
  readonly hooks: { remove(): void }[];

  constructor(
    readonly params: Parameter[],
    readonly names: string[],
    readonly group: ProcessGroup,
    readonly bucketBytesCap: number,
    readonly findUnused: boolean,
    readonly asBucketView: boolean,
  ) {
    this.ready = params.map(() => false);
    this.locallyUsed = params.map(() => false);
    const reversed = params.map((_, i) => params.length - 1 - i);
    const meta = params.map((p) => ({ numel: p.numel(), dtype: p.dtype }));
    // PyTorch buckets the reversed parameter list; with detection off, one bucket until the first iteration shows the order
    const limits = findUnused ? [DEFAULT_FIRST_BUCKET_BYTES, bucketBytesCap] : [Number.MAX_SAFE_INTEGER];
    const { buckets } = computeBucketAssignmentBySize(reversed.map((i) => meta[i]!), limits);
    this.setBuckets(buckets.map((b) => b.map((j) => reversed[j]!)));
    this.hooks = params.map((p, i) => p.registerPostAccumulateGradHook(() => this.autogradHook(i)));
  }

  private setBuckets(assignment: number[][]): void {
    this.buckets = assignment.map((params) => {
      const offsets: number[] = [];
      let numel = 0;
      for (const i of params) {
        this.bucketOf[i] = this.buckets.length;
        offsets.push(numel);
        numel += this.params[i]!.numel();
      }
      return { params, offsets, numel, dtype: this.params[params[0]!]!.dtype, buffer: null, pending: params.length, work: null };
    });
    this.buckets.forEach((b, k) => b.params.forEach((i, j) => ((this.bucketOf[i] = k), (this.slotOf[i] = j))));
  }

  /** Raise PyTorch's error when the previous backward left parameters without gradients. */
  ensurePriorReductionFinished(): void {
    if (!this.requireFinalize) return;
    const missing = this.ready.flatMap((r, i) => (r ? [] : [i]));
    const rank = this.group.rank();
    const head = this.findUnused
      ? "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. Since `findUnusedParameters: true` is enabled, this likely  means that not all `forward` outputs participate in computing loss. You can fix this by making sure all `forward` function outputs participate in calculating loss. "
      : "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss. You can enable unused parameter detection by passing the keyword argument `findUnusedParameters: true` to `nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs participate in calculating loss. ";
    throw new DistError(
      head +
        "\nIf you already have done the above, then the distributed data parallel module wasn't able to locate the output tensors in the return value of your module's `forward` function. Please include the loss function and the structure of the return value of `forward` of your module when reporting this issue (e.g. list, dict, iterable)." +
        `\nParameter indices which did not receive grad for rank ${rank}: ${missing.join(" ")}` +
        `\nParameters which did not receive grad for rank ${rank}: ${missing.map((i) => this.names[i]).join(", ")}`,
    );
  }

  /** After a forward with grad sync: expect the hooks of the coming backward. */
  prepareForBackward(outputs: Tensor[]): void {
    this.armed = true;
    this.requireFinalize = false;
    this.nextBucket = 0;
    this.markedUnused = false;
    this.ready.fill(false);
    this.locallyUsed.fill(false);
    for (const b of this.buckets) {
      b.pending = b.params.length;
      b.work = null;
      if (!this.asBucketView) b.buffer = null;
    }
    if (!this.findUnused) return;
    const reached = reachedLeaves(outputs);
    this.unused = this.params.flatMap((p, i) => (reached.has(p) ? [] : [i]));
    if (!this.unused.length && !this.warnedNoUnused) {
      this.warnedNoUnused = true;
      console.warn(
        "findUnusedParameters: true was specified in the DistributedDataParallel constructor, but did not find any unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph every iteration, which can adversely affect performance. If your model indeed never has any unused parameters in the forward pass, consider turning this flag off.",
      );
    }
  }

  private autogradHook(i: number): void {
    if (!this.armed) return; // noSync, or a backward no forward of this module prepared
    if (!this.markedUnused) {
      this.markedUnused = true;
      for (const u of this.unused) this.markReady(u, false);
    }
    this.markReady(i, true);
  }

  private bufferOf(b: Bucket): Tensor {
    // made in the first backward and kept for every later one: no torch.scope around a step frees it
    return (b.buffer ??= holdBeyondScopes(zeros([b.numel], { dtype: b.dtype })));
  }

  private markReady(i: number, used: boolean): void {
    if (this.ready[i])
      throw new DistError(
        `Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a module parameter outside the \`forward\` function. Please make sure model parameters are not shared across multiple concurrent forward-backward passes. or try to use noSync() if you need to accumulate gradients over several backward calls. 2) Reused parameters in multiple reentrant backward passes. For example, if you use multiple \`checkpoint\` functions to wrap the same part of your model, it would result in the same set of parameters been used by different reentrant backward passes multiple times. Parameter at index ${i} with name ${this.names[i]} has been marked as ready twice. This means that multiple autograd engine hooks have fired for this particular parameter during this iteration.`,
      );
    this.ready[i] = true;
    this.requireFinalize = true;
    if (!this.hasRebuiltBuckets && !this.findUnused) this.readyOrder.push(i);
    const b = this.buckets[this.bucketOf[i]!]!;
    const p = this.params[i]!;
    const slot = this.bufferOf(b).narrow(0, b.offsets[this.slotOf[i]!]!, p.numel());
    noGrad(() => {
      if (used && p.grad) {
        this.locallyUsed[i] = true;
        slot.copy_(p.grad.reshape(-1));
        p.grad = slot.view(p.shape); // its value arrives with the bucket's all-reduce
      } else slot.zero_();
    });
    if (--b.pending === 0) this.launchReady();
  }

  /** All-reduce every ready bucket that is next in order (every rank issues them in the same order). */
  private launchReady(): void {
    while (this.nextBucket < this.buckets.length && this.buckets[this.nextBucket]!.pending === 0) {
      const b = this.buckets[this.nextBucket++]!;
      b.work = allReduce(this.bufferOf(b), { op: ReduceOp.AVG, group: this.group, asyncOp: true }) ?? null;
    }
    if (this.nextBucket === this.buckets.length) this.finalize();
  }

  /** Every bucket is on its way: the iteration's reduction is complete as far as this thread goes. */
  private finalize(): void {
    this.armed = false;
    this.requireFinalize = false;
    if (!this.findUnused || !this.unused.length) return;
    // a parameter unused here but used on another rank gets the average; one no rank used keeps its gradient
    const used = tensor(this.locallyUsed.map((u) => (u ? 1 : 0)), { dtype: "int32" });
    allReduce(used, { op: ReduceOp.MAX, group: this.group });
    const global = used._tolistSync() as number[];
    for (const i of this.unused) {
      if (!global[i]) continue;
      const b = this.buckets[this.bucketOf[i]!]!;
      const p = this.params[i]!;
      p.grad = this.bufferOf(b).narrow(0, b.offsets[this.slotOf[i]!]!, p.numel()).view(p.shape);
    }
  }

  /** Rebuild the buckets from the order gradients arrived in the first iteration (rank 0's order wins). */
  rebuildBuckets(): boolean {
    if (this.hasRebuiltBuckets || this.findUnused || this.readyOrder.length !== this.params.length) return false;
    this.hasRebuiltBuckets = true;
    const meta = this.params.map((p) => ({ numel: p.numel(), dtype: p.dtype }));
    const { buckets } = computeBucketAssignmentBySize(meta, [DEFAULT_FIRST_BUCKET_BYTES, this.bucketBytesCap], this.readyOrder);
    this.readyOrder = [];
    // every rank must bucket alike (the all-reduces are matched by order): use rank 0's
    const count = tensor([buckets.length], { dtype: "int64" });
    broadcast(count, this.group.ranks[0]!, { group: this.group });
    const n = (count._tolistSync() as number[])[0]!;
    const flat = tensor(n === buckets.length ? [...buckets.map((b) => b.length), ...buckets.flat()] : new Array<number>(n + this.params.length).fill(0), { dtype: "int64" });
    broadcast(flat, this.group.ranks[0]!, { group: this.group });
    const v = flat._tolistSync() as number[];
    const assignment: number[][] = [];
    let at = n;
    for (let k = 0; k < n; k++) {
      assignment.push(v.slice(at, at + v[k]!));
      at += v[k]!;
    }
    this.bucketOf = [];
    this.slotOf = [];
    this.setBuckets(assignment);
    return true;
  }
}

/** Broadcast `tensors` from group rank 0, coalesced per dtype (one collective per dtype and 250 MB). */
function broadcastCoalesced(tensors: Tensor[], group: ProcessGroup): void {
  const byType = new Map<DType, Tensor[]>();
  for (const t of tensors) byType.set(t.dtype, [...(byType.get(t.dtype) ?? []), t]);
  for (const list of byType.values()) {
    let chunk: Tensor[] = [];
    let bytes = 0;
    const flush = () => {
      if (!chunk.length) return;
      const flat = cat(chunk.map((t) => t.detach().reshape(-1)));
      broadcast(flat, group.ranks[0]!, { group });
      let at = 0;
      noGrad(() => {
        for (const t of chunk) {
          t.copy_(flat.narrow(0, at, t.numel()).view(t.shape));
          at += t.numel();
        }
      });
      chunk = [];
      bytes = 0;
    };
    for (const t of list) {
      chunk.push(t);
      bytes += t.numel() * itemSize(t.dtype);
      if (bytes >= BROADCAST_BUCKET_BYTES) flush();
    }
    flush();
  }
}

export class DistributedDataParallel extends Module {
  module!: Module;
  readonly processGroup: ProcessGroup;
  readonly broadcastBuffers: boolean;
  readonly findUnusedParameters: boolean;
  readonly gradientAsBucketView: boolean;
  readonly bucketBytesCap: number;
  /** Off inside noSync(): backward accumulates gradients locally. */
  requireBackwardGradSync = true;
  requireForwardParamSync = true;
  /** @internal */
  readonly _reducer: Reducer;

  constructor(module: Module, opts: DistributedDataParallelOptions = {}) {
    super();
    if (!(module instanceof Module)) throw new TypeError(`DistributedDataParallel(): argument 'module' must be an nn.Module, got ${describe(module)}`);
    for (const k of Object.keys(opts)) if (!OPTION_NAMES.includes(k)) throw new TypeError(`DistributedDataParallel() got an unexpected keyword argument '${k}'`);
    if ((opts.deviceIds !== undefined && opts.deviceIds !== null) || (opts.outputDevice !== undefined && opts.outputDevice !== null))
      throw new DistError("DistributedDataParallel device_ids and output_device arguments only work with single-device/multiple-device GPU modules or CPU modules, but got device_ids [" + String(opts.deviceIds) + "], output_device " + String(opts.outputDevice) + " for a module of cpu parameters.");
    if (opts.dim !== undefined && opts.dim !== 0) throw new DistError("DistributedDataParallel: dim must be 0 for cpu modules");
    this.processGroup = groupArg("DistributedDataParallel", opts.processGroup);
    this.broadcastBuffers = boolOpt("broadcastBuffers", opts.broadcastBuffers, true);
    this.findUnusedParameters = boolOpt("findUnusedParameters", opts.findUnusedParameters, false);
    this.gradientAsBucketView = boolOpt("gradientAsBucketView", opts.gradientAsBucketView, false);
    const cap = opts.bucketCapMb ?? 25;
    if (typeof cap !== "number" || !(cap > 0)) throw new TypeError(`DistributedDataParallel(): argument 'bucketCapMb' must be a positive number, got ${describe(cap)}`);
    this.bucketBytesCap = Math.floor(cap * MB);
    const named = [...module.namedParameters()].filter(([, p]) => p.requiresGrad);
    if (!named.length)
      throw new DistError("DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient.");
    for (const [n, p] of named) {
      if (!p._storage.device.readSync) throw new DistError(`DistributedDataParallel: parameter ${n} is on ${p.device}; the TCP backend reduces cpu tensors`);
    }
    this.module = module;
    if (this.processGroup.isMember && this.processGroup.size() > 1)
      broadcastCoalesced([...module.parameters(), ...module.buffers()], this.processGroup);
    this._reducer = new Reducer(named.map(([, p]) => p), named.map(([n]) => n), this.processGroup, this.bucketBytesCap, this.findUnusedParameters, this.gradientAsBucketView);
  }

  override forward(...args: unknown[]): any {
    const sync = isGradEnabled() && this.requireBackwardGradSync;
    if (isGradEnabled()) {
      this._reducer.ensurePriorReductionFinished();
      this._reducer.rebuildBuckets();
    }
    if (this.broadcastBuffers && this.requireForwardParamSync && this.processGroup.size() > 1) {
      const bufs = [...this.module.buffers()];
      if (bufs.length) broadcastCoalesced(bufs, this.processGroup);
    }
    const out = (this.module.call as (...a: unknown[]) => unknown)(...args);
    if (sync) {
      this.requireForwardParamSync = true;
      this._reducer.prepareForBackward(this.findUnusedParameters ? [...findTensors(out)] : []);
    } else this.requireForwardParamSync = false;
    return out;
  }

  /**
   * Run `fn` without gradient synchronization (PyTorch's `with ddp.no_sync():`): its backwards
   * accumulate into .grad locally; the first forward-backward after it reduces the sum.
   */
  noSync<T>(fn: () => T): T {
    const prev = this.requireBackwardGradSync;
    this.requireBackwardGradSync = false;
    let r: T;
    try {
      r = fn();
    } catch (e) {
      this.requireBackwardGradSync = prev;
      throw e;
    }
    if (r instanceof Promise) return r.finally(() => (this.requireBackwardGradSync = prev)) as T;
    this.requireBackwardGradSync = prev;
    return r;
  }

  /** The parameter indices of each bucket, in the order they are all-reduced (for inspection). */
  _bucketIndices(): number[][] {
    return this._reducer.buckets.map((b) => [...b.params]);
  }

  override extraRepr(): string {
    return "";
  }
}
