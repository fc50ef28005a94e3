// What V8's garbage collector costs the small training step, per eager mode, measured the way a
// training loop runs (no forced collections): each mode runs in its own Node process under
// --trace-gc-nvp, and the collections of the second half of its steps are summed. Reports, per
// 100 steps, the young-generation collections (scavenges: their count, mean pause and the bytes
// each promotes to the old generation) and the full ones (mark-compacts, most of them torchts'
// own: memory.ts collects before the wasm arena grows, and after a flush leaves 64 MB of old
// values behind), and the collector's milliseconds per step. `--pretenuring` also runs each mode
// with V8's allocation-site pretenuring left on (TORCHTS_V8_PRETENURING=1; bench/RESULTS.md,
// session 17).
//   node --import tsx bench/small_step/gc_stats.ts [--steps 400] [--batches N] [--pretenuring]
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { numberArg } from "../lib.js";

const self = fileURLToPath(import.meta.url);
const child = process.argv.indexOf("--child");
if (child >= 0) {
  const mode = process.argv[child + 1] as "strict" | "fused" | "compiled";
  const steps = Number(process.argv[child + 2]);
  const nb = Number(process.argv[child + 3]) || steps;
  const torch = await import("../../packages/torchts/src/index.js");
  const { batchTensors, batches, makeModel, step } = await import("./model.js");
  torch.backends.cpu.setNumThreads(2);
  const m = makeModel();
  const data = batches(nb).map(batchTensors);
  const fn = mode === "compiled" ? torch.compile((x: typeof data[0][0], y: typeof data[0][0]) => step(m, x, y)) : (x: typeof data[0][0], y: typeof data[0][0]) => step(m, x, y);
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) {
    if (i === steps >> 1) console.log(`MARK ${performance.now() - t0}`); // the second half starts
    await torch.withEagerMode(mode === "strict" ? "strict" : "fused", async () => {
      const l = fn(...data[i % nb]!);
      torch.sync();
      return await l.item();
    });
  }
  console.log(`END ${performance.now() - t0}`);
  process.exit(0);
}

const STEPS = numberArg("--steps") ?? 400;
if (!(Number.isInteger(STEPS) && STEPS >= 20)) throw new Error(`gc_stats: --steps must be an integer of at least 20, got ${STEPS}`);
// --batches N: cycle over N batches instead of one per step. With fewer batch tensors live, where
// the host reads fall against the arena's collections changes: 100 batches over 600 steps is the
// loop in which strict eager collected twice in a row (session 23's scratch loop, bench/RESULTS.md).
const BATCHES = numberArg("--batches") ?? STEPS;
if (!(Number.isInteger(BATCHES) && BATCHES >= 1)) throw new Error(`gc_stats: --batches must be a positive integer, got ${BATCHES}`);
const variants: [string, Record<string, string>][] = [["", {}]];
if (process.argv.includes("--pretenuring")) variants.push([" (pretenuring on)", { TORCHTS_V8_PRETENURING: "1" }]);
console.log(`small GPT step, 2 threads; collections over the second half of ${STEPS} steps (${BATCHES} batches, cycled), per 100 steps`);
console.log(`mode                        scavenges  mean pause ms  promoted KB each   mark-compacts  mean pause ms   GC ms/step   step ms (mean)`);
for (const mode of ["strict", "fused", "compiled"])
  for (const [label, env] of variants) {
    const r = spawnSync(process.execPath, ["--trace-gc-nvp", "--import", "tsx", self, "--child", mode, String(STEPS), String(BATCHES)], { env: { ...process.env, ...env }, encoding: "utf8", maxBuffer: 256 << 20 });
    if (r.status !== 0) throw new Error(`gc_stats: the ${mode} run failed (${r.status}): ${r.stderr.slice(-500)}`);
    // collection lines print "<pid> <ms> ms: pause=... gc=s|mc ... promoted=..."; MARK/END are ours
    let inHalf = false;
    const sc = { n: 0, pause: 0, promoted: 0 }, mc = { n: 0, pause: 0 };
    let mark = 0, end = 0;
    for (const line of r.stdout.split("\n")) {
      if (line.startsWith("MARK ")) [inHalf, mark] = [true, Number(line.slice(5))];
      else if (line.startsWith("END ")) end = Number(line.slice(4));
      else if (inHalf && line.includes(" gc=")) {
        const kind = / gc=(\w+)/.exec(line)?.[1];
        const pause = Number(/ pause=([\d.]+)/.exec(line)?.[1] ?? 0);
        if (kind === "s") {
          sc.n++;
          sc.pause += pause;
          sc.promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
        } else if (kind === "mc" || kind === "mmc") {
          mc.n++;
          mc.pause += pause;
        }
      }
    }
    const half = STEPS - (STEPS >> 1);
    const per100 = (x: number) => ((100 * x) / half).toFixed(1);
    const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "-");
    console.log(
      `${(mode + label).padEnd(27)} ${per100(sc.n).padStart(10)} ${f(sc.pause / sc.n).padStart(14)} ${f(sc.promoted / sc.n / 1024, 0).padStart(17)} ${per100(mc.n).padStart(15)} ${f(mc.pause / mc.n).padStart(14)} ${f((sc.pause + mc.pause) / half).padStart(12)} ${f((end - mark) / half).padStart(16)}`,
    );
  }
