// Peak wasm-arena memory of the two workloads issue 18 bounds (findings: README.md here):
//   (a) decode: the ~100M Llama of bench/transformers (d 768, 12 layers, 12/4 heads, MLP 2048,
//       vocab 16000, random weights), prompt 512 + 32 new tokens, batch 1, f32, compiled and
//       strict and fused, like bench/transformers/llama.ts (a warm-up generate,
//       then 3 timed ones).
//       Target: peak arena <= 1.5x (weights + KV cache).
//   (b) train: the minGPT step of bench/suites/mingpt.ts (6 layers, d 384, 6 heads, block 256,
//       batch 8, AdamW), 9 steps, strict / fused / compiled.
//       Target: peak arena <= 1.25x the bytes live at the peak.
// Each (case, mode) runs in a child process of its own: wasm memory never shrinks, so the arena's
// size at the end of a process is its peak.
//   node --import tsx bench/memory/memory.ts [--quick] [--case=decode|train] [--mode=strict|fused|compiled]
// Definitions (bench/memory/tracker.ts records every arena block):
//   peak arena  = the wasm memory's size at the end (WebAssembly.Memory never shrinks);
//   live        = the sum of live storages' sizes (torch.memory.stats().peakBytes: tensors' bytes
//                 not yet freed, whether or not anything still reads them) plus the kernels'
//                 scratch blocks, at the moment that sum is largest (the allocator's view);
//   needed      = the same sum counting a storage only until the last kernel or host access that
//                 touches it (the bytes a perfect planner would keep: dead-but-unfreed tensors,
//                 e.g. garbage waiting for a GC, are excluded).
import { spawnSync } from "node:child_process";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { ArenaTracker, type Snapshot } from "./tracker.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
import { QUICK, emit } from "../lib.js";
import { itemSize } from "../../packages/torchts/src/ir/dtype.js";

const MiB = 2 ** 20;
const arg = (k: string) => process.argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
const mb = (b: number) => (b / MiB).toFixed(0);

interface Result {
  case: "decode" | "train";
  mode: string;
  /** decode: weights + KV cache; train: parameters + grads + AdamW moments (the state that must stay) */
  base: number;
  baseLabel: string;
  /** torch.memory.stats().peakBytes over the run */
  storagePeak: number;
  snap: Snapshot;
  ms: number;
}

async function child(kase: "decode" | "train", mode: string): Promise<Result> {
  const tracker = new ArenaTracker(); // before any tensor exists
  const torch = await import("../../packages/torchts/src/index.js");
  torch.backends.cpu.setNumThreads(Math.min(cpus().length, 4));
  const t0 = performance.now();
  let base: number;
  let baseLabel: string;
  if (kase === "decode") {
    const { buildModel } = await import("../transformers/bench_model.js");
    const { KVCache } = await import("../../packages/torchts/src/transformers/index.js");
    const PROMPT = QUICK ? 64 : 512;
    const DECODE = QUICK ? 8 : 32;
    tracker.mark("model");
    const m = buildModel();
    const weights = [...m.parameters(), ...m.buffers()].reduce((s, t) => s + t.numel() * itemSize(t.dtype), 0);
    // the cache generate() builds for this prompt: measured as the bytes its tensors hold
    const shape = m.cacheShape();
    const before = torch.memory.stats().liveBytes;
    const probe = new KVCache({ batchSize: 1, ...shape, maxLength: PROMPT + DECODE + 1, dtype: "float32" });
    const kv = torch.memory.stats().liveBytes - before;
    probe.dispose();
    base = weights + kv;
    baseLabel = `weights ${mb(weights)} + KV ${mb(kv)} MiB`;
    const prompt = Array.from({ length: PROMPT }, (_, i) => (i * 7919 + 13) % 16000);
    const compile = mode === "compiled";
    await torch.withEagerMode(mode === "fused" ? "fused" : "strict", async () => {
      for (let r = 0; r < 4; r++) {
        tracker.mark(`generate ${r}`);
        await m.generate(prompt, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile });
      }
    });
  } else {
    const { GPT } = await import("../../examples/mingpt/model.js");
    const cfg = { vocabSize: 65, blockSize: 256, nLayer: 6, nHead: 6, nEmbd: 384 };
    const B = 8;
    torch.manualSeed(0);
    if (mode === "fused") torch.setEagerMode("fused");
    tracker.mark("model");
    const model = new GPT(cfg);
    const opt = model.configureOptimizer({ lr: 3e-4, betas: [0.9, 0.95], weightDecay: 0.1 });
    const params = [...model.parameters()].reduce((s, p) => s + p.numel() * 4, 0);
    base = 4 * params; // weights, grads, exp_avg, exp_avg_sq
    baseLabel = `params ${mb(params)} MiB x4 (weights, grads, 2 AdamW moments)`;
    const step = (x: Tensor, y: Tensor): Tensor => {
      const { loss } = model.forward(x, y);
      opt.zeroGrad();
      loss!.backward();
      opt.step();
      if (mode !== "compiled") torch.sync();
      return loss!;
    };
    const run = mode === "compiled" ? torch.compile(step, { modules: [model] }) : step;
    for (let i = 0; i <= (QUICK ? 4 : 8); i++) {
      const x = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize]);
      const y = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize]);
      tracker.mark(`step ${i}`);
      await run(x, y).item();
      if (process.argv.includes("--detail"))
        process.stderr.write(`step ${i}: arena ${mb(tracker.arena.reservedBytes)} MiB, in use ${mb(tracker.arena.bytesInUse)}, storages ${mb(torch.memory.stats().liveBytes)}\n`);
    }
  }
  await tracker.finish();
  return { case: kase, mode, base, baseLabel, storagePeak: torch.memory.stats().peakBytes, snap: tracker.snapshot(), ms: performance.now() - t0 };
}

