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

/**
 * The storages that became pending since the last flush (fused mode), in order, as weak
 * references. An array whose slots are overwritten with undefined when entries go, not a Set:
 * V8's young-generation collector (the scavenger) treats any pointer from the old generation as
 * alive, dead objects' included, and a Set that lives long has its hash table promoted; V8 then
 * allocates that Set's later tables (after clear(), or when it grows) in the old generation too,
 * and leaves the entries in each table it replaces. Every table a step filled kept that step's
 * references, through them its storages and their pending nodes, alive to every scavenge until
 * a full collection: ~2 MB promoted per scavenge in a small training step (bench/RESULTS.md,
 * session 17).
 */
export class PendingList {
  private items: (WeakRef<Storage> | undefined)[] = new Array<WeakRef<Storage> | undefined>(64);
  /** Slots used. */
  private n = 0;
  /** Entries not removed. */
  private live = 0;
  get size(): number {
    return this.live;
  }
  add(r: WeakRef<Storage>): void {
    if (this.n === this.items.length) {
      const next = new Array<WeakRef<Storage> | undefined>(2 * this.n);
      for (let i = 0; i < this.n; i++) next[i] = this.items[i];
      this.items.fill(undefined); // the old slots must not keep the entries alive (see above)
      this.items = next;
    }
    this.items[this.n++] = r;
    this.live++;
  }
  *[Symbol.iterator](): IterableIterator<WeakRef<Storage>> {
    for (let i = 0; i < this.n; i++) {
      const r = this.items[i];
      if (r) yield r;
    }
  }
  /** Remove the entries for which `drop` returns true (it may not add entries). */
  sweep(drop: (r: WeakRef<Storage>) => boolean): void {
    let k = 0;
    for (let i = 0; i < this.n; i++) {
      const r = this.items[i];
      if (r && !drop(r)) this.items[k++] = r;
    }
    for (let i = k; i < this.n; i++) this.items[i] = undefined;
    this.n = this.live = k;
  }
  clear(): void {
    for (let i = 0; i < this.n; i++) this.items[i] = undefined;
    this.n = this.live = 0;
  }
}

/** Every storage that became pending (fused mode); flushAll and the size bound walk it. */
export const pendingSet = new PendingList();

