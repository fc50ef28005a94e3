// A Storage is the memory behind one or more tensor views. In fused mode it may still be
// pending: an IR node that will produce it when something needs the value.
import type { DeviceBuffer, DevicePlugin } from "../device/plugin.js";
import { castScalar, hostArrayCtor, type DType } from "../ir/dtype.js";
import type { IRNode } from "../ir/prims.js";
import type { Shape } from "../ir/shape.js";
import { reportReleaseError, trackAlloc, trackFree, transferOwnership, type BufferOwner } from "./memory.js";
import { opPrefix } from "./errors.js";

/** What a kernel needs to know about one input view. */
export interface ViewRef {
  readonly storage: Storage;
  readonly shape: Shape;
  readonly strides: Shape;
  readonly offset: number;
  readonly dtype: DType;
}

export interface Pending {
  node: IRNode;
  inputs: ViewRef[];
  scalars: number[];
  callSite?: string;
}

/** Dtypes whose host array type holds only valid values (float16 lives in float32, int64 in float64, bool in uint8). */
const EXACT_HOST: ReadonlySet<DType> = new Set<DType>(["float32", "float64", "int32", "int8", "uint8"]);

/**
 * While the outermost public op runs in strict or debug eager, the storages it makes are listed
 * here, so that it can free those its result does not hold when it returns (tensor.ts,
 * freeOpTemporaries). Null when nothing is listening.
 */
export const opTemporaries: { made: Storage[] | null } = { made: null };

/** Every storage that became pending (fused mode); flushAll and the size bound walk it. */
export const pendingSet = new Set<WeakRef<Storage>>();

export class Storage {
  buf: DeviceBuffer | null = null;
  /** The buffer's registration with the memory tracker (runtime/memory.ts). */
  _held: BufferOwner["_held"] = null;
  pending: Pending | null = null;
  /** Pending nodes that read this storage (fused mode): re-pointed when its contents move away. */
  readers: WeakRef<Storage>[] | null = null;
  /** Written in place (parameters, optimizer state): always materialized, never left to recompute. */
  persistent = false;
  /**
   * Autograd nodes that saved a tensor of this storage for backward (fused mode materializes
   * such values and keeps them, instead of recomputing the forward, matmuls included, later).
   */
  savedBy = 0;
  /**
   * Made inside a public op and not part of its result, kept only because autograd nodes saved
   * it: freed when the last of them is released after backward (autograd/node.ts).
   */
  internal = false;
  /** readers.length after the last pruning of dead/finished readers. */
  private pruned = 0;
  /** Bumped by every in-place write; autograd compares it with the version it saved. */
  version = 0;
  disposed = false;
  /**
   * Made by moveOut: the old contents of a storage, kept for the pending nodes that read them.
   * No tensor refers to it, so once nothing pending reads it the value is unreachable.
   */
  orphan = false;
  /** In the pending set: new work for the next torch.sync (not a value left recomputable by one). */
  listed = false;
  /**
   * A collective's result still arriving into this storage (distributed/comm.ts): its buffer is set
   * aside (buf is null) until then. land() blocks until every transfer is written (throwing if one
   * failed); landed() resolves when that would not block.
   */
  transfer: { land(): void; landed(): Promise<void> } | null = null;
  /** Storages created so far; torch.scope frees only storages created after it started. */
  static created = 0;
  readonly serial = ++Storage.created;
  constructor(
    readonly device: DevicePlugin,
    readonly dtype: DType,
    readonly numel: number,
  ) {
    // a NaN, negative or fractional size is refused where the op that computed it runs (in
    // fused mode the allocation itself comes later, at a flush)
    if (!(numel >= 0 && Number.isInteger(numel)))
      throw new RangeError(`${opPrefix()}invalid tensor size: ${String(numel)} elements (a size must be a finite non-negative integer)`);
    if (numel > 65536 && device.checkSize) device.checkSize(dtype, numel);
    opTemporaries.made?.push(this);
  }

  allocate(): DeviceBuffer {
    const b = this.device.allocate(this.dtype, this.numel);
    trackAlloc(this, this.device, b); // may refuse the buffer: then this storage holds none
    this.buf = b;
    return b;
  }

  /** Never throws (a release problem is counted in memory.stats().releaseErrors). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    try {
      if (!this.moveOut()) {
        this.pending = null;
        if (this.buf) trackFree(this, this.device, this.buf);
        this.buf = null;
      }
    } catch (e) {
      reportReleaseError("dispose", e);
      this.pending = null;
      this.buf = null;
    }
  }

  /** Forget the value, buffer and node, at once: for a value nothing can read (a fused region's intermediate). Never throws. */
  discard(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.pending = null;
    this.readers = null;
    try {
      if (this.buf) trackFree(this, this.device, this.buf);
    } catch (e) {
      reportReleaseError("discard", e);
    }
    this.buf = null;
  }

  /** Give the buffer back to the device now (the value stays recomputable from `pending`). */
  release(p: Pending): void {
    if (this.buf) trackFree(this, this.device, this.buf);
    this.buf = null;
    this.pending = p;
  }

