// torchts.distributed: PyTorch's torch.distributed with camelCase names.
//   import { distributed as dist } from "torchts"   (or: import * as dist from "torchts/distributed")
//   await dist.initProcessGroup({ backend: "gloo" });   // env:// (set by `torchts run`) or tcp://host:port
//   dist.allReduce(t);                                  // returns at once; reading t waits for the result
//   const w = dist.allReduce(g, { asyncOp: true }); ...; await w.wait();
export { TCPStore, DEFAULT_STORE_TIMEOUT, type TCPStoreOptions } from "./tcp_store.js";
export { DistError, DistBackendError, DistNetworkError, DistStoreError, DistTimeoutError } from "./errors.js";
export { ReduceOp, type ReduceOpName } from "./reduce_ops.js";
export {
  ProcessGroup, DEFAULT_PG_TIMEOUT, initProcessGroup, isInitialized, isAvailable, isGlooAvailable, isNcclAvailable,
  getRank, getWorldSize, getBackend, getProcessGroupRanks, getGlobalRank, getGroupRank, newGroup, destroyProcessGroup,
  getDefaultStore, group,
} from "./process_group.js";
export {
  allReduce, broadcast, reduce, allGather, allGatherIntoTensor, reduceScatter, reduceScatterTensor, allToAllSingle, allToAll,
  gather, scatter, send, recv, isend, irecv, barrier, monitoredBarrier,
} from "./collectives.js";
export { Work } from "./work.js";
export { DistributedDataParallel, DEFAULT_FIRST_BUCKET_BYTES, type DistributedDataParallelOptions } from "./ddp.js";
export { computeBucketAssignmentBySize } from "./ddp_buckets.js";
export { DeviceMesh, initDeviceMesh } from "./device_mesh.js";
export * as tensor from "./tensor/index.js";
export * as deviceMesh from "./device_mesh.js";
export { allGatherObject, broadcastObjectList } from "./object_collectives.js";
export * as checkpoint from "./checkpoint/index.js";
export * as fsdp from "./fsdp/index.js";
export { fullyShard, MixedPrecisionPolicy } from "./fsdp/index.js";
export * as pipelining from "./pipelining/index.js";
export * as embedding from "./embedding/index.js";
