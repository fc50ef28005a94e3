// Parallelism degrees from the config, checked against the world size (TorchTitan's ParallelDims):
// dp_replicate x dp_shard x cp x tp x pp = world, with data_parallel_shard_degree = -1 taking the
// ranks the others leave. Ranks are laid out as TorchTitan's mesh [pp, dp_replicate, dp_shard, cp, tp]
// (tp innermost), which gives each rank its data-parallel rank (the data shard it reads).
import { ConfigError } from "./config/parse.js";
import type { JobConfig } from "./config/job.js";

export interface ParallelDims {
  world: number;
  dpReplicate: number;
  dpShard: number;
  tp: number;
  pp: number;
  cp: number;
  /** dp_replicate x dp_shard: the ranks that read different data. */
  dp: number;
  /** tp x pp x cp: devices that share one data-parallel rank's tokens. */
  nonDataParallelSize: number;
}

export function parallelDims(c: JobConfig["parallelism"], world: number): ParallelDims {
  const { data_parallel_replicate_degree: dpReplicate, tensor_parallel_degree: tp, pipeline_parallel_degree: pp, context_parallel_degree: cp } = c;
  const others = dpReplicate * tp * pp * cp;
  let dpShard = c.data_parallel_shard_degree;
  if (dpShard === -1) {
    if (world % others !== 0)
      throw new ConfigError(`parallelism: world size ${world} is not divisible by data_parallel_replicate_degree x tensor_parallel_degree x pipeline_parallel_degree x context_parallel_degree = ${others}`);
    dpShard = world / others;
  }
  const product = others * dpShard;
  if (product !== world)
    throw new ConfigError(
      `parallelism: data_parallel_replicate_degree (${dpReplicate}) x data_parallel_shard_degree (${dpShard}) x tensor_parallel_degree (${tp}) x pipeline_parallel_degree (${pp}) x context_parallel_degree (${cp}) = ${product}, but the world size is ${world}`,
    );
  return { world, dpReplicate, dpShard, tp, pp, cp, dp: dpReplicate * dpShard, nonDataParallelSize: tp * pp * cp };
}

/** This rank's data-parallel rank in the mesh [pp, dp_replicate, dp_shard, cp, tp]. */
export function dataParallelRank(d: ParallelDims, rank: number): number {
  return Math.floor(rank / (d.cp * d.tp)) % d.dp;
}

/** Global batch size and gradient-accumulation steps; the global batch must split evenly. */
export function batchPlan(t: JobConfig["training"], dp: number): { globalBatch: number; accumulation: number } {
  const perStep = t.local_batch_size * dp;
  const globalBatch = t.global_batch_size === -1 ? perStep : t.global_batch_size;
  if (globalBatch % perStep !== 0)
    throw new ConfigError(`training.global_batch_size (${globalBatch}) must be a multiple of local_batch_size (${t.local_batch_size}) x data-parallel degree (${dp}) = ${perStep}`);
  return { globalBatch, accumulation: globalBatch / perStep };
}

/** What this torchts build cannot run yet (the parser accepts it: the config is valid for a cluster). */
export function unsupported(d: ParallelDims, available: { ddp: boolean; fsdp: boolean }): string | null {
  if (d.tp > 1) return `tensor_parallel_degree = ${d.tp}: tensor parallelism (parallelize_module) is not in torchts yet`;
  if (d.pp > 1) return `pipeline_parallel_degree = ${d.pp}: pipeline parallelism is not in torchts yet`;
  if (d.cp > 1) return `context_parallel_degree = ${d.cp}: context parallelism is not in torchts yet`;
  if (d.dpShard > 1 && d.dpReplicate > 1) return "HSDP (data_parallel_replicate_degree and data_parallel_shard_degree both > 1) is not in torchts yet";
  if (d.dpShard > 1 && !available.fsdp) return `data_parallel_shard_degree = ${d.dpShard}: FSDP2 (fully_shard) is not in this torchts build yet; use data_parallel_replicate_degree (DDP) instead`;
  if (d.dpReplicate > 1 && !available.ddp) return `data_parallel_replicate_degree = ${d.dpReplicate}: DistributedDataParallel is not in this torchts build yet`;
  return null;
}
