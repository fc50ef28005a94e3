// GRPO's pieces against PyTorch 1.13 on the same inputs (test/fixtures/grpo_reference.json, made by
// grpo_reference.py): group advantages (singleton and zero-variance groups), the clipped policy loss
// with dual clip under every aggregation mode, its clip fractions, the KL estimators, and gradients.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as torch from "torchts";
import { aggLoss, grpoAdvantages, klPenalty, maskedMean, policyLoss, type KlType, type LossAggMode } from "../src/grpo/core_algos.js";

interface Ref {
  inputs: { groups: number[]; scores: number[]; mask: number[][]; old_logp: number[][]; logp: number[][]; ref_logp: number[][] };
  advantages: number[][];
  advantages_no_std: number[][];
  policy: { clip_ratio_low: number; clip_ratio_high: number; clip_ratio_c: number; mode: LossAggMode; pg_loss: number; pg_clipfrac: number; pg_clipfrac_lower: number; ppo_kl: number; grad_logp: number[][] }[];
  kl: Record<KlType, { per_token: number[][]; token_mean: number; grad_logp: number[][] }>;
  total: { kl_coef: number; loss: number; grad_logp: number[][] };
}

const ref = JSON.parse(readFileSync(new URL("./fixtures/grpo_reference.json", import.meta.url), "utf8")) as Ref;
const T = (x: number[] | number[][]) => torch.tensor(x, { dtype: "float32" });
const mask = T(ref.inputs.mask);
const old = T(ref.inputs.old_logp);
const refLogp = T(ref.inputs.ref_logp);
const scores = T(ref.inputs.scores);

async function close(actual: torch.Tensor, expected: number[][] | number, tol: number, what: string): Promise<void> {
  const a = (await actual.tolist()) as number[][] | number;
  const flatA = ([] as number[]).concat(...(Array.isArray(a) ? a : [[a]]));
  const flatE = ([] as number[]).concat(...(Array.isArray(expected) ? expected : [[expected]]));
  assert.equal(flatA.length, flatE.length, what);
  flatA.forEach((v, i) => assert.ok(Math.abs(v - flatE[i]!) <= tol * Math.max(1, Math.abs(flatE[i]!)), `${what}[${i}]: ${v} vs torch ${flatE[i]}`));
}

test("group-normalized advantages equal torch's (r - mean) / (std + 1e-6), singletons: mean 0, std 1", async () => {
  const adv = grpoAdvantages(scores, ref.inputs.groups, mask);
  await close(adv, ref.advantages, 1e-6, "advantages");
  await close(grpoAdvantages(scores, ref.inputs.groups, mask, { normByStd: false }), ref.advantages_no_std, 1e-6, "advantages (Dr. GRPO)");
  // group [0, 0, 0] has std 0: every advantage is exactly 0; the singleton with score 1 keeps 1 / (1 + 1e-6)
  const rows = (await adv.tolist()) as number[][];
  assert.deepEqual(rows[4], [0, 0, 0, 0, 0, 0]);
  assert.ok(Math.abs(rows[6]![0]! - 1 / (1 + 1e-6)) < 1e-7);
  assert.throws(() => grpoAdvantages(scores, [0, 1], mask), /2 group ids for 8 scores/);
});

test("PPO clipped loss with dual clip, clip fractions and ppo_kl under every aggregation mode, and its gradient", async () => {
  const adv = T(ref.advantages);
  assert.ok(ref.policy.some((p) => p.pg_clipfrac_lower > 0), "the fixture exercises the dual clip");
  for (const p of ref.policy) {
    const lp = T(ref.inputs.logp).requiresGrad_(true);
    const r = policyLoss(old, lp, adv, mask, { clipRatioLow: p.clip_ratio_low, clipRatioHigh: p.clip_ratio_high, clipRatioC: p.clip_ratio_c, lossAggMode: p.mode });
    const what = `${p.mode} eps=(${p.clip_ratio_low}, ${p.clip_ratio_high}) c=${p.clip_ratio_c}`;
    await close(r.pgLoss, p.pg_loss, 1e-5, `${what} pg_loss`);
    await close(r.pgClipfrac, p.pg_clipfrac, 1e-6, `${what} pg_clipfrac`);
    await close(r.pgClipfracLower, p.pg_clipfrac_lower, 1e-6, `${what} pg_clipfrac_lower`);
    await close(r.ppoKl, p.ppo_kl, 1e-5, `${what} ppo_kl`);
    r.pgLoss.backward();
    await close(lp.grad!, p.grad_logp, 1e-5, `${what} d pg_loss / d logp`);
  }
  assert.throws(() => policyLoss(old, old, adv, mask, { clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 1, lossAggMode: "token-mean" }), /clip_ratio_c \(dual clip\) must be > 1/);
});

test("KL estimators (k3 low_var_kl with its clamps, k1, abs, k2) and their token-mean gradients", async () => {
  for (const kind of ["low_var_kl", "kl", "abs", "mse"] as const) {
    const lp = T(ref.inputs.logp).requiresGrad_(true);
    const k = klPenalty(lp, refLogp, kind);
    await close(k, ref.kl[kind].per_token, 1e-5, `${kind} per token`);
    const m = maskedMean(k, mask);
    await close(m, ref.kl[kind].token_mean, 1e-5, `${kind} token-mean`);
    m.backward();
    await close(lp.grad!, ref.kl[kind].grad_logp, 1e-5, `${kind} gradient`);
  }
  // the fixture has a token whose ref - logp is far below -20: k3 is clamped to 10 there
  const k3 = (await klPenalty(T(ref.inputs.logp), refLogp, "low_var_kl").tolist()) as number[][];
  assert.equal(k3[1]![1], 10);
});

test("the actor's total loss pg + kl_coef * k3 (token-mean) and its gradient", async () => {
  const lp = T(ref.inputs.logp).requiresGrad_(true);
  const pg = policyLoss(old, lp, T(ref.advantages), mask, { clipRatioLow: 0.2, clipRatioHigh: 0.2, clipRatioC: 3, lossAggMode: "token-mean" }).pgLoss;
  const total = pg.add(aggLoss(klPenalty(lp, refLogp, "low_var_kl"), mask, "token-mean").mul(ref.total.kl_coef));
  await close(total, ref.total.loss, 1e-5, "total loss");
  total.backward();
  await close(lp.grad!, ref.total.grad_logp, 1e-5, "total gradient");
});
