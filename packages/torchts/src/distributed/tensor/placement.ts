// DTensor placements (torch.distributed.tensor's): how a tensor lies along one mesh dimension.
//   Shard(d):    split along tensor dim d with torch.chunk's rule (ceil-sized chunks; trailing ones
//                short or empty), one chunk per mesh coordinate
//   Replicate(): every coordinate holds the whole tensor
//   Partial(op): every coordinate holds a partial value; the tensor is their reduction (sum by default)
import type { ReduceOpName } from "../reduce_ops.js";

export type PartialReduce = "sum" | "avg" | "max" | "min";
const REDUCE_OPS: Record<PartialReduce, ReduceOpName> = { sum: "SUM", avg: "AVG", max: "MAX", min: "MIN" };

export abstract class Placement {
  isShard(dim?: number): this is Shard {
    return this instanceof Shard && (dim === undefined || this.dim === dim);
  }
  isReplicate(): this is Replicate {
    return this instanceof Replicate;
  }
  isPartial(): this is Partial {
    return this instanceof Partial;
  }
  abstract equals(o: Placement): boolean;
  abstract toString(): string;
}

export class Shard extends Placement {
  constructor(readonly dim: number) {
    super();
    if (!Number.isInteger(dim)) throw new TypeError(`Shard(): dim must be an integer, got ${String(dim)}`);
  }
  equals(o: Placement): boolean {
    return o instanceof Shard && o.dim === this.dim;
  }
  toString(): string {
    return `Shard(dim=${this.dim})`;
  }
}

export class Replicate extends Placement {
  equals(o: Placement): boolean {
    return o instanceof Replicate;
  }
  toString(): string {
    return "Replicate()";
  }
}

export class Partial extends Placement {
  readonly reduceOp: PartialReduce;
  constructor(reduceOp: PartialReduce = "sum") {
    super();
    if (!(reduceOp in REDUCE_OPS)) throw new TypeError(`Partial(): reduceOp must be one of ${Object.keys(REDUCE_OPS).join(", ")}, got ${String(reduceOp)}`);
    this.reduceOp = reduceOp;
  }
  get distOp(): ReduceOpName {
    return REDUCE_OPS[this.reduceOp];
  }
  equals(o: Placement): boolean {
    return o instanceof Partial && o.reduceOp === this.reduceOp;
  }
  toString(): string {
    return `Partial(${this.reduceOp})`;
  }
}

// PyTorch's constructors are called without `new` (Shard(0), Replicate()); both forms work here
type Ctor<A extends unknown[], T> = { (...a: A): T; new (...a: A): T };
function callable<A extends unknown[], T>(C: new (...a: A) => T): Ctor<A, T> {
  const f = function (this: unknown, ...a: A) {
    return new C(...a);
  } as unknown as Ctor<A, T>;
  Object.defineProperty(f, Symbol.hasInstance, { value: (x: unknown) => x instanceof C });
  Object.defineProperty(f, "name", { value: C.name });
  return f;
}
export const ShardP = callable(Shard);
export const ReplicateP = callable(Replicate);
export const PartialP = callable(Partial);

/** torch.chunk's split of `size` into `n`: [offset, length] of chunk `i`. */
export function chunkRange(size: number, n: number, i: number): [number, number] {
  const c = Math.ceil(size / n);
  const start = Math.min(i * c, size);
  return [start, Math.max(0, Math.min(size, start + c) - start)];
}
