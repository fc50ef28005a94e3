// The Tensor: a strided view of a Storage plus autograd metadata. Ops are attached to the
// prototype by the files under ops/ (each op lives in one place); this file holds only
// what every tensor is.
import { getDevice } from "./device/plugin.js";
import type { DType, HostArray } from "./ir/dtype.js";
import { contiguousStrides, isContiguous, numel, shapeStr, type Shape } from "./ir/shape.js";
import { realize, runFusedRegion, traceState } from "./runtime/dispatch.js";
import { getEagerMode } from "./runtime/mode.js";
import { maybeYield } from "./runtime/memory.js";
import { pendingSet, Storage } from "./runtime/storage.js";
import { AccumulateGrad, type Node, type TensorHook } from "./autograd/node.js";
import { formatTensor } from "./format.js";

export type Scalar = number | boolean;
export type TensorLike = Tensor | Scalar;
export type NestedArray = Scalar | NestedArray[];

let liveScope: Tensor[][] = [];
/** Per open torch.scope (parallel to liveScope): tensors whose .grad was set inside it. */
let gradScope: Tensor[][] = [];

/** `t.grad` was just set: the open torch.scope keeps that gradient if t still holds it when the scope ends. */
export function noteGradSet(t: Tensor): void {
  const g = gradScope[gradScope.length - 1];
  if (g) g.push(t);
}

export class Tensor {
  _storage: Storage;
  readonly shape: number[];
  _strides: number[];
  _offset: number;
  readonly dtype: DType;
  gradFn: Node | null = null;
  _outputNr = 0;
  /** The tensor whose storage this one views (PyTorch's ._base), for in-place autograd on views. */
  _base: Tensor | null = null;
  /** The tensor this view was taken from (one step up), so in-place checks can find leaf ancestors. */
  _viewParent: Tensor | null = null;
  _requiresGrad = false;
  _grad: Tensor | null = null;
  _retainsGrad = false;
  _hooks: TensorHook[] | null = null;
  _postAccHooks: ((t: Tensor) => void)[] | null = null;
  _acc: AccumulateGrad | null = null;
  _name: string | undefined;

  constructor(storage: Storage, shape: Shape, strides?: Shape, offset = 0, dtype?: DType) {
    this._storage = storage;
    this.shape = [...shape];
    this._strides = strides ? [...strides] : contiguousStrides(shape);
    this._offset = offset;
    this.dtype = dtype ?? storage.dtype;
    const scope = liveScope[liveScope.length - 1];
    if (scope) scope.push(this);
  }

  // ---- metadata ----
  get device(): string {
    return this._storage.device.name;
  }
  get ndim(): number {
    return this.shape.length;
  }
  dim(): number {
    return this.shape.length;
  }
  size(): number[];
  size(dim: number | { dim: number }): number;
  size(opts: { dim?: null }): number[];
  size(dim?: number | { dim?: number | null }): number[] | number {
    // the op table's entry (ops/tensor_basics.ts) binds the arguments; this is the bare accessor
    if (dim === undefined || typeof dim === "object") return [...this.shape];
    const d = dim < 0 ? dim + this.ndim : dim;
    if (d < 0 || d >= this.ndim)
      throw new RangeError(`Dimension out of range (expected to be in range of [${-this.ndim}, ${this.ndim - 1}], but got ${dim})`);
    return this.shape[d]!;
  }
  numel(): number {
    return numel(this.shape);
  }
  /** PyTorch's aliases of dim() and numel() */
  ndimension(): number {
    return this.shape.length;
  }
  nelement(): number {
    return numel(this.shape);
  }
  stride(): number[];
  stride(dim: number | { dim: number }): number;
  stride(opts: { dim?: null }): number[];
  stride(dim?: number | { dim?: number | null }): number[] | number {
    if (dim === undefined || typeof dim === "object") return [...this._strides];
    return this._strides[dim < 0 ? dim + this.ndim : dim]!;
  }
  storageOffset(): number {
    return this._offset;
  }
  isContiguous(_opts?: { memoryFormat?: "contiguous_format" | "preserve_format" | "channels_last" | "channels_last_3d" }): boolean {
    return isContiguous(this.shape, this._strides);
  }
  get strides(): number[] {
    return this._strides;
  }
  get offset(): number {
    return this._offset;
  }
  get storage(): Storage {
    return this._storage;
  }
  get isLeaf(): boolean {
    return this.gradFn === null;
  }
  get isCuda(): boolean {
    return false;
  }
  /** Version counter shared by all views of the same storage (PyTorch's ._version). */
  get _version(): number {
    return this._storage.version;
  }
  get isDisposed(): boolean {
    return this._storage.disposed;
  }

