// torch.distributed.fsdp (FSDP2): fullyShard and its MixedPrecisionPolicy.
export { fullyShard, fsdpGroup, MixedPrecisionPolicy, type FullyShardOptions } from "./fully_shard.js";
