// `torchts bench serve`: vLLM's `vllm bench serve` flags (the random dataset) over benchServe(); prints
// vLLM's result table on stdout and a progress bar (rate, ETA) on stderr.
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import cliProgress from "cli-progress";
import { BenchArgumentError, benchServe, ENDPOINTS, type BenchServeOptions, type BenchServeResult } from "./bench_serve.js";
import type { GoodputSlos } from "./metrics.js";
import { latencyPlotPng } from "./plot.js";
import { formatResult, jsonRecord } from "./report.js";
import type { Endpoint } from "./request.js";

export const USAGE = `usage: torchts bench serve [--base-url URL | --host 127.0.0.1 --port 8000] [--endpoint /v1/completions|/v1/chat/completions]
         [--model NAME] [--tokenizer DIR] [--num-prompts 1000] [--input-len 1024] [--output-len 128] [--prefix-len 0]
         [--request-rate inf] [--burstiness 1.0] [--max-concurrency C] [--seed 0] [--goodput ttft:MS tpot:MS e2el:MS]
         [--metric-percentiles 99] [--num-warmups 0] [--json FILE] [--save-detailed] [--plot FILE.png]
         [--ignore-eos | --no-ignore-eos] [--temperature T] [--top-p P] [--top-k K] [--api-key KEY] [--disable-tqdm]
  vLLM's random dataset: --input-len random tokens per prompt after --prefix-len tokens shared by all (token ids
  for /v1/completions, text for chat). --model defaults to the server's first model, --tokenizer to the model
  (a folder with tokenizer.json). Requests arrive as a Poisson process at --request-rate (gamma gaps with
  --burstiness), at most --max-concurrency at once, each streamed. --ignore-eos is the default, as in vLLM.
  --json writes vLLM's result JSON (--save-detailed keeps the per-request lists); --plot a PNG of the
  latency percentiles. The vLLM names --dataset-name random and --random-input-len/-output-len/-prefix-len work too.`;

const OPTIONS = {
  "base-url": { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  endpoint: { type: "string" },
  model: { type: "string" },
  tokenizer: { type: "string" },
  "num-prompts": { type: "string" },
  "input-len": { type: "string" },
  "output-len": { type: "string" },
  "prefix-len": { type: "string" },
  "random-input-len": { type: "string" },
  "random-output-len": { type: "string" },
  "random-prefix-len": { type: "string" },
  "dataset-name": { type: "string" },
  "request-rate": { type: "string" },
  burstiness: { type: "string" },
  "max-concurrency": { type: "string" },
  seed: { type: "string" },
  goodput: { type: "string", multiple: true },
  "metric-percentiles": { type: "string" },
  "num-warmups": { type: "string" },
  json: { type: "string" },
  "save-detailed": { type: "boolean" },
  plot: { type: "string" },
  "ignore-eos": { type: "boolean" },
  "no-ignore-eos": { type: "boolean" },
  temperature: { type: "string" },
  "top-p": { type: "string" },
  "top-k": { type: "string" },
  "api-key": { type: "string" },
  "disable-tqdm": { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

type Values = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K] extends { multiple: true } ? string[] : (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };

function int(v: string | undefined, flag: string, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !Number.isInteger(n) || n < min) throw new BenchArgumentError(`--${flag}: expected an integer >= ${min}, got '${v}'`);
  return n;
}

/** A positive number, or inf. */
function positive(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  if (/^[+]?inf(inity)?$/i.test(v.trim())) return Infinity;
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n) || n <= 0) throw new BenchArgumentError(`--${flag}: expected a number > 0 or inf, got '${v}'`);
  return n;
}

function finite(v: string | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n)) throw new BenchArgumentError(`--${flag}: expected a number, got '${v}'`);
  return n;
}

/** `--goodput ttft:500 tpot:50` (vLLM's nargs="+") as parseArgs's repeated `--goodput ttft:500 --goodput tpot:50`. */
function spreadGoodput(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    out.push(argv[i]!);
    if (argv[i] !== "--goodput") continue;
    let first = true;
    while (i + 1 < argv.length && !argv[i + 1]!.startsWith("-")) {
      if (!first) out.push("--goodput");
      out.push(argv[++i]!);
      first = false;
    }
  }
  return out;
}

function goodputOf(pairs: string[] | undefined): GoodputSlos | undefined {
  if (!pairs?.length) return undefined;
  const slos: GoodputSlos = {};
  for (const pair of pairs) {
    const m = /^(\w+):(.+)$/.exec(pair);
    if (!m) throw new BenchArgumentError(`--goodput: expected KEY:MS pairs (ttft, tpot, e2el in ms), got '${pair}'`);
    const [, key, ms] = m as unknown as [string, string, string];
    if (key !== "ttft" && key !== "tpot" && key !== "e2el") throw new BenchArgumentError(`--goodput: the SLOs are ttft, tpot and e2el, got '${key}'`);
    const n = Number(ms);
    if (!Number.isFinite(n) || n < 0) throw new BenchArgumentError(`--goodput: ${key} must be a number of ms >= 0, got '${ms}'`);
    slos[key] = n;
  }
  return slos;
}

