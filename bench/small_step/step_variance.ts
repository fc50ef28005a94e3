// Where a slow strict step's time goes: each of 60 strict steps (after 10 warm-up) runs under
// torch.profiler and a PerformanceObserver on gc, and the steps at a few percentiles of wall time
// are split into kernel time, garbage collection and the rest of the host time.
// --scope runs each step in torch.scope (its activations are freed as it ends, not by the collector).
//   node --import tsx bench/small_step/step_variance.ts [--mode strict|fused] [--steps N] [--scope]
import { PerformanceObserver, performance as perf } from "node:perf_hooks";
import * as torch from "../../packages/torchts/src/index.js";
import { numberArg } from "../lib.js";
import { batchTensors, batches, makeModel, step } from "./model.js";

const mode = (process.argv.includes("--mode") ? process.argv[process.argv.indexOf("--mode") + 1] : "strict") as "strict" | "fused";
const STEPS = numberArg("--steps") ?? 60;
const SCOPED = process.argv.includes("--scope");
if (mode !== "strict" && mode !== "fused") throw new Error(`step_variance: --mode must be strict or fused, got '${mode}'`);
if (!(Number.isInteger(STEPS) && STEPS >= 1)) throw new Error(`step_variance: --steps must be a positive integer, got ${STEPS}`);
torch.backends.cpu.setNumThreads(2);
const m = makeModel();
const bs = batches(STEPS + 10);
const gcs: [number, number][] = [];
new PerformanceObserver((l) => {
  for (const e of l.getEntries()) gcs.push([e.startTime, e.duration]);
}).observe({ entryTypes: ["gc"] });
const run = (x: torch.Tensor, y: torch.Tensor) =>
  torch.withEagerMode(mode, () => {
    const f = () => {
      const l = step(m, x, y);
      torch.sync();
      return l;
    };
    return SCOPED ? torch.scope(f) : f();
  });
for (let i = 0; i < 10; i++) run(...batchTensors(bs[i]!));
const rows: { t0: number; t1: number; kernels: number; gc: number }[] = [];
for (let i = 10; i < STEPS + 10; i++) {
  const [x, y] = batchTensors(bs[i]!);
  const p = torch.profiler.profile();
  const t0 = perf.now();
  run(x, y);
  const t1 = perf.now();
  p.stop();
  rows.push({ t0, t1, kernels: p.events.reduce((s, e) => s + e.dur / 1000, 0), gc: 0 });
}
await new Promise((r) => setTimeout(r, 50)); // gc entries are delivered asynchronously
for (const r of rows) for (const [s, d] of gcs) if (s >= r.t0 && s < r.t1) r.gc += d;
rows.sort((a, b) => a.t1 - a.t0 - (b.t1 - b.t0));
console.log(`${mode}${SCOPED ? " (each step in torch.scope)" : ""} small GPT step, ${STEPS} steps: percentile, wall, kernels, gc, other host (ms); gc ${(rows.reduce((s, r) => s + r.gc, 0) / STEPS).toFixed(2)} ms a step on average`);
for (const q of [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1]) {
  const r = rows[Math.min(rows.length - 1, Math.floor(q * rows.length))]!;
  const w = r.t1 - r.t0;
  console.log(`p${Math.round(q * 100)}`.padEnd(6), w.toFixed(1).padStart(6), r.kernels.toFixed(1).padStart(6), r.gc.toFixed(1).padStart(6), (w - r.kernels - r.gc).toFixed(1).padStart(6));
}
