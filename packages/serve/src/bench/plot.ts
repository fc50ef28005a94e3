// --plot FILE.png: the latency percentiles of a run (p50, p90, p99 of TTFT, TPOT, ITL and E2EL, one
// panel each, in ms), drawn by ECharts' server-side SVG renderer and rasterized by resvg. Both load
// only when a plot is asked for: they are large and the benchmark itself needs neither.
import type { BenchServeResult } from "./bench_serve.js";
import { METRICS, percentile, tpotOf, type MetricName } from "./metrics.js";

export const PLOT_PERCENTILES = [50, 90, 99] as const;

const TITLES: Record<MetricName, string> = { ttft: "TTFT", tpot: "TPOT (excl. 1st token)", itl: "ITL", e2el: "E2EL" };
const COLORS: Record<MetricName, string> = { ttft: "#4c72b0", tpot: "#dd8452", itl: "#55a868", e2el: "#c44e52" };

/** Each metric's samples in ms over the successful requests, as calculateMetrics takes them. */
export function latencySamples(r: BenchServeResult): Record<MetricName, number[]> {
  const s: Record<MetricName, number[]> = { ttft: [], tpot: [], itl: [], e2el: [] };
  r.errors.forEach((err, i) => {
    if (err) return;
    const n = r.output_lens[i]!;
    s.ttft.push(r.ttfts[i]! * 1000);
    if (n > 1) s.tpot.push(tpotOf(r.latencies[i]!, r.ttfts[i]!, n) * 1000);
    for (const gap of r.itls[i]!) s.itl.push(gap * 1000);
    s.e2el.push(r.latencies[i]! * 1000);
  });
  return s;
}

/** The PNG bytes of the percentile panels for `r`. */
export async function latencyPlotPng(r: BenchServeResult, opts: { width?: number; height?: number } = {}): Promise<Uint8Array> {
  const echarts = await import("echarts");
  const { Resvg } = await import("@resvg/resvg-js");
  const width = opts.width ?? 1000;
  const height = opts.height ?? 700;
  const samples = latencySamples(r);
  const rate = r.request_rate === "inf" ? "inf" : `${r.request_rate}/s`;
  const conc = r.max_concurrency ?? "no limit";
  const cells = METRICS.map((m, i) => ({ m, left: i % 2 ? 56 : 7, top: i < 2 ? 17 : 60 }));
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width, height });
  chart.setOption({
    animation: false,
    backgroundColor: "#ffffff",
    textStyle: { fontFamily: "sans-serif" },
    title: [
      { text: `Serving latency percentiles: ${r.model_id}`, left: "center", top: 8, textStyle: { fontSize: 18 } },
      {
        text: `${r.completed} ok / ${r.failed} failed, ${r.num_prompts} prompts, rate ${rate}, concurrency ${conc}, ${r.duration.toFixed(2)} s`,
        left: "center",
        top: 36,
        textStyle: { fontSize: 12, fontWeight: "normal", color: "#555" },
      },
      ...cells.map((c) => ({ text: `${TITLES[c.m]} (ms)`, left: `${c.left}%`, top: `${c.top - 6}%`, textStyle: { fontSize: 14 } })),
    ],
    grid: cells.map((c) => ({ left: `${c.left}%`, top: `${c.top}%`, width: "37%", height: "28%", containLabel: true })),
    xAxis: cells.map((_, i) => ({ type: "category", gridIndex: i, data: PLOT_PERCENTILES.map((p) => `p${p}`) })),
    yAxis: cells.map((_, i) => ({ type: "value", gridIndex: i })),
    series: cells.map((c, i) => ({
      type: "bar",
      xAxisIndex: i,
      yAxisIndex: i,
      barWidth: "45%",
      itemStyle: { color: COLORS[c.m] },
      label: { show: true, position: "top", formatter: (p: { value: number }) => p.value.toFixed(2) },
      data: PLOT_PERCENTILES.map((p) => percentile(samples[c.m], p)),
    })),
  });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return new Resvg(svg, { background: "#ffffff", font: { loadSystemFonts: true, defaultFontFamily: "DejaVu Sans" } }).render().asPng();
}
