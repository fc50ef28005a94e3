// The job config: TOML + `--section.key value` overrides, errors that name the key, the shipped
// recipes (debug ones and cluster ones, the latter validated against their intended world sizes).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { buildConfig, ConfigError, splitArgs } from "../src/config/parse.js";
import { JOB_SCHEMA, validateJob } from "../src/config/job.js";
import { GRPO_SCHEMA, validateGrpo } from "../src/grpo/config.js";
import { describeJob } from "../src/trainer.js";
import { batchPlan, dataParallelRank, parallelDims, unsupported } from "../src/parallel.js";
import { RECIPES } from "./helpers.js";

const recipe = (name: string) => readFileSync(`${RECIPES}/${name}`, "utf8");
const job = (toml: string | null, overrides: [string, string][] = []) => buildConfig(JOB_SCHEMA, toml, "job.toml", overrides);

test("defaults, then the TOML file, then the overrides", () => {
  const d = job(null);
  assert.equal(d.training.steps, 10000);
  assert.equal(d.metrics.log_freq, 10);
  const c = job("[training]\nsteps = 7\nseq_len = 64\n", [["training.steps", "100"]]);
  assert.equal(c.training.steps, 100);
  assert.equal(c.training.seq_len, 64);
  assert.equal(c.training.local_batch_size, 8); // untouched default
});

test("unknown sections and keys are errors that name them, with the file line", () => {
  assert.throws(() => job("[training]\nsteps = 5\nstepz = 3\n"), (e: Error) => e instanceof ConfigError && /job\.toml:3: unknown key 'training\.stepz' \(did you mean 'steps'\?\)/.test(e.message));
  assert.throws(() => job("[trainer]\nsteps = 5\n"), (e: Error) => /job\.toml:1: unknown section \[trainer\] \(did you mean 'training'\?\)/.test(e.message));
  assert.throws(() => job(null, [["training.stepz", "3"]]), (e: Error) => e instanceof ConfigError && /--training\.stepz: unknown key 'training\.stepz' \(did you mean 'training\.steps'\?\)/.test(e.message));
  assert.throws(() => job(null, [["nosuch.steps", "3"]]), /--nosuch\.steps: unknown section 'nosuch'/);
});

test("values are type- and range-checked", () => {
  assert.throws(() => job("[training]\nsteps = 1.5\n"), /job\.toml:2: training\.steps: expected an integer, got 1\.5/);
  assert.throws(() => job("[training]\nsteps = \"10\"\n"), /expected an integer, got a string/);
  assert.throws(() => job(null, [["training.steps", "ten"]]), /--training\.steps: expected an integer, got 'ten'/);
  assert.throws(() => job(null, [["training.steps", "0"]]), /--training\.steps must be >= 1/);
  assert.throws(() => job(null, [["model.name", "gpt2"]]), /--model\.name must be one of 'llama3', 'qwen3', got 'gpt2'/);
  assert.throws(() => job(null, [["compile.enable", "yes"]]), /expected true or false/);
  assert.throws(() => job("[optimizer]\nbeta2 = 1.5\n"), /optimizer\.beta2 must be <= 1/);
  assert.throws(() => job("[training\nsteps = 1\n"), (e: Error) => e instanceof ConfigError && /^job\.toml:1:\d+:/.test(e.message));
});

test("command-line splitting: --a.b v, --a.b=v, bare booleans, other flags", () => {
  const a = splitArgs(JOB_SCHEMA, ["--config", "x.toml", "--training.steps", "5", "--compile.enable", "--metrics.log_freq=2", "--validate"], ["config"], ["validate"]);
  assert.deepEqual(a.overrides, [["training.steps", "5"], ["compile.enable", "true"], ["metrics.log_freq", "2"]]);
  assert.equal(a.flags.get("config"), "x.toml");
  assert.equal(a.flags.get("validate"), "true");
  assert.throws(() => splitArgs(JOB_SCHEMA, ["--confg", "x"], ["config"]), /unknown option '--confg' \(did you mean 'config'\?\)/);
  assert.throws(() => splitArgs(JOB_SCHEMA, ["--training.steps"], ["config"]), /needs a value/);
  assert.throws(() => splitArgs(JOB_SCHEMA, ["stray"], ["config"]), /unexpected argument 'stray'/);
});

