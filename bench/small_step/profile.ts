// Where the small GPT step's time goes (issue 18), in two parts:
//  1. kernels: torch.profiler over a few steps per mode (strict, fused, compiled): kernel time by
//     kind, kernel count, wall time per step, and GC pauses (PerformanceObserver "gc") in the same steps;
//  2. host: `node --cpu-prof` of a child running only the steps of one mode; the main thread's
//     profile (tsx's loader thread and the kernel worker threads write their own) is bucketed by
//     what each sample was doing: wasm kernels, JS kernels, waiting for the worker threads, the
//     dispatcher/binder, autograd, allocation (Storage, FinalizationRegistry), scheduling (fused),
//     the op library, GC.
//   node --import tsx bench/small_step/profile.ts [--steps 20] [--modes=strict,fused,compiled] [--top N] [--no-part1] [--no-cpuprof] [--keep DIR]
//   TORCHTS_CACHE_DIR=$(mktemp -d) TORCHTS_LOGS=schedule,kernels node --import tsx bench/small_step/profile.ts --fused-steps 2
// Child mode (what part 2 runs): profile.ts --child MODE STEPS
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { PerformanceObserver } from "node:perf_hooks";
import * as torch from "../../packages/torchts/src/index.js";
import { numberArg } from "../lib.js";
import { batchTensors, batches, makeModel, step } from "./model.js";

type Mode = "strict" | "fused" | "compiled";
const argv = process.argv.slice(2);
const here = new URL(".", import.meta.url).pathname;
const WARM = 6;

function runner(mode: Mode) {
  const m = makeModel();
  const fn = mode === "compiled" ? torch.compile((x: torch.Tensor, y: torch.Tensor) => step(m, x, y), { name: "small_step" }) : (x: torch.Tensor, y: torch.Tensor) => step(m, x, y);
  const eager = mode === "strict" ? "strict" : "fused";
  return async (x: torch.Tensor, y: torch.Tensor) =>
    torch.withEagerMode(eager, async () => {
      const l = fn(x, y);
      torch.sync();
      return await l.item();
    });
}

if (argv[0] === "--fused-steps") {
  // just N fused steps, to read with TORCHTS_LOGS=schedule,kernels (fusion groups, generated sources;
  // point TORCHTS_CACHE_DIR at an empty folder to see every kernel generated rather than loaded)
  const data = batches(Number(argv[1])).map(batchTensors);
  const run = runner("fused");
  for (const [x, y] of data) await run(x, y);
  process.exit(0);
}
if (argv[0] === "--child") {
  // part 2's child: warm up, then the profiled steps (the profile covers the whole process;
  // the parent keeps only samples under the timed loop, see STEPS_MARK)
  const mode = argv[1] as Mode, steps = Number(argv[2]);
  const data = batches(WARM + 2 * steps).map(batchTensors);
  const run = runner(mode);
  for (let i = 0; i < WARM + steps; i++) await run(...data[i]!); // as part 1: warm-up, then the bare pass
  const t0 = performance.now();
  await timedSteps(run, data.slice(WARM + steps));
  console.log(JSON.stringify({ msPerStep: (performance.now() - t0) / steps }));
  process.exit(0);
}
/** The timed loop of the child, a named function so the parent can find its samples in the profile. */
async function timedSteps(run: (x: torch.Tensor, y: torch.Tensor) => Promise<number>, data: [torch.Tensor, torch.Tensor][]) {
  for (const [x, y] of data) await run(x, y);
}

