// `torchts train` and `torchts grpo` argument handling: --config FILE, `--section.key value` overrides,
// --validate (resolve and check the config, print the model and layout, train nothing), --help.
// Config mistakes exit 2 with a message naming the key; failures while training exit 1.
import { readFileSync } from "node:fs";
import { buildConfig, ConfigError, describeSchema, splitArgs } from "./config/parse.js";
import { JOB_SCHEMA, validateJob, type JobConfig } from "./config/job.js";
import { DatasetError } from "./data/dataset.js";
import { FLAVORS } from "./model/flavors.js";
import type { Schema, ConfigOf } from "./config/fields.js";

const TRAIN_USAGE = `usage: torchts train --config recipes/NAME.toml [--section.key value ...] [--validate [--world-size N]]
  --validate       resolve and check the config (model size, FLOPs per token, parallel layout) without training
  --world-size N   the world size --validate checks the parallelism degrees against (default: WORLD_SIZE or 1)
  --list-flavors   the named model sizes
launch on several processes with: npx torchts run --nproc-per-node N <torchts cli> train --config ...`;

const GRPO_USAGE = `usage: torchts grpo --config recipes/grpo_arith.toml [--section.key value ...] [--validate]`;

function readConfig<S extends Schema>(schema: S, argv: string[], usage: string): { config: ConfigOf<S>; flags: Map<string, string> } | number {
  const args = splitArgs(schema, argv, ["config", "world-size"], ["validate", "list-flavors"]);
  if (args.help) {
    process.stdout.write(`${usage}\n\nconfig keys (TOML sections; any key can be overridden as --section.key value):\n${describeSchema(schema)}\n`);
    return 0;
  }
  const file = args.flags.get("config");
  let text: string | null = null;
  if (file !== undefined) {
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      throw new ConfigError(`--config: cannot read ${file}: ${(e as Error).message}`);
    }
  }
  return { config: buildConfig(schema, text, file ?? "<defaults>", args.overrides), flags: args.flags };
}

function worldSize(flags: Map<string, string>): number {
  const w = flags.get("world-size") ?? process.env.WORLD_SIZE ?? "1";
  const n = Number(w);
  if (!Number.isSafeInteger(n) || n < 1) throw new ConfigError(`--world-size: expected a positive integer, got '${w}'`);
  return n;
}

async function guarded(command: string, usage: string, run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (e) {
    if (e instanceof ConfigError || e instanceof DatasetError) {
      process.stderr.write(`${command}: ${e.message}\n${usage.split("\n")[0]}\n`);
      return 2;
    }
    process.stderr.write(`${command}: ${(e as Error).stack ?? String(e)}\n`);
    return 1;
  }
}

export function trainMain(argv: string[]): Promise<number> {
  return guarded("torchts train", TRAIN_USAGE, async () => {
    const r = readConfig(JOB_SCHEMA, argv, TRAIN_USAGE);
    if (typeof r === "number") return r;
    const { config, flags } = r;
    if (flags.has("list-flavors")) {
      for (const [name, fl] of Object.entries(FLAVORS)) process.stdout.write(`${name}: ${Object.keys(fl).join(", ")}\n`);
      return 0;
    }
    validateJob(config);
    const { describeJob, train } = await import("./trainer.js");
    if (flags.has("validate")) {
      const d = describeJob(config, worldSize(flags));
      process.stdout.write(`${JSON.stringify({ ok: true, model: `${config.model.name} ${config.model.flavor}`, params: d.params, flops_per_token: d.flopsPerToken, seq_len: config.training.seq_len, global_batch_size: d.globalBatch, gradient_accumulation: d.accumulation, parallelism: d.dims })}\n`);
      return 0;
    }
    await train(config as JobConfig);
    return 0;
  });
}

export function grpoMain(argv: string[]): Promise<number> {
  return guarded("torchts grpo", GRPO_USAGE, async () => {
    const { GRPO_SCHEMA, validateGrpo } = await import("./grpo/config.js");
    const r = readConfig(GRPO_SCHEMA, argv, GRPO_USAGE);
    if (typeof r === "number") return r;
    validateGrpo(r.config);
    if (r.flags.has("validate")) {
      process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
      return 0;
    }
    const { runGrpo } = await import("./grpo/trainer.js");
    await runGrpo(r.config);
    return 0;
  });
}