  // ---- autograd metadata ----
  get requiresGrad(): boolean {
    return this._requiresGrad || this.gradFn !== null;
  }
  set requiresGrad(v: boolean) {
    if (this.gradFn !== null && !v)
      throw new Error(
        "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().",
      );
    if (v && !(this.dtype.startsWith("float") || this.dtype === "bfloat16"))
      throw new Error(`only Tensors of floating point dtype can require gradients (got ${this.dtype})`);
    this._requiresGrad = v;
  }
  requiresGrad_(v: boolean | { requiresGrad?: boolean } = true): this {
    if (typeof v === "object") v = v.requiresGrad ?? true;
    this.requiresGrad = v;
    return this;
  }
  get grad(): Tensor | null {
    return this._grad;
  }
  set grad(g: Tensor | null) {
    if (g && !sameShapeArr(g.shape, this.shape))
      throw new RangeError(`assigned grad has data of a different size: ${shapeStr(g.shape)} vs ${shapeStr(this.shape)}`);
    this._grad = g;
    if (g) noteGradSet(this);
  }
  retainGrad(): void {
    if (this.isLeaf) return;
    this._retainsGrad = true;
    const n = this.gradFn!;
    (n.retained ??= new Map()).set(this._outputNr, new WeakRef(this));
  }
  get retainsGrad(): boolean {
    return this._retainsGrad;
  }
  /** Hook called with this tensor's gradient; may return a replacement gradient. */
  registerHook(hook: TensorHook): { remove(): void } {
    if (!this.requiresGrad) throw new Error("cannot register a hook on a tensor that doesn't require gradient");
    if (this.isLeaf) {
      (this._hooks ??= []).push(hook);
      return { remove: () => (this._hooks = this._hooks!.filter((h) => h !== hook)) };
    }
    const n = this.gradFn!;
    const m = (n.preHooks ??= new Map());
    const list = m.get(this._outputNr) ?? [];
    list.push(hook);
    m.set(this._outputNr, list);
    return { remove: () => m.set(this._outputNr, (m.get(this._outputNr) ?? []).filter((h: TensorHook) => h !== hook)) };
  }
  /** Called after the gradient is accumulated into this leaf's .grad (what DDP hooks on). */
  registerPostAccumulateGradHook(hook: (t: Tensor) => void): { remove(): void } {
    if (!this.isLeaf) throw new Error("post accumulate grad hooks cannot be registered on non-leaf tensors");
    (this._postAccHooks ??= []).push(hook);
    return { remove: () => (this._postAccHooks = this._postAccHooks!.filter((h: (t: Tensor) => void) => h !== hook)) };
  }
  _accNode(): AccumulateGrad {
    return (this._acc ??= new AccumulateGrad(this));
  }

  // ---- host reads (async because accelerators are) ----
  async data(): Promise<HostArray> {
    const dev = this._storage.device;
    await maybeYield();
    await this._storage.transfer?.landed(); // a collective's result still arriving: await, do not block
    if (dev.readSync) return this._contiguousHost();
    // accelerators (webgpu): realize, then await the device's async read
    this._checkAlive();
    realize(this._storage);
    return this._gather(await dev.read(this._storage.buf!, this._storage.dtype, this._storage.numel));
  }
  async tolist(): Promise<NestedArray> {
    await maybeYield();
    await this._storage.transfer?.landed();
    if (this._storage.device.readSync) return this._tolistSync();
    return this._nested(await this.data());
  }
  async item(): Promise<number> {
    if (this.numel() !== 1)
      throw new RangeError(`a Tensor with ${this.numel()} elements cannot be converted to Scalar`);
    const d = await this.data();
    return this.dtype === "bool" ? d[0]! : d[0]!;
  }
  /** Synchronous read for host-visible devices (cpu); used by printing. */
  _contiguousHost(): HostArray {
    this._checkAlive();
    realize(this._storage);
    const dev = this._storage.device;
    if (!dev.readSync)
      throw new Error(
        `${dev.name} tensors cannot be read synchronously: use await t.data() / t.tolist() / t.item(), or await t.cpuAsync() instead of .cpu()`,
      );
    return this._gather(dev.readSync(this._storage.buf!, this._storage.dtype, this._storage.numel));
  }
  /** This view's elements, contiguous, from its whole storage's host copy. */
  _gather(src: HostArray): HostArray {
    const n = this.numel();
    const out = new (src.constructor as new (n: number) => HostArray)(n);
    const nd = this.ndim;
    if (nd === 0) {
      out[0] = src[this._offset]!;
      return out;
    }
    if (this.isContiguous()) {
      out.set(src.subarray(this._offset, this._offset + n) as never);
      return out;
    }
    const idx = new Array<number>(nd).fill(0);
    for (let p = 0; p < n; p++) {
      let o = this._offset;
      for (let d = 0; d < nd; d++) o += idx[d]! * this._strides[d]!;
      out[p] = src[o]!;
      for (let d = nd - 1; d >= 0; d--) {
        if (++idx[d]! < this.shape[d]!) break;
        idx[d] = 0;
      }
    }
    return out;
  }
  _tolistSync(): NestedArray {
    return this._nested(this._contiguousHost());
  }
  _nested(flat: HostArray): NestedArray {
    const isBool = this.dtype === "bool";
    const conv = (v: number): Scalar => (isBool ? v !== 0 : v);
    if (this.ndim === 0) return conv(flat[0]!);
    let p = 0;
    const build = (d: number): NestedArray[] => {
      const out: NestedArray[] = [];
      for (let i = 0; i < this.shape[d]!; i++) out.push(d === this.ndim - 1 ? conv(flat[p++]!) : build(d + 1));
      return out;
    };
    return build(0);
  }
  _checkAlive(): void {
    if (this._storage.disposed)
      throw new Error("Tensor has been disposed (by dispose(), `using` or torch.scope) and can no longer be used");
  }

