// `torchts grpo`: VeRL's GRPO loop on a generated arithmetic task. A tiny model first learns the answer
// format by SFT on worked solutions (briefly: it answers some problems right, not most); then each step
//   1. the sampler (the serve engine) draws n responses for each of train_batch_size prompts;
//   2. the GSM8K scorer rewards each response (1 when its "#### <n>" is the answer);
//   3. advantages are normalized within each prompt's group;
//   4. log-probs of the responses under the current policy (old) and the frozen SFT model (reference);
//   5. for each mini-batch (ppo_epochs passes): PPO's clipped ratio with dual clip + k3 KL, token-mean,
//      one AdamW step; 6. the new weights go to the sampler.
// Metrics per step (mean reward, accuracy, KL, clip fraction, response length) go to JSONL and a PNG.
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "torchts";
import type { Tensor } from "torchts";
import type { PreTrainedTokenizer } from "torchts/transformers";
import { buildConfig, createModel, hfConfigFor, initWeights, type CausalLM } from "../model/build.js";
import { loadTokenizer } from "../trainer.js";
import { wsdScheduler } from "../lr.js";
import { lastPerStep, metricsPlotPng } from "../metrics/plot.js";
import { arithmeticProblems, mulberry32, promptOf, type Problem } from "./arith.js";
import type { GrpoConfig } from "./config.js";
import { aggLoss, entropyFromLogits, grpoAdvantages, klPenalty, policyLoss, tokenLogProbs } from "./core_algos.js";
import { gsm8kScore } from "./reward.js";
import { Sampler } from "./rollout.js";

export interface GrpoResult {
  /** One record per logged GRPO step. */
  records: Record<string, unknown>[];
  /** SFT loss at the end of the warm start. */
  sftLoss: number | null;
  /** Every GRPO step's mean reward, in order. */
  rewards: number[];
}

const yieldToEventLoop = () => new Promise<void>((r) => setImmediate(r));

/** A seeded endless stream of problem indices (a new shuffle per pass). */
function problemOrder(n: number, seed: number): () => number {
  const rnd = mulberry32(seed);
  let perm: number[] = [];
  return () => {
    if (!perm.length) {
      perm = Array.from({ length: n }, (_, i) => i);
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(rnd() * (i + 1));
        [perm[i], perm[j]] = [perm[j]!, perm[i]!];
      }
    }
    return perm.pop()!;
  };
}

interface Encoded {
  prompt: number[];
  solution: number[];
}

/** SFT: next-token loss on the solution (and its eos), the prompt masked out; rows right-padded to `len`. */
function sftBatch(rows: Encoded[], len: number, pad: number, eos: number | null): { x: Tensor; y: Tensor } {
  const x = new Int32Array(rows.length * len).fill(pad);
  const y = new Int32Array(rows.length * len).fill(-100);
  rows.forEach((r, b) => {
    const seq = [...r.prompt, ...r.solution, ...(eos !== null ? [eos] : [])].slice(0, len + 1);
    for (let t = 0; t + 1 < seq.length; t++) {
      x[b * len + t] = seq[t]!;
      if (t + 1 >= r.prompt.length) y[b * len + t] = seq[t + 1]!; // predicting a solution token
    }
  });
  return { x: torch.tensor(x, { dtype: "int32" }).to("int64").reshape(rows.length, len), y: torch.tensor(y, { dtype: "int32" }).to("int64").reshape(rows.length, len) };
}

interface RolloutBatch {
  /** [bs, P + R]: prompts left-padded to P, responses from column P, right-padded to R. */
  input: Tensor;
  attentionMask: Tensor;
  /** [bs, R] the response tokens and their mask. */
  responses: Tensor;
  responseMask: Tensor;
}

function rolloutBatch(prompts: number[][], rows: { group: number; tokens: number[] }[], P: number, R: number, pad: number): RolloutBatch {
  const bs = rows.length;
  const input = new Int32Array(bs * (P + R)).fill(pad);
  const am = new Int32Array(bs * (P + R));
  const resp = new Int32Array(bs * R).fill(pad);
  const rm = new Float32Array(bs * R);
  rows.forEach((r, b) => {
    const p = prompts[r.group]!;
    const o = b * (P + R);
    p.forEach((tok, i) => {
      input[o + P - p.length + i] = tok;
      am[o + P - p.length + i] = 1;
    });
    r.tokens.slice(0, R).forEach((tok, i) => {
      input[o + P + i] = tok;
      am[o + P + i] = 1;
      resp[b * R + i] = tok;
      rm[b * R + i] = 1;
    });
  });
  const i64 = (a: Int32Array, cols: number) => torch.tensor(a, { dtype: "int32" }).to("int64").reshape(bs, cols);
  return { input: i64(input, P + R), attentionMask: i64(am, P + R), responses: i64(resp, R), responseMask: torch.tensor(rm).reshape(bs, R) };
}

