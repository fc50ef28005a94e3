// The dispatcher: every primitive goes through runPrim. The eager mode decides whether it
// runs now (debug/strict) or is recorded into the pending lazy graph (fused). All modes
// fetch executables from the one compile cache.
import type { DevicePlugin, Executable, KernelArg } from "../device/plugin.js";
import { isFloating, type DType } from "../ir/dtype.js";
import type { IRNode, PrimName, PrimParams } from "../ir/prims.js";
import { numel, type Shape } from "../ir/shape.js";
import { getExecutable } from "./cache.js";
import { currentOpName, getEagerMode, isAnomalyEnabled, setEagerMode, userCallSite } from "./mode.js";
import { pendingSet, Storage, type Pending, type ViewRef } from "./storage.js";
import { flushGraph, recordHooks } from "./scheduler.js";
import { runKernel } from "./profiler.js";
import { reportReleaseError } from "./memory.js";

/** Size bound of the lazy graph: recording more pending nodes than this flushes. */
const MAX_PENDING = 16384;
let recorded = 0;

/** Set while torch.compile traces a function: host reads inside it are errors, not graph breaks. */
export const traceState: { fn: string | null; violation: Error | null } = { fn: null, violation: null };

export class TorchError extends Error {}

function assertUsable(v: ViewRef): void {
  if (v.storage.disposed)
    throw new Error("Tensor has been disposed (by dispose(), `using` or torch.scope) and can no longer be used");
}

export function runPrim<P extends PrimName>(
  prim: P,
  params: PrimParams[P],
  inputs: ViewRef[],
  out: { shape: Shape; dtype: DType },
  device: DevicePlugin,
  scalars: number[] = [],
): Storage {
  if (recordHooks.prim) recordHooks.prim(inputs, scalars);
  for (const v of inputs) {
    assertUsable(v);
    if (v.storage.device !== device)
      throw new TorchError(
        `${currentOpName() ?? prim}: Expected all tensors to be on the same device, but found at least two devices, ${device.name} and ${v.storage.device.name}!`,
      );
  }
  const node: IRNode<P> = {
    prim,
    params,
    inputs: inputs.map((v) => ({ shape: v.shape, strides: v.strides, dtype: v.dtype })),
    out: { shape: [...out.shape], dtype: out.dtype },
  };
  const st = new Storage(device, out.dtype, numel(out.shape));
  const mode = getEagerMode();
  if (mode === "fused") {
    st.pending = { node, inputs: inputs.map(snapshot), scalars };
    st.trackPending();
    if (++recorded >= MAX_PENDING && traceState.fn === null) {
      recorded = 0;
      flushAll();
    }
    return st;
  }
  if (mode === "debug") {
    const site = userCallSite();
    try {
      execute(st, { node, inputs, scalars });
    } catch (e) {
      if (e instanceof Error) e.message += `\n  (torchts debug mode: raised by ${currentOpName() ?? prim} at ${site})`;
      throw e;
    }
    checkOutput(st, node, site);
  } else execute(st, { node, inputs, scalars });
  return st;
}

function snapshot(v: ViewRef): ViewRef {
  return { storage: v.storage, shape: v.shape, strides: v.strides, offset: v.offset, dtype: v.dtype };
}

/**
 * Run one node into its storage (strict/debug, and the fused scheduler's unfusable nodes); its
 * inputs exist. `exe`: its one-node executable, when the caller has it (a flush plan keeps them).
 */
export function execute(st: Storage, p: Pending, exe?: Executable): void {
  for (const v of p.inputs) if (!v.storage.buf) realize(v.storage);
  const dev = st.device;
  exe ??= getExecutable(dev, { nodes: [p.node] });
  const out = st.allocate();
  const args: KernelArg[] = new Array(p.inputs.length);
  for (let i = 0; i < args.length; i++) args[i] = { buf: p.inputs[i]!.storage.buf!, offset: p.inputs[i]!.offset };
  if (recordHooks.kernel) recordHooks.kernel(exe, p.node.prim, p.inputs, [st], p.scalars, p.node);
  runKernel(p.node.prim, exe, args, [out], p.scalars, p.node);
}

/** Make a storage's value exist, running (fused) whatever pending graph produces it. */
export function realize(st: Storage): void {
  if (st.transfer) st.transfer.land(); // a collective's result (distributed): wait for it
  if (st.buf || !st.pending) {
    if (st.disposed) throw new Error("Tensor has been disposed and can no longer be used");
    return;
  }
  if (traceState.fn !== null) throw hostReadError();
  try {
    flushGraph([st], execute);
  } catch (e) {
    undoPartialFlush([st]);
    throw e;
  }
}

/**
 * After a flush threw: a storage that got its buffer but whose kernel did not finish (its node
 * is still pending) holds garbage that would be read as its value. Give such buffers back; the
 * nodes stay pending, so the values are recomputed if they are read.
 */
