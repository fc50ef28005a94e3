// distributeTensor: a tensor every rank holds (the source rank's values count) laid out on a mesh.
import { noGrad } from "../../autograd/grad_mode.js";
import { Tensor } from "../../tensor.js";
import { broadcast } from "../collectives.js";
import type { DeviceMesh } from "../device_mesh.js";
import { DistError } from "../errors.js";
import { current, type ProcessGroup } from "../process_group.js";
import { DTensor, isDTensor, normalizePlacements } from "./dtensor.js";
import { Partial, type Placement, Replicate } from "./placement.js";
import "./redistribute.js";
import "./dispatch.js";
import "./rules_pointwise.js";
import "./rules_ops.js";

/** A group holding every rank of the mesh (its own for a 1-d mesh, the world's for a full mesh). */
export function meshGroup(mesh: DeviceMesh): ProcessGroup {
  if (mesh.ndim === 1) return mesh.getGroup(0);
  const world = current("DeviceMesh").world;
  if (mesh.ranks.length === world.size()) return world;
  throw new DistError("DeviceMesh: a sub-mesh of more than one dimension that is not the whole world is not supported");
}

/**
 * Lay `tensor` out on `deviceMesh` by `placements` (default: Replicate everywhere). The values of
 * rank `srcDataRank` (default: the mesh's first rank) are used: they are broadcast, then each rank
 * keeps its piece. Every rank of the mesh must call it with a tensor of the same shape and dtype.
 */
export function distributeTensor(tensor: Tensor, deviceMesh: DeviceMesh, placements?: readonly Placement[] | null, opts: { srcDataRank?: number | null } = {}): DTensor {
  if (!(tensor instanceof Tensor)) throw new TypeError("distributeTensor(): argument 'tensor' must be a Tensor");
  if (isDTensor(tensor)) throw new DistError("distributeTensor: the tensor is already a DTensor");
  const pl = normalizePlacements("distributeTensor", placements ?? deviceMesh.shape.map(() => new Replicate()), deviceMesh, tensor.ndim);
  if (pl.some((p) => p instanceof Partial)) throw new DistError("distributeTensor: Partial placements are not supported (distribute as Replicate, then redistribute)");
  const src = opts.srcDataRank ?? deviceMesh.ranks[0]!;
  if (!deviceMesh.ranks.includes(src)) throw new DistError(`distributeTensor: srcDataRank ${src} is not in the mesh`);
  const requiresGrad = tensor.requiresGrad;
  const full = noGrad(() => tensor.detach().contiguous().clone());
  if (deviceMesh.size() > 1) broadcast(full, src, { group: meshGroup(deviceMesh) });
  const rep = new DTensor(full, { mesh: deviceMesh, placements: pl.map(() => new Replicate()), shape: [...tensor.shape] });
  const out = pl.every((p) => p instanceof Replicate) ? rep : rep.redistribute(null, pl);
  if (requiresGrad) out._local.requiresGrad = true;
  return out;
}
