// The backward engine: walks the graph from the roots in dependency order, calling each
// node's vjp (itself made of dispatched ops) and accumulating into leaves' .grad.
import { coversStorage, noteGradSet, scope, Tensor } from "../tensor.js";
import { isGradEnabled, setGradEnabled } from "./grad_mode.js";
import { AccumulateGrad, type Edge, type Node } from "./node.js";
import { add } from "../ops/math.js";
import { onesLike, zeros } from "../ops/creation.js";
import { _clone as clone, _detach as detach } from "../ops/shape_ops.js";
import { Storage } from "../runtime/storage.js";
import { getEagerMode } from "../runtime/mode.js";

export interface BackwardOptions {
  retainGraph?: boolean;
  createGraph?: boolean;
}

function edgeFor(t: Tensor): Edge | null {
  if (t.gradFn) return { node: t.gradFn, index: t._outputNr };
  if (t.requiresGrad) return { node: t._accNode(), index: 0 };
  return null;
}

function accumulate(a: Tensor | null, b: Tensor): Tensor {
  return a ? add(a, b) : b;
}

/** Callbacks of the running backward (PyTorch's Variable._execution_engine.queue_callback). */
let callbacks: (() => void)[] | null = null;

/**
 * Run `fn` once the backward that is running now has finished (FSDP reduces the gradients of
 * parameters no hook reported there). Raises outside a backward.
 */
export function queueCallback(fn: () => void): void {
  if (!callbacks) throw new Error("queueCallback: no backward is running (call it from a hook during backward)");
  callbacks.push(fn);
}

/**
 * Run backward from `roots` with gradients `grads`. With `capture`, gradients reaching the
 * given edges are returned instead of accumulated into .grad (torch.autograd.grad).
 */