  // ---- lifetime ----
  /** Tensors that hold this one's data besides its storage (a DTensor's local shard). */
  _innerTensors(): readonly Tensor[] {
    return [];
  }
  /** Free this tensor's storage now (also frees every view of it). */
  dispose(): void {
    this._storage.dispose();
  }
  [Symbol.dispose](): void {
    this.dispose();
  }

  toString(): string {
    return formatTensor(this);
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
  get [Symbol.toStringTag](): string {
    return "Tensor";
  }
}

/** Whether t views all of its storage in order (offset 0, contiguous, every element): writes to t are writes to the storage. */
export function coversStorage(t: Tensor): boolean {
  return t._offset === 0 && t.isContiguous() && t.numel() === t._storage.numel;
}

function sameShapeArr(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * A scope for a composite's formula (no autograd recording inside): in strict eager its ops run
 * as fused kernels (runtime/dispatch.ts runFusedRegion) and only the returned tensors stay. Fused
 * eager runs the formula as it is: its values are pending nodes the scheduler fuses, and a sync
 * frees the ones it had to materialize after their last reader; disposing them here instead
 * moved each into an orphan storage for the nodes still reading it, ~4% of a small training
 * step's time (bench/RESULTS.md, session 20). Elsewhere (debug, torch.compile's trace) it is
 * torch.scope.
 */
export function compositeScope<T>(fn: () => T): T {
  const mode = getEagerMode();
  if (mode === "fused" && traceState.fn === null) return fn();
  if (mode !== "strict" || traceState.fn !== null || pendingSet.size !== 0) return scope(fn);
  return runFusedRegion(fn, (r) => {
    const out: Storage[] = [];
    collectTensors(r, (t) => out.push(t._storage));
    return out;
  });
}

/**
 * torch.scope(fn): every tensor created inside fn is disposed when fn returns, except those
 * returned (anywhere inside an array/object result) or passed to torch.keep, gradients still held
 * by a tensor's .grad, and tensors stored where they outlive the call (module attributes, optimizer
 * state: `holdBeyondScopes`). One that autograd saved for a backward still to come is freed when
 * that backward releases it, so a scope may end before `loss.backward()` and a training step
 * (forward, backward, optimizer step) may run in one scope. Returned tensors made inside belong to
 * the enclosing scope from then on (as tf.tidy's do), so nested scopes (one per decoder layer inside
 * a step's) free each result once the outer scope ends.
 */
export function scope<T>(fn: () => T): T {
  if (typeof fn !== "function") throw new TypeError(`scope(): argument 'fn' must be a function, got ${fn === null ? "null" : typeof fn}`);
  const mine: Tensor[] = [];
  const grads: Tensor[] = [];
  const born = Storage.created;
  liveScope.push(mine);
  gradScope.push(grads);
  let result: T;
  try {
    result = fn();
  } finally {
    liveScope.pop();
    gradScope.pop();
  }
  const keepStorages = new Set<Storage>();
  collectTensors(result, (t) => keepStorages.add(t._storage));
  // a gradient set inside that its tensor still holds: the outer scope checks its tensor again
  for (const t of grads)
    if (t._grad) {
      collectTensors(t._grad, (g) => keepStorages.add(g._storage));
      gradScope[gradScope.length - 1]?.push(t);
    }
  const keptStorages = new Set<Storage>();
  for (const t of kept) keptStorages.add(t._storage);
  // newest first: readers go before the values they read, so a fused value no pending node
  // needs any more is freed now instead of being moved aside for a reader about to go too
  for (let i = mine.length - 1; i >= 0; i--) {
    const t = mine[i]!;
    const st = t._storage;
    // only memory allocated inside the scope: a view made inside it of an outer tensor, or an
    // in-place write into one (its temporary then points at the outer storage), share the
    // outer tensor's storage, which must survive
    if (st.serial <= born || pinned.has(st) || st.disposed) continue;
    if (keptStorages.has(st)) continue; // torch.keep: no scope frees it
    if (keepStorages.has(st)) liveScope[liveScope.length - 1]?.push(t); // a result: the outer scope's now
    else if (st.savedBy > 0) st.internal = true; // backward frees it (autograd/node.ts release)
    else st.dispose();
  }
  return result;
}

/**
 * `t` is stored where it outlives any scope open now (a module's attribute, an optimizer's state):
 * no torch.scope frees its storage; the garbage collector does once nothing holds it.
 */
export function holdBeyondScopes<T extends Tensor>(t: T): T {
  pinned.add(t._storage);
  if (t._base) pinned.add(t._base._storage);
  for (const inner of t._innerTensors()) holdBeyondScopes(inner);
  return t;
}

/**
 * The end of an outermost public op in strict or debug eager: the storages it made (`made`, in
 * order) that its result does not hold are freed now, not when the garbage collector gets to them
 * (a composite's intermediates: linear's product before the bias, gelu's polynomial, an
 * optimizer update's terms), so the next op reuses that memory. One an autograd node saved stays
 * for backward, marked `internal`, and is freed when the last node that saved it is released
 * (PyTorch frees saved variables after backward). A result the walk cannot see through (a class
 * instance, a tensor subclass, deep nesting) frees nothing.
 */
export function freeOpTemporaries(made: readonly Storage[], result: unknown): void {
  if (!made.length) return;
  const keep = new Set<Storage>();
  if (!resultStorages(result, keep, 0)) return;
  for (let i = made.length - 1; i >= 0; i--) {
    const st = made[i]!;
    if (st.disposed || keep.has(st) || st.persistent || st.transfer || st.pending || pinned.has(st)) continue;
    if (st.savedBy > 0) st.internal = true;
    else st.dispose();
  }
}

/** Adds the storages of the tensors in `v` to `out`; false if `v` may hold tensors it cannot see. */
function resultStorages(v: unknown, out: Set<Storage>, depth: number): boolean {
  if (v === null || typeof v !== "object") return typeof v !== "function";
  if (depth > 6) return false;
  if (v instanceof Tensor) {
    if (v.constructor !== Tensor) return false;
    out.add(v._storage);
    if (v._base) out.add(v._base._storage);
    return true;
  }
  if (Array.isArray(v)) return v.every((x) => resultStorages(x, out, depth + 1));
  const proto = Object.getPrototypeOf(v) as unknown;
  if (proto !== Object.prototype && proto !== null) return false;
  return Object.values(v as object).every((x) => resultStorages(x, out, depth + 1));
}

/** Storages of long-lived internal constants: no torch.scope frees them, not even through a view. */
const pinned = new WeakSet<Storage>();

/** Runs fn with no torch.scope collecting the tensor it creates, and pins its storage. */
export function unscoped(fn: () => Tensor): Tensor {
  const [outer, outerGrads] = [liveScope, gradScope];
  liveScope = [];
  gradScope = [];
  try {
    return holdBeyondScopes(fn());
  } finally {
    [liveScope, gradScope] = [outer, outerGrads];
  }
}

const kept = new Set<Tensor>();
/** Exempt a tensor from the enclosing torch.scope's disposal. */
export function keep<T extends Tensor>(t: T): T {
  kept.add(t);
  queueMicrotask(() => kept.delete(t));
  return t;
}

function collectTensors(v: unknown, f: (t: Tensor) => void, depth = 0): void {
  if (depth > 6 || v === null || typeof v !== "object") return;
  if (v instanceof Tensor) {
    f(v);
    if (v._base) f(v._base);
    return;
  }
  if (Array.isArray(v)) for (const x of v) collectTensors(x, f, depth + 1);
  else if (v instanceof Map) for (const x of v.values()) collectTensors(x, f, depth + 1);
  else for (const x of Object.values(v as object)) collectTensors(x, f, depth + 1);
}

export function deviceOf(name: string) {
  return getDevice(name);
}
