// benchServe(): `vllm bench serve` against any OpenAI-compatible server. It makes vLLM's random
// dataset, sends the requests at the arrival times of --request-rate/--burstiness with at most
// --max-concurrency in flight, streams each one, and returns vLLM's result record: the same keys as
// the JSON file `vllm bench serve --save-result` writes (snake_case, as that format has them), so
// tools that read vLLM's results read these.
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { AutoTokenizer, type PreTrainedTokenizer } from "torchts/transformers";
import { arrivalTimes } from "./arrivals.js";
import { randomRequests, type SampleRequest } from "./dataset.js";
import { calculateMetrics, METRICS, type GoodputSlos, type MetricName } from "./metrics.js";
import { sendRequest, type Endpoint, type RequestOutcome, type RequestSpec } from "./request.js";
import { SeededRandom } from "./rng.js";

export const ENDPOINTS: readonly Endpoint[] = ["/v1/completions", "/v1/chat/completions"];

export interface BenchServeOptions {
  /** The server's root, e.g. http://127.0.0.1:8000 (the endpoint path is added to it). */
  baseUrl: string;
  /** Default /v1/completions (token-id prompts); /v1/chat/completions sends text prompts. */
  endpoint?: Endpoint;
  /** The `model` of each request; default the first model of GET /v1/models. */
  model?: string;
  /** A folder with tokenizer.json, or a loaded tokenizer; default the model's name (or /v1/models' root) as a folder. */
  tokenizer?: string | PreTrainedTokenizer;
  /** Sent as Authorization: Bearer KEY (default $OPENAI_API_KEY). */
  apiKey?: string;
  numPrompts: number;
  /** Random tokens per prompt after the shared prefix. */
  inputLen: number;
  /** max_tokens of each request. */
  outputLen: number;
  /** Tokens of one random prefix shared by every prompt (default 0). */
  prefixLen?: number;
  /** Requests per second (default Infinity: all at once). */
  requestRate?: number;
  /** Gamma shape of the gaps between requests (default 1: a Poisson process). */
  burstiness?: number;
  /** Most requests in flight (default no limit). */
  maxConcurrency?: number;
  /** Seeds the prompts and the arrival times (default 0, as vLLM). */
  seed?: number;
  /** Service-level objectives in ms for request_goodput. */
  goodput?: GoodputSlos;
  /** Send ignore_eos so every request generates outputLen tokens (default true, as vLLM does for the random dataset). */
  ignoreEos?: boolean;
  /** Percentiles reported per metric (default [99], as vLLM's --metric-percentiles). */
  metricPercentiles?: number[];
  /** Untimed requests of the first prompt sent before the run (default 0). */
  numWarmups?: number;
  /** More body fields for every request (e.g. temperature). */
  extraBody?: Record<string, unknown>;
  /** Called as each request of the timed run ends. */
  onRequestDone?: (done: number, total: number) => void;
  /** vLLM's progress lines ("Traffic request rate: ..."); default silent. */
  log?: (line: string) => void;
  signal?: AbortSignal;
}

type StatKey = `${"mean" | "median" | "std"}_${MetricName}_ms`;

/** vLLM's result JSON: the run's setup, its summary and per-request lists (times in seconds). */
export type BenchServeResult = {
  date: string;
  endpoint_type: "openai" | "openai-chat";
  backend: "openai" | "openai-chat";
  label: string | null;
  model_id: string;
  tokenizer_id: string;
  num_prompts: number;
  /** "inf" for Infinity (which JSON cannot hold), as vLLM writes request_rate. */
  request_rate: number | "inf";
  burstiness: number | "inf";
  max_concurrency: number | null;
  duration: number;
  completed: number;
  failed: number;
  total_input_tokens: number;
  total_output_tokens: number;
  request_throughput: number;
  /** null when no --goodput SLO was given. */
  request_goodput: number | null;
  output_throughput: number;
  total_token_throughput: number;
  max_output_tokens_per_s: number;
  max_concurrent_requests: number;
  input_lens: number[];
  output_lens: number[];
  ttfts: number[];
  itls: number[][];
  latencies: number[];
  start_times: number[];
  queue_times: number[];
  generated_texts: string[];
  errors: string[];
} & { [K in StatKey]: number } & { [k: `p${string}_${MetricName}_ms`]: number };

/** A bad option: the CLI reports it as a usage error (exit 2). */
export class BenchArgumentError extends Error {}

function check(ok: boolean, message: string): void {
  if (!ok) throw new BenchArgumentError(message);
}
const isInt = (x: unknown, min: number): boolean => Number.isInteger(x) && (x as number) >= min;

