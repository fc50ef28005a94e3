// The shipped GRPO recipe (fixed seed): the tiny model's mean reward over the last 20 GRPO steps is at
// least 1.5x the first 20's; the run logs VeRL's metrics, draws the PNG and saves a model folder that
// torchts/transformers loads.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AutoModelForCausalLM } from "torchts/transformers";
import { buildConfig } from "../src/config/parse.js";
import { GRPO_SCHEMA, validateGrpo } from "../src/grpo/config.js";
import { runGrpo } from "../src/grpo/trainer.js";
import { readJsonl, RECIPES, tmp } from "./helpers.js";

test("recipes/grpo_arith.toml: mean reward of the last 20 steps >= 1.5x the first 20", async (t) => {
  const dump = tmp("grpo");
  const c = buildConfig(GRPO_SCHEMA, readFileSync(join(RECIPES, "grpo_arith.toml"), "utf8"), "grpo_arith.toml", [["job.dump_folder", dump]]);
  validateGrpo(c);
  const t0 = performance.now();
  const lines: string[] = [];
  const r = await runGrpo(c, { out: (l) => lines.push(l) });
  const seconds = (performance.now() - t0) / 1000;
  assert.ok(r.rewards.length >= 40, "at least 40 GRPO steps");
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const [first, last] = [mean(r.rewards.slice(0, 20)), mean(r.rewards.slice(-20))];
  t.diagnostic(`SFT loss ${r.sftLoss?.toFixed(4)}; mean reward first 20 steps ${first.toFixed(4)}, last 20 ${last.toFixed(4)} (${(last / first).toFixed(2)}x); ${r.rewards.length} steps in ${seconds.toFixed(0)} s`);
  assert.ok(first > 0, "the SFT model answers some problems right");
  assert.ok(last >= 1.5 * first, `last 20 ${last} vs first 20 ${first}`);

  const recs = readJsonl(join(dump, "metrics.jsonl"));
  assert.equal(recs.length, r.rewards.length);
  for (const k of ["critic/score/mean", "accuracy", "actor/kl_loss", "actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl", "actor/pg_loss", "actor/grad_norm", "response_length/mean", "timing_s/gen"])
    assert.equal(typeof recs[0]![k], "number", k);
  assert.ok((recs[recs.length - 1]!["actor/kl_loss"] as number) > 0, "the policy moved away from the reference");
  assert.ok(recs.some((x) => (x["actor/pg_clipfrac"] as number) > 0), "the second mini-batch of a step is off-policy: some ratios clip");
  assert.ok(existsSync(join(dump, "metrics.png")));
  const saved = await AutoModelForCausalLM.fromPretrained(join(dump, "model"));
  assert.equal(saved.config.numHiddenLayers, 2);
});
