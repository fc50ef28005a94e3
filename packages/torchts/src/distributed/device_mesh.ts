// DeviceMesh and initDeviceMesh (torch.distributed.device_mesh): the world's ranks laid out as an
// n-dimensional array; each mesh dimension has, for every rank, the process group of the ranks
// that differ from it only along that dimension. Every process creates every group (newGroup's
// rule), in the same order, so the groups agree.
import { describe } from "./args.js";
import { DistError } from "./errors.js";
import { current, getRank, getWorldSize, newGroup, type ProcessGroup } from "./process_group.js";

const numelOf = (s: readonly number[]) => s.reduce((a, b) => a * b, 1);

export class DeviceMesh {
  readonly deviceType: string;
  /** The ranks, flattened row-major over `shape`. */
  readonly ranks: readonly number[];
  readonly shape: readonly number[];
  readonly meshDimNames: readonly string[] | null;
  private readonly groups: ProcessGroup[];
  private readonly coord: number[] | null;

  /** @internal use initDeviceMesh (or `mesh.get(name)` for a sub-mesh) */
  constructor(deviceType: string, ranks: readonly number[], shape: readonly number[], meshDimNames: readonly string[] | null, groups?: ProcessGroup[]) {
    this.deviceType = deviceType;
    this.ranks = ranks;
    this.shape = shape;
    this.meshDimNames = meshDimNames;
    const me = getRank();
    const at = ranks.indexOf(me);
    this.coord = at < 0 ? null : unravel(at, shape);
    this.groups = groups ?? this.makeGroups();
  }

  private makeGroups(): ProcessGroup[] {
    const mine: ProcessGroup[] = [];
    for (let d = 0; d < this.shape.length; d++) {
      // every line of the mesh along dim d, in row-major order of the other coordinates
      const others = this.shape.map((s, k) => (k === d ? 1 : s));
      for (let j = 0; j < numelOf(others); j++) {
        const base = unravel(j, others);
        const members = Array.from({ length: this.shape[d]! }, (_, i) => this.ranks[ravel(base.map((c, k) => (k === d ? i : c)), this.shape)]!);
        const g = this.shape.length === 1 && members.length === getWorldSize() && sameSet(members) ? current("DeviceMesh").world : newGroup(members);
        if (this.coord && members.includes(getRank())) mine[d] = g;
      }
    }
    return mine;
  }

  get ndim(): number {
    return this.shape.length;
  }
  /** Number of ranks along `meshDim` (all of them without it). */
  size(meshDim?: number | string): number {
    return meshDim === undefined ? this.ranks.length : this.shape[this.dimIndex(meshDim)]!;
  }
  /** The process group of this rank's line along `meshDim` (a 1-d mesh's only one by default). */
  getGroup(meshDim?: number | string): ProcessGroup {
    if (meshDim === undefined && this.ndim !== 1)
      throw new DistError(`Found the DeviceMesh have ${this.ndim} dimensions. Optional kwarg \`mesh_dim\` needs to be specified when device_mesh.ndim > 1.`);
    if (!this.coord) throw new DistError("getGroup: this rank is not part of the mesh");
    return this.groups[this.dimIndex(meshDim ?? 0)]!;
  }
  /** This rank's coordinate along `meshDim` (null coordinates when not in the mesh). */
  getLocalRank(meshDim?: number | string): number {
    if (meshDim === undefined && this.ndim !== 1) throw new DistError("getLocalRank: meshDim must be given for a mesh of more than one dimension");
    if (!this.coord) throw new DistError("getLocalRank: this rank is not part of the mesh");
    return this.coord[this.dimIndex(meshDim ?? 0)]!;
  }
  getCoordinate(): number[] | null {
    return this.coord ? [...this.coord] : null;
  }
  /** The global rank at `coordinate`. */
  rankAt(coordinate: readonly number[]): number {
    return this.ranks[ravel(coordinate, this.shape)]!;
  }

