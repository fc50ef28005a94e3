#!/usr/bin/env node
// torchts command line: run Hugging Face checkpoints.
//   torchts generate --model DIR (--prompt TEXT | --input-ids 1,2,3) [--max-new-tokens N] [--greedy]
//                    [--device cpu|webgpu] [--json] [--mode strict|fused|compiled] [--dtype D]
//                    [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S]
//   torchts chat --model DIR [--max-new-tokens N] [--system TEXT] ...   (one user message per stdin line)
//   torchts logits --model DIR --input-ids 1,2,3 [--json]
//   torchts serve --model DIR [--port 8000] ...   (the OpenAI-compatible server of @torchts/serve)
//   torchts bench serve --base-url URL ...   (@torchts/serve's benchmark client, as vllm bench serve)
//   torchts convert --model DIR --to tflite|onnx ...   (torch.export, then LiteRT or ONNX: src/export/cli.ts)
import { parseArgs } from "node:util";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import * as torch from "./index.js";
import {
  AutoModelForCausalLM, AutoTokenizer, type GenerateOptions, type PreTrainedModel, type PreTrainedTokenizer,
} from "./transformers/index.js";

const USAGE = `usage:
  torchts generate --model DIR (--prompt TEXT | --input-ids 1,2,3) [--max-new-tokens N] [--greedy] [--device cpu|webgpu] [--json]
  torchts chat --model DIR [--system TEXT] [--max-new-tokens N] [--greedy]
  torchts logits --model DIR --input-ids 1,2,3 [--json]
  torchts serve --model DIR [--host H] [--port P] [--api-key KEY] ...   (torchts serve --help)
  torchts router --config router.yaml | --replica URL ... [--port P]   (torchts router --help)
  torchts train --config recipes/NAME.toml [--section.key value ...]   (torchts train --help)
  torchts grpo --config recipes/grpo_arith.toml [--section.key value ...]   (torchts grpo --help)
  torchts run --nproc-per-node N [--nnodes N|MIN:MAX] [--max-restarts K] ... script.(ts|js) [args]   (torchts run --help)
  torchts bench serve --base-url URL [--num-prompts N] [--request-rate R] ...   (torchts bench serve --help)
  torchts convert --model DIR|FILE --to tflite|onnx [--quantize int8|float16] [--out FILE]   (torchts convert --help)
common: --mode strict|fused|compiled  --dtype float32|float16|bfloat16  sampling: --temperature --top-k --top-p --min-p --repetition-penalty --seed`;

const OPTIONS = {
  model: { type: "string" },
  prompt: { type: "string" },
  "input-ids": { type: "string" },
  "max-new-tokens": { type: "string" },
  greedy: { type: "boolean" },
  device: { type: "string" },
  json: { type: "boolean" },
  mode: { type: "string" },
  dtype: { type: "string" },
  temperature: { type: "string" },
  "top-k": { type: "string" },
  "top-p": { type: "string" },
  "min-p": { type: "string" },
  "repetition-penalty": { type: "string" },
  seed: { type: "string" },
  system: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

class UsageError extends Error {}

function num(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new UsageError(`--${flag}: expected a number, got '${v}'`);
  return n;
}

function parseIds(s: string): number[] {
  const ids = s.split(",").map((x) => x.trim()).filter((x) => x !== "").map(Number);
  if (!ids.length || ids.some((x) => !Number.isInteger(x) || x < 0)) throw new UsageError(`--input-ids: expected comma-separated token ids, got '${s}'`);
  return ids;
}

type Values = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };

async function loadTokenizer(dir: string): Promise<PreTrainedTokenizer | null> {
  try {
    return await AutoTokenizer.fromPretrained(dir);
  } catch (e) {
    if (/tokenizer\.json not found/.test((e as Error).message)) return null;
    throw e;
  }
}

/** A streamer that prints each new token's text as the decoded reply grows (skipping the stop tokens given). */
function textStreamer(tok: PreTrainedTokenizer, skip: number[] = []): GenerateOptions["streamer"] {
  let printed = "";
  const newIds: number[] = [];
  return ({ token }) => {
    if (skip.includes(token)) return;
    newIds.push(token);
    const text = tok.decode(newIds, { skipSpecialTokens: true });
    process.stdout.write(text.slice(printed.length));
    printed = text;
  };
}

