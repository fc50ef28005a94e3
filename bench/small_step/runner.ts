// One torchts runner of small_step.ts: the small GPT step of model.ts in one eager mode (or
// torch.compile of it), optionally with each step in torch.scope. small_step.ts runs each runner in a
// process of its own (this file as a script) and drives it over stdin with the protocol of
// small_step.py (with --one-process it makes them in its own process with makeRunner):
//   "run K"  -> K more steps; prints one JSON line {"times": [ms...], "losses": [...]}
//   "quit"   -> exits
//   node --import tsx bench/small_step/runner.ts --mode fused|strict|compiled [--scoped] --batches N --threads T
import { createInterface } from "node:readline";
import * as torch from "../../packages/torchts/src/index.js";
import { batchTensors, batches, makeModel, step } from "./model.js";

export type Mode = "strict" | "fused" | "compiled";

/** A runner: `run(k)` runs its next k steps (batch i for its i-th step), returning their times and losses. */
export function makeRunner(mode: Mode, scoped: boolean, data: [torch.Tensor, torch.Tensor][]) {
  const m = makeModel();
  const fn = mode === "compiled" ? torch.compile((x: torch.Tensor, y: torch.Tensor) => step(m, x, y), { name: "small_step" }) : (x: torch.Tensor, y: torch.Tensor) => step(m, x, y);
  const eager = mode === "strict" ? "strict" : "fused";
  let next = 0;
  return async (k: number): Promise<{ times: number[]; losses: number[] }> => {
    const times: number[] = [], losses: number[] = [];
    for (let j = 0; j < k; j++, next++) {
      if (next >= data.length) throw new Error(`small_step runner: asked for step ${next}, only ${data.length} batches were made`);
      const [x, y] = data[next]!;
      const t0 = performance.now();
      const v = await torch.withEagerMode(eager, async () => {
        const run = () => {
          const l = fn(x, y);
          torch.sync(); // fused: the backward and update run now, charged to this step
          return l;
        };
        const l = scoped ? torch.scope(run) : run();
        const loss = await l.item();
        if (scoped) l.dispose();
        return loss;
      });
      times.push(performance.now() - t0);
      losses.push(v);
    }
    return { times, losses };
  };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

if (process.argv.includes("--mode")) {
  const mode = arg("--mode") as Mode;
  if (!["strict", "fused", "compiled"].includes(mode)) throw new Error(`small_step runner: --mode must be strict, fused or compiled, got ${String(mode)}`);
  const n = Number(arg("--batches"));
  const threads = Number(arg("--threads"));
  if (!(Number.isInteger(n) && n > 0 && Number.isInteger(threads) && threads > 0)) throw new Error("small_step runner: --batches and --threads must be positive integers");
  torch.backends.cpu.setNumThreads(threads);
  const run = makeRunner(mode, process.argv.includes("--scoped"), batches(n).map(batchTensors));
  console.log(JSON.stringify({ ready: true, threads: torch.backends.cpu.getNumThreads() }));
  // one command at a time: the next line is read only after this one's steps are done
  for await (const line of createInterface({ input: process.stdin })) {
    const cmd = line.trim().split(/\s+/);
    if (cmd[0] === "quit" || cmd[0] === "") break;
    const k = Number(cmd[1]);
    if (cmd[0] !== "run" || !(Number.isInteger(k) && k > 0)) throw new Error(`small_step runner: unknown command '${line}'`);
    console.log(JSON.stringify(await run(k)));
  }
  process.exit(0);
}
