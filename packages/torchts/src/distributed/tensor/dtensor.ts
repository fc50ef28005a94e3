// DTensor (torch.distributed.tensor): a tensor of a global shape laid out over a DeviceMesh by one
// placement per mesh dimension; each rank holds its local piece (`toLocal()`). Its metadata (shape,
// dtype) are the global tensor's; its own storage holds nothing: ops on a DTensor go to
// dispatch.ts (through the op table's subclass hook), which runs them on the local pieces with
// sharding propagation. Anything that would read the (empty) global storage directly raises.
//
// Layout: mesh dimensions are applied left to right; Shard(d) on mesh dimension i splits what the
// earlier mesh dimensions left of tensor dim d with torch.chunk's rule, so uneven sizes give short
// (or empty) trailing shards.
import { getDevice } from "../../device/plugin.js";
import type { DType } from "../../ir/dtype.js";
import { contiguousStrides } from "../../ir/shape.js";
import { Parameter } from "../../nn/module.js";
import { Storage } from "../../runtime/storage.js";
import { Tensor, type NestedArray } from "../../tensor.js";
import type { HostArray } from "../../ir/dtype.js";
import type { DeviceMesh } from "../device_mesh.js";
import { DistError } from "../errors.js";
import { chunkRange, Placement, Replicate, Shard } from "./placement.js";

export interface DTensorSpec {
  mesh: DeviceMesh;
  placements: readonly Placement[];
  /** The global shape. */
  shape: readonly number[];
}

const noGlobalStorage = {
  land(): never {
    throw new DistError(
      "this operation reads a DTensor's global storage, which does not exist: it has no sharding rule for DTensor (use dtensor.toLocal() for the local piece or dtensor.fullTensor() for the whole tensor)",
    );
  },
  landed: () => Promise.resolve(),
};

/** The storage of a DTensor: empty, and raising on any read (a transfer that never lands). */
function globalStorage(dtype: DType): Storage {
  const st = new Storage(getDevice("cpu"), dtype, 0);
  st.transfer = noGlobalStorage;
  // freeing it (torch.scope disposing a DTensor made inside it) has nothing to wait for: only reads raise
  const free = st.dispose.bind(st);
  st.dispose = () => {
    st.transfer = null;
    free();
  };
  return st;
}

/** The local piece's shape and its offset in the global tensor, on the mesh coordinate `coord`. */
export function localLayout(shape: readonly number[], placements: readonly Placement[], meshShape: readonly number[], coord: readonly number[]): { shape: number[]; offsets: number[] } {
  const size = [...shape];
  const offsets = shape.map(() => 0);
  placements.forEach((p, i) => {
    if (!(p instanceof Shard)) return;
    const d = p.dim;
    const [o, s] = chunkRange(size[d]!, meshShape[i]!, coord[i]!);
    offsets[d]! += o;
    size[d] = s;
  });
  return { shape: size, offsets };
}

/** Size of tensor dim `d` that mesh dimension `level` splits (what the earlier mesh dims left of it). */
export function levelSize(shape: readonly number[], placements: readonly Placement[], meshShape: readonly number[], coord: readonly number[], d: number, level: number): number {
  let size = shape[d]!;
  for (let i = 0; i < level; i++) {
    const p = placements[i]!;
    if (p instanceof Shard && p.dim === d) size = chunkRange(size, meshShape[i]!, coord[i]!)[1];
  }
  return size;
}

export function normalizePlacements(fn: string, placements: readonly Placement[], mesh: DeviceMesh, ndim: number): Placement[] {
  if (!Array.isArray(placements)) throw new TypeError(`${fn}: placements must be a list of Placement`);
  if (placements.length !== mesh.ndim)
    throw new DistError(`${fn}: the mesh has ${mesh.ndim} dimension(s), so placements needs ${mesh.ndim} entries, got ${placements.length}`);
  return placements.map((p) => {
    if (!(p instanceof Placement)) throw new TypeError(`${fn}: placements must be Shard(dim), Replicate() or Partial(), got ${String(p)}`);
    if (p instanceof Shard) {
      if (p.dim < -ndim || p.dim >= ndim) throw new DistError(`${fn}: Shard(${p.dim}) is out of range for a ${ndim}-d tensor`);
      if (p.dim < 0) return new Shard(p.dim + ndim);
    }
    return p;
  });
}

