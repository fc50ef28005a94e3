// Warmup-stable-decay learning rate (TorchTitan's lr_scheduler section) as a LambdaLR factor of the
// peak lr: linear warmup over warmup_steps (step s, 0-based, gets (s + 1) / (warmup + 1)), then 1,
// then over the last decay_steps a linear / sqrt / cosine decay to min_lr_factor.
import * as torch from "torchts";

export interface WsdOptions {
  steps: number;
  warmupSteps: number;
  /** Fraction of steps spent decaying; -1: every step after warmup. */
  decayRatio: number;
  decayType: "linear" | "sqrt" | "cosine";
  minLrFactor: number;
}

export function wsdFactor(step: number, o: WsdOptions): number {
  const warmup = o.warmupSteps;
  const decay = o.decayRatio < 0 ? o.steps - warmup : Math.round(o.steps * o.decayRatio);
  const stableEnd = Math.max(warmup, o.steps - decay);
  if (step < warmup) return (step + 1) / (warmup + 1);
  if (step < stableEnd || decay <= 0) return 1;
  const progress = Math.min(1, (step + 1 - stableEnd) / decay);
  const shape = o.decayType === "linear" ? 1 - progress : o.decayType === "sqrt" ? 1 - Math.sqrt(progress) : 0.5 * (1 + Math.cos(Math.PI * progress));
  return o.minLrFactor + (1 - o.minLrFactor) * shape;
}

export function wsdScheduler(opt: torch.optim.Optimizer, o: WsdOptions): torch.optim.lrScheduler.LambdaLR {
  return new torch.optim.lrScheduler.LambdaLR(opt, (s) => wsdFactor(s, o));
}
