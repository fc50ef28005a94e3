// Autograd graph nodes. A node holds what its backward needs (saved tensors, with the
// storage version they had) and edges to the nodes that produced its inputs.
import type { Tensor } from "../tensor.js";
import type { Storage } from "../runtime/storage.js";

export interface Edge {
  node: Node;
  index: number; // which output of `node` the tensor was
}

export interface SavedTensor {
  t: Tensor | null;
  version: number;
}

export type Vjp = (grads: (Tensor | null)[], saved: Tensor[], node: Node) => (Tensor | null | undefined)[];
export type TensorHook = (grad: Tensor) => Tensor | void | undefined;

let seq = 0;

const releasedVjp: Vjp = () => {
  throw new Error("internal: backward of a released autograd node");
};

export class Node {
  readonly seq = seq++;
  saved: SavedTensor[] | null;
  released = false;
  /** Tensor hooks and retain_grad targets for this node's outputs (non-leaf tensors). */
  preHooks: Map<number, TensorHook[]> | null = null;
  retained: Map<number, WeakRef<Tensor>> | null = null;
  /** A custom autograd.Function: user code sees (and may keep) the gradients it gets and makes. */
  userCode = false;
  constructor(
    readonly name: string,
    readonly next: (Edge | null)[],
    saved: (Tensor | null)[],
    public vjp: Vjp,
    readonly outputs: { shape: number[]; dtype: string; device: string }[],
    public ctx: Record<string, unknown> = {},
  ) {
    this.saved = saved.map((t) => ({ t, version: t ? t._storage.version : 0 }));
    this.savedStorages = saved.filter((t) => t !== null).map((t) => t._storage);
    for (const st of this.savedStorages) st.savedBy++;
  }
  /** The storages whose savedBy this node counts (as they were when saved). */
  private savedStorages: Storage[];

  unpackSaved(): Tensor[] {
    if (this.released || !this.saved)
      throw new Error(
        "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). " +
          "Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). " +
          "Specify retainGraph: true if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.",
      );
    return this.saved.map((s, i) => {
      if (!s.t) return null as unknown as Tensor;
      if (s.t._storage.version !== s.version)
        throw new Error(
          `one of the variables needed for gradient computation has been modified by an inplace operation: ` +
            `[${s.t.dtype} [${s.t.shape.join(", ")}]] (saved tensor ${i} of ${this.name}) is at version ${s.t._storage.version}; ` +
            `expected version ${s.version} instead.`,
        );
      return s.t;
    });
  }

  /** After backward (retainGraph false): drop everything that can hold tensors, the backward
   * closure and ctx included, so a kept output (the loss) does not keep the step's activations. */
  release(): void {
    if (!this.released)
      for (const st of this.savedStorages) {
        st.savedBy = Math.max(0, st.savedBy - 1);
        // an op's intermediate that only autograd kept (tensor.ts, freeOpTemporaries): no one else can read it
        if (st.savedBy === 0 && st.internal) st.dispose();
      }
    this.savedStorages = [];
    this.released = true;
    this.saved = null;
    this.vjp = releasedVjp;
    this.ctx = {};
  }
}

/** The node that accumulates into a leaf's .grad. */
export class AccumulateGrad extends Node {
  // runs as soon as it is ready (PyTorch gives it the largest sequence number): post-accumulate
  // hooks (DDP's all-reduces) then fire while the rest of backward still computes
  override readonly seq = Number.MAX_SAFE_INTEGER;
  constructor(readonly variable: Tensor) {
    super("AccumulateGrad", [], [], () => [], [
      { shape: [...variable.shape], dtype: variable.dtype, device: variable.device },
    ]);
  }
  override release(): void {}
}