const coordOf = (mesh: DeviceMesh): number[] => {
  const c = mesh.getCoordinate();
  if (!c) throw new DistError("DTensor: this rank is not part of the mesh");
  return c;
};

/** What DTensor and DTensorParameter share (mixed into both prototypes). */
export interface DTensorLike extends Tensor {
  _local: Tensor;
  _spec: DTensorSpec;
  readonly placements: readonly Placement[];
  readonly deviceMesh: DeviceMesh;
  toLocal(): Tensor;
  fullTensor(): Tensor;
  redistribute(mesh?: DeviceMesh | null, placements?: readonly Placement[]): DTensor;
  /** This rank's piece: its offset in the global tensor along every dim. */
  localOffsets(): number[];
}

export function isDTensor(v: unknown): v is DTensorLike {
  return v instanceof Tensor && (v as Partial_<DTensorLike>)._spec !== undefined;
}
type Partial_<T> = { [K in keyof T]?: T[K] };

// set by redistribute.ts (which imports this file)
export const hooks: { redistribute: ((x: DTensorLike, mesh: DeviceMesh, placements: Placement[]) => DTensor) | null; activate: () => void } = {
  redistribute: null,
  // dispatch.ts: the op table starts looking for DTensor arguments once one exists
  activate: () => {},
};

/** The DTensor behaviour, shared by DTensor and DTensorParameter (each delegates to these). */
const impl = {
  toLocal: (x: DTensorLike): Tensor => x._local,
  localOffsets: (x: DTensorLike): number[] => localLayout(x._spec.shape, x._spec.placements, x._spec.mesh.shape, coordOf(x._spec.mesh)).offsets,
  redistribute(x: DTensorLike, mesh?: DeviceMesh | null, placements?: readonly Placement[]): DTensor {
    const m = mesh ?? x._spec.mesh;
    if (!m.equals(x._spec.mesh)) throw new DistError("redistribute: moving a DTensor to another mesh is not supported");
    return hooks.redistribute!(x, m, normalizePlacements("redistribute", placements ?? x._spec.placements, m, x.ndim));
  },
  fullTensor: (x: DTensorLike): Tensor => impl.redistribute(x, null, x._spec.placements.map(() => new Replicate()))._local,
  getGrad(x: DTensorLike): DTensor | null {
    const g = x._local?.grad;
    if (!g) return null;
    return isDTensor(g) ? (g as DTensor) : new DTensor(g, x._spec);
  },
  setGrad(x: DTensorLike, g: Tensor | null): void {
    if (g === null) {
      if (x._local) x._local.grad = null;
      return;
    }
    if (!isDTensor(g)) throw new DistError("DTensor: its .grad must be a DTensor (got a plain Tensor)");
    if (g.shape.join() !== x.shape.join()) throw new RangeError(`assigned grad has data of a different size: [${g.shape.join(", ")}] vs [${x.shape.join(", ")}]`);
    const same = g._spec.placements.every((p, i) => p.equals(x._spec.placements[i]!));
    x._local.grad = (same ? g : g.redistribute(null, x._spec.placements))._local;
  },
  setRequiresGrad(x: DTensorLike, v: boolean): void {
    if (x._local) x._local.requiresGrad = v; // (Parameter's constructor sets it before _local exists)
  },
  toString: (x: DTensorLike): string =>
    `DTensor(local_tensor=${x._local.toString()}, device_mesh=${x._spec.mesh.toString()}, placements=(${x._spec.placements.map(String).join(", ")}))`,
};

type TensorCtor = abstract new (...args: any[]) => Tensor;

/**
 * What DTensor and DTensorParameter share (a DTensor is a Tensor or an nn.Parameter, and both
 * behave the same): accessors and methods that work on `_local` and `_spec` through `impl`.
 */
