// torch.nn.parallel: DistributedDataParallel lives with the rest of torchts.distributed.
export { DistributedDataParallel, type DistributedDataParallelOptions } from "../distributed/ddp.js";
