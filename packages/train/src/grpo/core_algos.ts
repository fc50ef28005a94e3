// GRPO's losses as VeRL defines them (verl/trainer/ppo/core_algos.py), on [batch, response_len] tensors
// with a response mask (1 = a generated token, 0 = padding):
//   advantage  A_i = (r_i - mean_g) / (std_g + eps) over the responses of prompt group g (torch.std:
//              unbiased; a group of one has mean 0, std 1), broadcast over the response's tokens;
//   policy     ratio = exp(clamp(logp - logp_old, -20, 20)); L = max(-A ratio, -A clip(ratio, 1 - eps_low,
//              1 + eps_high)); dual clip: where A < 0, L = min(L, -A c) (c = clip_ratio_c, 3);
//   KL         k3 ("low_var_kl"): d = clamp(ref - logp, -20, 20); clamp(exp(d) - d - 1, -10, 10);
//   aggregate  token-mean: sum(L mask) / (sum(mask) + 1e-8), or the seq-mean variants.
import * as torch from "torchts";
import type { Tensor } from "torchts";

export type LossAggMode = "token-mean" | "seq-mean-token-sum" | "seq-mean-token-mean" | "seq-mean-token-sum-norm";
export type KlType = "low_var_kl" | "kl" | "abs" | "mse";

/** sum(x mask) / (sum(mask) + 1e-8) (verl_F.masked_mean over all elements). */
export function maskedMean(x: Tensor, mask: Tensor): Tensor {
  return x.mul(mask).sum().div(mask.sum().add(1e-8));
}

/**
 * Outcome advantages [bs, L] from one score per response and its group (prompt) id: (r - mean) / (std +
 * eps) within each group (r - mean with normByStd false: Dr. GRPO), times the response mask.
 */
export function grpoAdvantages(scoresIn: Tensor, groups: readonly (string | number)[], responseMask: Tensor, o: { epsilon?: number; normByStd?: boolean } = {}): Tensor {
  const eps = o.epsilon ?? 1e-6;
  const scores = scoresIn.float();
  const bs = scores.shape[0]!;
  if (groups.length !== bs) throw new RangeError(`grpoAdvantages: ${groups.length} group ids for ${bs} scores`);
  const members = new Map<string | number, number[]>();
  groups.forEach((g, i) => members.set(g, [...(members.get(g) ?? []), i]));
  const mean = new Array<Tensor>(bs);
  const std = new Array<Tensor>(bs);
  for (const idx of members.values()) {
    let m: Tensor;
    let s: Tensor;
    if (idx.length === 1) [m, s] = [torch.tensor(0, { dtype: "float32" }), torch.tensor(1, { dtype: "float32" })];
    else {
      const g = scores.indexSelect(0, torch.tensor(idx, { dtype: "int64" }));
      [m, s] = [g.mean(), g.std()];
    }
    for (const i of idx) [mean[i], std[i]] = [m, s];
  }
  const mu = torch.stack(mean);
  const centered = scores.sub(mu);
  const adv = o.normByStd === false ? centered : centered.div(torch.stack(std).add(eps));
  return adv.unsqueeze(-1).mul(responseMask);
}

/** The loss matrix [bs, L] reduced as loss_agg_mode says. */
export function aggLoss(loss: Tensor, mask: Tensor, mode: LossAggMode): Tensor {
  switch (mode) {
    case "token-mean":
      return maskedMean(loss, mask);
    case "seq-mean-token-sum":
      return loss.mul(mask).sum(-1).mean();
    case "seq-mean-token-mean":
      return loss.mul(mask).sum(-1).div(mask.sum(-1)).mean();
    case "seq-mean-token-sum-norm":
      return loss.mul(mask).sum().div(mask.shape[mask.ndim - 1]!);
  }
}

export interface PolicyLossOptions {
  clipRatioLow: number;
  clipRatioHigh: number;
  /** The dual-clip bound for negative advantages (> 1). */
  clipRatioC: number;
  lossAggMode: LossAggMode;
}

export interface PolicyLoss {
  pgLoss: Tensor;
  /** Fraction of tokens where the clipped term was the larger (the clip was active). */
  pgClipfrac: Tensor;
  /** Fraction of tokens (A < 0) where the dual clip bound was the smaller. */
  pgClipfracLower: Tensor;
  /** masked mean of logp_old - logp. */
  ppoKl: Tensor;
}

export function policyLoss(oldLogProb: Tensor, logProb: Tensor, advantages: Tensor, mask: Tensor, o: PolicyLossOptions): PolicyLoss {
  if (!(o.clipRatioC > 1)) throw new RangeError(`clip_ratio_c (dual clip) must be > 1, got ${o.clipRatioC}`);
  const negKl = logProb.sub(oldLogProb).clamp(-20, 20);
  const ratio = negKl.exp();
  const ppoKl = maskedMean(negKl.neg(), mask);
  const l1 = advantages.neg().mul(ratio);
  const l2 = advantages.neg().mul(ratio.clamp(1 - o.clipRatioLow, 1 + o.clipRatioHigh));
  const clipped = torch.maximum(l1, l2);
  const pgClipfrac = maskedMean(l2.gt(l1).float(), mask);
  const l3 = advantages.neg().mul(o.clipRatioC);
  const dual = torch.minimum(l3, clipped);
  const negative = advantages.lt(0);
  const pgClipfracLower = maskedMean(clipped.gt(l3).logicalAnd(negative).float(), mask);
  const losses = torch.where(negative, dual, clipped);
  return { pgLoss: aggLoss(losses, mask, o.lossAggMode), pgClipfrac, pgClipfracLower, ppoKl };
}

/** Per-token KL estimate of the policy from the reference (VeRL's kl_penalty). */
export function klPenalty(logProb: Tensor, refLogProb: Tensor, type: KlType): Tensor {
  switch (type) {
    case "kl":
      return logProb.sub(refLogProb);
    case "abs":
      return logProb.sub(refLogProb).abs();
    case "mse":
      return logProb.sub(refLogProb).pow(2).mul(0.5);
    case "low_var_kl": {
      const kl = refLogProb.sub(logProb).clamp(-20, 20);
      return kl.exp().sub(kl).sub(1).clamp(-10, 10);
    }
  }
}

/** Entropy of each position's distribution [bs, L] from logits [bs, L, V]: logsumexp(z) - sum(softmax(z) z). */
export function entropyFromLogits(logits: Tensor): Tensor {
  const p = torch.softmax(logits, -1);
  return logits.logsumexp(-1).sub(p.mul(logits).sum(-1));
}

/** log p(token) [bs, L] of `tokens` [bs, L] under logits [bs, L, V]. */
export function tokenLogProbs(logits: Tensor, tokens: Tensor): Tensor {
  return torch.logSoftmax(logits.float(), -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
}