export class Storage {
  buf: DeviceBuffer | null = null;
  /** The buffer's registration with the memory tracker (runtime/memory.ts). */
  _held: BufferOwner["_held"] = null;
  _gcToken: BufferOwner["_gcToken"] = null;
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
  /** The flush that last pruned `readers` (runtime/scheduler.ts standIns): one pruning per flush. */
  pruneEpoch = 0;
  /** The last torch.sync whose pending nodes read this storage (runtime/dispatch.ts flushAll). */
  readMark = 0;
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
  /**
   * A stand-in (made by lentView): the storage whose buffer this one reads without owning it,
   * until that storage's contents change and hand the buffer over (handOff). Null when this
   * storage owns its buffer.
   */
  lender: Storage | null = null;
  /** Made by lentView (it stays one after it took its lender's buffer over). */
  standIn = false;
  /**
   * A stand-in: how many inputs of nodes left pending read it (counted when a flush points them
   * here, uncounted when their node runs or is dropped: dropPending). While none does, its lender
   * may write or free its buffer as if it had lent nothing.
   */
  uses = 0;
  /** The stand-in lentView made for this storage's current buffer, while it lives. */
  private borrower: WeakRef<Storage> | null = null;
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
    if (this.lender) {
      this.buf = null; // a stand-in's buffer is its lender's
      return;
    }
    try {
      if (!this.moveOut()) {
        this.dropPending();
        if (this.buf) trackFree(this, this.device, this.buf);
        this.buf = null;
      }
    } catch (e) {
      reportReleaseError("dispose", e);
      this.pending = null;
      this.buf = null;
    }
  }

  /** The node is done with (it ran, or its value went): the stand-ins it read are read once less. */
  dropPending(): void {
    const p = this.pending;
    this.pending = null;
    if (p) for (const v of p.inputs) if (v.storage.standIn) v.storage.uses--;
  }

  /** Forget the value, buffer and node, at once: for a value nothing can read (a fused region's intermediate). Never throws. */
  discard(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.dropPending();
    this.readers = null;
    try {
      this.freeBuffer();
    } catch (e) {
      reportReleaseError("discard", e);
    }
    this.buf = null;
  }

  /** Give the buffer back to the device now (the value stays recomputable from `pending`). */
  release(p: Pending): void {
    this.freeBuffer();
    this.pending = p;
  }

  /**
   * Give this storage's buffer back: to the stand-in that still reads it for nodes left pending
   * (handOff), else to the device. A stand-in's own borrowed buffer is its lender's: it only lets go.
   */
  freeBuffer(): void {
    if (this.buf && !this.lender && !this.handOff()) trackFree(this, this.device, this.buf);
    this.buf = null;
  }

  // Stand-ins. A pending node lists itself as a reader of each storage it reads (readers), weakly,
  // so that moveOut can find it. But V8's young-generation collector (the scavenger) treats weak
  // references as strong, and a reader's own readers after it: a long-lived storage (a parameter,
  // a batch the caller keeps, a cached constant) that a node left pending by a flush reads kept
  // that step's whole graph alive to every scavenge, to be promoted and die in the old generation
  // (bench/RESULTS.md, session 17). So a flush points the nodes it leaves pending at a stand-in:
  // a storage that reads the same buffer without owning it, to which the buffer is handed when
  // this storage's contents change or go (handOff), so those nodes still read the value they were
  // recorded against. This storage then references the stand-in, weakly, and not the nodes.

  /** The stand-in through which nodes left pending by a flush read this storage's current buffer. */
  lentView(): Storage {
    const had = this.borrower?.deref();
    if (had && had.lender === this && had.buf === this.buf) return had;
    const made = opTemporaries.made;
    opTemporaries.made = null; // not an op's temporary: strict mode's cleanup must not free it
    let a: Storage;
    try {
      a = new Storage(this.device, this.dtype, this.numel);
    } finally {
      opTemporaries.made = made;
    }
    a.buf = this.buf;
    a.lender = this;
    a.standIn = true;
    this.borrower = new WeakRef(a);
    return a;
  }

  /** Whether a stand-in still reads this storage's buffer for nodes left pending (its contents must then not change in place). */
  lent(): boolean {
    return this.reader() !== null;
  }

  /** The stand-in that reads this storage's current buffer for nodes left pending, if any. */
  private reader(): Storage | null {
    const a = this.borrower?.deref();
    return a !== undefined && a.lender === this && a.buf === this.buf && this.buf !== null && a.uses > 0 ? a : null;
  }

  /**
   * Before this storage's buffer is freed or its contents replaced: a stand-in that reads it takes
   * it over (and the collector frees it with the stand-in). Returns whether one did: then this
   * storage holds no buffer.
   */
  private handOff(): boolean {
    const a = this.reader();
    this.borrower = null;
    if (!a) return false;
    transferOwnership(this, a, this.device, this.buf!);
    a.lender = null;
    this.buf = null;
    return true;
  }

  /** Forget readers that no longer read this storage (finished, or pointed at a stand-in). */
  pruneReaders(): void {
    const rs = this.readers;
    if (!rs) return;
    let n = 0;
    for (let k = 0; k < rs.length; k++) {
      const p = rs[k]!.deref()?.pending;
      if (!p) continue;
      const ins = p.inputs;
      for (let i = 0; i < ins.length; i++)
        if (ins[i]!.storage === this) {
          rs[n++] = rs[k]!;
          break;
        }
    }
    rs.length = n;
    this.pruned = n;
    if (n === 0) this.readers = null;
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
    const live: Storage[] = [];
    for (const w of rs ?? []) {
      const r = w.deref();
      if (r?.pending && r.pending.inputs.some((v) => v.storage === this) && !live.includes(r)) live.push(r);
    }
    const a = this.reader();
    if (a) {
      // the stand-in takes the buffer over, and stands in for the pending readers too
      this.handOff();
      this.pointReadersAt(live, a);
      this.pending = null;
      return true;
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
    this.pointReadersAt(live, old);
    this.buf = null;
    this.pending = null;
    return true;
  }

  /** The pending nodes `live` read `to` where they read this storage (a stand-in counts them). */
  private pointReadersAt(live: Storage[], to: Storage): void {
    for (const r of live) {
      r.pending!.inputs = r.pending!.inputs.map((v) => {
        if (v.storage !== this) return v;
        if (to.standIn) to.uses++;
        return { ...v, storage: to };
      });
      to.addReader(new WeakRef(r));
    }
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
    this.dropPending();
    this.readers = null;
    this.freeBuffer();
  }

  /** Take over another (realized, unshared) storage's buffer: how in-place writes land. */
  adopt(other: Storage): void {
    if (!other.buf && other.pending) return this.adoptPending(other);
    if (!other.buf) throw new Error("internal: adopt() needs a realized storage");
    if (other.lender) throw new Error("internal: adopt() of a stand-in");
    if (!this.moveOut() && this.buf) trackFree(this, this.device, this.buf);
    this.buf = other.buf;
    this.dropPending();
    transferOwnership(other, this, this.device, other.buf);
    // a stand-in of other's buffer borrows it from this storage now
    const a = other.reader();
    if (a) {
      a.lender = this;
      this.borrower = other.borrower;
    }
    other.borrower = null;
    other.buf = null;
    this.takeReaders(other);
    other.disposed = true;
  }

  /** Fused mode: take over another storage's pending node without running it (a lazy in-place write). */
  private adoptPending(other: Storage): void {
    this.persistent = true;
    if (!this.moveOut() && this.buf) trackFree(this, this.device, this.buf);
    this.buf = null;
    this.dropPending(); // (moveOut moved it aside if anything still reads it)
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
