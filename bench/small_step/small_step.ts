// Issue 18's small GPT training step (vocab 96, C 128, 4 heads, 2 layers, T 64, batch 4; raw ops,
// plain SGD) in torchts strict eager, fused eager (each step ends with torch.sync()) and
// torch.compile of the step, against the same step in PyTorch eager (small_step.py, Debian's
// python3-torch 1.13 on OpenBLAS, 2 threads; and at 1 thread, as a reference row), in one run. All
// runners start from the same weights (model.ts writes them for PyTorch) and see the same batches;
// the torchts modes' losses must be identical. Strict and fused also run with each step in torch.scope
// (rows "strict+scope", "fused+scope"), which frees the step's activations as it ends.
// Each runner runs in a process of its own, as a training run does (runner.ts as a script for the
// torchts modes, small_step.py for PyTorch); --one-process runs the torchts runners in this process
// instead, where their garbage collections land in each other's steps and V8 compiles their shared
// host code for all five at once (bench/RESULTS.md, sessions 18 and 20).
// By default each runner runs all its steps (warm-up, then the measured ones) in one go, one runner
// after another (PyTorch first), as a training run does. --turn N interleaves them instead, N steps
// of one runner before the next (the order rotating per round), so load that changes during the run
// hits every runner alike; but a switch costs a torchts process more than PyTorch's (an idle Node
// process comes back slower for several steps: fused eager's median was ~20% higher interleaved in
// turns of 8 than in one go, compiled ~15%, PyTorch's the same; bench/RESULTS.md, session 20). In
// either way, two things about a switch are kept out of the numbers, for every runner alike: a
// runner's process is waited for after its turn until its threads stop (quiet.ts: PyTorch's
// OpenBLAS threads spin ~0.1 s of a core after each turn, which the next runner's steps paid for),
// and the first step of every turn is run but not measured. The median step time after the warm-up
// steps is reported, and the mean beside it (what a training run's throughput sees: a garbage
// collection every few steps lands in the mean, rarely in the median).
// Warm-up: torchts' host code is JavaScript that V8 compiles as it runs (a function reaches its
// optimizing tier after enough calls, and a step calls many functions once or twice), and the wasm
// arena grows to its working size in the first steps; a process reaches its steady step time
// after ~100-150 steps (bench/RESULTS.md, sessions 16 and 18; the "by blocks" lines at the end of
// each run show it). The steady state is what a training run sees, so every runner (PyTorch too)
// first runs --warmup steps, in the same rotation; what those steps cost is printed too (the
// "warm-up ms" column: their mean), so the one-off price shows.
//   node --import tsx bench/small_step/small_step.ts [--quick] [--steps N] [--warmup N] [--turn N] [--passes N] [--one-process] [--python /usr/bin/python3]
// Prints a table, and ROW lines (suite "small-step") for bench/run.ts.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { createInterface } from "node:readline";
import * as torch from "../../packages/torchts/src/index.js";
import { productPeak } from "../../packages/torchts/src/device/cpu/wasm/index.js";
import { QUICK, emit, numberArg, round } from "../lib.js";
import { CFG, batchTensors, batches, writeData } from "./model.js";
import { untilQuiet } from "./quiet.js";
import { makeRunner, type Mode } from "./runner.js";