function undoPartialFlush(roots: readonly Storage[]): void {
  try {
    const seen = new Set<Storage>();
    const stack = [...roots];
    while (stack.length) {
      const s = stack.pop()!;
      if (seen.has(s) || !s.pending) continue;
      seen.add(s);
      if (s.buf) s.release(s.pending);
      for (const v of s.pending.inputs) stack.push(v.storage);
    }
  } catch (e) {
    reportReleaseError("failed flush cleanup", e); // the flush's own error is the one to raise
  }
}

/**
 * Strict eager: run `fn`, a pure formula of tensor ops (a composite's forward, or its backward
 * without createGraph), as the fused kernels fused eager would make of it, and return with the
 * storages `results` names materialized; everything else fn made is dropped. PyTorch runs such
 * composites as one native kernel each (gelu_backward, native_layer_norm_backward), not one
 * kernel per term. The kernels are the fused eager ones, so values are bit-identical to fused
 * eager (which matches strict). Only called in strict eager with nothing pending and no trace.
 */
export function runFusedRegion<T>(fn: () => T, results: (r: T) => Storage[]): T {
  const token = Storage.created;
  setEagerMode("fused");
  let r: T;
  try {
    r = fn();
  } catch (e) {
    setEagerMode("strict");
    dropRegion(token, new Set());
    throw e;
  }
  setEagerMode("strict");
  const keep = new Set(results(r));
  const roots = [...keep].filter((s) => s.pending);
  try {
    if (roots.length) flushGraph(roots, execute, true, false);
  } catch (e) {
    undoPartialFlush(roots);
    dropRegion(token, new Set());
    throw e;
  }
  dropRegion(token, keep);
  return r;
}

/** After a fused region: what it made besides `keep` is unreachable (its intermediates); give it back and unlist it. */
function dropRegion(token: number, keep: Set<Storage>): void {
  recorded = 0;
  const gone: Storage[] = [];
  pendingSet.sweep((ref) => {
    const s = ref.deref();
    if (s && s.serial <= token) return false;
    if (s) gone.push(s);
    return true;
  });
  for (const s of gone) {
    s.listed = false;
    if (!keep.has(s)) s.discard();
  }
}

/**
 * Transactions for public ops. `opCheckpoint()` at the entry of the outermost public op and
 * `opRollback(token)` when it throws: every node the op recorded (fused mode) is unlisted as if
 * never recorded, so no later flush runs it, and a buffer a failed flush left half-made is
 * given back. The token is the storage counter: taking it costs one read.
 */
export function opCheckpoint(): unknown {
  return Storage.created;
}

/**
 * Undo what was recorded since `opCheckpoint()` returned `token` (see there). A no-op when
 * nothing was; never throws (it runs while an op's error propagates). The nodes are not
 * destroyed: a pending node something still reads (an in-place write that already landed, a
 * value moved aside for an older node) is computed with its reader, and one that nothing can
 * reach is collected with its storage.
 */
export function opRollback(token: unknown): void {
  if (typeof token !== "number" || token >= Storage.created || pendingSet.size === 0) return;
  try {
    let dropped = 0;
    const gone: Storage[] = [];
    pendingSet.sweep((r) => {
      const s = r.deref();
      if (s === undefined) return true;
      if (!(s.serial > token)) return false;
      gone.push(s);
      return true;
    });
    for (const s of gone) {
      s.listed = false;
      if (!s.pending) continue;
      dropped++;
      if (s.buf) s.release(s.pending); // a half-made value (its kernel did not finish)
    }
    recorded = Math.max(0, recorded - dropped);
  } catch (e) {
    reportReleaseError("rollback", e);
  }
}

function hostReadError(): TorchError {
  const site = userCallSite();
  const stack = new Error().stack ?? "";
  const reads = [...stack.matchAll(/\.(item|tolist|data|_contiguousHost) /g)].map((m) => m[1]!);
  const call = /formatTensor|toString/.test(stack) ? "printing" : (reads.at(-1) ?? "torch.sync()"); // the outermost read names the call
  // remembered too: printing swallows read errors and async reads reject later; compile rethrows it
  return (traceState.violation ??= new TorchError(
    `torch.compile: '${traceState.fn}' reads a tensor value on the host (${call === "_contiguousHost" ? "a synchronous read" : call}) at ${site}; ` +
      `a compiled function must not read values inside it: return the tensor and read it after the call`,
  )) as TorchError;
}

/** The number of the last torch.sync (flushAll marks the storages its pending nodes read with it). */
let syncMark = 0;

/**
 * torch.sync(): run everything pending (fused mode). Values only used inside a fused kernel stay
 * unmaterialized; values materialized only for later kernels are freed after their last use.
 * Either kind is recomputed if read later, except what the scheduler keeps (tensors saved for
 * backward, scalars such as the loss, state written in place). (A read, realize(), frees
 * nothing: what it leaves behind is usually needed by the next flush.)
 */
