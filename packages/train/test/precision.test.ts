// training.mixed_precision_param = "bfloat16": the matmuls run under bf16 autocast (parameters and
// AdamW stay float32), so the losses follow the float32 run closely without being the same numbers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { buildConfig } from "../src/config/parse.js";
import { JOB_SCHEMA } from "../src/config/job.js";
import { train } from "../src/trainer.js";
import { RECIPES, tmp } from "./helpers.js";

test("bf16 autocast training tracks float32 within 2% over 10 steps, and differs from it", async () => {
  const losses: number[][] = [];
  for (const mp of ["float32", "bfloat16"]) {
    const c = buildConfig(JOB_SCHEMA, readFileSync(`${RECIPES}/qwen3_debug.toml`, "utf8"), "qwen3_debug.toml", [
      ["model.flavor", "tiny"], ["training.seq_len", "32"], ["training.local_batch_size", "4"], ["training.steps", "10"], ["training.mixed_precision_param", mp],
      ["checkpoint.enable", "false"], ["metrics.log_freq", "1"], ["metrics.peak_tflops", "0.01"], ["metrics.enable_plot", "false"], ["metrics.progress", "never"], ["job.dump_folder", tmp(mp)],
    ]);
    const lines: string[] = [];
    const r = await train(c, { out: (l) => lines.push(l) });
    if (mp === "bfloat16") assert.ok(lines.some((l) => l.includes("bf16 autocast")));
    losses.push(r.records.map((x) => x["loss_metrics/global_avg_loss"] as number));
  }
  const [f32, bf16] = losses as [number[], number[]];
  assert.equal(bf16.length, 10);
  assert.notDeepEqual(bf16, f32);
  f32.forEach((l, i) => assert.ok(Math.abs(bf16[i]! / l - 1) < 0.02, `step ${i + 1}: bf16 ${bf16[i]} vs float32 ${l}`));
});