const MEASURED = numberArg("--steps") ?? (QUICK ? 8 : 48); // per runner, after the warm-up
// per runner; at least 4: compile replays from its fourth call, fused's plan cache fills in the first
const WARM = numberArg("--warmup") ?? (QUICK ? 4 : 150);
/** Steps of one runner before switching to the next (--turn); none: each runner runs all its steps in one go. */
const TURN = numberArg("--turn");
const SEQUENTIAL = TURN === null;
if (!(Number.isInteger(MEASURED) && MEASURED >= 1)) throw new Error(`small_step: --steps must be a positive integer, got ${MEASURED}`);
if (!(Number.isInteger(WARM) && WARM >= 4)) throw new Error(`small_step: --warmup must be an integer of at least 4 (compile replays from its fourth call), got ${WARM}`);
if (!SEQUENTIAL && !(Number.isInteger(TURN) && TURN >= 2)) throw new Error(`small_step: --turn must be an integer of at least 2 (its first step is not measured), got ${TURN}`);
/** Step i is measured: past the warm-up, and (interleaved) not the first of its turn. */
const measured = (i: number) => i >= WARM && (SEQUENTIAL || i % TURN! !== 0);
let STEPS = WARM;
for (let n = 0; n < MEASURED; STEPS++) if (measured(STEPS)) n++;
const ROUND = SEQUENTIAL ? STEPS : TURN!;
const ONE_PROCESS = process.argv.includes("--one-process");
/**
 * One go (no --turn): the whole sequence runs --passes times, each pass in fresh processes (warm-up
 * included), and every runner is reported from the pass where its ratio to that pass's PyTorch
 * median is lowest (a ratio only ever compares runners of one pass). The
 * runners of one pass run minutes apart from each other, so a stretch of load on the shared cores
 * can land on one runner's steps only; a second pass keeps such a stretch from deciding the ratio
 * on its own (the other rows of bench/ report best-of-runs the same way). Interleaved runs hit
 * every runner alike and run one pass.
 */
const PASSES = numberArg("--passes") ?? (TURN === null ? 2 : 1);
if (!(Number.isInteger(PASSES) && PASSES >= 1)) throw new Error(`small_step: --passes must be a positive integer, got ${PASSES}`);
const python = process.argv.includes("--python") ? process.argv[process.argv.indexOf("--python") + 1]! : "/usr/bin/python3";
const here = new URL(".", import.meta.url).pathname;
const S = "small-step";
const W = SEQUENTIAL ? "small GPT train step" : `small GPT train step, interleaved (turns of ${ROUND})`;

// FLOPs per step (forward 2 per multiply-add; backward twice the forward): matmuls only
const { V, C, L, T, B } = CFG;
const fwd = 2 * B * T * (L * (3 * C * C + C * C + 8 * C * C) + C * V) + L * 2 * 2 * B * T * T * C;
const flopsPerStep = 3 * fwd;

// ---- PyTorch workers (2 threads: the peer; 1 thread: for reference) ----
// torchts runs at the peer's thread count too (its default is every core), so the ratios compare like with like
const PEER_THREADS = 2;
torch.backends.cpu.setNumThreads(PEER_THREADS);
const dir = mkdtempSync(`${tmpdir()}/small_step-`);
writeData(dir, STEPS);
// torchts' products run on its AVX-512 GEMM where the CPU has one, else on OpenBLAS when the
// bridge loads. PyTorch runs its OpenBLAS as installed (this environment's OPENBLAS_CORETYPE, if
// set); when torchts runs OpenBLAS too, PyTorch gets the same core type (the bridge may pick
// another than PyTorch's OpenBLAS would on its own: SkylakeX on AMD's AVX-512 cores)
const blasCore = /core (\w+)$/.exec(torch.backends.cpu.info().blas)?.[1];
const pyEnv = { ...process.env, ...(blasCore ? { OPENBLAS_CORETYPE: blasCore } : {}) };
/** A runner process speaking small_step.py's line protocol (a ready line, then "run K" -> one JSON line). */
function lineWorker(cmd: string, args: string[], env: NodeJS.ProcessEnv, what: string) {
  const py = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"], env });
  const pending: ((l: string) => void)[] = [], early: string[] = []; // lines nobody asked for yet wait in early
  createInterface({ input: py.stdout }).on("line", (l) => (pending.length ? pending.shift()!(l) : early.push(l)));
  const exit = new Promise<number | string | null>((r) => {
    py.on("exit", (c) => r(c));
    py.on("error", (e) => r(e.message)); // no such interpreter
  });
  py.stdin.on("error", () => {}); // writes to a dead worker: its exit is reported instead
  return {
    exit,
    pid: py.pid,
    close: () => py.stdin.write("quit\n"),
    async ask(cmd?: string): Promise<Record<string, unknown>> {
      const got = new Promise<string>((r) => (early.length ? r(early.shift()!) : pending.push(r)));
      if (cmd) py.stdin.write(cmd + "\n");
      const l = await Promise.race([got, exit.then((c) => { throw new Error(`${what} exited (${c}) before answering '${cmd ?? "ready"}'`); })]);
      return JSON.parse(l) as Record<string, unknown>;
    },
  };
}
const pyWorker = (threads: number) => lineWorker(python, [`${here}small_step.py`, dir, "--threads", String(threads)], pyEnv, "small_step.py");
// without PyTorch (no /usr/bin/python3 with torch), the torchts rows still run, with no ratio
let hello: Record<string, unknown> = {};
let pyError = "";
/** This pass's PyTorch workers (2 threads, 1 thread), started and checked; null without PyTorch. */
async function pyWorkers(): Promise<[ReturnType<typeof pyWorker>, ReturnType<typeof pyWorker>] | null> {
  if (pyError) return null;
  const py2 = pyWorker(PEER_THREADS), py1 = pyWorker(1);
  try {
    hello = await py2.ask();
    await py1.ask();
    if (hello.threads !== torch.backends.cpu.getNumThreads())
      throw new Error(`PyTorch runs ${String(hello.threads)} threads, torchts ${torch.backends.cpu.getNumThreads()}: no like-for-like peer`);
    return [py2, py1];
  } catch (e) {
    pyError = String((e as Error).message ?? e);
    process.stderr.write(`small_step: PyTorch unavailable (${python}): ${pyError}; running the torchts modes only\n`);
    for (const w of [py2, py1]) w.close();
    return null;
  }
}