export function flushAll(keep: readonly Storage[] = [], freeIntermediates = true): void {
  if (traceState.fn !== null && pendingSet.size) throw hostReadError();
  const live: Storage[] = [];
  for (const r of pendingSet) {
    const s = r.deref();
    if (!s) continue;
    s.listed = false;
    if (s.pending) live.push(s);
  }
  pendingSet.clear();
  recorded = 0;
  if (!live.length) return;
  // roots: pending values no other pending node reads (everything else is computed on the way);
  // a read is marked on the storage with this sync's number (no Set of every input: ~800 a step)
  const mark = ++syncMark;
  for (const s of live) for (const v of s.pending!.inputs) v.storage.readMark = mark;
  const roots = live.filter((s) => s.readMark !== mark);
  for (const s of keep) if (s.pending && !roots.includes(s)) roots.push(s);
  // intermediates left unmaterialized stay recomputable on demand; they are not new work for the next sync
  // one graph per device: a plan is built for one device (pending graphs never cross devices)
  const byDevice = new Map<object, Storage[]>();
  for (const s of roots.length ? roots : live) {
    const g = byDevice.get(s.device);
    if (g) g.push(s);
    else byDevice.set(s.device, [s]);
  }
  try {
    for (const g of byDevice.values()) flushGraph(g, execute, freeIntermediates);
  } catch (e) {
    undoPartialFlush(live);
    throw e;
  }
}

/** Before an in-place write: eager modes run everything pending; fused mode defers it (see Storage.adopt). */
export function prepareInplace(st: Storage): void {
  if (getEagerMode() === "fused") return;
  flushAll();
  realize(st);
}

/**
 * Rows rows[i] of `dst` (rows of `rowElems` elements) take the contiguous rows of `src`, written in
 * place on the device: O(rows) instead of the whole-storage rewrite of an in-place op. Runs what is
 * pending first (a pending node reading dst's old value must see it). Returns false, changing
 * nothing, where that cannot be done (no device support, inside torch.compile, a recomputable pending
 * value still reads dst's contents): the caller then takes the general path.
 */
export function writeRowsInPlace(dst: Storage, src: ViewRef, rowElems: number, rows: ArrayLike<number>): boolean {
  const dev = dst.device;
  if (!dev.writeRows || src.storage.device !== dev || traceState.fn !== null || dst.disposed) return false;
  flushAll();
  realize(dst);
  realize(src.storage);
  if (dst.lent()) return false; // a stand-in reads this buffer for nodes left pending
  for (const w of dst.readers ?? []) {
    const r = w.deref();
    if (r?.pending && r.pending.inputs.some((v) => v.storage === dst)) return false;
  }
  dev.writeRows(dst.buf!, src.storage.buf!, src.offset, rowElems, rows);
  dst.version++;
  return true;
}

/** Land `src`'s value in `dst` (the end of every in-place op). */
/**
 * Strict and debug eager: an in-place result `src` made by the op itself is copied into dst's own
 * buffer and freed at once, instead of dst taking over src's buffer (adoptInto). A parameter then
 * keeps its memory for its whole life, and the op's result block is reused by the next op: taking
 * over would leave the old buffer behind as a hole between long-lived tensors (a model's
 * initialization and every optimizer step would scatter its weights over the arena). Returns
 * false, changing nothing, where the write must take the general path (fused eager and compile
 * tracing keep values lazy; a device without writeRows; contents still arriving).
 */
export function copyIntoInPlace(dst: Storage, src: Storage): boolean {
  const dev = dst.device;
  if (getEagerMode() === "fused" || traceState.fn !== null || !dev.writeRows) return false;
  if (src.device !== dev || src.numel !== dst.numel || src.dtype !== dst.dtype || !dst.buf || dst.transfer || src.savedBy > 0 || dst.lent()) return false;
  realize(src);
  if (!src.buf) return false;
  dev.writeRows(dst.buf, src.buf, 0, dst.numel, [0]);
  src.dispose();
  return true;
}

export function adoptInto(dst: Storage, src: Storage): void {
  if (getEagerMode() !== "fused" || !src.pending) realize(src);
  dst.adopt(src);
}

export function pendingCount(): number {
  return pendingSet.size;
}

function checkOutput(st: Storage, node: IRNode, site: string): void {
  const dev = st.device;
  if (!dev.readSync) return;
  const data = dev.readSync(st.buf!, st.dtype, st.numel);
  const op = currentOpName() ?? node.prim;
  if (data.length !== st.numel)
    throw new TorchError(`${op}: internal check failed: output has ${data.length} elements, expected ${st.numel}`);
  if (isAnomalyEnabled() && isFloating(st.dtype)) {
    for (let i = 0; i < data.length; i++) {
      const v = data[i]!;
      if (!Number.isFinite(v))
        throw new TorchError(
          `Function '${op}' returned ${v !== v ? "nan" : "inf"} values in its output (element ${i}), at ${site}`,
        );
    }
  }
}
