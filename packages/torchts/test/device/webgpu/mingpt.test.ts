// A 3-step minGPT-style AdamW training loop (gradient clipping included) on webgpu must follow
// the cpu run: same losses, gradient norms and final weights within float32 tolerance.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { GPT } from "../../../../../examples/mingpt/model.js";
import { skip } from "./setup.js";

const cfg = { vocabSize: 17, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 16 };

async function train(device: string, mode: "strict" | "fused"): Promise<{ losses: number[]; norms: number[]; params: Map<string, Float32Array> }> {
  return torch.withEagerMode(mode, async () => {
    torch.manualSeed(1234);
    const model = new GPT(cfg);
    model.to(device);
    const opt = model.configureOptimizer({ lr: 3e-3, betas: [0.9, 0.95], weightDecay: 0.1, eps: 1e-8 });
    const params = [...model.namedParameters()];
    torch.manualSeed(99);
    const data = torch.randint(0, cfg.vocabSize, [3, 4, cfg.blockSize + 1]);
    const losses: number[] = [];
    const norms: number[] = [];
    for (let i = 0; i < 3; i++) {
      const batch = data.select(0, i).to(device);
      const x = batch.narrow(1, 0, cfg.blockSize);
      const y = batch.narrow(1, 1, cfg.blockSize);
      const { loss } = model.forward(x, y);
      opt.zeroGrad({ setToNone: true });
      loss!.backward();
      norms.push(await torch.nn.utils.clipGradNorm_(params.map(([, p]) => p), 0.5).item());
      opt.step();
      losses.push(await loss!.item());
    }
    const out = new Map<string, Float32Array>();
    for (const [n, p] of params) out.set(n, Float32Array.from(await p.data()));
    return { losses, norms, params: out };
  });
}

for (const mode of ["strict", "fused"] as const)
  test(`minGPT: 3 AdamW steps on webgpu match cpu (${mode})`, { skip }, async () => {
    const cpu = await train("cpu", mode);
    const gpu = await train("webgpu", mode);
    for (let i = 0; i < 3; i++) {
      assert.ok(Math.abs(gpu.losses[i]! - cpu.losses[i]!) < 1e-4 * cpu.losses[i]!, `step ${i}: loss ${gpu.losses[i]} vs ${cpu.losses[i]}`);
      assert.ok(Math.abs(gpu.norms[i]! - cpu.norms[i]!) < 1e-4 * cpu.norms[i]!, `step ${i}: grad norm ${gpu.norms[i]} vs ${cpu.norms[i]}`);
    }
    let worst = 0;
    for (const [n, w] of cpu.params) {
      const g = gpu.params.get(n)!;
      for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(g[i]! - w[i]!));
    }
    assert.ok(worst < 2e-5, `final weights differ by ${worst}`);
  });