const STEPS = numberArg("--steps") ?? 20;
const TOP = numberArg("--top") ?? 0;
const modes = ((argv.find((a) => a.startsWith("--modes="))?.slice(8)) ?? "strict,fused,compiled").split(",") as Mode[];
console.log(`# small GPT step profile: ${STEPS} steps per mode after ${WARM} warm-up; torchts ${torch.backends.cpu.getNumThreads()} threads; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);

// ---- part 1: torch.profiler ----
/** Kernel kinds: the name torch.profiler records (with recordShapes the single-op params too). */
function kind(name: string): string {
  if (name.startsWith("fused_matmul")) return name.includes("erf") ? "matmul + GELU (erf) epilogue" : "matmul (+ elementwise epilogue)";
  if (name.startsWith("matmul")) return "matmul";
  if (name.startsWith("unary") && name.includes('"erf"')) return "erf (GELU, JS scalar kernel)";
  if (name.startsWith("unary") && name.includes('"identity"')) return "copies (contiguous/identity)";
  if (/^(unary|binary|where|cast|full|fused_elementwise)/.test(name)) return "elementwise";
  if (/^(reduce|fused_reduction)/.test(name)) return "reductions";
  if (name.startsWith("composite")) return /softmax/i.test(name) ? "softmax (composite)" : `composite ${/"name":"(\w+)"/.exec(name)?.[1] ?? ""}`;
  if (/^(gather|scatter|scatterAdd|stridedScatter|index|cat)/.test(name)) return "gather/scatter/cat";
  return name.split(/[ [{]/)[0]!;
}

interface Part1 { bare: number; wall: number; kernels: number; kernelMs: number; gcMs: number; gcCount: number; byKind: Map<string, { ms: number; n: number }> }
const part1 = new Map<Mode, Part1>();
for (const mode of argv.includes("--no-part1") ? [] : modes) {
  const data = batches(WARM + STEPS).map(batchTensors);
  const run = runner(mode);
  for (let i = 0; i < WARM; i++) await run(...data[i]!);
  // the same steps without the profiler first: its own cost per kernel (timestamps, shape strings)
  const bareTimes: number[] = [];
  for (let i = WARM; i < WARM + STEPS; i++) {
    const t = performance.now();
    await run(...data[i]!);
    bareTimes.push(performance.now() - t);
  }
  const bare = [...bareTimes].sort((a, b) => a - b)[bareTimes.length >> 1]!;
  let gcMs = 0, gcCount = 0;
  const obs = new PerformanceObserver((l) => {
    for (const e of l.getEntries()) {
      gcMs += e.duration;
      gcCount++;
    }
  });
  obs.observe({ entryTypes: ["gc"] });
  const p = torch.profiler.profile({ recordShapes: true });
  const t0 = performance.now();
  for (let i = WARM; i < WARM + STEPS; i++) await run(...data[i]!);
  const wall = (performance.now() - t0) / STEPS;
  p.stop();
  await new Promise((r) => setTimeout(r, 50)); // let the observer deliver
  obs.disconnect();
  const byKind = new Map<string, { ms: number; n: number }>();
  let kernelMs = 0, kernels = 0;
  for (const k of p.keyAverages()) {
    const e = byKind.get(kind(k.name)) ?? { ms: 0, n: 0 };
    e.ms += k.totalMs / STEPS;
    e.n += k.count / STEPS;
    byKind.set(kind(k.name), e);
    kernelMs += k.totalMs / STEPS;
    kernels += k.count / STEPS;
  }
  part1.set(mode, { bare, wall, kernels, kernelMs, gcMs: gcMs / STEPS, gcCount: gcCount / STEPS, byKind });
  if (TOP) {
    console.log(`\n${mode}: top kernels per step (ms, count, kernel)`);
    for (const k of p.keyAverages().slice(0, TOP)) console.log(`  ${(k.totalMs / STEPS).toFixed(3).padStart(7)} ms ${String(k.count / STEPS).padStart(5)}x ${k.name.slice(0, 140)}`);
  }
}
if (part1.size) {
console.log(`\n## Part 1: torch.profiler (per step)\n`);
console.log(`| | ${modes.join(" | ")} |`);
console.log(`|---|${modes.map(() => "---:").join("|")}|`);
const cell = (f: (p: Part1) => string) => modes.map((m) => f(part1.get(m)!)).join(" | ");
console.log(`| wall ms/step without the profiler (median, the same steps before) | ${cell((p) => p.bare.toFixed(1))} |`);
console.log(`| wall ms/step (profiled) | ${cell((p) => p.wall.toFixed(1))} |`);
console.log(`| kernels/step | ${cell((p) => p.kernels.toFixed(0))} |`);
console.log(`| kernel time ms | ${cell((p) => `${p.kernelMs.toFixed(1)} (${((100 * p.kernelMs) / p.wall).toFixed(0)}%)`)} |`);
const kinds = [...new Set(modes.flatMap((m) => [...part1.get(m)!.byKind.keys()]))].sort((a, b) => Math.max(...modes.map((m) => part1.get(m)!.byKind.get(b)?.ms ?? 0)) - Math.max(...modes.map((m) => part1.get(m)!.byKind.get(a)?.ms ?? 0)));
for (const k of kinds) console.log(`| &nbsp; ${k} | ${cell((p) => { const e = p.byKind.get(k); return e ? `${e.ms.toFixed(2)} (${e.n.toFixed(0)})` : "-"; })} |`);
console.log(`| outside kernels ms (host: dispatch, autograd, allocation, scheduling, GC) | ${cell((p) => `${(p.wall - p.kernelMs).toFixed(1)} (${((100 * (p.wall - p.kernelMs)) / p.wall).toFixed(0)}%)`)} |`);
console.log(`| &nbsp; of which GC pauses ms (count) | ${cell((p) => `${p.gcMs.toFixed(2)} (${p.gcCount.toFixed(1)})`)} |`);
console.log(`\n(kernel kinds: ms per step (kernels per step))`);
}

