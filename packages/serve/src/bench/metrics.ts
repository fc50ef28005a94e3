// The summary numbers of `vllm bench serve` (vllm/benchmarks/serve.py, calculate_metrics), over the
// per-request outcomes. Only successful requests enter the latencies and token totals.
//   TTFT, E2EL: per request. TPOT: (E2EL - TTFT) / (output tokens - 1), for requests with more than
//   one output token. ITL: every gap between token chunks, pooled over all requests.
//   Throughputs divide by the benchmark's wall time; goodput counts the requests meeting every SLO
//   given (a request with one output token has TPOT 0 there).
// Statistics are numpy's: population std, percentiles by linear interpolation, and 0 for no values.
import type { RequestOutcome } from "./request.js";

export const METRICS = ["ttft", "tpot", "itl", "e2el"] as const;
export type MetricName = (typeof METRICS)[number];

/** Service-level objectives in milliseconds (--goodput ttft:MS tpot:MS e2el:MS). */
export type GoodputSlos = Partial<Record<"ttft" | "tpot" | "e2el", number>>;

export interface MetricStats {
  mean: number;
  median: number;
  std: number;
  /** [percentile, value] pairs, in the order asked. */
  percentiles: [number, number][];
}

export interface BenchmarkMetrics {
  completed: number;
  failed: number;
  totalInput: number;
  totalOutput: number;
  requestThroughput: number;
  requestGoodput: number;
  outputThroughput: number;
  totalTokenThroughput: number;
  /** Milliseconds, per metric. */
  stats: Record<MetricName, MetricStats>;
  /** Most token chunks that arrived within one second (of the benchmark's one-second buckets). */
  maxOutputTokensPerS: number;
  /** Most requests in flight at once. */
  maxConcurrentRequests: number;
  /** Output tokens per request (0 for a failed one). */
  outputLens: number[];
}

export function mean(xs: number[]): number {
  return xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : 0;
}

export function std(xs: number[]): number {
  if (!xs.length) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) * (x - m), 0) / xs.length);
}

/** numpy.percentile's default ("linear"): the value at rank p / 100 * (n - 1) of the sorted values. */
export function percentile(xs: number[], p: number): number {
  if (!xs.length) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

/** TPOT of one request in the unit of its times; 0 for one output token (no gap to average). */
export function tpotOf(latency: number, ttft: number, outputTokens: number): number {
  return outputTokens > 1 ? (latency - ttft) / (outputTokens - 1) : 0;
}

function statsMs(seconds: number[], ps: number[]): MetricStats {
  const ms = seconds.map((s) => s * 1000);
  return { mean: mean(ms), median: percentile(ms, 50), std: std(ms), percentiles: ps.map((p) => [p, percentile(ms, p)]) };
}

/** Most token chunks in one one-second bucket from the first send, and the peak of requests in flight. */
function peaks(done: RequestOutcome[]): { tokensPerS: number; concurrent: number } {
  if (!done.length) return { tokensPerS: 0, concurrent: 0 };
  // Loops, not Math.min(...xs): a spread of a long list overflows the stack.
  const t0 = done.reduce((m, o) => Math.min(m, o.startTime), Infinity);
  const buckets = new Map<number, number>();
  for (const o of done) {
    let t = o.startTime + o.ttft;
    const times = [t];
    for (const gap of o.itl) times.push((t += gap));
    for (const x of times) {
      const b = Math.floor(x - t0);
      buckets.set(b, (buckets.get(b) ?? 0) + 1);
    }
  }
  // Half-open [start, end): at equal times an end is counted before a start.
  const events = done.flatMap((o) => [[o.startTime, 1] as const, [o.startTime + o.latency, -1] as const]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let peak = 0;
  for (const [, d] of events) peak = Math.max(peak, (now += d));
  let tokensPerS = 0;
  for (const c of buckets.values()) tokensPerS = Math.max(tokensPerS, c);
  return { tokensPerS, concurrent: peak };
}

/**
 * @param countTokens counts a generated text's tokens, for a server whose stream gave no usage
 *   (vLLM re-tokenizes the text then; without a tokenizer it counts 1).
 */
export function calculateMetrics(outcomes: RequestOutcome[], durationS: number, percentiles: number[], slos: GoodputSlos, countTokens?: (text: string) => number): BenchmarkMetrics {
  const outputLens: number[] = [];
  const ttfts: number[] = [];
  const tpots: number[] = [];
  const goodputTpots: number[] = [];
  const itls: number[] = [];
  const e2els: number[] = [];
  let totalInput = 0;
  const done = outcomes.filter((o) => o.success);
  for (const o of outcomes) {
    if (!o.success) {
      outputLens.push(0);
      continue;
    }
    const n = o.outputTokens || (countTokens ? countTokens(o.generatedText) : 1);
    outputLens.push(n);
    totalInput += o.promptLen;
    const tpot = tpotOf(o.latency, o.ttft, n);
    if (n > 1) tpots.push(tpot);
    goodputTpots.push(tpot);
    for (const gap of o.itl) itls.push(gap);
    ttfts.push(o.ttft);
    e2els.push(o.latency);
  }
  let good = 0;
  const limits = Object.entries(slos).filter((e): e is [keyof GoodputSlos, number] => e[1] !== undefined);
  if (limits.length) {
    const per = { ttft: ttfts, tpot: goodputTpots, e2el: e2els };
    for (let i = 0; i < done.length; i++) if (limits.every(([k, ms]) => per[k][i]! <= ms / 1000)) good++;
  }
  const totalOutput = outputLens.reduce((s, x) => s + x, 0);
  const { tokensPerS, concurrent } = peaks(done);
  return {
    completed: done.length,
    failed: outcomes.length - done.length,
    totalInput,
    totalOutput,
    requestThroughput: done.length / durationS,
    requestGoodput: good / durationS,
    outputThroughput: totalOutput / durationS,
    totalTokenThroughput: (totalInput + totalOutput) / durationS,
    stats: { ttft: statsMs(ttfts, percentiles), tpot: statsMs(tpots, percentiles), itl: statsMs(itls, percentiles), e2el: statsMs(e2els, percentiles) },
    maxOutputTokensPerS: tokensPerS,
    maxConcurrentRequests: concurrent,
    outputLens,
  };
}