/** Log-probs [bs, R] of the response tokens, and the logits at their positions. */
function responseLogProbs(model: CausalLM, b: Pick<RolloutBatch, "input" | "attentionMask" | "responses">, P: number, R: number): { logp: Tensor; logits: Tensor } {
  const logits = model.forward(b.input, { attentionMask: b.attentionMask }).logits.narrow(1, P - 1, R); // position t predicts t + 1
  return { logp: tokenLogProbs(logits, b.responses), logits };
}

function rowsOf(b: RolloutBatch, ix: Tensor): RolloutBatch {
  return { input: b.input.indexSelect(0, ix), attentionMask: b.attentionMask.indexSelect(0, ix), responses: b.responses.indexSelect(0, ix), responseMask: b.responseMask.indexSelect(0, ix) };
}

async function saveModelFolder(model: CausalLM, hf: Record<string, unknown>, tok: PreTrainedTokenizer, dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), `${JSON.stringify({ ...hf, torch_dtype: "float32" }, null, 2)}\n`);
  const tensors: Record<string, Tensor> = {};
  for (const [k, v] of model.stateDict()) if (!(model.config.tieWordEmbeddings && k === "lm_head.weight")) tensors[k] = v.contiguous();
  await torch.safetensors.saveFile(tensors, join(dir, "model.safetensors"), { format: "pt" });
  writeFileSync(join(dir, "tokenizer.json"), `${JSON.stringify(tok.tokenizerJson)}\n`);
  writeFileSync(join(dir, "tokenizer_config.json"), `${JSON.stringify(tok.config, null, 1)}\n`);
}

export interface GrpoOptions {
  out?: (line: string) => void;
  /** The reward of a response's text for a problem (default: the GSM8K scorer against its answer). */
  reward?: (response: string, problem: Problem) => number;
}

