// `torchts grpo`'s config: the model, the generated arithmetic data, a short SFT warm start, the
// sampler (the serve engine) and GRPO's actor settings under VeRL's names (actor_rollout_ref.actor.* and
// algorithm.*, flattened into [rollout] and [grpo]).
import { bool, float, int, str, type ConfigOf } from "../config/fields.js";
import { ConfigError } from "../config/parse.js";

export const GRPO_SCHEMA = {
  job: {
    dump_folder: str("./outputs/grpo", "folder for metrics.jsonl, the plot and the final model"),
    description: str("", "a line printed at start"),
  },
  model: {
    name: str("llama3", "model family", { choices: ["llama3", "qwen3"] as const }),
    flavor: str("tiny", "a named size of the family, or 'hf' to read hf_assets_path/config.json"),
    hf_assets_path: str("", "a Hugging Face folder: tokenizer.json (and config.json with flavor = 'hf'); empty: the built-in debug tokenizer"),
  },
  data: {
    train_size: int(2000, "generated training problems", { min: 1 }),
    max_operand: int(9, "operands are drawn from [0, max_operand]", { min: 1 }),
    seed: int(0, "seed of the problem set", { min: 0 }),
  },
  sft: {
    steps: int(100, "supervised steps on the worked solutions before GRPO (0: none)", { min: 0 }),
    batch_size: int(32, "sequences per SFT step", { min: 1 }),
    lr: float(3e-3, "SFT peak learning rate", { min: 0 }),
    warmup_steps: int(10, "SFT linear warmup", { min: 0 }),
  },
  rollout: {
    n: int(8, "responses sampled per prompt (the group)", { min: 2 }),
    temperature: float(1.0, "sampling temperature", { min: 0 }),
    top_p: float(1.0, "nucleus sampling", { min: 0, max: 1 }),
    max_response_length: int(16, "new tokens per response at most", { min: 1 }),
  },
  grpo: {
    steps: int(60, "GRPO steps (one rollout batch and its updates each)", { min: 1 }),
    train_batch_size: int(8, "prompts per step", { min: 1 }),
    ppo_mini_batch_size: int(4, "prompts per policy update (their n responses each)", { min: 1 }),
    ppo_epochs: int(1, "passes over each step's rollouts", { min: 1 }),
    lr: float(1e-4, "actor peak learning rate", { min: 0 }),
    warmup_style: str("constant", "actor LR schedule after warmup: constant, or cosine decay to min_lr_ratio x lr over the steps", { choices: ["constant", "cosine"] as const }),
    lr_warmup_steps: int(0, "actor linear LR warmup steps", { min: 0 }),
    min_lr_ratio: float(0.0, "cosine: the final LR as a fraction of lr", { min: 0, max: 1 }),
    weight_decay: float(0.01, "actor AdamW weight decay", { min: 0 }),
    max_norm: float(1.0, "gradient clipping (<= 0: off)"),
    clip_ratio_low: float(0.2, "PPO clip: ratio >= 1 - clip_ratio_low", { min: 0, max: 1 }),
    clip_ratio_high: float(0.2, "PPO clip: ratio <= 1 + clip_ratio_high", { min: 0 }),
    clip_ratio_c: float(3.0, "dual clip bound for negative advantages (> 1)", { check: (v) => (v > 1 ? null : "must be > 1") }),
    use_kl_loss: bool(true, "KL to the frozen reference in the loss"),
    kl_loss_coef: float(0.001, "weight of the KL term", { min: 0 }),
    kl_loss_type: str("low_var_kl", "KL estimator (low_var_kl = k3)", { choices: ["low_var_kl", "kl", "abs", "mse"] as const }),
    loss_agg_mode: str("token-mean", "loss aggregation", { choices: ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] as const }),
    entropy_coeff: float(0.0, "entropy bonus weight", { min: 0 }),
    norm_adv_by_std_in_grpo: bool(true, "divide advantages by the group std (false: Dr. GRPO)"),
  },
  training: {
    seed: int(0, "seed of the init, the prompt order and the sampler", { min: 0 }),
    device: str("cpu", "device"),
    compile: bool(true, "torch.compile the SFT step, the log-prob passes and the policy update (fixed shapes)"),
  },
  metrics: {
    log_freq: int(1, "log every this many GRPO steps", { min: 1 }),
    enable_jsonl: bool(true, "write job.dump_folder/metrics.jsonl"),
    enable_plot: bool(true, "draw job.dump_folder/metrics.png (reward, accuracy, KL, clip fraction, response length)"),
  },
} as const;

export type GrpoConfig = ConfigOf<typeof GRPO_SCHEMA>;

export function validateGrpo(c: GrpoConfig): void {
  const g = c.grpo;
  if (g.train_batch_size % g.ppo_mini_batch_size !== 0)
    throw new ConfigError(`grpo.train_batch_size (${g.train_batch_size}) must be a multiple of grpo.ppo_mini_batch_size (${g.ppo_mini_batch_size})`);
  if (c.data.train_size < g.train_batch_size) throw new ConfigError(`data.train_size (${c.data.train_size}) is smaller than one batch of grpo.train_batch_size (${g.train_batch_size})`);
  if (c.model.flavor === "hf" && !c.model.hf_assets_path) throw new ConfigError("model.flavor = 'hf' needs model.hf_assets_path (a folder with config.json)");
}
