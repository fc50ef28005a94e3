// Does a process that sat idle come back slower, and by as much for PyTorch as for torchts? The
// interleaved small-step mode (small_step.ts --turn 8) makes every runner wait through the others'
// turns, and fused eager's ratio was worse there than in one go. This runs blocks of 8 steps, each
// either right after the previous block or after a 150 ms sleep (the order alternates), for PyTorch
// eager (small_step.py, 2 threads) and then torchts in one mode, and prints the median step time
// at each position of a block both ways.
//   node --import tsx bench/small_step/idle_penalty.ts [--mode fused|strict|compiled] [--blocks N] [--sleep MS] [--python /usr/bin/python3]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import * as torch from "../../packages/torchts/src/index.js";
import { numberArg } from "../lib.js";
import { batchTensors, batches, makeModel, step, writeData } from "./model.js";

const arg = (name: string, def: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1]! : def);
const MODE = arg("--mode", "fused");
const BLOCKS = numberArg("--blocks") ?? 40; // of each kind
const SLEEP = numberArg("--sleep") ?? 150; // numberArg: a non-negative integer or an error
const PYTHON = arg("--python", "/usr/bin/python3");
const K = 8;
const WARM = 200;
if (!["fused", "strict", "compiled"].includes(MODE)) throw new Error(`idle_penalty: --mode must be fused, strict or compiled, got '${MODE}'`);
if (!(Number.isInteger(BLOCKS) && BLOCKS >= 1)) throw new Error(`idle_penalty: --blocks must be a positive integer, got ${BLOCKS}`);

const dir = mkdtempSync(join(tmpdir(), "idle-penalty-"));
writeData(dir, 100);
const here = fileURLToPath(new URL(".", import.meta.url));
const py = spawn(PYTHON, [join(here, "small_step.py"), dir, "--threads", "2"], { stdio: ["pipe", "pipe", "inherit"] });
const lines = createInterface({ input: py.stdout! })[Symbol.asyncIterator]();
const hello = await lines.next();
if (hello.done) throw new Error(`idle_penalty: ${PYTHON} bench/small_step/small_step.py did not start (python3-torch installed?)`);
const pyRun = async (k: number): Promise<number[]> => {
  py.stdin!.write(`run ${k}\n`);
  const r = await lines.next();
  if (r.done) throw new Error("idle_penalty: the PyTorch runner exited");
  return (JSON.parse(r.value) as { times: number[] }).times;
};

torch.backends.cpu.setNumThreads(2);
const m = makeModel();
const data = batches(100).map(batchTensors);
const fn = MODE === "compiled" ? torch.compile((x: torch.Tensor, y: torch.Tensor) => step(m, x, y)) : (x: torch.Tensor, y: torch.Tensor) => step(m, x, y);
let next = 0;
const tsRun = async (k: number): Promise<number[]> => {
  const out: number[] = [];
  for (let j = 0; j < k; j++) {
    const [x, y] = data[next++ % data.length]!;
    const t0 = performance.now();
    await torch.withEagerMode(MODE === "strict" ? "strict" : "fused", async () => {
      const l = fn(x, y);
      torch.sync();
      return await l.item();
    });
    out.push(performance.now() - t0);
  }
  return out;
};

const median = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
try {
  for (const [name, run] of [["PyTorch eager", pyRun], [`torchts ${MODE}`, tsRun]] as const) {
    await run(WARM);
    const blocks: Record<"idle" | "busy", number[][]> = { idle: [], busy: [] };
    for (let b = 0; b < BLOCKS; b++)
      for (const kind of b % 2 ? (["busy", "idle"] as const) : (["idle", "busy"] as const)) {
        if (kind === "idle") await sleep(SLEEP);
        blocks[kind].push(await run(K));
      }
    const byPos = (kind: "idle" | "busy") => Array.from({ length: K }, (_, p) => median(blocks[kind].map((s) => s[p]!)).toFixed(2)).join(" ");
    const all = (kind: "idle" | "busy") => median(blocks[kind].flat());
    console.log(`${name}: median step ms by position in a block of ${K}`);
    console.log(`  after a ${SLEEP} ms sleep: ${byPos("idle")}`);
    console.log(`  back to back:        ${byPos("busy")}`);
    console.log(`  all positions: ${all("idle").toFixed(2)} after a sleep, ${all("busy").toFixed(2)} back to back (+${(all("idle") - all("busy")).toFixed(2)} ms)`);
  }
} finally {
  py.stdin!.write("quit\n");
  rmSync(dir, { recursive: true, force: true });
}