  /** Record that pending storage r reads this one. */
  addReader(r: WeakRef<Storage>): void {
    const rs = (this.readers ??= []);
    rs.push(r);
    if (rs.length > 64 && rs.length > 2 * this.pruned) {
      this.readers = rs.filter((w) => w.deref()?.pending);
      this.pruned = this.readers.length;
    }
  }

  /**
   * This storage just became pending: register it with its inputs and, when it is new work
   * (`list`), list it for flushAll.
   */
  trackPending(list = true): void {
    const ref = new WeakRef<Storage>(this);
    if (list) {
      pendingSet.add(ref);
      this.listed = true;
    }
    for (const v of this.pending!.inputs) v.storage.addReader(ref);
  }

  /**
   * Before this storage's contents are replaced or freed: if pending nodes still read the
   * current contents, move them (buffer or pending node) into a fresh storage and re-point
   * those readers at it, so deferred work sees the value as it was when it was recorded.
   * Returns whether anything was moved (then this storage is left empty).
   */
  moveOut(): boolean {
    if (this.transfer) this.transfer.land(); // the contents being replaced must have arrived first
    const rs = this.readers;
    this.readers = null;
    if (!rs) return false;
    const live: Storage[] = [];
    for (const w of rs) {
      const r = w.deref();
      if (r?.pending && r.pending.inputs.some((v) => v.storage === this) && !live.includes(r)) live.push(r);
    }
    if (!live.length || (!this.buf && !this.pending)) return false;
    const old = new Storage(this.device, this.dtype, this.numel);
    old.orphan = true;
    if (this.buf) {
      old.buf = this.buf;
      transferOwnership(this, old, this.device, this.buf);
    }
    old.pending = this.pending;
    old.persistent = this.persistent; // state moved aside must still be materialized, or recompute chains grow
    // old contents a sync left recomputable are not new work: listing them would make the next
    // sync compute them (a disposed step's whole forward) though no live node reads them
    if (old.pending) old.trackPending(this.listed);
    for (const r of live) {
      r.pending!.inputs = r.pending!.inputs.map((v) => (v.storage === this ? { ...v, storage: old } : v));
      old.addReader(new WeakRef(r));
    }
    this.buf = null;
    this.pending = null;
    return true;
  }

  /**
   * After a flush: an orphan that no pending node reads any more gives its buffer back now
   * (and forgets its node), instead of when the garbage collector finds it. Without this a
   * fused-mode loop whose steps end in torch.scope (generate's decode) keeps every value the
   * scope disposed while it was still pending (~5 MB a token for a 100M Llama) until a GC.
   */
  dropIfUnread(): void {
    if (!this.orphan || this.disposed) return;
    for (const w of this.readers ?? []) {
      const r = w.deref();
      if (r?.pending && r.pending.inputs.some((v) => v.storage === this)) return;
    }
    this.disposed = true;
    this.pending = null;
    this.readers = null;
    if (this.buf) trackFree(this, this.device, this.buf);
    this.buf = null;
  }

  /** Take over another (realized, unshared) storage's buffer: how in-place writes land. */
  adopt(other: Storage): void {
    if (!other.buf && other.pending) return this.adoptPending(other);
    if (!other.buf) throw new Error("internal: adopt() needs a realized storage");
    if (!this.moveOut() && this.buf) trackFree(this, this.device, this.buf);
    this.buf = other.buf;
    this.pending = null;
    transferOwnership(other, this, this.device, other.buf);
    other.buf = null;
    this.takeReaders(other);
    other.disposed = true;
  }

  /** Fused mode: take over another storage's pending node without running it (a lazy in-place write). */
  private adoptPending(other: Storage): void {
    this.persistent = true;
    if (!this.moveOut() && this.buf) trackFree(this, this.device, this.buf);
    this.buf = null;
    this.pending = other.pending;
    other.pending = null;
    this.trackPending();
    this.takeReaders(other);
    other.disposed = true;
  }

  /** Whoever was going to read `other` reads the same value here. */
  private takeReaders(other: Storage): void {
    for (const w of other.readers ?? []) {
      const r = w.deref();
      if (!r?.pending) continue;
      r.pending.inputs = r.pending.inputs.map((v) => (v.storage === other ? { ...v, storage: this } : v));
      this.addReader(w);
    }
    other.readers = null;
  }

  static fromHost(device: DevicePlugin, dtype: DType, data: ArrayLike<number>): Storage {
    const s = new Storage(device, dtype, data.length);
    const b = s.allocate();
    const ctor = hostArrayCtor(dtype);
    // a typed array already holding exactly the dtype's values is written as it is (a quantized
    // model's int8 weights, a float32 checkpoint): no per-element cast
    if (data instanceof ctor && EXACT_HOST.has(dtype)) {
      device.write(b, data);
      return s;
    }
    const arr = new ctor(data.length);
    for (let i = 0; i < data.length; i++) arr[i] = castScalar(data[i]!, dtype);
    device.write(b, arr);
    return s;
  }
}