export function runBackward(
  roots: Tensor[],
  grads: (Tensor | null)[],
  opts: BackwardOptions,
  capture?: Tensor[],
): (Tensor | null)[] | void {
  const createGraph = opts.createGraph ?? false;
  const retain = opts.retainGraph ?? createGraph;
  const rootEdges = roots.map((t, i) => {
    const e = edgeFor(t);
    if (!e) throw new Error(`element ${i} of tensors does not require grad and does not have a grad_fn`);
    return e;
  });
  const rootGrads = roots.map((t, i) => {
    const g = grads[i];
    if (g) {
      if (g.shape.length !== t.shape.length || g.shape.some((d, k) => d !== t.shape[k]))
        throw new RangeError(`Mismatch in shape: grad_output[${i}] has a shape of [${g.shape.join(", ")}] and output[${i}] has a shape of [${t.shape.join(", ")}].`);
      return g;
    }
    if (t.numel() !== 1) throw new Error("grad can be implicitly created only for scalar outputs");
    return onesLike(t);
  });

  // dependency counts
  const deps = new Map<Node, number>();
  const seen = new Set<Node>();
  const stack = rootEdges.map((e) => e.node);
  while (stack.length) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    for (const e of n.next) {
      if (!e) continue;
      deps.set(e.node, (deps.get(e.node) ?? 0) + 1);
      stack.push(e.node);
    }
  }

  const captureMap = new Map<Node, Map<number, number>>();
  const captured: (Tensor | null)[] = [];
  if (capture)
    capture.forEach((t, i) => {
      captured.push(null);
      const e = edgeFor(t);
      if (!e) throw new Error(`One of the differentiated Tensors (input ${i}) does not require grad`);
      const m = captureMap.get(e.node) ?? new Map();
      m.set(e.index, i);
      captureMap.set(e.node, m);
    });

  // Gradients the engine creates during this run are freed as soon as the last node that
  // reads them has run (PyTorch frees them by refcount; here the garbage collector would only
  // get to them after the whole backward, so a big step would need all of them at once).
  // Counted per storage (views and pass-through grads share one); never freed: gradients user
  // code can see (hooks, retain_grad, custom Functions, autograd.grad results, createGraph).
  // (fused mode and compile tracing: values stay lazy, and the scheduler frees what it materialized)
  const freeing = !createGraph && getEagerMode() !== "fused";
  const bornAfter = Storage.created;
  const refs = new Map<Storage, number>();
  const visible = new Set<Storage>();
  const hold = (t: Tensor) => refs.set(t._storage, (refs.get(t._storage) ?? 0) + 1);
  const drop = (t: Tensor | null | undefined) => {
    if (!t) return;
    const st = t._storage;
    const c = (refs.get(st) ?? 1) - 1;
    if (c > 0) return void refs.set(st, c);
    refs.delete(st);
    if (freeing && st.serial > bornAfter && !visible.has(st)) st.dispose();
  };
  const buffers = new Map<Node, (Tensor | null)[]>();
  const put = (e: Edge, g: Tensor) => {
    let b = buffers.get(e.node);
    if (!b) buffers.set(e.node, (b = []));
    const prev = b[e.index] ?? null;
    hold(g);
    b[e.index] = accumulate(prev, g);
    if (prev) {
      hold(b[e.index]!);
      drop(prev);
      drop(g);
    }
  };
  rootEdges.forEach((e, i) => put(e, rootGrads[i]!));

  const ready: Node[] = [];
  for (const e of rootEdges) if (!deps.get(e.node) && !ready.includes(e.node)) ready.push(e.node);

  const prevGrad = isGradEnabled();
  const outerCallbacks = callbacks;
  callbacks = [];
  setGradEnabled(createGraph);
  try {
    while (ready.length) {
      // highest sequence number first: later ops are differentiated first, like PyTorch; of equal
      // ones (AccumulateGrad's), the last made ready. A scan, not a sort plus pop (the same pick:
      // ready keeps the order nodes became ready in): Array.prototype.sort allocated ~40 KB in a
      // small training step's backward
      let top = 0;
      for (let i = 1; i < ready.length; i++) if (ready[i]!.seq >= ready[top]!.seq) top = i;
      const node = ready[top]!;
      // shifted by a loop: Array.prototype.copyWithin is a generic per-element builtin
      for (let i = top + 1; i < ready.length; i++) ready[i - 1] = ready[i]!;
      ready.pop();
      const gin = buffers.get(node) ?? [];
      buffers.delete(node);
      const consumed = [...gin];
      if (node.preHooks || node.retained || node.userCode) for (const g of gin) if (g) visible.add(g._storage);
      // tensor hooks and retain_grad on this node's outputs
      if (node.preHooks)
        for (const [idx, hooks] of node.preHooks) {
          for (const h of hooks) {
            const g = gin[idx];
            if (!g) continue;
            const r = h(g);
            if (r instanceof Tensor) gin[idx] = r;
          }
        }
      if (node.retained)
        for (const [idx, ref] of node.retained) {
          const t = ref.deref();
          const g = gin[idx];
          if (t && g) {
            t._grad = t._grad ? add(t._grad, g) : createGraph ? g : detach(g);
            noteGradSet(t);
          }
        }
      const cap = captureMap.get(node);
      if (cap)
        for (const [idx, slot] of cap) {
          captured[slot] = gin[idx] ?? null;
          if (gin[idx]) visible.add(gin[idx]!._storage);
        }

      if (node instanceof AccumulateGrad) {
        const g = gin[0];
        if (node.variable._hooks && g) visible.add(g._storage);
        // a gradient this backward made, held by nothing else, becomes .grad itself (PyTorch's
        // AccumulateGrad steals an unshared gradient too) instead of being copied and freed
        const own = !!g && !createGraph && !capture && !node.variable._grad && refs.get(g._storage) === 1 &&
          g._storage.serial > bornAfter && !visible.has(g._storage) && coversStorage(g);
        if (!capture) accumulateLeaf(node.variable, g ?? null, createGraph, own);
        if (own) refs.delete(g._storage);
        else consumed.forEach(drop);
        continue;
      }
      const filled = gin.length ? gin : [null];
      if (filled.every((g) => !g)) {
        releaseAndDecrement(node, ready, deps, retain);
        continue;
      }
      const outGrads = node.outputs.map(
        (o, i) => gin[i] ?? zeros(o.shape, { dtype: o.dtype as Tensor["dtype"], device: o.device }),
      );
      const saved = node.unpackSaved();
      // temporaries a built-in vjp makes (not its results) are freed when it returns
      const inGrads = !freeing || node.userCode ? node.vjp(outGrads, saved, node) : scope(() => node.vjp(outGrads, saved, node));
      if (!retain) node.release();
      // held until all are put: gradients that are views of one tensor the vjp made (a packed
      // backward's, layerNorm's rows for the input, weight and bias) share a storage, and one
      // summed into an existing gradient by its put must not free the others' memory
      const builtIn = !node.userCode; // a user's vjp may return tensors it keeps: only those put are counted
      if (builtIn) for (const g of inGrads) if (g) hold(g);
      node.next.forEach((e, i) => {
        if (!e) return;
        const g = inGrads[i];
        if (!g) return;
        if (node.userCode) visible.add(g._storage);
        put(e, g);
      });
      consumed.forEach(drop); // after the puts: a gradient passed through (or a view of it) stays
      if (builtIn) for (const g of inGrads) drop(g);
      releaseAndDecrement(node, ready, deps, retain, true);
    }
    for (let i = 0; i < callbacks.length; i++) callbacks[i]!(); // (a callback may queue more)
  } finally {
    callbacks = outerCallbacks;
    setGradEnabled(prevGrad);
  }
  if (capture) return captured;
}

