// Throughput of the llama3_debug recipe at N = 1 and N = 2 (DDP and FSDP through `torchts run`) on this
// machine: tokens/s per rank, the total, MFU against the measured matmul peak, and the scaling
// efficiency total(N = 2) / (2 x tokens/s of N = 1) at the same local batch per rank. `torchts run` gives
// each of several workers one compute thread; the baseline for the efficiency is N = 1 on one thread
// (one "device"), the same process on all cores is listed too.
//   node --import tsx bench/train_scaling.ts [--steps 30] [--out bench/RESULTS.md]
// The first logged window (compilation, warm-up) is left out of the averages.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { steps: { type: "string" }, out: { type: "string" }, "log-freq": { type: "string" } } });
const steps = Number(values.steps ?? 30);
const logFreq = Number(values["log-freq"] ?? 5);
const bin = fileURLToPath(new URL("../../torchts/bin/torchts.js", import.meta.url));
const recipe = fileURLToPath(new URL("../../../recipes/llama3_debug.toml", import.meta.url));

interface Run {
  name: string;
  ranks: number;
  extra: string[];
  env?: Record<string, string>;
}
const ONE_THREAD = { OMP_NUM_THREADS: "1", TORCHTS_NUM_THREADS: "1" };
const RUNS: Run[] = [
  { name: "N=1, compiled step", ranks: 1, extra: [] },
  { name: "N=1, strict eager", ranks: 1, extra: ["--compile.enable", "false"] },
  { name: "N=1, strict eager, 1 thread", ranks: 1, extra: ["--compile.enable", "false"], env: ONE_THREAD },
  { name: "N=2, DDP (eager)", ranks: 2, extra: ["--parallelism.data_parallel_replicate_degree", "2"] },
  { name: "N=2, FSDP (eager)", ranks: 2, extra: ["--parallelism.data_parallel_shard_degree", "2"] },
];

function run(cmd: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [bin, ...cmd], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    let out = "";
    c.stdout.on("data", (d: Buffer) => (out += d.toString()));
    c.stderr.on("data", (d: Buffer) => (out += d.toString()));
    c.on("close", (code) => resolve({ code, out }));
  });
}

const rows: string[] = [];
const results: { run: Run; tps: number; mfu: number; loss: number }[] = [];
for (const r of RUNS) {
  const dump = mkdtempSync(join(tmpdir(), "torchts-bench-train-"));
  const train = ["train", "--config", recipe, "--training.steps", String(steps), "--metrics.log_freq", String(logFreq), "--checkpoint.enable", "false",
    "--metrics.enable_plot", "false", "--metrics.progress", "never", "--job.dump_folder", dump, ...r.extra];
  const cmd = r.ranks > 1 ? ["run", "--nproc-per-node", String(r.ranks), bin, ...train] : train;
  const t0 = performance.now();
  const { code, out } = await run(cmd, r.env);
  if (code !== 0) throw new Error(`${r.name} failed:\n${out.slice(-3000)}`);
  const recs = readFileSync(join(dump, "metrics.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, number>).slice(1);
  const mean = (k: string) => recs.reduce((s, x) => s + x[k]!, 0) / recs.length;
  results.push({ run: r, tps: mean("throughput(tps)"), mfu: mean("mfu(%)"), loss: recs[recs.length - 1]!["loss_metrics/global_avg_loss"]! });
  process.stderr.write(`${r.name}: ${mean("throughput(tps)").toFixed(0)} tokens/s per rank, MFU ${mean("mfu(%)").toFixed(2)}% (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
  const peak = /peak ([\d.]+) TFLOP\/s/.exec(out)?.[1];
  if (peak) rows.push(`${r.name}: measured matmul peak ${peak} TFLOP/s`);
}
const base = results.find((x) => x.run.name === "N=1, strict eager, 1 thread")!;
const table = [
  "| run | tokens/s per rank | total tokens/s | MFU (%) | scaling efficiency vs N=1 eager on 1 thread | loss at the last step |",
  "|---|---:|---:|---:|---:|---:|",
  ...results.map((x) => {
    const total = x.tps * x.run.ranks;
    const eff = x.run.ranks > 1 ? `${((100 * total) / (x.run.ranks * base.tps)).toFixed(0)}%` : "-";
    return `| ${x.run.name} | ${x.tps.toFixed(0)} | ${total.toFixed(0)} | ${x.mfu.toFixed(2)} | ${eff} | ${x.loss.toFixed(4)} |`;
  }),
];
const report = [
  "## llama3_debug: throughput, MFU and data-parallel scaling (`node --import tsx bench/train_scaling.ts`)",
  "",
  `llama3_debug (4 layers, dim 256, 4.2M parameters), local batch 8 x 128 tokens per rank, ${steps} steps, averages over the log windows after the first;`,
  `${cpus().length} cpu cores (${cpus()[0]?.model ?? "?"}), shared with other work; MFU is per rank against the peak each process measured (${rows.join("; ")}).`,
  "",
  ...table,
].join("\n");
process.stdout.write(`${report}\n`);
if (values.out) writeFileSync(values.out, `${report}\n`);