/** Sampling settings: flags, else generation_config.json, else greedy. */
async function generateOptions(v: Values, dir: string): Promise<GenerateOptions> {
  let gen: Record<string, unknown> = {};
  try {
    gen = JSON.parse(await readFile(join(dir, "generation_config.json"), "utf8")) as Record<string, unknown>;
  } catch {
    /* optional file */
  }
  const o: GenerateOptions = {
    maxNewTokens: num(v["max-new-tokens"], "max-new-tokens") ?? 32,
    doSample: v.greedy ? false : v.temperature !== undefined || v["top-k"] !== undefined || v["top-p"] !== undefined || v["min-p"] !== undefined || gen.do_sample === true,
    temperature: num(v.temperature, "temperature") ?? (gen.temperature as number | undefined),
    topK: num(v["top-k"], "top-k") ?? (gen.top_k as number | undefined),
    topP: num(v["top-p"], "top-p") ?? (gen.top_p as number | undefined),
    minP: num(v["min-p"], "min-p") ?? (gen.min_p as number | undefined),
    repetitionPenalty: num(v["repetition-penalty"], "repetition-penalty") ?? (gen.repetition_penalty as number | undefined),
    seed: num(v.seed, "seed"),
  };
  return o;
}

async function loadModel(v: Values): Promise<PreTrainedModel> {
  if (!v.model) throw new UsageError("--model DIR is required");
  return AutoModelForCausalLM.fromPretrained(v.model, { deviceMap: v.device ?? "cpu", dtype: v.dtype as torch.DType | undefined });
}

async function cmdGenerate(v: Values): Promise<void> {
  const model = await loadModel(v);
  const tok = await loadTokenizer(v.model!);
  let ids: number[];
  if (v["input-ids"] !== undefined) ids = parseIds(v["input-ids"]);
  else if (v.prompt !== undefined) {
    if (!tok) throw new UsageError(`--prompt needs ${join(v.model!, "tokenizer.json")}; use --input-ids instead`);
    ids = tok.encode(v.prompt);
  } else throw new UsageError("generate needs --prompt TEXT or --input-ids 1,2,3");
  const o = await generateOptions(v, v.model!);
  o.compile = v.mode === "compiled";
  if (tok?.eosTokenId !== null && tok?.eosTokenId !== undefined && !model.config.eosTokenId.length) o.stopTokenIds = [tok.eosTokenId];
  if (!v.json) {
    let n = 0;
    o.streamer = tok ? textStreamer(tok) : ({ token }) => process.stdout.write(`${n++ ? "," : ""}${token}`);
  }
  const out = await model.generate(ids, o);
  if (v.json) {
    const result: Record<string, unknown> = { input_ids: ids, new_tokens: out.newTokens[0], sequence: out.sequences[0] };
    if (tok) result.text = tok.decode(out.newTokens[0]!, { skipSpecialTokens: true });
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } else process.stdout.write("\n");
}

async function cmdLogits(v: Values): Promise<void> {
  if (v["input-ids"] === undefined) throw new UsageError("logits needs --input-ids 1,2,3");
  const ids = parseIds(v["input-ids"]);
  const model = await loadModel(v);
  const forward = (x: torch.Tensor) => torch.noGrad(() => model.forward(x).logits);
  const run = v.mode === "compiled" ? torch.compile(forward, { modules: [model], name: "logits" }) : forward;
  const logits = run(torch.tensor([ids], { device: model.device })).float();
  const rows = (await logits.tolist()) as number[][][];
  if (v.json) process.stdout.write(`${JSON.stringify({ shape: logits.shape, logits: rows })}\n`);
  else for (const [i, row] of rows[0]!.entries()) process.stdout.write(`${i}\targmax=${row.indexOf(Math.max(...row))}\t${row.slice(0, 8).map((x) => x.toFixed(4)).join(" ")} ...\n`);
}

async function cmdChat(v: Values): Promise<void> {
  const model = await loadModel(v);
  const tok = await loadTokenizer(v.model!);
  if (!tok) throw new UsageError(`chat needs ${join(v.model!, "tokenizer.json")}`);
  const base = await generateOptions(v, v.model!);
  base.compile = v.mode === "compiled";
  const stop = [...new Set([...(tok.eosTokenId !== null ? [tok.eosTokenId] : []), ...model.config.eosTokenId])];
  const messages: { role: string; content: string }[] = v.system ? [{ role: "system", content: v.system }] : [];
  const rl = createInterface({ input: process.stdin, terminal: false });
  const interactive = process.stdin.isTTY;
  if (interactive) process.stdout.write("> ");
  for await (const line of rl) {
    if (!line.trim()) continue;
    messages.push({ role: "user", content: line });
    const ids = tok.applyChatTemplate(messages, { addGenerationPrompt: true, tokenize: true });
    const out = await model.generate(ids, { ...base, stopTokenIds: stop, streamer: textStreamer(tok, stop) });
    process.stdout.write("\n");
    messages.push({ role: "assistant", content: tok.decode(out.newTokens[0]!, { skipSpecialTokens: true }) });
    if (interactive) process.stdout.write("> ");
  }
}

