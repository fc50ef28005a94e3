// torch.distributed.tensor: DTensor, its placements, distributeTensor (and the DeviceMesh it lives on).
export { DTensor, DTensorParameter, isDTensor, type DTensorSpec } from "./dtensor.js";
export { distributeTensor } from "./api.js";
export { ShardP as Shard, ReplicateP as Replicate, PartialP as Partial, Placement, type PartialReduce } from "./placement.js";
export type { Shard as ShardPlacement, Replicate as ReplicatePlacement, Partial as PartialPlacement } from "./placement.js";
export { DeviceMesh, initDeviceMesh } from "../device_mesh.js";
export * as parallel from "./parallel/index.js";
