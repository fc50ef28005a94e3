// minGPT training-step timings per execution mode: strict eager, fused eager, torch.compile
// (replaying the recorded kernels from the fourth call on) and torch.compile with replay off
// ("rerun": every call runs the function, reusing schedule and kernels).
// Steps of the modes are interleaved (strict, fused, compile, strict, ...) so that load from
// other processes hits every mode alike; the median step time after warmup is reported.
// Run: cd packages/torchts && node --expose-gc --import tsx bench/compile_mingpt.ts [--steps N] [--modes strict,fused,compile,rerun] [--top]
// (--top: the twelve kernels with the most time per step, per mode)
import * as torch from "../src/index.js";
import { GPT } from "../../../examples/mingpt/model.js";

const argv = process.argv.slice(2);
const opt = (k: string) => (argv.includes(k) ? argv[argv.indexOf(k) + 1] : undefined);
const steps = Number(opt("--steps") ?? 12);
const modes = (opt("--modes") ?? "strict,fused,compile,rerun").split(",");
const B = 8, T = 64, V = 65, WARM_STEPS = 3;

function setup(mode: string) {
  torch.manualSeed(0);
  const model = new GPT({ vocabSize: V, blockSize: T, nLayer: 2, nHead: 4, nEmbd: 64 });
  const o = model.configureOptimizer({ lr: 3e-3, betas: [0.9, 0.95], weightDecay: 0.1 });
  const step = (x: torch.Tensor, y: torch.Tensor) => {
    const { loss } = model.forward(x, y);
    o.zeroGrad({ setToNone: true });
    loss!.backward();
    torch.nn.utils.clipGradNorm_([...model.parameters()], 1.0);
    o.step();
    return loss!;
  };
  const compiled = mode === "compile" || mode === "rerun";
  const fn = compiled ? torch.compile(step, { modules: [model], replay: mode === "compile", name: mode }) : step;
  const eager = (compiled ? "fused" : mode) as torch.EagerMode;
  return { fn, eager, times: [] as number[], losses: [] as number[] };
}

const runs = new Map(modes.map((m) => [m, setup(m)]));
const batches = Array.from({ length: steps }, (_, i) => {
  torch.manualSeed(100 + i);
  return [torch.randint(0, V, [B, T]), torch.randint(0, V, [B, T])] as const;
});
for (let i = 0; i < steps; i++) {
  for (const r of runs.values()) {
    const [x, y] = batches[i]!;
    const t0 = performance.now();
    // sync: the step's deferred work (fused backward/optimizer) is charged to its own mode
    const l = await torch.withEagerMode(r.eager, async () => {
      const v = await r.fn(x, y).item();
      torch.sync();
      return v;
    });
    r.times.push(performance.now() - t0);
    r.losses.push(l);
  }
}
const median = (a: number[]) => [...a].sort((p, q) => p - q)[Math.floor(a.length / 2)]!;
const WARM = Math.min(WARM_STEPS, steps - 1);
const ms = new Map([...runs].map(([m, r]) => [m, median(r.times.slice(WARM))]));
for (const [m, r] of runs)
  console.log(`${m.padEnd(8)} ${ms.get(m)!.toFixed(1).padStart(7)} ms/step (median of ${steps - WARM}, best ${Math.min(...r.times.slice(WARM)).toFixed(1)})  losses ${r.losses.slice(0, 3).map((l) => l.toFixed(5)).join(" ")} ... ${r.losses.at(-1)!.toFixed(5)}`);
// Where a step goes: kernels per step and kernel time per step (torch.profiler over a few more
// steps per mode); the rest of a step is dispatch, autograd, scheduling and garbage collection.
const PROF_STEPS = 5;
for (const [m, r] of runs) {
  const p = torch.profiler.profile();
  const t0 = performance.now();
  for (let i = 0; i < PROF_STEPS; i++) {
    const [x, y] = batches[i % batches.length]!;
    await torch.withEagerMode(r.eager, async () => {
      await r.fn(x, y).item();
      torch.sync();
    });
  }
  p.stop();
  const wall = (performance.now() - t0) / PROF_STEPS;
  const ka = p.keyAverages();
  const n = ka.reduce((s, k) => s + k.count, 0) / PROF_STEPS;
  const kms = ka.reduce((s, k) => s + k.totalMs, 0) / PROF_STEPS;
  console.log(`${m.padEnd(8)} profiled: ${n.toFixed(0)} kernels/step, kernel time ${kms.toFixed(1)} ms of ${wall.toFixed(1)} ms/step (${(100 * kms / wall).toFixed(0)}%)`);
  if (argv.includes("--top"))
    for (const k of [...ka].sort((a, b) => b.totalMs - a.totalMs).slice(0, 12))
      console.log(`    ${(k.totalMs / PROF_STEPS).toFixed(2).padStart(6)} ms ${String(k.count / PROF_STEPS).padStart(4)}x ${k.name}`);
}
const base = runs.get("strict");
if (base) {
  for (const [m, r] of runs) {
    if (m === "strict") continue;
    const d = Math.max(...r.losses.map((l, i) => Math.abs(l - base.losses[i]!)));
    console.log(`${m}: ${(ms.get("strict")! / ms.get(m)!).toFixed(2)}x faster than strict; max |loss - strict loss| = ${d.toExponential(2)}`);
  }
}
console.log("compile stats:", JSON.stringify(torch.compiler.stats()));