// `serve` lives in the @torchts/serve workspace package, which depends on torchts; torchts only
// imports it at run time, by a name tsc does not follow, so the layering stays one-way.
const SERVE_CLI: string = "@torchts/serve/cli";

async function cmdServe(argv: string[], entry: "main" | "bench" = "main"): Promise<number> {
  let serve: { main(argv: string[]): Promise<number>; bench(argv: string[]): Promise<number> };
  try {
    serve = (await import(SERVE_CLI)) as typeof serve;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if ((err.code === "ERR_MODULE_NOT_FOUND" || err.code === "MODULE_NOT_FOUND") && err.message.includes("@torchts/serve")) {
      process.stderr.write("torchts serve: the @torchts/serve package is not installed (in the repository: npm ci; elsewhere: npm install @torchts/serve)\n");
      return 1;
    }
    throw e;
  }
  return serve[entry](argv);
}

// `router` lives in @torchts/router, imported the same way (by a name tsc does not follow).
const ROUTER_CLI: string = "@torchts/router/cli";

async function cmdRouter(argv: string[]): Promise<number> {
  let router: { main(argv: string[]): Promise<number> };
  try {
    router = (await import(ROUTER_CLI)) as typeof router;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if ((err.code === "ERR_MODULE_NOT_FOUND" || err.code === "MODULE_NOT_FOUND") && err.message.includes("@torchts/router")) {
      process.stderr.write("torchts router: the @torchts/router package is not installed (in the repository: npm ci; elsewhere: npm install @torchts/router)\n");
      return 1;
    }
    throw e;
  }
  return router.main(argv);
}

// `train` and `grpo` live in @torchts/train, imported the same way.
const TRAIN_CLI: string = "@torchts/train/cli";

async function cmdTrain(cmd: "train" | "grpo", argv: string[]): Promise<number> {
  let train: Record<"train" | "grpo", (argv: string[]) => Promise<number>>;
  try {
    train = (await import(TRAIN_CLI)) as typeof train;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if ((err.code === "ERR_MODULE_NOT_FOUND" || err.code === "MODULE_NOT_FOUND") && err.message.includes("@torchts/train")) {
      process.stderr.write(`torchts ${cmd}: the @torchts/train package is not installed (in the repository: npm ci; elsewhere: npm install @torchts/train)\n`);
      return 1;
    }
    throw e;
  }
  return train[cmd](argv);
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === "serve") return cmdServe(rest);
  if (cmd === "router") return cmdRouter(rest);
  if (cmd === "train" || cmd === "grpo") return cmdTrain(cmd, rest);
  if (cmd === "run") return (await import("./distributed/launcher/agent.js")).main(rest); // torchrun for torchts scripts
  if (cmd === "bench") return cmdServe(rest, "bench");
  if (cmd === "convert") return (await import("./export/cli.js")).main(rest); // torch.export to .tflite / .onnx
  let v: Values;
  try {
    v = parseArgs({ args: rest, options: OPTIONS, strict: true, allowPositionals: false }).values as Values;
  } catch (e) {
    process.stderr.write(`torchts: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (!cmd || v.help || cmd === "help" || cmd === "--help" || cmd === "-h") {
    process.stdout.write(`${USAGE}\n`);
    return cmd ? 0 : 2;
  }
  if (v.mode) {
    if (!["strict", "fused", "debug", "compiled"].includes(v.mode)) {
      process.stderr.write(`torchts: --mode must be strict, fused, debug or compiled, got '${v.mode}'\n`);
      return 2;
    }
    if (v.mode !== "compiled") torch.setEagerMode(v.mode as torch.EagerMode);
  }
  const commands: Record<string, (v: Values) => Promise<void>> = { generate: cmdGenerate, chat: cmdChat, logits: cmdLogits };
  const run = commands[cmd];
  if (!run) {
    process.stderr.write(`torchts: unknown command '${cmd}'\n${USAGE}\n`);
    return 2;
  }
  try {
    await run(v);
    return 0;
  } catch (e) {
    process.stderr.write(`torchts ${cmd}: ${(e as Error).message}\n`);
    if (e instanceof UsageError) process.stderr.write(`${USAGE}\n`);
    return e instanceof UsageError ? 2 : 1;
  } finally {
    // Dawn keeps the process alive while a WebGPU device exists
    if (torch.webgpu.isInitialized()) torch.webgpu.shutdown();
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
