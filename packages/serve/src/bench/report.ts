// What `vllm bench serve` writes: its result table, line for line (a 40-wide label, then the value,
// two decimals for rates, times and throughputs; section rules 50 wide), and its JSON record.
import type { BenchServeResult } from "./bench_serve.js";
import type { MetricName } from "./metrics.js";

const WIDTH = 50;

/** `text` centred in a rule of `fill`, as Python's "{:=^50}" (the odd pad goes right). */
function rule(text: string, fill: string): string {
  const pad = Math.max(0, WIDTH - text.length);
  const left = Math.floor(pad / 2);
  return fill.repeat(left) + text + fill.repeat(pad - left);
}

const row = (label: string, value: number): string => `${label.padEnd(40)} ${value}`;
const row2 = (label: string, value: number): string => `${label.padEnd(40)} ${value.toFixed(2)}`;

const SECTIONS: [MetricName, string, string][] = [
  ["ttft", "TTFT", "Time to First Token"],
  ["tpot", "TPOT", "Time per Output Token (excl. 1st token)"],
  ["itl", "ITL", "Inter-token Latency"],
  ["e2el", "E2EL", "End-to-end Latency"],
];

/** The table for `r`; `percentiles` are those the run computed (its metricPercentiles). */
export function formatResult(r: BenchServeResult, percentiles: number[]): string {
  const lines = [rule(" Serving Benchmark Result ", "=")];
  lines.push(row("Successful requests:", r.completed), row("Failed requests:", r.failed));
  if (r.max_concurrency !== null) lines.push(row("Maximum request concurrency:", r.max_concurrency));
  if (r.request_rate !== "inf") lines.push(row2("Request rate configured (RPS):", r.request_rate));
  lines.push(
    row2("Benchmark duration (s):", r.duration),
    row("Total input tokens:", r.total_input_tokens),
    row("Total generated tokens:", r.total_output_tokens),
    row2("Request throughput (req/s):", r.request_throughput),
  );
  if (r.request_goodput !== null) lines.push(row2("Request goodput (req/s):", r.request_goodput));
  lines.push(
    row2("Output token throughput (tok/s):", r.output_throughput),
    row2("Peak output token throughput (tok/s):", r.max_output_tokens_per_s),
    row2("Peak concurrent requests:", r.max_concurrent_requests),
    row2("Total token throughput (tok/s):", r.total_token_throughput),
  );
  for (const [key, name, header] of SECTIONS) {
    lines.push(rule(header, "-"), row2(`Mean ${name} (ms):`, r[`mean_${key}_ms`]), row2(`Median ${name} (ms):`, r[`median_${key}_ms`]));
    for (const p of percentiles) lines.push(row2(`P${p} ${name} (ms):`, r[`p${p}_${key}_ms`]));
  }
  lines.push("=".repeat(WIDTH));
  return lines.join("\n");
}

/** The per-request lists vLLM leaves out of its JSON unless --save-detailed. */
const DETAILED = ["input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"] as const;

/** The JSON file's record: `r` less the per-request lists unless `detailed`. */
export function jsonRecord(r: BenchServeResult, detailed: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = { ...r };
  if (!detailed) for (const k of DETAILED) delete out[k];
  return out;
}
