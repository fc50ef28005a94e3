// Data parallelism from torchts/distributed: DDP for data_parallel_replicate_degree, FSDP2's
// fullyShard (per decoder layer, then the root: TorchTitan's order, after activation checkpointing)
// for data_parallel_shard_degree; gradient clipping over sharded gradients.
import * as torch from "torchts";
import type { Tensor } from "torchts";
import type { ForwardOptions, CausalLMOutput } from "torchts/transformers";
import type { CausalLM } from "./model/build.js";
import type { ParallelDims } from "./parallel.js";

// torch.distributed, not the "torchts/distributed" entry: the repository CLI maps only "torchts" and
// "torchts/transformers" to the sources (@torchts/serve/cli's tsconfig), so another entry could load a
// second copy of torchts (its built dist/) whose Tensor class is not this one
const dist = torch.distributed;

export function distributedFeatures(): { ddp: boolean; fsdp: boolean; dcp: boolean } {
  const api = dist as unknown as Record<string, unknown>;
  return { ddp: typeof api.DistributedDataParallel === "function", fsdp: typeof api.fullyShard === "function", dcp: typeof api.checkpoint === "object" && api.checkpoint !== null };
}

/** What the step calls: the model's forward (through DDP's, which arms the gradient reduction), noSync and clipping. */
export interface DataParallelModel {
  forward(x: Tensor, o: ForwardOptions): CausalLMOutput;
  /** Run micro-batches before the last without reducing gradients (DDP); FSDP reduces each one. */
  noSync<T>(fn: () => T): T;
  /** Clip the gradients' total L2 norm to maxNorm; returns the norm before clipping. */
  clipGradNorm(params: Tensor[], maxNorm: number): Tensor;
  kind: "single" | "ddp" | "fsdp";
}

/**
 * clip_grad_norm_ over FSDP's sharded gradients: each rank's sum of squares of its shards, summed over
 * the shard group, is the squared total norm; every shard is scaled by the same factor.
 */
function clipShardedGradNorm(params: Tensor[], maxNorm: number): Tensor {
  return torch.noGrad(() => {
    const grads = params.map((p) => p.grad).filter((g): g is Tensor => g !== null);
    const local = (g: Tensor) => (g instanceof dist.tensor.DTensor ? g.toLocal() : g);
    const sq = torch.stack(grads.map((g) => local(g).float().pow(2).sum())).sum().reshape([1]);
    dist.allReduce(sq, { op: dist.ReduceOp.SUM });
    const total = sq.sqrt().reshape([]);
    const coef = torch.clamp(total.add(1e-6).reciprocal().mul(maxNorm), null, 1);
    for (const g of grads) {
      const l = local(g);
      l.copy_(l.mul(coef.to(l.dtype)));
    }
    return total;
  });
}

export function wrapDataParallel(lm: CausalLM, dims: ParallelDims, o: { reshardAfterForward: "default" | "always" | "never" }): DataParallelModel {
  const clip = (params: Tensor[], maxNorm: number) => torch.nn.utils.clipGradNorm_(params, maxNorm);
  if (dims.dpReplicate > 1) {
    const ddp = new dist.DistributedDataParallel(lm);
    return { kind: "ddp", forward: (x, f) => ddp.forward(x, f) as CausalLMOutput, noSync: (fn) => ddp.noSync(fn), clipGradNorm: clip };
  }
  if (dims.dpShard > 1) {
    // TorchTitan: "default" reshards every block after forward but the root (whose backward comes first)
    const reshard = o.reshardAfterForward !== "never";
    for (const layer of lm.model.layers.children()) dist.fullyShard(layer, { reshardAfterForward: reshard });
    dist.fullyShard(lm, { reshardAfterForward: o.reshardAfterForward === "always" });
    return { kind: "fsdp", forward: (x, f) => lm.forward(x, f), noSync: (fn) => fn(), clipGradNorm: clipShardedGradNorm };
  }
  return { kind: "single", forward: (x, f) => lm.forward(x, f), noSync: (fn) => fn(), clipGradNorm: clip };
}