// ---- runners ----
interface Runner {
  name: string;
  times: number[];
  losses: number[];
  /** Runs steps i .. i+k-1 back to back, recording each one's time and loss. */
  run(i: number, k: number): Promise<void>;
  /** A runner in a process of its own: CPU ticks (10 ms) it burnt after its turns, while the next turn waited (quiet.ts). */
  spinTicks: number;
}
const data = ONE_PROCESS ? batches(STEPS).map(batchTensors) : [];
/** `scoped`: the eager step runs in torch.scope, which frees its activations when it ends instead of leaving them to the garbage collector. */
let tsWorkers: ReturnType<typeof lineWorker>[] = []; // this pass's
async function tsRunner(mode: Mode, scoped = false): Promise<Runner> {
  const r: Runner = { name: scoped ? `${mode}+scope` : mode, times: [], losses: [], run: async () => {}, spinTicks: 0 };
  const record = (got: { times: number[]; losses: number[] }) => {
    r.times.push(...got.times);
    r.losses.push(...got.losses);
  };
  if (ONE_PROCESS) {
    const run = makeRunner(mode, scoped, data);
    r.run = async (_i, k) => record(await run(k));
    return r;
  }
  const w = lineWorker(process.execPath, ["--import", "tsx", `${here}runner.ts`, "--mode", mode, ...(scoped ? ["--scoped"] : []), "--batches", String(STEPS), "--threads", String(PEER_THREADS)], process.env, `the ${r.name} runner`);
  tsWorkers.push(w);
  const hi = await w.ask();
  if (hi.threads !== PEER_THREADS) throw new Error(`small_step: the ${r.name} runner runs ${String(hi.threads)} threads, not ${PEER_THREADS}`);
  r.run = async (_i, k) => {
    record((await w.ask(`run ${k}`)) as { times: number[]; losses: number[] });
    r.spinTicks += await untilQuiet(w.pid);
  };
  return r;
}
function pyRunner(name: string, w: ReturnType<typeof pyWorker>): Runner {
  const r: Runner = {
    name, times: [], losses: [], spinTicks: 0,
    async run(_i, k) {
      const got = (await w.ask(`run ${k}`)) as { times: number[]; losses: number[] };
      r.times.push(...got.times);
      r.losses.push(...got.losses);
      r.spinTicks += await untilQuiet(w.pid); // its BLAS threads spin on after the turn: not in the next runner's steps
    },
  };
  return r;
}
/** One pass: every runner in fresh processes, warm-up and measured steps (see PASSES). */
async function runPass(): Promise<{ runners: Runner[]; pt: Runner | null; pt1: Runner | null }> {
  tsWorkers = [];
  const py = await pyWorkers();
  const pt = py ? pyRunner("pytorch", py[0]) : null, pt1 = py ? pyRunner("pytorch-1t", py[1]) : null;
  const runners = [await tsRunner("strict"), await tsRunner("fused"), await tsRunner("compiled"), await tsRunner("strict", true), await tsRunner("fused", true)];
  for (let done = 0, round = 0; done < STEPS; done += ROUND, round++) {
    const k = Math.min(ROUND, STEPS - done);
    const order = !pt || !pt1 ? [...runners] : SEQUENTIAL ? [pt, ...runners, pt1] : [...runners, pt, pt1];
    for (let s = 0; s < round % order.length; s++) order.push(order.shift()!); // rotate
    for (const r of order) await r.run(done, k);
  }
  const ws = [...(py ?? []), ...tsWorkers];
  for (const w of ws) w.close();
  await Promise.all(ws.map((w) => w.exit));
  return { runners, pt, pt1 };
}
const load0 = loadavg()[0]!;
const t0 = performance.now();
const passes: Awaited<ReturnType<typeof runPass>>[] = [];
for (let p = 0; p < PASSES; p++) passes.push(await runPass());
rmSync(dir, { recursive: true, force: true });
const wallS = (performance.now() - t0) / 1000;

