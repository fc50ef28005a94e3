// Data parallelism through `torchts run`: llama3 (tiny) with DDP at N = 2 reaches the single-process
// losses (same global batch and seed) within 1% at every step to 100; each rank reads its own shard;
// DCP checkpoints written by two ranks resume a single process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { lossByStep, readJsonl, RECIPES, runCli, tmp, TORCHTS_BIN } from "./helpers.js";

const args = (dump: string, extra: string[]) => [
  "train", "--config", join(RECIPES, "llama3_debug.toml"), "--model.flavor", "tiny", "--training.seq_len", "32", "--training.steps", "100",
  "--training.global_batch_size", "8", "--compile.enable", "false", "--metrics.peak_tflops", "0.05", "--metrics.log_freq", "1",
  "--metrics.enable_plot", "false", "--checkpoint.interval", "50", "--checkpoint.async_mode", "disabled", "--job.dump_folder", dump, ...extra,
];
const launch = (n: number) => ["run", "--nproc-per-node", String(n), TORCHTS_BIN];

test("DDP at N = 2 matches N = 1 within 1% over 100 steps (same global batch, same seed)", async (t) => {
  const one = tmp("n1");
  const a = await runCli(args(one, ["--training.local_batch_size", "8"]));
  assert.equal(a.code, 0, a.stderr);
  const ddp = tmp("ddp2");
  const b = await runCli([...launch(2), ...args(ddp, ["--training.local_batch_size", "4", "--parallelism.data_parallel_replicate_degree", "2"])]);
  assert.equal(b.code, 0, `${b.stdout.slice(-2000)}\n${b.stderr.slice(-2000)}`);
  assert.match(b.stdout, /world 2: dp_replicate 2 x dp_shard 1/);
  const want = lossByStep(readJsonl(join(one, "metrics.jsonl")));
  const got = lossByStep(readJsonl(join(ddp, "metrics.jsonl")));
  assert.equal(got.size, 100);
  let worst = 0;
  for (let s = 1; s <= 100; s++) worst = Math.max(worst, Math.abs(got.get(s)! / want.get(s)! - 1));
  t.diagnostic(`loss at step 100: N=1 ${want.get(100)}, DDP N=2 ${got.get(100)}; largest relative difference over the 100 steps ${worst.toExponential(2)}`);
  assert.ok(worst < 0.01, `largest relative loss difference ${worst}`);
  assert.ok(want.get(100)! < want.get(1)! - 0.5, "the runs learned");

  // the 2-rank DCP checkpoint of step 50 resumes one process: its steps 51-100 follow the N=1 run
  const resumed = await runCli(args(ddp, ["--training.local_batch_size", "8", "--checkpoint.load_step", "50", "--job.dump_folder", ddp]));
  assert.equal(resumed.code, 0, resumed.stderr);
  const after = lossByStep(readJsonl(join(ddp, "metrics.jsonl")));
  for (const s of [51, 75, 100]) assert.ok(Math.abs(after.get(s)! / want.get(s)! - 1) < 0.01, `step ${s}: ${after.get(s)} vs ${want.get(s)}`);
});