function withDTensorMembers<B extends TensorCtor>(Base: B) {
  abstract class DTensorMembers extends Base implements DTensorLike {
    declare _local: Tensor;
    declare _spec: DTensorSpec;
    /** What holdBeyondScopes holds with the DTensor: its local shard has the data. */
    override _innerTensors(): readonly Tensor[] {
      return [this._local];
    }
    get placements(): readonly Placement[] {
      return this._spec.placements;
    }
    get deviceMesh(): DeviceMesh {
      return this._spec.mesh;
    }
    toLocal(): Tensor {
      return impl.toLocal(this);
    }
    localOffsets(): number[] {
      return impl.localOffsets(this);
    }
    redistribute(mesh?: DeviceMesh | null, placements?: readonly Placement[]): DTensor {
      return impl.redistribute(this, mesh, placements);
    }
    fullTensor(): Tensor {
      return impl.fullTensor(this);
    }
    override get requiresGrad(): boolean {
      return this._local?.requiresGrad ?? false;
    }
    override set requiresGrad(v: boolean) {
      impl.setRequiresGrad(this, v);
    }
    override get isLeaf(): boolean {
      return this._local.isLeaf;
    }
    override get grad(): DTensor | null {
      return impl.getGrad(this);
    }
    override set grad(g: Tensor | null) {
      impl.setGrad(this, g);
    }
    /** Host reads of a DTensor read the whole tensor (a collective: every rank must call them). */
    override data(): Promise<HostArray> {
      return this.fullTensor().data();
    }
    override tolist(): Promise<NestedArray> {
      return this.fullTensor().tolist();
    }
    override item(): Promise<number> {
      return this.fullTensor().item();
    }
    override dispose(): void {
      this._local.dispose();
    }
    override toString(): string {
      return impl.toString(this);
    }
  }
  return DTensorMembers;
}

export class DTensor extends withDTensorMembers(Tensor) {
  /** @internal use DTensor.fromLocal or distributeTensor */
  constructor(local: Tensor, spec: DTensorSpec) {
    super(globalStorage(local.dtype), spec.shape, contiguousStrides([...spec.shape]), 0, local.dtype);
    this._local = local;
    this._spec = { mesh: spec.mesh, placements: [...spec.placements], shape: [...spec.shape] };
    hooks.activate();
  }

  /**
   * A DTensor from each rank's local piece. Without `shape` the pieces are taken to be even (the
   * global size of a sharded dim is the local size times the mesh size, as PyTorch assumes).
   */
  static fromLocal(local: Tensor, deviceMesh: DeviceMesh, placements: readonly Placement[], opts: { shape?: number[]; runCheck?: boolean } = {}): DTensor {
    if (!(local instanceof Tensor) || isDTensor(local)) throw new TypeError("DTensor.fromLocal: localTensor must be a (non-distributed) Tensor");
    const pl = normalizePlacements("DTensor.fromLocal", placements, deviceMesh, local.ndim);
    const shape = opts.shape ? [...opts.shape] : [...local.shape];
    if (!opts.shape) pl.forEach((p, i) => p instanceof Shard && (shape[p.dim]! *= deviceMesh.shape[i]!));
    const want = localLayout(shape, pl, deviceMesh.shape, coordOf(deviceMesh)).shape;
    if (want.join() !== local.shape.join())
      throw new DistError(`DTensor.fromLocal: the local tensor has shape [${local.shape.join(", ")}], but placements ${pl.map(String).join(", ")} of a [${shape.join(", ")}] tensor give this rank [${want.join(", ")}]`);
    return new DTensor(local, { mesh: deviceMesh, placements: pl, shape });
  }

  static override [Symbol.hasInstance](x: unknown): boolean {
    return isDTensor(x);
  }
}

/** An nn.Parameter that is a DTensor (what FSDP and tensor parallelism put in a module). */
export class DTensorParameter extends withDTensorMembers(Parameter) {
  constructor(data: DTensorLike, requiresGrad = true) {
    super(data, false);
    this._local = data._local;
    this._spec = data._spec;
    if (requiresGrad) this._local.requiresGrad = true;
  }
}