// ---- part 2: --cpu-prof of each mode's steps ----
if (argv.includes("--no-cpuprof")) process.exit(0);
interface Node { id: number; callFrame: { functionName: string; url: string; scriptId: number | string }; children?: number[] }
interface CpuProfile { nodes: Node[]; samples: number[]; timeDeltas: number[] }
/** What a sample was doing: the category of its innermost frame that says something. */
function bucket(stack: Node[]): string {
  for (let i = stack.length - 1; i >= 0; i--) {
    const { functionName: f, url, scriptId } = stack[i]!.callFrame;
    if (f === "(garbage collector)") return "GC";
    if (f === "(idle)") return "idle (awaiting: maybeYield's forced-GC wait, timers)";
    if (f === "(program)") return "V8 (program: compile, IC, runtime)";
    if (url.startsWith("wasm://") || /^\$?(js-to-wasm|wasm-to-js)|^wasm-function|JSToWasm/.test(f)) return "kernels: wasm (the main thread's share)";
    if (f === "wait" && !url) return "kernels: waiting for worker threads (Atomics.wait)";
    if (f === "register" && !url) return "allocation: FinalizationRegistry.register";
    if (!url && Number(scriptId) > 0) return "kernels: JS (generated by new Function: loops, erf)"; // code without a file
    if (!url) continue; // a builtin: charge its caller
    if (!url.includes("/packages/torchts/src/")) {
      if (url.includes("/bench/small_step/")) return "the step's own code (model.ts)";
      if (url.startsWith("node:")) continue;
      return "other JS";
    }
    const p = url.slice(url.indexOf("/packages/torchts/src/") + 22);
    if (/^device\/cpu\/wasm\/pool\.ts/.test(p)) return "kernels: pool.run (posting jobs, the caller spin-waiting for the workers)";
    if (/^device\/cpu\/wasm\/arena\.ts/.test(p)) return "allocation: wasm arena (alloc, release, Memory.grow)";
    if (/^device\/cpu\/wasm\/(emitter|codegen|features|fused_reduce|runtime)\.ts/.test(p)) return "kernel code generation / planning";
    if (/^device\/cpu\/(kernels|math)\.ts/.test(p)) return "kernels: JS (kernels.ts loops, odometers, scalar math)";
    if (/^device\//.test(p)) return "kernel launch (device plugin, argument staging, GEMM driver)";
    if (/^runtime\/(dispatch|mode)\.ts/.test(p)) return "dispatch (runPrim, realize)";
    if (/^runtime\/(storage|memory)\.ts/.test(p)) return "allocation (Storage, pool, release)";
    if (/^runtime\/(scheduler|fused_graph)\.ts/.test(p)) return "scheduling (fused graph, plan cache)";
    if (/^runtime\/cache\.ts/.test(p)) return "executable cache (keys, lookups)";
    if (/^runtime\/profiler/.test(p)) return "profiler";
    if (/^ops\/(binder|schema|registry)\.ts/.test(p)) return "binder (argument parsing, op table)";
    if (/^autograd\//.test(p)) return "autograd (nodes, engine)";
    if (/^compile\//.test(p)) return "compile (trace, replay)";
    if (/^(tensor|methods)\.ts/.test(p)) return "Tensor objects, methods";
    if (/^ir\//.test(p)) return "shapes, dtypes, promotion (ir/)";
    return "op library (ops/, nn/: shape logic, decompositions)";
  }
  return "other";
}
const keep = argv.includes("--keep") ? argv[argv.indexOf("--keep") + 1]! : null;
const cpu = new Map<Mode, { ms: number; sampled: number; buckets: Map<string, number>; top: [string, number][] }>();
for (const mode of modes) {
  const dir = keep ? `${keep}/${mode}` : mkdtempSync(`${tmpdir()}/small_step_prof-`);
  const out = execFileSync(process.execPath, ["--cpu-prof", "--cpu-prof-dir", dir, "--cpu-prof-interval", "100", "--import", "tsx", `${here}profile.ts`, "--child", mode, String(STEPS)], { encoding: "utf8" });
  const ms = JSON.parse(out.trim().split("\n").at(-1)!).msPerStep as number;
  // one .cpuprofile per thread: the main thread's is the one with timedSteps in it
  let best: { prof: CpuProfile; under: number } | null = null;
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
    const prof = JSON.parse(readFileSync(`${dir}/${f}`, "utf8")) as CpuProfile;
    const under = prof.nodes.filter((n) => n.callFrame.functionName === "timedSteps").length;
    if (under && (!best || under > best.under)) best = { prof, under };
  }
  if (!keep) rmSync(dir, { recursive: true, force: true });
  if (!best) throw new Error(`profile.ts: no main-thread profile with timedSteps for ${mode}`);
  const { nodes, samples, timeDeltas } = best.prof;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stackOf = (id: number): Node[] => {
    const s: Node[] = [];
    for (let i: number | undefined = id; i !== undefined; i = parent.get(i)) s.unshift(byId.get(i)!);
    return s;
  };
  // the timed loop's samples, plus the idle/GC/program samples between its first and last one
  // (an awaited step leaves the JS stack: those samples have no timedSteps frame)
  const stacks = samples.map(stackOf);
  const inLoop = stacks.map((s) => s.some((n) => n.callFrame.functionName === "timedSteps"));
  const first = inLoop.indexOf(true), last = inLoop.lastIndexOf(true);
  const buckets = new Map<string, number>();
  const selfFn = new Map<string, number>();
  let total = 0;
  for (let i = first; i <= last; i++) {
    const dt = (timeDeltas[i + 1] ?? timeDeltas[i]!) / 1000; // ms this sample stands for
    const b = bucket(stacks[i]!);
    buckets.set(b, (buckets.get(b) ?? 0) + dt);
    const leaf = stacks[i]!.at(-1)!.callFrame;
    const key = `${leaf.functionName || "(anonymous)"} ${leaf.url.replace(/.*\/packages\/torchts\/src\//, "").replace(/.*\/bench\//, "bench/")}`;
    selfFn.set(key, (selfFn.get(key) ?? 0) + dt);
    total += dt;
  }
  cpu.set(mode, { ms, sampled: total / STEPS, buckets: new Map([...buckets].map(([k, v]) => [k, v / STEPS])), top: [...selfFn].sort((a, b) => b[1] - a[1]).slice(0, Math.max(TOP, 12)).map(([k, v]) => [k, v / STEPS]) });
}
console.log(`\n## Part 2: node --cpu-prof, main thread, per step (sampling every 100 us)\n`);
console.log(`| | ${modes.join(" | ")} |`);
console.log(`|---|${modes.map(() => "---:").join("|")}|`);
const cell2 = (f: (c: NonNullable<ReturnType<typeof cpu.get>>) => string) => modes.map((m) => f(cpu.get(m)!)).join(" | ");
console.log(`| ms/step in the profiled child | ${cell2((c) => c.ms.toFixed(1))} |`);
console.log(`| sampled ms/step | ${cell2((c) => c.sampled.toFixed(1))} |`);
const bks = [...new Set(modes.flatMap((m) => [...cpu.get(m)!.buckets.keys()]))].sort((a, b) => Math.max(...modes.map((m) => cpu.get(m)!.buckets.get(b) ?? 0)) - Math.max(...modes.map((m) => cpu.get(m)!.buckets.get(a) ?? 0)));
const isKernel = (b: string) => b.startsWith("kernels");
const sumOf = (c: NonNullable<ReturnType<typeof cpu.get>>, f: (b: string) => boolean) => [...c.buckets].filter(([b]) => f(b)).reduce((a, [, v]) => a + v, 0);
console.log(`| **kernels (wasm, JS, pool)** | ${cell2((c) => `**${sumOf(c, isKernel).toFixed(1)}**`)} |`);
console.log(`| **host (everything else but idle)** | ${cell2((c) => `**${sumOf(c, (b) => !isKernel(b) && !b.startsWith("idle")).toFixed(1)}**`)} |`);
// each bucket with its share of the kernels' or the host's sampled time (the sampler inflates JS-heavy host
// code, so part 1's "outside kernels" is the better absolute figure and these shares split it)
for (const b of bks)
  console.log(`| ${b} | ${cell2((c) => {
    const v = c.buckets.get(b);
    const of = isKernel(b) ? sumOf(c, isKernel) : b.startsWith("idle") ? c.sampled : sumOf(c, (x) => !isKernel(x) && !x.startsWith("idle"));
    return v === undefined ? "-" : `${v.toFixed(2)} (${((100 * v) / of).toFixed(0)}%)`;
  })} |`);
console.log(`\n(ms per step (share of the kernels' time for kernel rows, of the host's for host rows, of the step for idle))`);
for (const m of modes) {
  console.log(`\n${m}: top self time per step (function, file)`);
  for (const [k, v] of cpu.get(m)!.top) console.log(`  ${v.toFixed(2).padStart(6)} ms  ${k}`);
}
