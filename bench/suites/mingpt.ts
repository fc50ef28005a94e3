// One minGPT training step (6 layers, d=384, 6 heads, block 256, batch 8; AdamW) in one eager
// mode or compiled. Reports the first step (warm-up: kernel generation, compile) separately
// from the steady steps, and MFU = model FLOP/s / measured FMA peak (all threads). Warm-up
// metrics as TorchTPU reports them: first step time, the number of steps until the compile
// cache stops missing (no new kernels generated), and the post-warm-up step time.
import * as torch from "../../packages/torchts/src/index.js";
import { productPeak } from "../../packages/torchts/src/device/cpu/wasm/index.js";
import { GPT } from "../../examples/mingpt/model.js";
import { QUICK, emit, round } from "../lib.js";

const mode = (process.argv.find((a) => a.startsWith("--mode="))?.slice(7) ?? "strict") as "strict" | "fused" | "compiled";
const S = "torchts";
const W = "minGPT train step";
const cfg = { vocabSize: 65, blockSize: 256, nLayer: 6, nHead: 6, nEmbd: 384 };
const B = 8;
// enough steps for the compiled step to reach replay (from its fourth call) and for fused eager's
// arena to stop growing; the post-warm-up figure is the best of the steps after the first
const steps = QUICK ? 5 : 8;

torch.manualSeed(0);
if (mode === "fused") torch.setEagerMode("fused");
const model = new GPT(cfg);
const opt = model.configureOptimizer({ lr: 3e-4, betas: [0.9, 0.95], weightDecay: 0.1 });
const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
const nonEmb = nParams - cfg.vocabSize * cfg.nEmbd - cfg.blockSize * cfg.nEmbd;
// PaLM-style accounting: 6 FLOPs per parameter per token + attention scores/values (fwd+bwd)
const flopsPerStep = B * cfg.blockSize * (6 * nonEmb + 12 * cfg.nLayer * cfg.blockSize * cfg.nEmbd);

function step(x: torch.Tensor, y: torch.Tensor): torch.Tensor {
  const { loss } = model.forward(x, y);
  opt.zeroGrad();
  loss!.backward();
  opt.step();
  // fused: run the backward and update now, as a training loop should (like xm.mark_step());
  // left pending they hold the step's activations into the next step (twice the memory)
  if (mode !== "compiled") torch.sync();
  return loss!;
}
const run = mode === "compiled" ? torch.compile(step, { modules: [model] }) : step;

const times: number[] = [];
const misses: number[] = [];
let loss = 0;
for (let i = 0; i <= steps; i++) {
  const x = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize]);
  const y = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize]);
  const m0 = torch.compiler.cacheStats().misses;
  const t0 = performance.now();
  loss = await run(x, y).item();
  times.push(performance.now() - t0);
  misses.push(torch.compiler.cacheStats().misses - m0);
  process.stderr.write(`minGPT ${mode} step ${i}: ${times[i]!.toFixed(0)} ms loss ${loss.toFixed(3)}, ${misses[i]} cache misses\n`);
}
// steps until the cache stops missing: 1 + the last step that still generated a kernel
const warmupSteps = misses.reduce((last, m, i) => (m > 0 ? i + 1 : last), 0);
const first = times[0]!;
const steady = times.slice(1).sort((a, b) => a - b);
const best = steady[0]!;
const peak = productPeak();
const flops = flopsPerStep / (best / 1000);
emit({
  suite: S, workload: W, variant: mode, ms: round(best), medianMs: round(steady[steady.length >> 1]!), gflops: round(flops / 1e9),
  note: `warm-up: first step ${round(first)} ms (${round(first / best)}x steady), cache stops missing after ${warmupSteps} step(s) ` +
    `(misses per step ${misses.join("/")}), post-warm-up ${round(best)} ms; ` +
    `${(nParams / 1e6).toFixed(2)}M params; ` +
    `${(flopsPerStep / 1e9).toFixed(1)} GFLOP/step; MFU ${peak ? ((100 * flops) / peak.flops).toFixed(1) + "%" : "n/a"} of ${peak ? round(peak.flops / 1e9) : "?"} GFLOP/s (${peak?.unit ?? "?"}, ${torch.backends.cpu.info().blasKernel || "wasm"} GEMM); loss ${loss.toFixed(3)}; ` +
    `wasm arena ${(torch.backends.cpu.info().arenaBytes / 2 ** 20).toFixed(0)} MiB`,
});