  dimIndex(meshDim: number | string): number {
    if (typeof meshDim === "string") {
      const i = this.meshDimNames?.indexOf(meshDim) ?? -1;
      if (i < 0) throw new DistError(`Mesh dimension '${meshDim}' does not exist. Available mesh dimensions are: mesh_dim_names=${JSON.stringify(this.meshDimNames ?? [])}`);
      return i;
    }
    if (!Number.isInteger(meshDim) || meshDim < -this.ndim || meshDim >= this.ndim)
      throw new DistError(`mesh dimension ${String(meshDim)} is out of range for a ${this.ndim}-d mesh`);
    return meshDim < 0 ? meshDim + this.ndim : meshDim;
  }

  /** The 1-d sub-mesh of this rank along the named dimension (PyTorch's mesh["dp"]). */
  get(name: string): DeviceMesh {
    const d = this.dimIndex(name);
    if (!this.coord) throw new DistError("DeviceMesh: this rank is not part of the mesh");
    const members = Array.from({ length: this.shape[d]! }, (_, i) => this.rankAt(this.coord!.map((c, k) => (k === d ? i : c))));
    return new DeviceMesh(this.deviceType, members, [this.shape[d]!], [name], [this.groups[d]!]);
  }

  equals(o: DeviceMesh): boolean {
    return this === o || (o.deviceType === this.deviceType && o.shape.join() === this.shape.join() && o.ranks.join() === this.ranks.join());
  }

  toString(): string {
    const names = this.meshDimNames ? `, mesh_dim_names=(${this.meshDimNames.map((n) => `'${n}'`).join(", ")})` : "";
    return `DeviceMesh('${this.deviceType}', ${nested(this.ranks, this.shape)}${names})`;
  }
}

function sameSet(members: number[]): boolean {
  return members.every((r, i) => r === i);
}

function unravel(i: number, shape: readonly number[]): number[] {
  const c = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    c[d] = i % shape[d]!;
    i = Math.floor(i / shape[d]!);
  }
  return c;
}

function ravel(c: readonly number[], shape: readonly number[]): number {
  let i = 0;
  for (let d = 0; d < shape.length; d++) i = i * shape[d]! + c[d]!;
  return i;
}

function nested(ranks: readonly number[], shape: readonly number[]): string {
  if (shape.length === 1) return `[${ranks.join(", ")}]`;
  const inner = numelOf(shape.slice(1));
  return `[${Array.from({ length: shape[0]! }, (_, i) => nested(ranks.slice(i * inner, (i + 1) * inner), shape.slice(1))).join(", ")}]`;
}

/**
 * initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] }): the world's ranks as a mesh of
 * that shape (row-major: rank r has coordinate unravel(r)). Every process must call it.
 */
export function initDeviceMesh(deviceType: string, meshShape: number[], opts: { meshDimNames?: string[] } = {}): DeviceMesh {
  if (deviceType !== "cpu") throw new DistError(`initDeviceMesh: device type '${deviceType}' is not supported (the TCP backend communicates cpu tensors)`);
  if (!Array.isArray(meshShape) || !meshShape.length || meshShape.some((s) => !Number.isInteger(s) || s < 1))
    throw new TypeError(`initDeviceMesh(): meshShape must be a non-empty list of positive integers, got ${describe(meshShape)}`);
  const n = getWorldSize();
  if (numelOf(meshShape) !== n) throw new DistError(`initDeviceMesh: mesh shape [${meshShape.join(", ")}] has ${numelOf(meshShape)} ranks but the world size is ${n}`);
  const names = opts.meshDimNames ?? null;
  if (names) {
    if (names.length !== meshShape.length)
      throw new DistError(`mesh_shape and mesh_dim_names should have same length! Found len(mesh_dim_names): ${names.length} and len(mesh_shape):${meshShape.length}.`);
    if (new Set(names).size !== names.length) throw new DistError(`Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names ${JSON.stringify(names)}`);
  }
  return new DeviceMesh(deviceType, [...Array(n).keys()], [...meshShape], names ? [...names] : null);
}
