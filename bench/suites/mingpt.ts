// One minGPT training step (6 layers, d=384, 6 heads, block 256, batch 8; AdamW) in one eager
// mode or compiled. Reports the first step (warm-up: kernel generation, compile) separately
// from the steady steps, and MFU = model FLOP/s / measured FMA peak (all threads).
import * as torch from "../../packages/torchts/src/index.js";
import { fmaPeak } from "../../packages/torchts/src/device/cpu/wasm/index.js";
import { GPT } from "../../examples/mingpt/model.js";
import { QUICK, emit, round } from "../lib.js";

const mode = (process.argv.find((a) => a.startsWith("--mode="))?.slice(7) ?? "strict") as "strict" | "fused" | "compiled";
const S = "torchts";
const W = "minGPT train step";
const cfg = { vocabSize: 65, blockSize: 256, nLayer: 6, nHead: 6, nEmbd: 384 };
const B = 8;
const steps = QUICK ? 1 : 3;

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
  return loss!;
}
const run = mode === "compiled" ? torch.compile(step, { modules: [model] }) : step;

const times: number[] = [];
let loss = 0;
for (let i = 0; i <= steps; i++) {
  const x = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize]);
  const y = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize]);
  const t0 = performance.now();
  loss = await run(x, y).item();
  times.push(performance.now() - t0);
  process.stderr.write(`minGPT ${mode} step ${i}: ${times[i]!.toFixed(0)} ms loss ${loss.toFixed(3)}\n`);
}
const first = times[0]!;
const steady = times.slice(1).sort((a, b) => a - b);
const best = steady[0]!;
const peak = fmaPeak(4096);
const flops = flopsPerStep / (best / 1000);
emit({
  suite: S, workload: W, variant: mode, ms: round(best), medianMs: round(steady[steady.length >> 1]!), gflops: round(flops / 1e9),
  note: `first step ${round(first)} ms (warm-up ${round(first / best)}x steady); ${(nParams / 1e6).toFixed(2)}M params; ` +
    `${(flopsPerStep / 1e9).toFixed(1)} GFLOP/step; MFU ${peak ? ((100 * flops) / peak.flops).toFixed(1) + "%" : "n/a"} of ${peak ? round(peak.flops / 1e9) : "?"} GFLOP/s; loss ${loss.toFixed(3)}; ` +
    `wasm arena ${(torch.backends.cpu.info().arenaBytes / 2 ** 20).toFixed(0)} MiB`,
});