export async function runGrpo(c: GrpoConfig, o: GrpoOptions = {}): Promise<GrpoResult> {
  const print = o.out ?? ((l: string) => process.stdout.write(`${l}\n`));
  const device = c.training.device;
  const seed = c.training.seed;
  torch.setEagerMode("strict");
  if (c.job.description) print(c.job.description);
  const tok = await loadTokenizer(c.model.hf_assets_path);
  const hf = hfConfigFor(c.model.name, c.model.flavor, c.model.hf_assets_path);
  const cfg = buildConfig(hf);
  const pad = tok.eosTokenId ?? 0;
  const eos = tok.eosTokenId;
  const problems: Problem[] = arithmeticProblems(c.data.train_size, c.data.seed, c.data.max_operand);
  const encoded: Encoded[] = problems.map((p) => ({ prompt: tok.encode(promptOf(p), { addSpecialTokens: false }), solution: tok.encode(p.solution, { addSpecialTokens: false }) }));
  const P = Math.max(...encoded.map((e) => e.prompt.length));
  const R = c.rollout.max_response_length;
  if (P + R > cfg.maxPositionEmbeddings) throw new RangeError(`prompt (${P}) + max_response_length (${R}) exceed the model's max_position_embeddings (${cfg.maxPositionEmbeddings})`);

  torch.manualSeed(seed);
  const policy = createModel(cfg, device);
  initWeights(policy, seed);
  const nParams = [...policy.parameters()].reduce((s, p) => s + p.numel(), 0);
  print(`model ${c.model.name} ${c.model.flavor}: ${nParams.toLocaleString("en-US")} parameters; ${problems.length} problems, prompts up to ${P} tokens, responses up to ${R}`);

  // ---- SFT warm start ----
  let sftLoss: number | null = null;
  if (c.sft.steps > 0) {
    const sftLen = Math.max(...encoded.map((e) => e.prompt.length + e.solution.length));
    const opt = new torch.optim.AdamW([...policy.parameters()], { lr: c.sft.lr, betas: [0.9, 0.95], weightDecay: 0.1 });
    const sched = wsdScheduler(opt, { steps: c.sft.steps, warmupSteps: Math.min(c.sft.warmup_steps, c.sft.steps), decayRatio: 0.3, decayType: "cosine", minLrFactor: 0.1 });
    const next = problemOrder(problems.length, seed + 1);
    const F = torch.nn.functional;
    const sftFn = (x: Tensor, y: Tensor) => {
      const logits = policy.forward(x).logits;
      const loss = F.crossEntropy(logits.view(-1, cfg.vocabSize), y.view(-1), { ignoreIndex: -100 });
      opt.zeroGrad({ setToNone: true });
      loss.backward();
      torch.nn.utils.clipGradNorm_([...policy.parameters()], 1.0);
      opt.step();
      return loss;
    };
    const sftStep = c.training.compile ? torch.compile(sftFn, { modules: [policy], name: "sft_step" }) : sftFn;
    const t0 = performance.now();
    for (let s = 1; s <= c.sft.steps; s++) {
      const rows = Array.from({ length: c.sft.batch_size }, () => encoded[next()]!);
      const { x, y } = sftBatch(rows, sftLen, pad, eos);
      sftLoss = await sftStep(x.to(device), y.to(device)).item();
      sched.step();
      if (s % 20 === 0 || s === c.sft.steps) print(`sft step ${String(s).padStart(4)}  loss: ${sftLoss.toFixed(4)}  (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
      await yieldToEventLoop();
    }
  }

  // ---- GRPO ----
  const g = c.grpo;
  const ref = createModel(cfg, device);
  torch.noGrad(() => ref.loadStateDict(policy.stateDict()));
  const sampler = new Sampler(createModel(cfg, device), tok, { maxNumSeqs: g.train_batch_size * c.rollout.n, maxModelLen: P + R + 1 });
  sampler.syncWeights(policy);
  const opt = new torch.optim.AdamW([...policy.parameters()], { lr: g.lr, betas: [0.9, 0.999], weightDecay: g.weight_decay });
  // VeRL's actor schedule: linear warmup, then constant or a cosine decay over the remaining steps
  const actorSched = wsdScheduler(opt, {
    steps: g.steps, warmupSteps: Math.min(g.lr_warmup_steps, g.steps), decayRatio: g.warmup_style === "cosine" ? -1 : 0, decayType: "cosine", minLrFactor: g.min_lr_ratio,
  });
  const next = problemOrder(problems.length, seed + 2);
  const n = c.rollout.n;
  const records: Record<string, unknown>[] = [];
  const rewards: number[] = [];
  const jsonl = c.metrics.enable_jsonl ? join(c.job.dump_folder, "metrics.jsonl") : null;
  if (jsonl) {
    mkdirSync(c.job.dump_folder, { recursive: true });
    writeFileSync(jsonl, "");
  }
  const maxNorm = g.max_norm > 0 ? g.max_norm : Infinity;
  const policyParams = [...policy.parameters()];
  const lossOpts = { clipRatioLow: g.clip_ratio_low, clipRatioHigh: g.clip_ratio_high, clipRatioC: g.clip_ratio_c, lossAggMode: g.loss_agg_mode };
  // one policy update on a mini-batch: loss, backward, clipping, AdamW (compiled: the shapes are fixed)
  const updateStep = (input: Tensor, am: Tensor, responses: Tensor, mask: Tensor, oldLp: Tensor, refLp: Tensor, advantages: Tensor): Tensor[] => {
    const { logp, logits } = responseLogProbs(policy, { input, attentionMask: am, responses }, P, R);
    const pl = policyLoss(oldLp, logp, advantages, mask, lossOpts);
    const kl = aggLoss(klPenalty(logp, refLp, g.kl_loss_type), mask, g.loss_agg_mode);
    let loss = g.use_kl_loss ? pl.pgLoss.add(kl.mul(g.kl_loss_coef)) : pl.pgLoss;
    const ent = g.entropy_coeff > 0 ? aggLoss(entropyFromLogits(logits), mask, g.loss_agg_mode) : null;
    if (ent) loss = loss.sub(ent.mul(g.entropy_coeff));
    opt.zeroGrad({ setToNone: true });
    loss.backward();
    const gn = torch.nn.utils.clipGradNorm_(policyParams, maxNorm);
    opt.step();
    return [pl.pgLoss.detach(), kl.detach(), pl.pgClipfrac, pl.pgClipfracLower, pl.ppoKl.detach(), gn, ...(ent ? [ent.detach()] : [])];
  };
  const logProbsOf = (m: CausalLM, name: string) => {
    const f = (input: Tensor, am: Tensor, responses: Tensor) => torch.noGrad(() => responseLogProbs(m, { input, attentionMask: am, responses }, P, R).logp);
    return c.training.compile ? torch.compile(f, { modules: [m], name }) : f;
  };
  const update = c.training.compile ? torch.compile(updateStep, { modules: [policy], name: "grpo_update" }) : updateStep;
  const [policyLogProbs, refLogProbs] = [logProbsOf(policy, "old_log_prob"), logProbsOf(ref, "ref_log_prob")];
  try {
    for (let step = 1; step <= g.steps; step++) {
      const t0 = performance.now();
      const batch = Array.from({ length: g.train_batch_size }, () => next());
      const prompts = batch.map((i) => encoded[i]!.prompt);
      const rolls = await sampler.generate(prompts, n, { temperature: c.rollout.temperature, topP: c.rollout.top_p, maxTokens: R, seed: seed * 1_000_003 + step * 10_007 });
      const tRollout = (performance.now() - t0) / 1000;
      const reward = o.reward ?? ((text: string, p: Problem) => gsm8kScore(text, p.answer));
      const scores = rolls.map((r) => reward(tok.decode(r.tokens, { skipSpecialTokens: true }), problems[batch[r.group]!]!));
      const rb = rolloutBatch(prompts, rolls, P, R, pad);
      const scoreT = torch.tensor(scores, { dtype: "float32" });
      const adv = grpoAdvantages(scoreT, rolls.map((r) => r.group), rb.responseMask, { normByStd: g.norm_adv_by_std_in_grpo });
      const [oldLogp, refLogp] = [policyLogProbs(rb.input, rb.attentionMask, rb.responses), refLogProbs(rb.input, rb.attentionMask, rb.responses)];
      const stats = { pgLoss: 0, kl: 0, clipfrac: 0, clipfracLower: 0, ppoKl: 0, gradNorm: 0, entropy: 0, updates: 0 };
      const perMini = g.ppo_mini_batch_size * n;
      for (let epoch = 0; epoch < g.ppo_epochs; epoch++) {
        for (let m0 = 0; m0 < rolls.length; m0 += perMini) {
          const ix = torch.arange(m0, m0 + perMini, { dtype: "int64" });
          const mb = rowsOf(rb, ix);
          const out = update(mb.input, mb.attentionMask, mb.responses, mb.responseMask, oldLogp.indexSelect(0, ix), refLogp.indexSelect(0, ix), adv.indexSelect(0, ix));
          const [pg, kl, cf, cfl, pkl, gn, ent] = await Promise.all(out.map((x) => x.item()));
          stats.pgLoss += pg!;
          stats.kl += kl!;
          stats.clipfrac += cf!;
          stats.clipfracLower += cfl!;
          stats.ppoKl += pkl!;
          stats.gradNorm += gn!;
          if (ent !== undefined) stats.entropy += ent;
          stats.updates++;
        }
      }
      sampler.syncWeights(policy);
      actorSched.step();
      const meanReward = scores.reduce((a, b) => a + b, 0) / scores.length;
      rewards.push(meanReward);
      const u = stats.updates;
      const rec: Record<string, unknown> = {
        step,
        "critic/score/mean": meanReward,
        accuracy: scores.filter((s) => s === 1).length / scores.length,
        "actor/kl_loss": stats.kl / u,
        "actor/pg_clipfrac": stats.clipfrac / u,
        "actor/pg_clipfrac_lower": stats.clipfracLower / u,
        "actor/ppo_kl": stats.ppoKl / u,
        "actor/pg_loss": stats.pgLoss / u,
        "actor/grad_norm": stats.gradNorm / u,
        ...(g.entropy_coeff > 0 ? { "actor/entropy": stats.entropy / u } : {}),
        "response_length/mean": await rb.responseMask.sum(-1).mean().item(),
        "timing_s/gen": tRollout,
        "timing_s/step": (performance.now() - t0) / 1000,
      };
      if (step % c.metrics.log_freq === 0 || step === g.steps) {
        records.push(rec);
        if (jsonl) appendFileSync(jsonl, `${JSON.stringify(rec)}\n`);
        print(
          `grpo step ${String(step).padStart(4)}  reward: ${meanReward.toFixed(3)}  kl: ${(stats.kl / u).toFixed(5)}  clipfrac: ${(stats.clipfrac / u).toFixed(3)}  ` +
            `len: ${(rec["response_length/mean"] as number).toFixed(1)}  gen: ${tRollout.toFixed(2)} s  step: ${(rec["timing_s/step"] as number).toFixed(2)} s`,
        );
      }
      await yieldToEventLoop();
    }
  } finally {
    await sampler.close();
  }
  if (c.metrics.enable_plot) {
    mkdirSync(c.job.dump_folder, { recursive: true });
    const png = await metricsPlotPng(`GRPO on arithmetic: ${c.model.name} ${c.model.flavor}`, lastPerStep(records), [
      { title: "mean reward", key: "critic/score/mean" },
      { title: "accuracy", key: "accuracy" },
      { title: "KL to reference (k3)", key: "actor/kl_loss" },
      { title: "clip fraction", key: "actor/pg_clipfrac" },
      { title: "response length (tokens)", key: "response_length/mean" },
    ]);
    writeFileSync(join(c.job.dump_folder, "metrics.png"), png);
  }
  await saveModelFolder(policy, hf, tok, join(c.job.dump_folder, "model"));
  return { records, sftLoss, rewards };
}