function checkOptions(o: BenchServeOptions): void {
  check(typeof o.baseUrl === "string" && /^https?:\/\/[^/]/.test(o.baseUrl), `baseUrl must be an http(s) URL, got '${o.baseUrl}'`);
  check(o.endpoint === undefined || ENDPOINTS.includes(o.endpoint), `endpoint must be one of ${ENDPOINTS.join(", ")}, got '${o.endpoint}'`);
  check(isInt(o.numPrompts, 1), `numPrompts must be an integer >= 1, got ${o.numPrompts}`);
  check(isInt(o.inputLen, 0), `inputLen must be an integer >= 0, got ${o.inputLen}`);
  check(isInt(o.outputLen, 1), `outputLen must be an integer >= 1, got ${o.outputLen}`);
  check(o.prefixLen === undefined || isInt(o.prefixLen, 0), `prefixLen must be an integer >= 0, got ${o.prefixLen}`);
  check(o.inputLen + (o.prefixLen ?? 0) >= 1, "a prompt needs at least one token: inputLen + prefixLen must be >= 1");
  check(o.requestRate === undefined || (typeof o.requestRate === "number" && o.requestRate > 0), `requestRate must be > 0 (Infinity: all at once), got ${o.requestRate}`);
  check(o.burstiness === undefined || (typeof o.burstiness === "number" && o.burstiness > 0), `burstiness must be > 0, got ${o.burstiness}`);
  check(o.maxConcurrency === undefined || isInt(o.maxConcurrency, 1), `maxConcurrency must be an integer >= 1, got ${o.maxConcurrency}`);
  check(o.seed === undefined || Number.isInteger(o.seed), `seed must be an integer, got ${o.seed}`);
  check(o.numWarmups === undefined || isInt(o.numWarmups, 0), `numWarmups must be an integer >= 0, got ${o.numWarmups}`);
  for (const [k, v] of Object.entries(o.goodput ?? {})) {
    check(k === "ttft" || k === "tpot" || k === "e2el", `goodput SLOs are ttft, tpot and e2el, got '${k}'`);
    check(typeof v === "number" && v >= 0, `goodput ${k} must be a number of ms >= 0, got ${v}`);
  }
  for (const p of o.metricPercentiles ?? []) check(typeof p === "number" && p >= 0 && p <= 100, `percentiles must be in [0, 100], got ${p}`);
}