/** The flags as benchServe options; throws BenchArgumentError on any bad one. */
export function optionsOf(v: Values): BenchServeOptions & { json?: string; plot?: string; saveDetailed: boolean; progress: boolean } {
  if (v["dataset-name"] !== undefined && v["dataset-name"] !== "random") throw new BenchArgumentError(`--dataset-name: only 'random' is supported, got '${v["dataset-name"]}'`);
  if (v["ignore-eos"] && v["no-ignore-eos"]) throw new BenchArgumentError("--ignore-eos and --no-ignore-eos contradict each other");
  const endpoint = v.endpoint ?? "/v1/completions";
  if (!ENDPOINTS.includes(endpoint as Endpoint)) throw new BenchArgumentError(`--endpoint: expected one of ${ENDPOINTS.join(", ")}, got '${endpoint}'`);
  let baseUrl = v["base-url"];
  if (baseUrl === undefined) baseUrl = `http://${v.host ?? "127.0.0.1"}:${int(v.port, "port", 1) ?? 8000}`;
  else if (v.host !== undefined || v.port !== undefined) throw new BenchArgumentError("give --base-url or --host/--port, not both");
  if (!/^https?:\/\/[^/]/.test(baseUrl)) throw new BenchArgumentError(`--base-url: expected an http(s) URL, got '${baseUrl}'`);
  const len = (a: "input-len" | "output-len" | "prefix-len", min: number) => int(v[a] ?? v[`random-${a}`], a, min);
  const percentiles = v["metric-percentiles"]?.split(",").map((p) => {
    const n = Number(p);
    if (p.trim() === "" || !(n >= 0 && n <= 100)) throw new BenchArgumentError(`--metric-percentiles: expected numbers in [0, 100] separated by commas, got '${v["metric-percentiles"]}'`);
    return n;
  });
  const extraBody: Record<string, unknown> = {};
  const temperature = finite(v.temperature, "temperature");
  const topP = finite(v["top-p"], "top-p");
  const topK = int(v["top-k"], "top-k", -1);
  if (temperature !== undefined) extraBody.temperature = temperature;
  if (topP !== undefined) extraBody.top_p = topP;
  if (topK !== undefined) extraBody.top_k = topK;
  return {
    baseUrl,
    endpoint: endpoint as Endpoint,
    model: v.model,
    tokenizer: v.tokenizer,
    apiKey: v["api-key"],
    numPrompts: int(v["num-prompts"], "num-prompts", 1) ?? 1000,
    inputLen: len("input-len", 0) ?? 1024,
    outputLen: len("output-len", 1) ?? 128,
    prefixLen: len("prefix-len", 0) ?? 0,
    requestRate: positive(v["request-rate"], "request-rate") ?? Infinity,
    burstiness: positive(v.burstiness, "burstiness") ?? 1,
    maxConcurrency: int(v["max-concurrency"], "max-concurrency", 1),
    seed: int(v.seed, "seed", -(2 ** 31)) ?? 0,
    goodput: goodputOf(v.goodput),
    ignoreEos: !v["no-ignore-eos"],
    metricPercentiles: percentiles ?? [99],
    numWarmups: int(v["num-warmups"], "num-warmups", 0) ?? 0,
    extraBody: Object.keys(extraBody).length ? extraBody : undefined,
    json: v.json,
    plot: v.plot,
    saveDetailed: Boolean(v["save-detailed"]),
    progress: !v["disable-tqdm"],
  };
}

function progressBar(): { update(done: number, total: number): void; stop(): void } {
  const bar = new cliProgress.SingleBar({
    format: "{bar} {percentage}% | {value}/{total} requests | {rate} req/s | elapsed {duration_formatted} | ETA {eta_formatted}",
    stream: process.stderr,
    noTTYOutput: true, // a log file gets a line every 2 s instead of nothing
    hideCursor: true,
    etaBuffer: 50,
  });
  const start = performance.now();
  let started = false;
  return {
    update(done, total) {
      const rate = (done / ((performance.now() - start) / 1000)).toFixed(2);
      if (!started) bar.start(total, done, { rate });
      else bar.update(done, { rate });
      started = true;
    },
    stop() {
      if (started) bar.stop();
    },
  };
}

/** Runs `torchts bench serve ARGS` (argv without "serve"); resolves with the exit code. */
export async function main(argv: string[]): Promise<number> {
  let opts: ReturnType<typeof optionsOf>;
  try {
    const v = parseArgs({ args: spreadGoodput(argv), options: OPTIONS, strict: true, allowPositionals: false }).values as Values;
    if (v.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    opts = optionsOf(v);
  } catch (e) {
    process.stderr.write(`torchts bench serve: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const bar = opts.progress ? progressBar() : undefined;
  let result: BenchServeResult;
  try {
    result = await benchServe({
      ...opts,
      log: (line) => process.stdout.write(`${line}\n`),
      onRequestDone: bar ? (done, total) => bar.update(done, total) : undefined,
    });
  } catch (e) {
    process.stderr.write(`torchts bench serve: ${(e as Error).message}\n`);
    return e instanceof BenchArgumentError ? 2 : 1;
  } finally {
    bar?.stop();
  }
  const failures = result.errors.filter((e) => e);
  if (failures.length) {
    process.stdout.write("Failed requests during benchmark run detected (capping to 10):\n");
    failures.slice(0, 10).forEach((e, i) => process.stdout.write(`Error ${i}: ${e}\n`));
  }
  process.stdout.write(`${formatResult(result, opts.metricPercentiles!)}\n`);
  try {
    if (opts.json) {
      await writeFile(opts.json, `${JSON.stringify(jsonRecord(result, opts.saveDetailed))}\n`);
      process.stdout.write(`wrote ${opts.json}\n`);
    }
    if (opts.plot) {
      await writeFile(opts.plot, await latencyPlotPng(result));
      process.stdout.write(`wrote ${opts.plot}\n`);
    }
  } catch (e) {
    process.stderr.write(`torchts bench serve: ${(e as Error).message}\n`);
    return 1;
  }
  if (result.completed === 0) {
    process.stderr.write("torchts bench serve: every request failed\n");
    return 1;
  }
  return 0;
}