// ---- report ----
const median = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1]!;
const steady = (r: Runner) => r.times.filter((_, i) => measured(i));
// A ratio compares a runner with the PyTorch peer of its own pass (rows measured together): each
// torchts runner is reported from the pass where that ratio is lowest, the peer rows from the pass
// where PyTorch's median is lowest (without PyTorch: each runner's lowest median).
const nobody: Runner = { name: "pytorch", times: [], losses: [], spinTicks: 0, run: async () => {} };
const havePeer = !pyError && passes.every((p) => p.pt && p.pt1);
const med = (r: Runner) => median(steady(r));
const lowest = (xs: number[]) => xs.indexOf(Math.min(...xs));
const ptPass = havePeer ? lowest(passes.map((p) => med(p.pt!))) : 0;
const pt = havePeer ? passes[ptPass]!.pt! : nobody, pt1 = havePeer ? passes[ptPass]!.pt1! : nobody;
const peers = havePeer ? [pt, pt1] : [];
/** The runner's pass's PyTorch peer, what its ratios are taken against. */
const peerOf = new Map<Runner, Runner>([[pt1, pt]]);
const passNotes = new Map<Runner, string>();
const runners = passes[0]!.runners.map((_, i) => {
  const rs = passes.map((p) => p.runners[i]!);
  const ratios = havePeer ? passes.map((p, k) => med(rs[k]!) / med(p.pt!)) : rs.map(med);
  const k = lowest(ratios);
  if (havePeer) peerOf.set(rs[k]!, passes[k]!.pt!);
  if (PASSES > 1)
    passNotes.set(rs[k]!, `; its ${PASSES} passes: medians ${rs.map((r) => round(med(r))).join(", ")} ms` +
      (havePeer ? `, PyTorch's ${passes.map((p) => round(med(p.pt!))).join(", ")} ms, ratios ${ratios.map((x) => x.toFixed(2)).join(", ")} (the lowest reported)` : " (the lowest reported)"));
  return rs[k]!;
});
if (PASSES > 1 && havePeer) for (const r of peers) passNotes.set(r, `; medians of its ${PASSES} passes ${passes.map((p) => round(med(r === pt ? p.pt! : p.pt1!))).join(", ")} ms (the pass with PyTorch's lowest reported)`);
const passNote = (r: Runner) => passNotes.get(r) ?? "";
// every torchts runner of every pass starts from the same weights and sees the same batches
const same = passes.every((p) => p.runners.every((r) => r.losses.every((l, i) => Object.is(l, runners[0]!.losses[i]))));
const firstN = Math.min(10, STEPS);
const maxDiff = (n: number) => !havePeer ? NaN : Math.max(...runners[0]!.losses.slice(0, n).map((l, i) => Math.abs(l - pt.losses[i]!)));
const dFirst = maxDiff(firstN), dAll = maxDiff(STEPS);
// the FMA peak of the units the products run on (AVX-512 or wasm SIMD; best of two: the cores are shared)
const peak = [productPeak(), productPeak()].reduce((p, q) => (q && (!p || q.flops > p.flops) ? q : p), null);
const lossNote = `losses across torchts modes ${same ? "identical" : "DIFFER"}` +
  (!havePeer ? "" : `; max abs(torchts - PyTorch) ${dFirst.toExponential(1)} over the first ${firstN} steps, ${dAll.toExponential(1)} over ${STEPS}`);