function report(r: Result): void {
  const s = r.snap;
  const live = Math.max(s.maxRequested, r.storagePeak);
  const [target, against, what] = r.case === "decode" ? [1.5, r.base, "weights+KV"] : [1.25, live, "live"];
  const ratio = s.reserved / against;
  console.log(
    `${r.case.padEnd(6)} ${r.mode.padEnd(8)} arena ${mb(s.reserved).padStart(5)} MiB | live max ${mb(live).padStart(5)} (storages ${mb(r.storagePeak)}), ` +
      `needed max ${mb(s.maxNeeded).padStart(5)} | ${r.baseLabel} | arena/${what} ${ratio.toFixed(2)}x (target <= ${target}x${ratio <= target ? ", met" : ""}), ` +
      `arena/needed ${(s.reserved / s.maxNeeded).toFixed(2)}x`,
  );
  console.log(
    `       at the peak (top ${mb(s.top)} MiB): allocated ${mb(s.allocatedAtPeak)} = needed storages ${mb(s.storageNeededAtPeak)} + dead-held storages ${mb(s.deadHeldAtPeak)} ` +
      `+ scratch ${mb(s.scratchAtPeak)} + class rounding ${mb(s.roundingAtPeak)}; free blocks not reused ${mb(s.freeAtPeak)}; above top ${mb(s.reserved - s.top)}; in ${s.phase} (${s.blocks} blocks, ${(r.ms / 1000).toFixed(0)} s)`,
  );
  if (process.argv.includes("--detail")) {
    console.log(`       dead-held by op (MiB): ${s.deadByOp.map(([o, b]) => `${o} ${mb(b)}`).join(", ")}`);
    console.log(`       most bytes live per phase (MiB): ${s.phasePeaks.map(([p, b]) => `${p} ${mb(b)}`).join(", ")}`);
    console.log(`       last growth: a request of ${(s.growth.bytes / MiB).toFixed(1)} MiB; free lists then (class MiB x blocks): ${s.growth.freeLists.map(([k, n]) => `${(k / MiB).toFixed(2)}x${n}`).join(", ")}`);
  }
  emit({
    suite: "memory", workload: r.case === "decode" ? "Llama 100M decode" : "minGPT train step", variant: r.mode, ratio: +ratio.toFixed(3),
    note: `arena ${mb(s.reserved)} MiB; live ${mb(live)} MiB; needed ${mb(s.maxNeeded)} MiB; ${r.baseLabel}; arena/${what} ${ratio.toFixed(2)}x (target ${target}x)`,
  });
}

const kase = arg("case");
const mode = arg("mode");
if (kase && mode) {
  const r = await child(kase as "decode" | "train", mode);
  console.log("RESULT " + JSON.stringify(r));
  process.exit(0); // the worker pool keeps the process alive
} else {
  const here = fileURLToPath(import.meta.url);
  const runs: [string, string][] = [["decode", "strict"], ["decode", "fused"], ["decode", "compiled"], ["train", "strict"], ["train", "fused"], ["train", "compiled"]];
  for (const [c, m] of runs.filter(([c, m]) => (!kase || c === kase) && (!mode || m === mode))) {
    const p = spawnSync(process.execPath, ["--import", "tsx", here, `--case=${c}`, `--mode=${m}`, ...(QUICK ? ["--quick"] : [])], { encoding: "utf8", maxBuffer: 1 << 26 });
    const line = p.stdout.split("\n").find((l) => l.startsWith("RESULT "));
    if (!line) {
      console.log(`${c} ${m}: failed (${p.status})\n${p.stderr.slice(-2000)}`);
      emit({ suite: "memory", workload: c === "decode" ? "Llama 100M decode" : "minGPT train step", variant: m, error: `exit ${p.status ?? p.signal}: ${p.stderr.trim().split("\n").slice(-2).join(" | ").slice(0, 200)}` });
      continue;
    }
    report(JSON.parse(line.slice(7)) as Result);
  }
}
