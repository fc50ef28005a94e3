// `torchts train`'s job config: TorchTitan's TOML sections and key names (job, model, training,
// optimizer, lr_scheduler, parallelism, checkpoint, activation_checkpoint, compile, metrics), with the
// defaults of its debug model where TorchTitan has one. Cross-key rules live in validateJob.
import { bool, float, int, str, strList, type ConfigOf } from "./fields.js";
import { ConfigError } from "./parse.js";

const positiveOrAll = (v: number) => (v === -1 || v >= 1 ? null : "must be -1 (all remaining ranks) or >= 1");

export const JOB_SCHEMA = {
  job: {
    dump_folder: str("./outputs", "folder for metrics.jsonl, the plot and checkpoints (relative to the working directory)"),
    description: str("", "a line printed at start"),
  },
  model: {
    name: str("llama3", "model family", { choices: ["llama3", "qwen3"] as const }),
    flavor: str("debugmodel", "a named size of the family (see `torchts train --list-flavors`), or 'hf' to read hf_assets_path/config.json"),
    hf_assets_path: str("", "a Hugging Face folder: tokenizer.json (and config.json with flavor = 'hf'); empty: the built-in debug tokenizer"),
  },
  training: {
    dataset: str("tinyshakespeare", "'tinyshakespeare' (shipped), or a local .txt / .jsonl file"),
    dataset_path: str("", "a file that replaces the named dataset's location"),
    dataset_text_field: str("text", "the JSONL field holding each document's text"),
    local_batch_size: int(8, "sequences per data-parallel rank per micro-batch", { min: 1 }),
    global_batch_size: int(-1, "sequences per optimizer step over all ranks (-1: local_batch_size x data-parallel degree); more means gradient accumulation", { check: positiveOrAll }),
    seq_len: int(2048, "tokens per packed sequence", { min: 2 }),
    steps: int(10000, "optimizer steps", { min: 1 }),
    max_norm: float(1.0, "gradient clipping: max total L2 norm (<= 0: off)"),
    mixed_precision_param: str("float32", "autocast dtype of the matmuls (parameters and optimizer state stay float32)", { choices: ["float32", "bfloat16"] as const }),
    seed: int(0, "seed of the weights' init and the data order", { min: 0 }),
    device: str("cpu", "device to train on"),
    eager_mode: str("strict", "eager mode of the steps that are not compiled", { choices: ["strict", "fused"] as const }),
  },
  optimizer: {
    name: str("AdamW", "optimizer", { choices: ["AdamW"] as const }),
    lr: float(8e-4, "peak learning rate", { min: 0 }),
    eps: float(1e-8, "AdamW eps", { min: 0 }),
    beta1: float(0.9, "AdamW beta1", { min: 0, max: 1 }),
    beta2: float(0.95, "AdamW beta2", { min: 0, max: 1 }),
    weight_decay: float(0.1, "decoupled weight decay", { min: 0 }),
  },
  lr_scheduler: {
    warmup_steps: int(200, "linear warmup steps", { min: 0 }),
    decay_ratio: float(-1, "fraction of the steps spent decaying at the end (-1: decay over every step after warmup)", {
      check: (v) => (v === -1 || (v >= 0 && v <= 1) ? null : "must be -1 or in [0, 1]"),
    }),
    decay_type: str("linear", "shape of the decay", { choices: ["linear", "sqrt", "cosine"] as const }),
    min_lr_factor: float(0.0, "the decay ends at min_lr_factor x lr", { min: 0, max: 1 }),
  },
  parallelism: {
    data_parallel_replicate_degree: int(1, "DDP degree (replicas)", { min: 1 }),
    data_parallel_shard_degree: int(-1, "FSDP degree (-1: the ranks left over by the other degrees)", { check: positiveOrAll }),
    fsdp_reshard_after_forward: str("default", "FSDP: free gathered parameters after forward", { choices: ["default", "always", "never"] as const }),
    tensor_parallel_degree: int(1, "tensor-parallel degree", { min: 1 }),
    pipeline_parallel_degree: int(1, "pipeline-parallel degree", { min: 1 }),
    context_parallel_degree: int(1, "context-parallel degree", { min: 1 }),
  },
  checkpoint: {
    enable: bool(false, "save checkpoints"),
    folder: str("checkpoint", "checkpoint folder inside job.dump_folder"),
    interval: int(500, "save every this many steps (and at the last step)", { min: 1 }),
    load_step: int(-1, "resume from this step's checkpoint (-1: the latest one, if any; 0: start fresh)", { min: -1 }),
    keep_latest_k: int(10, "keep this many checkpoints (0: all)", { min: 0 }),
    async_mode: str("disabled", "'async': stage a copy of the state and write it while training continues", { choices: ["disabled", "async"] as const }),
  },
  activation_checkpoint: {
    mode: str("none", "recompute activations in backward", { choices: ["none", "full", "selective"] as const }),
    selective_ac_option: str("2", "selective: checkpoint every Nth layer (an integer; per-op selection is not supported)"),
  },
  compile: {
    enable: bool(false, "torch.compile the whole training step (forward, backward, clipping, optimizer)"),
    components: strList(["model", "loss"], "TorchTitan's compiled parts; both or neither (the step is compiled as one graph)"),
  },
  metrics: {
    log_freq: int(10, "log every this many steps", { min: 1 }),
    peak_tflops: float(-1, "peak TFLOP/s for MFU (-1: measure the device's matmul peak at start)"),
    enable_jsonl: bool(true, "write job.dump_folder/metrics.jsonl"),
    enable_plot: bool(true, "draw job.dump_folder/metrics.png (loss and MFU) at the end"),
    progress: str("auto", "progress bar", { choices: ["auto", "always", "never"] as const }),
  },
} as const;

export type JobConfig = ConfigOf<typeof JOB_SCHEMA>;

/** Rules across keys (the parser checks each key alone). */
export function validateJob(c: JobConfig): void {
  const ac = c.activation_checkpoint;
  if (ac.mode === "selective" && !/^[1-9]\d*$/.test(ac.selective_ac_option))
    throw new ConfigError(`activation_checkpoint.selective_ac_option must be a positive integer (checkpoint every Nth layer), got '${ac.selective_ac_option}' (per-op selective checkpointing is not supported)`);
  const comps = c.compile.components;
  for (const x of comps) if (x !== "model" && x !== "loss") throw new ConfigError(`compile.components: unknown component '${x}' (model, loss)`);
  if (c.compile.enable && comps.length !== 2) throw new ConfigError("compile.components: the step is compiled as one graph: list both 'model' and 'loss'");
  if (c.model.flavor === "hf" && !c.model.hf_assets_path) throw new ConfigError("model.flavor = 'hf' needs model.hf_assets_path (a folder with config.json)");
}