console.log(`small GPT step (V ${V}, C ${C}, ${CFG.H} heads, ${L} layers, T ${T}, B ${B}; raw ops, SGD lr ${CFG.lr}), ${MEASURED} measured steps per runner after ${WARM} warm-up steps, ${SEQUENTIAL ? "each runner's steps in one go, one runner after another" : `${ROUND} per turn (the first not measured)`}, ${ONE_PROCESS ? "the torchts runners in one process" : "each runner in its own process"}${PASSES > 1 ? `; ${PASSES} passes, each runner reported from its pass with the lowest ratio to that pass's PyTorch` : ""}, ${wallS.toFixed(1)} s`);
console.log(`load average ${load0.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end (${cpus().length} cores)${Math.max(load0, loadavg()[0]!) > 1.5 ? ": other processes shared the cores; PyTorch's OpenMP threads suffer most (a preempted thread stalls the barrier)" : ""}`);
console.log(`${pyError ? `PyTorch unavailable (${pyError})` : `PyTorch ${hello.torch} eager, ${hello.threads} threads`}; torchts ${torch.backends.cpu.getNumThreads()} threads; FMA peak ${peak ? round(peak.flops / 1e9) : "?"} GFLOP/s (${peak?.threads ?? "?"} threads, ${peak?.unit ?? "?"}); ${(flopsPerStep / 1e6).toFixed(0)} MFLOP/step (matmuls)`);
{
  const i = torch.backends.cpu.info();
  console.log(`torchts float32 GEMM: ${i.blas ? `${i.blas} (the pool's threads)` : `wasm SIMD (${i.blasReason})`}; PyTorch's: its OpenBLAS${pyEnv.OPENBLAS_CORETYPE ? `, OPENBLAS_CORETYPE=${pyEnv.OPENBLAS_CORETYPE}` : ""}`);
}
console.log(`runner         median ms   mean ms   best ms   first ms   warm-up ms   / PyTorch   mean / PyTorch's   % FMA peak`);
const mean = (a: number[]) => a.reduce((p, q) => p + q, 0) / a.length;
const warmMean = (r: Runner) => r.times.slice(0, WARM).reduce((p, q) => p + q, 0) / WARM;
for (const r of [...runners, ...peers]) {
  const st = steady(r);
  const m = median(st);
  const peer = peerOf.get(r);
  const ptMs = peer ? med(peer) : NaN;
  const ratio = r === pt ? "(peer)" : r === pt1 ? "(ref)" : !peer ? "-" : `${(m / ptMs).toFixed(2)}x`;
  const meanRatio = r === pt ? "(peer)" : r === pt1 ? "(ref)" : !peer ? "-" : `${(mean(st) / mean(steady(peer))).toFixed(2)}x`;
  const pct = peak ? `${((100 * flopsPerStep) / (m / 1000) / peak.flops).toFixed(1)}%` : "?";
  console.log(`${r.name.padEnd(14)} ${m.toFixed(1).padStart(9)} ${mean(st).toFixed(1).padStart(9)} ${Math.min(...st).toFixed(1).padStart(9)} ${r.times[0]!.toFixed(0).padStart(10)} ${warmMean(r).toFixed(1).padStart(12)} ${ratio.padStart(11)} ${meanRatio.padStart(18)} ${pct.padStart(12)}`);
  emit({
    suite: S, workload: W, variant: r === pt ? `pytorch ${hello.torch} eager` : r === pt1 ? `pytorch ${hello.torch} eager 1 thread` : `torchts ${r.name}`, ms: round(Math.min(...st)), medianMs: round(m), meanMs: round(mean(st)),
    // the peer's median in the same pass: what run.ts divides by
    ...(peer ? { peerMs: round(ptMs) } : r === pt ? { peerMs: round(m) } : {}),
    gflops: round(flopsPerStep / (m / 1000) / 1e9),
    note: r === pt || r === pt1
      ? `${r === pt ? "the peer" : "for reference, not the peer"}; ${r === pt ? hello.threads : 1} thread(s); first step ${round(r.times[0]!)} ms; ${WARM} warm-up steps ${round(warmMean(r))} ms on average; losses ${r.losses.slice(0, 3).map((l) => l.toFixed(5)).join(" ")} ... ${r.losses.at(-1)!.toFixed(5)}${passNote(r)}`
      : `${!peer ? "no PyTorch peer" : `vs PyTorch eager ${round(ptMs)} ms: ${(m / ptMs).toFixed(2)}x`}; first step ${round(r.times[0]!)} ms; ${WARM} warm-up steps ${round(warmMean(r))} ms on average${!peer ? "" : ` (${(warmMean(r) / warmMean(peer)).toFixed(2)}x PyTorch's)`}; ${lossNote}${passNote(r)}`,
  });
}
if (pyError) emit({ suite: S, workload: W, variant: "pytorch eager", error: `PyTorch unavailable (${python}): ${pyError}`.slice(0, 300) });
console.log(`losses: strict ${runners[0]!.losses.slice(0, 4).map((l) => l.toFixed(6)).join(" ")} ... ${runners[0]!.losses.at(-1)!.toFixed(6)}`);
if (havePeer) console.log(`        pytorch ${pt.losses.slice(0, 4).map((l) => l.toFixed(6)).join(" ")} ... ${pt.losses.at(-1)!.toFixed(6)}`);
console.log(lossNote);
if (!same) for (const r of runners) console.log(`  ${r.name}: ${r.losses.map((l) => l.toFixed(7)).join(" ")}`);
// how each runner's step time settles: medians of consecutive blocks of its steps (warm-up ones
// included), so a run shows whether the measured steps were past the warm-up
{
  const BLOCK = 24;
  console.log(`step ms by blocks of ${BLOCK} steps per runner${PASSES > 1 ? " (its reported pass)" : ""} (median of each; the measured steps are those after the first ${WARM}${SEQUENTIAL ? "" : ", less the first of each turn"}):`);
  for (const r of [...runners, ...peers]) {
    const meds: string[] = [];
    for (let b = 0; b < r.times.length; b += BLOCK) meds.push(median(r.times.slice(b, b + BLOCK)).toFixed(1));
    console.log(`  ${r.name.padEnd(14)} ${meds.join(" ")}`);
  }
}
{
  const turns = Math.ceil(STEPS / ROUND);
  const spun = [...runners, ...peers].filter((r) => r.spinTicks > 0).map((r) => `${r.name} ${((10 * r.spinTicks) / turns).toFixed(0)} ms`);
  if (spun.length) console.log(`CPU time runner processes burnt after their turns, waited out before the next turn (quiet.ts), per turn: ${spun.join(", ")}`);
}
// the first step of a turn follows another runner's turn: what the switch costs shows here
if (!SEQUENTIAL) {
  console.log(`step ms after the warm-up by position in the turn (median of each; the first is not measured):`);
  for (const r of [...runners, ...peers]) {
    const pos = Array.from({ length: ROUND }, (_, p) => median(r.times.filter((_, i) => i >= WARM && i % ROUND === p)).toFixed(2));
    console.log(`  ${r.name.padEnd(14)} ${pos.join(" ")}`);
  }
}