test("cross-key rules", () => {
  assert.throws(() => validateJob(job(null, [["activation_checkpoint.mode", "selective"], ["activation_checkpoint.selective_ac_option", "op"]])), /per-op selective checkpointing is not supported/);
  assert.throws(() => validateJob(job(null, [["compile.enable", "true"], ["compile.components", "model"]])), /list both 'model' and 'loss'/);
  assert.throws(() => validateJob(job(null, [["model.flavor", "hf"]])), /needs model\.hf_assets_path/);
  assert.throws(() => describeJob(job(null, [["model.flavor", "9B"]]), 1), /'9B' is not a llama3 flavor \(debugmodel, tiny, 8B, 70B, 405B, or 'hf'\)/);
  assert.throws(() => describeJob(job(null, [["model.flavor", "tiny"], ["training.seq_len", "5000"]]), 1), /seq_len \(5000\) exceeds the model's max_position_embeddings \(4096\)/);
});

test("parallel degrees multiply to the world size; -1 fills; data-parallel ranks and batch plans", () => {
  const p = job(null).parallelism;
  assert.deepEqual(parallelDims(p, 8), { world: 8, dpReplicate: 1, dpShard: 8, tp: 1, pp: 1, cp: 1, dp: 8, nonDataParallelSize: 1 });
  const tp = parallelDims({ ...p, tensor_parallel_degree: 8 }, 64);
  assert.equal(tp.dpShard, 8);
  assert.equal(tp.nonDataParallelSize, 8);
  // mesh [pp, dp_replicate, dp_shard, cp, tp]: the 8 tp ranks of a group read the same data
  assert.deepEqual([0, 7, 8, 63].map((r) => dataParallelRank(tp, r)), [0, 0, 1, 7]);
  assert.throws(() => parallelDims({ ...p, tensor_parallel_degree: 8 }, 60), /world size 60 is not divisible by .* = 8/);
  assert.throws(() => parallelDims({ ...p, data_parallel_shard_degree: 2, data_parallel_replicate_degree: 2 }, 8), /= 4, but the world size is 8/);
  const t = job(null).training;
  assert.deepEqual(batchPlan({ ...t, local_batch_size: 4, global_batch_size: 16 }, 2), { globalBatch: 16, accumulation: 2 });
  assert.deepEqual(batchPlan({ ...t, local_batch_size: 4 }, 2), { globalBatch: 8, accumulation: 1 });
  assert.throws(() => batchPlan({ ...t, local_batch_size: 4, global_batch_size: 12 }, 2), /global_batch_size \(12\) must be a multiple of local_batch_size \(4\) x data-parallel degree \(2\) = 8/);
  assert.match(unsupported(tp, { ddp: true, fsdp: true })!, /tensor parallelism .* is not in torchts yet/);
  assert.match(unsupported(parallelDims(p, 2), { ddp: true, fsdp: false })!, /FSDP2 .* is not in this torchts build yet/);
  assert.equal(unsupported(parallelDims({ ...p, data_parallel_replicate_degree: 2 }, 2), { ddp: true, fsdp: false }), null);
});

// the published parameter counts of the real models (model cards / safetensors metadata)
const CLUSTER: Record<string, { world: number; params: number; tol: number }> = {
  "llama3_8b.toml": { world: 8, params: 8_030_261_248, tol: 0 },
  "llama3_70b.toml": { world: 64, params: 70_553_706_496, tol: 0 },
  "qwen3_8b.toml": { world: 8, params: 8.19e9, tol: 0.005 },
  "qwen3_32b.toml": { world: 32, params: 32.8e9, tol: 0.005 },
};

test("every shipped recipe parses and validates; cluster recipes at their world sizes", () => {
  const files = readdirSync(RECIPES).filter((f) => f.endsWith(".toml"));
  for (const need of ["llama3_debug.toml", "qwen3_debug.toml", "grpo_arith.toml", ...Object.keys(CLUSTER)]) assert.ok(files.includes(need), need);
  for (const f of files) {
    if (f.startsWith("grpo")) {
      validateGrpo(buildConfig(GRPO_SCHEMA, recipe(f), f));
      continue;
    }
    const c = job(recipe(f));
    const cl = CLUSTER[f];
    const d = describeJob(c, cl?.world ?? 1);
    if (cl) {
      if (cl.tol === 0) assert.equal(d.params, cl.params, f);
      else assert.ok(Math.abs(d.params / cl.params - 1) < cl.tol, `${f}: ${d.params}`);
      assert.equal(d.dims.world, cl.world);
      // 6N + 12 L H Q T dominates by 6N at these sizes
      assert.ok(d.flopsPerToken > 6 * (d.params - d.cfg.vocabSize * d.cfg.hiddenSize), f);
    } else assert.equal(d.dims.world, 1, f);
  }
  // a cluster recipe on the wrong world size is refused
  assert.throws(() => describeJob(job(recipe("llama3_70b.toml")), 60), /not divisible/);
});
