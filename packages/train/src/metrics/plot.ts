// The end-of-run PNG: one line panel per metric over the steps, drawn by ECharts' server-side SVG
// renderer and rasterized by resvg (as @torchts/serve's benchmark plots are). Both load only when a
// plot is drawn.

export interface Panel {
  title: string;
  /** The JSONL key plotted. */
  key: string;
  color?: string;
}

const PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"];

/** Panels in a grid (two columns from three panels on); points are the records that have the key. */
export async function metricsPlotPng(title: string, records: Record<string, unknown>[], panels: Panel[], opts: { width?: number; height?: number } = {}): Promise<Uint8Array> {
  const echarts = await import("echarts");
  const { Resvg } = await import("@resvg/resvg-js");
  const cols = panels.length > 2 ? 2 : 1;
  const rows = Math.ceil(panels.length / cols);
  const width = opts.width ?? (cols === 2 ? 1200 : 900);
  const height = opts.height ?? 120 + rows * 300;
  const cellW = 100 / cols;
  const cellH = (100 - 12) / rows;
  const cells = panels.map((p, i) => ({ p, left: (i % cols) * cellW + 6, top: 12 + Math.floor(i / cols) * cellH + 5 }));
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width, height });
  chart.setOption({
    animation: false,
    backgroundColor: "#ffffff",
    textStyle: { fontFamily: "sans-serif" },
    title: [
      { text: title, left: "center", top: 10, textStyle: { fontSize: 18 } },
      ...cells.map((c) => ({ text: c.p.title, left: `${c.left}%`, top: `${c.top - 4}%`, textStyle: { fontSize: 14 } })),
    ],
    grid: cells.map((c) => ({ left: `${c.left}%`, top: `${c.top}%`, width: `${cellW - 10}%`, height: `${cellH - 12}%`, containLabel: true })),
    xAxis: cells.map((_, i) => ({ type: "value", gridIndex: i, name: "step", nameLocation: "middle", nameGap: 24, minInterval: 1 })),
    yAxis: cells.map((_, i) => ({ type: "value", gridIndex: i, scale: true })),
    series: cells.map((c, i) => ({
      type: "line",
      xAxisIndex: i,
      yAxisIndex: i,
      showSymbol: false,
      lineStyle: { width: 2, color: c.p.color ?? PALETTE[i % PALETTE.length] },
      itemStyle: { color: c.p.color ?? PALETTE[i % PALETTE.length] },
      data: records.filter((r) => typeof r[c.p.key] === "number" && typeof r.step === "number").map((r) => [r.step as number, r[c.p.key] as number]),
    })),
  });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return new Resvg(svg, { background: "#ffffff", font: { loadSystemFonts: true, defaultFontFamily: "DejaVu Sans" } }).render().asPng();
}

/** The last record of each step (a resumed run re-logs the steps after its checkpoint), in step order. */
export function lastPerStep(records: Record<string, unknown>[]): Record<string, unknown>[] {
  const by = new Map<number, Record<string, unknown>>();
  for (const r of records) if (typeof r.step === "number") by.set(r.step, r);
  return [...by.values()].sort((a, b) => (a.step as number) - (b.step as number));
}
