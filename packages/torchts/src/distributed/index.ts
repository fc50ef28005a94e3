// torchts.distributed: PyTorch's torch.distributed with camelCase names.
//   import { distributed as dist } from "torchts"   (or: import * as dist from "torchts/distributed")
export { TCPStore, DEFAULT_STORE_TIMEOUT, type TCPStoreOptions } from "./tcp_store.js";
export { DistError, DistBackendError, DistNetworkError, DistStoreError, DistTimeoutError } from "./errors.js";