function releaseAndDecrement(node: Node, ready: Node[], deps: Map<Node, number>, retain: boolean, done = false): void {
  if (!done && !retain) node.release();
  for (const e of node.next) {
    if (!e) continue;
    const c = deps.get(e.node)! - 1;
    deps.set(e.node, c);
    if (c === 0) ready.push(e.node);
  }
}

/** `own`: g is this backward's own unshared tensor, so it becomes .grad without a copy. */
function accumulateLeaf(v: Tensor, g: Tensor | null, createGraph: boolean, own = false): void {
  if (!g) return;
  if (v._hooks)
    for (const h of v._hooks) {
      const r = h(g);
      if (r instanceof Tensor) g = r;
    }
  // .grad is a fresh contiguous tensor owned by this leaf (the incoming gradient may be an
  // expanded view or shared with another input), so in-place updates of .grad are safe
  const gg = createGraph ? g : own ? detach(g) : detach(clone(g));
  v._grad = v._grad ? (createGraph ? add(v._grad, gg) : detach(add(v._grad, gg))) : gg;
  noteGradSet(v);
  if (v._postAccHooks) for (const h of v._postAccHooks) h(v);
}

/** torch.autograd.grad */
export function grad(
  outputs: Tensor | Tensor[],
  inputs: Tensor | Tensor[],
  opts: BackwardOptions & { gradOutputs?: Tensor | (Tensor | null)[]; allowUnused?: boolean } = {},
): (Tensor | null)[] {
  const outs = Array.isArray(outputs) ? outputs : [outputs];
  const ins = Array.isArray(inputs) ? inputs : [inputs];
  const go = opts.gradOutputs === undefined ? [] : Array.isArray(opts.gradOutputs) ? opts.gradOutputs : [opts.gradOutputs];
  const r = runBackward(outs, outs.map((_, i) => go[i] ?? null), opts, ins) as (Tensor | null)[];
  if (!opts.allowUnused)
    r.forEach((g, i) => {
      if (!g)
        throw new Error(
          `One of the differentiated Tensors (input ${i}) appears to not have been used in the graph. Set allowUnused: true if this is the desired behavior.`,
        );
    });
  return r;
}

export function backward(t: Tensor, gradient?: Tensor | null, opts: BackwardOptions & { inputs?: Tensor[] } = {}): void {
  runBackward([t], [gradient ?? null], opts);
}
