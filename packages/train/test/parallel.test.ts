// Data parallelism through `torchts run`: llama3 (tiny) with DDP and with FSDP2 at N = 2 reach the
// single-process losses (same global batch and seed) within 1% at every step to 100, and each other's;
// the DCP checkpoint FSDP's two ranks wrote (sharded) resumes a single process (resharded at load).
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { freePort, lossByStep, readJsonl, RECIPES, runCli, tmp, TORCHTS_BIN } from "./helpers.js";

const args = (dump: string, extra: string[]) => [
  "train", "--config", join(RECIPES, "llama3_debug.toml"), "--model.flavor", "tiny", "--training.seq_len", "32", "--training.steps", "100",
  "--training.global_batch_size", "8", "--compile.enable", "false", "--metrics.peak_tflops", "0.05", "--metrics.log_freq", "1",
  "--metrics.enable_plot", "false", "--checkpoint.interval", "50", "--checkpoint.async_mode", "disabled", "--job.dump_folder", dump, ...extra,
];
const launch = async (n: number) => ["run", "--nproc-per-node", String(n), "--master-port", String(await freePort()), TORCHTS_BIN];

test("DDP and FSDP at N = 2 match N = 1 within 1% over 100 steps (same global batch, same seed)", async (t) => {
  const one = tmp("n1");
  const ddp = tmp("ddp2");
  const fsdp = tmp("fsdp2");
  const [a, b, c] = await Promise.all([
    runCli(args(one, ["--training.local_batch_size", "8"])),
    runCli([...(await launch(2)), ...args(ddp, ["--training.local_batch_size", "4", "--parallelism.data_parallel_replicate_degree", "2"])]),
    runCli([...(await launch(2)), ...args(fsdp, ["--training.local_batch_size", "4", "--parallelism.data_parallel_shard_degree", "2"])]),
  ]);
  // stderr first (a crash's message is its first line), then the last steps the run logged
  for (const [name, r] of [["N=1", a], ["DDP", b], ["FSDP", c]] as const)
    assert.equal(r.code, 0, `the ${name} run exited with ${r.code}:\n${r.stderr.slice(0, 3000)}\n--- its last stdout:\n${r.stdout.slice(-600)}`);
  assert.match(b.stdout, /world 2: dp_replicate 2 x dp_shard 1/);
  assert.match(c.stdout, /world 2: dp_replicate 1 x dp_shard 2/);
  const want = lossByStep(readJsonl(join(one, "metrics.jsonl")));
  const worst = (m: Map<number, number>, ref: Map<number, number>) => {
    assert.equal(m.size, 100);
    let w = 0;
    for (let s = 1; s <= 100; s++) w = Math.max(w, Math.abs(m.get(s)! / ref.get(s)! - 1));
    return w;
  };
  const gotDdp = lossByStep(readJsonl(join(ddp, "metrics.jsonl")));
  const gotFsdp = lossByStep(readJsonl(join(fsdp, "metrics.jsonl")));
  const [wd, wf, wdf] = [worst(gotDdp, want), worst(gotFsdp, want), worst(gotFsdp, gotDdp)];
  t.diagnostic(`loss at step 100: N=1 ${want.get(100)}, DDP ${gotDdp.get(100)}, FSDP ${gotFsdp.get(100)}; largest relative difference over 100 steps: DDP-N1 ${wd.toExponential(2)}, FSDP-N1 ${wf.toExponential(2)}, FSDP-DDP ${wdf.toExponential(2)}`);
  for (const w of [wd, wf, wdf]) assert.ok(w < 0.01, `largest relative loss difference ${w}`);
  assert.ok(want.get(100)! < want.get(1)! - 0.5, "the runs learned");

  // FSDP's sharded step-50 checkpoint resumes one process: its steps 51-100 follow the N=1 run
  const resumed = await runCli(args(fsdp, ["--training.local_batch_size", "8", "--checkpoint.load_step", "50"]));
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stdout, /resumed from .*step-50/);
  const after = lossByStep(readJsonl(join(fsdp, "metrics.jsonl")));
  for (let s = 51; s <= 100; s++) assert.ok(Math.abs(after.get(s)! / want.get(s)! - 1) < 0.01, `step ${s}: ${after.get(s)} vs ${want.get(s)}`);
});
