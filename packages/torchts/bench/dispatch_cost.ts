// Per-op dispatch cost, before and after a change, in one run: the minGPT example's training step
// (2L/d64 B8 T64) in strict eager, from this checkout and from another one (`--base`, e.g. a git
// worktree of the commit before), alternating processes so that load hits both alike.
//   cd packages/torchts && node --import tsx bench/dispatch_cost.ts --base /tmp/base/packages/torchts [--rounds 5] [--steps 40]
import { execFileSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { base: { type: "string" }, rounds: { type: "string", default: "5" }, steps: { type: "string", default: "40" } },
});
if (!values.base) throw new Error("dispatch_cost: --base DIR (another checkout's packages/torchts) is required");
const here = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const trees = { base: resolve(values.base), head: here };
const times: Record<string, number[]> = { base: [], head: [] };
const median = (a: number[]) => [...a].sort((p, q) => p - q)[Math.floor(a.length / 2)]!;
for (let r = 0; r < Number(values.rounds); r++)
  for (const [name, dir] of Object.entries(trees)) {
    const out = execFileSync(process.execPath, ["--expose-gc", "--import", "tsx", join(dir, "bench/compile_mingpt.ts"), "--steps", values.steps!, "--modes", "strict"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, TORCHTS_EAGER_MODE: "" },
    });
    const m = /strict\s+([\d.]+) ms\/step/.exec(out);
    if (!m) throw new Error(`no strict step time in the output of ${dir}:\n${out}`);
    times[name]!.push(Number(m[1]));
    console.log(`round ${r + 1} ${name.padEnd(4)} ${m[1]} ms/step`);
  }
const b = median(times.base!);
const h = median(times.head!);
console.log(`strict minGPT step: base ${b.toFixed(1)} ms (${times.base!.join(", ")}), head ${h.toFixed(1)} ms (${times.head!.join(", ")}); head/base ${(h / b).toFixed(3)}`);
