// The dispatcher: every primitive goes through runPrim. The eager mode decides whether it
// runs now (debug/strict) or is recorded into the pending lazy graph (fused). All modes
// fetch executables from the one compile cache.
import type { DevicePlugin } from "../device/plugin.js";
import { isFloating, type DType } from "../ir/dtype.js";
import type { IRNode, PrimName, PrimParams } from "../ir/prims.js";
import { numel, type Shape } from "../ir/shape.js";
import { getExecutable } from "./cache.js";
import { currentOpName, getEagerMode, isAnomalyEnabled, userCallSite } from "./mode.js";
import { Storage, type Pending, type ViewRef } from "./storage.js";

const pendingSet = new Set<WeakRef<Storage>>();
const MAX_PENDING = 4096;

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
    pendingSet.add(new WeakRef(st));
    if (pendingSet.size >= MAX_PENDING) flushAll();
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

function execute(st: Storage, p: Pending): void {
  for (const v of p.inputs) realize(v.storage);
  const dev = st.device;
  const exe = getExecutable(dev, { nodes: [p.node] });
  const out = st.allocate();
  exe.run(
    p.inputs.map((v) => ({ buf: v.storage.buf!, offset: v.offset })),
    [out],
    p.scalars,
  );
}

/** Make a storage's value exist, running whatever pending IR produces it (iteratively: chains can be long). */
export function realize(st: Storage): void {
  if (st.buf || !st.pending) {
    if (st.disposed) throw new Error("Tensor has been disposed and can no longer be used");
    return;
  }
  const stack: Storage[] = [st];
  while (stack.length) {
    const s = stack[stack.length - 1]!;
    if (s.buf || !s.pending) {
      stack.pop();
      continue;
    }
    const waiting = s.pending.inputs.filter((v) => !v.storage.buf && v.storage.pending);
    if (waiting.length) {
      for (const v of waiting) stack.push(v.storage);
      continue;
    }
    const p = s.pending;
    execute(s, p);
    s.pending = null;
    stack.pop();
  }
}

/** torch.sync(): run everything pending (fused mode). */
export function flushAll(): void {
  const live: Storage[] = [];
  for (const r of pendingSet) {
    const s = r.deref();
    if (s && s.pending) live.push(s);
  }
  pendingSet.clear();
  for (const s of live) realize(s);
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
