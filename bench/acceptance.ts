// Issue 18's acceptance, judged from the rows of one `npm run bench` run: every bar with the value this
// run measured and PASS or FAIL. A bar whose rows are missing (its suite was not selected, or failed) says
// so instead of passing.
import type { Row } from "./lib.js";

const SMALL = "small-step";
const SMALL_ONE_GO = "small GPT train step"; // the interleaved table's workload carries a suffix

interface Bar {
  what: string;
  /** The measured value, or a reason it is missing. */
  value: number | string;
  bar: number;
  /** "max": value <= bar passes; "min": value >= bar passes. */
  kind: "max" | "min";
  detail?: string;
}

const fmt = (v: number) => `${v.toFixed(2)}x`;

function smallStep(rows: Row[]): Bar[] {
  const one = rows.filter((r) => r.suite === SMALL && r.workload === SMALL_ONE_GO);
  const peerErr = rows.find((r) => r.suite === SMALL && r.error);
  const bars: Bar[] = [];
  for (const [mode, bar] of [["strict", 1.0], ["fused", 0.67], ["compiled", 0.5]] as const) {
    const r = one.find((x) => x.variant === `torchts ${mode}`);
    const value = r?.medianMs && r.peerMs ? r.medianMs / r.peerMs : peerErr ? `not measured: ${peerErr.error}` : "not measured";
    // each pass's ratio (the row is reported from the pass where it is lower): how much the run's noise moved it
    const passes = /ratios ([\d., ]+?) \(/.exec(r?.note ?? "")?.[1];
    bars.push({ what: `small GPT step, torchts ${mode} / PyTorch eager (one go, 2 threads)`, value, bar, kind: "max", detail: r ? `${r.medianMs} vs ${r.peerMs} ms${passes ? `; passes ${passes}` : ""}` : undefined });
  }
  // losses identical across the torchts modes: the runner prints the verdict in every torchts row's note
  const notes = one.filter((r) => r.variant?.startsWith("torchts")).map((r) => r.note ?? "");
  const identical = notes.length > 0 && notes.every((n) => n.includes("losses across torchts modes identical"));
  bars.push({ what: "small GPT step, losses identical across torchts modes", value: notes.length ? (identical ? 1 : 0) : "not measured", bar: 1, kind: "min", detail: identical ? "identical" : "differ" });
  return bars;
}

function llama(rows: Row[]): Bar[] {
  const ratio = (workload: string, variant: string) => rows.find((r) => r.suite === "ratio" && r.workload === workload && r.variant === variant);
  const cppErr = rows.find((r) => r.suite === "llama.cpp" && r.error)?.error;
  const spec: [string, string, string][] = [
    ["~100M Llama f32 decode, batch 1", "decode", "torchts f32 / llama.cpp f32 (2t)"],
    ["~100M Llama prefill 512, f32", "prefill", "torchts f32 / llama.cpp f32 (2t)"],
    ["~100M Llama prefill 512, w8a8 vs q8_0", "prefill", "torchts w8a8 / llama.cpp q8_0 (2t)"],
    // the rows that already won when the issue was filed keep winning
    ["~100M Llama int8 decode, batch 1 vs q8_0", "decode", "torchts int8 / llama.cpp q8_0 (2t)"],
    ["~100M Llama f32 decode, batch 8", "decode x8", "torchts f32 / llama.cpp f32 (2t, batch 8)"],
  ];
  return spec.map(([what, workload, variant]) => {
    const r = ratio(workload, variant);
    return { what: `${what} (2 threads)`, value: r?.ratio ?? (cppErr ? `not measured: ${cppErr}` : "not measured"), bar: 1.0, kind: "min", detail: r?.note?.replace(/^[\d.]+x \((.*)\)$/, "$1") };
  });
}

function memory(rows: Row[]): Bar[] {
  const bars: Bar[] = [];
  for (const [workload, bar, against] of [["Llama 100M decode", 1.5, "weights + KV cache"], ["minGPT train step", 1.25, "bytes live at its peak"]] as const)
    for (const mode of ["strict", "fused", "compiled"]) {
      const r = rows.find((x) => x.suite === "memory" && x.workload === workload && x.variant === mode);
      bars.push({ what: `peak arena / ${against}, ${workload}, ${mode}`, value: r?.ratio ?? (r?.error ? `not measured: ${r.error}` : "not measured"), bar, kind: "max", detail: r?.note?.split(";").slice(0, 2).join(";") });
    }
  return bars;
}

/** The markdown section: one line per bar, then a verdict. Empty when the run measured none of issue 18's suites. */
export function issue18Acceptance(rows: Row[], quick = false): string[] {
  const groups = [smallStep(rows), llama(rows), memory(rows)].filter((g) => g.some((b) => typeof b.value === "number"));
  if (!groups.length) return [];
  const bars = groups.flat();
  const pass = (b: Bar) => typeof b.value === "number" && (b.kind === "max" ? b.value <= b.bar : b.value >= b.bar);
  const lines = [``, `## Issue 18 acceptance (this run)`, ``];
  if (quick) lines.push(`With --quick the workloads are smaller (prompt 32, fewer steps): the bars are judged on a full run.`, ``);
  lines.push(`| bar | measured | needed | |`, `|---|---|---|---|`);
  for (const b of bars) {
    const shown = typeof b.value === "number" ? (b.what.includes("losses") ? (b.value ? "identical" : "differ") : fmt(b.value)) : b.value;
    const need = b.what.includes("losses") ? "identical" : `${b.kind === "max" ? "<=" : ">="} ${b.bar.toFixed(2)}x`;
    lines.push(`| ${b.what} | ${shown}${b.detail && !b.what.includes("losses") ? ` (${b.detail.replace(/\|/g, "/")})` : ""} | ${need} | ${pass(b) ? "PASS" : "FAIL"} |`);
  }
  const failed = bars.filter((b) => !pass(b)).length;
  lines.push(``, failed ? `${failed} of ${bars.length} bars not met in this run.` : `All ${bars.length} bars met in this run.`);
  return lines;
}