/** Waits for a free slot in FIFO order; `limit` Infinity never waits. */
class Semaphore {
  private free: number;
  private readonly waiting: (() => void)[] = [];
  constructor(limit: number) {
    this.free = limit;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((r) => this.waiting.push(r));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

async function firstModel(client: OpenAI): Promise<{ id: string; root: string }> {
  let list: { data?: { id?: string; root?: string }[] };
  try {
    list = await client.get<typeof list>("/v1/models");
  } catch (e) {
    throw new Error(`no --model given and GET /v1/models failed: ${(e as Error).message}`, { cause: e });
  }
  const m = list.data?.[0];
  if (!m?.id) throw new Error("no --model given and GET /v1/models lists no model");
  return { id: m.id, root: m.root ?? m.id };
}

async function loadTokenizer(dir: string): Promise<PreTrainedTokenizer> {
  try {
    return await AutoTokenizer.fromPretrained(dir);
  } catch (e) {
    throw new BenchArgumentError(`cannot load a tokenizer from '${dir}' (pass --tokenizer DIR, a folder with tokenizer.json): ${(e as Error).message}`, { cause: e });
  }
}

/** vLLM's date field: local time as YYYYMMDD-HHMMSS. */
function stamp(d: Date): string {
  const two = (x: number) => String(x).padStart(2, "0");
  return `${d.getFullYear()}${two(d.getMonth() + 1)}${two(d.getDate())}-${two(d.getHours())}${two(d.getMinutes())}${two(d.getSeconds())}`;
}

/** Python's str(float) for the setup lines: 1.0, inf. */
const pyFloat = (x: number): string => (x === Infinity ? "inf" : Number.isInteger(x) ? x.toFixed(1) : String(x));

export async function benchServe(opts: BenchServeOptions): Promise<BenchServeResult> {
  checkOptions(opts);
  const log = opts.log ?? (() => {});
  const endpoint = opts.endpoint ?? "/v1/completions";
  const rate = opts.requestRate ?? Infinity;
  const burstiness = opts.burstiness ?? 1;
  const seed = opts.seed ?? 0;
  const percentiles = opts.metricPercentiles ?? [99];
  const client = new OpenAI({
    baseURL: opts.baseUrl.replace(/\/+$/, ""),
    apiKey: opts.apiKey ?? process.env.OPENAI_API_KEY ?? "EMPTY",
    maxRetries: 0, // a retried request would be timed from its retry
    timeout: 6 * 3600 * 1000,
  });
  const listed = opts.model === undefined ? await firstModel(client) : undefined;
  const model = opts.model ?? listed!.id;
  const tokenizerId = typeof opts.tokenizer === "string" ? opts.tokenizer : opts.tokenizer ? "(given)" : (listed?.root ?? model);
  const tokenizer = typeof opts.tokenizer === "object" ? opts.tokenizer : await loadTokenizer(tokenizerId);

  const requests: SampleRequest[] = randomRequests(
    tokenizer,
    { numPrompts: opts.numPrompts, inputLen: opts.inputLen, outputLen: opts.outputLen, prefixLen: opts.prefixLen ?? 0, text: endpoint === "/v1/chat/completions" },
    new SeededRandom(seed, 0),
  );
  const times = arrivalTimes(requests.length, rate, burstiness, new SeededRandom(seed, 1));
  const spec: RequestSpec = { endpoint, model, ignoreEos: opts.ignoreEos ?? true, extraBody: opts.extraBody };
  const slots = new Semaphore(opts.maxConcurrency ?? Infinity);

  if (opts.numWarmups) {
    log(`Warming up with ${opts.numWarmups} requests...`);
    const warm = await Promise.all(
      Array.from({ length: opts.numWarmups }, async () => {
        await slots.acquire();
        try {
          return await sendRequest(client, spec, requests[0]!, performance.now(), opts.signal);
        } finally {
          slots.release();
        }
      }),
    );
    const bad = warm.find((o) => !o.success);
    if (bad) throw new Error(`a warm-up request failed: ${bad.error}`);
    log("Warmup run completed.");
  }

  log("Starting main benchmark run...");
  log(`Traffic request rate: ${pyFloat(rate)}`);
  log(`Burstiness factor: ${pyFloat(burstiness)} (${burstiness === 1 ? "Poisson process" : "Gamma distribution"})`);
  log(`Maximum request concurrency: ${opts.maxConcurrency ?? "None"}`);
  let done = 0;
  const t0 = performance.now();
  const outcomes: RequestOutcome[] = await Promise.all(
    requests.map(async (req, i) => {
      const due = t0 + times[i]! * 1000 - performance.now();
      if (due > 0) await sleep(due, undefined, { signal: opts.signal }).catch(() => {}); // aborted: the send fails at once
      const arrived = performance.now();
      await slots.acquire();
      try {
        const o = await sendRequest(client, spec, req, t0, opts.signal);
        o.queueTime = o.startTime - (arrived - t0) / 1000;
        return o;
      } finally {
        slots.release();
        opts.onRequestDone?.(++done, requests.length);
      }
    }),
  );
  const duration = (performance.now() - t0) / 1000;
  opts.signal?.throwIfAborted();

  const m = calculateMetrics(outcomes, duration, percentiles, opts.goodput ?? {}, (text) => tokenizer.encode(text, { addSpecialTokens: false }).length);
  const backend = endpoint === "/v1/completions" ? "openai" : "openai-chat";
  const result = {
    date: stamp(new Date()),
    endpoint_type: backend,
    backend,
    label: null,
    model_id: model,
    tokenizer_id: tokenizerId,
    num_prompts: opts.numPrompts,
    request_rate: rate === Infinity ? "inf" : rate,
    burstiness: burstiness === Infinity ? "inf" : burstiness,
    max_concurrency: opts.maxConcurrency ?? null,
    duration,
    completed: m.completed,
    failed: m.failed,
    total_input_tokens: m.totalInput,
    total_output_tokens: m.totalOutput,
    request_throughput: m.requestThroughput,
    request_goodput: opts.goodput && Object.keys(opts.goodput).length ? m.requestGoodput : null,
    output_throughput: m.outputThroughput,
    total_token_throughput: m.totalTokenThroughput,
    max_output_tokens_per_s: m.maxOutputTokensPerS,
    max_concurrent_requests: m.maxConcurrentRequests,
    input_lens: outcomes.map((o) => o.promptLen),
    output_lens: m.outputLens,
    ttfts: outcomes.map((o) => o.ttft),
    itls: outcomes.map((o) => o.itl),
    latencies: outcomes.map((o) => o.latency),
    start_times: outcomes.map((o) => o.startTime),
    queue_times: outcomes.map((o) => o.queueTime),
    generated_texts: outcomes.map((o) => o.generatedText),
    errors: outcomes.map((o) => o.error),
  } as BenchServeResult;
  for (const name of METRICS) {
    const s = m.stats[name];
    result[`mean_${name}_ms`] = s.mean;
    result[`median_${name}_ms`] = s.median;
    result[`std_${name}_ms`] = s.std;
    for (const [p, v] of s.percentiles) result[`p${p}_${name}_ms`] = v; // vLLM's keys: p99, p99.9
  }
  return result;
}
