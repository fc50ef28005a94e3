// The data-parallel wrappers torchts/distributed offers, found at run time: this package builds and
// runs single-process against a torchts without them, and uses them where they exist.
import * as dist from "torchts/distributed";
import type { ForwardOptions, CausalLMOutput } from "torchts/transformers";
import type { Tensor } from "torchts";
import type { CausalLM } from "./model/build.js";
import type { ParallelDims } from "./parallel.js";

interface DdpModule {
  forward(x: Tensor, o: ForwardOptions): CausalLMOutput;
  noSync<T>(fn: () => T): T;
}
type DdpClass = new (module: CausalLM, opts?: Record<string, unknown>) => DdpModule;

const api = dist as unknown as Record<string, unknown>;

export function distributedFeatures(): { ddp: boolean; fsdp: boolean; dcp: boolean } {
  return { ddp: typeof api.DistributedDataParallel === "function", fsdp: typeof api.fullyShard === "function", dcp: typeof api.checkpoint === "object" && api.checkpoint !== null };
}

/** What the step calls: the model's forward (through DDP's, which arms the gradient reduction) and noSync. */
export interface DataParallelModel {
  forward(x: Tensor, o: ForwardOptions): CausalLMOutput;
  noSync<T>(fn: () => T): T;
}

export function wrapDataParallel(lm: CausalLM, dims: ParallelDims): DataParallelModel {
  if (dims.dpReplicate > 1) {
    const DDP = api.DistributedDataParallel as DdpClass;
    const ddp = new DDP(lm);
    return { forward: (x, o) => ddp.forward(x, o), noSync: (fn) => ddp.noSync(fn) };
  }
  return { forward: (x, o) => lm.forward(x, o), noSync: (fn) => fn() };
}
