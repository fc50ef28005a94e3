// The small step (fused and compiled) on two float32 GEMMs, interleaved per round in one process:
// 16 rounds of 3 steps per runner, median and best step after 2 rounds.
//   K=avx2,off node --import tsx bench/small_step/step_kernels.ts
import * as torch from "../../packages/torchts/src/index.js";
import { setCpuBlas } from "../../packages/torchts/src/device/cpu/native/blas.js";
import { batchTensors, batches, makeModel, step } from "./model.js";
torch.backends.cpu.setNumThreads(2);
const kernels = (process.env.K ?? "avx2,off").split(",") as ("avx2" | "off" | "openblas")[];
const modes = ["fused", "compiled"] as const;
const data = batches(8).map(batchTensors);
const runners = new Map<string, () => Promise<number>>();
for (const k of kernels) for (const mode of modes) {
  const m = makeModel();
  const fn = mode === "compiled" ? torch.compile((x: torch.Tensor, y: torch.Tensor) => step(m, x, y), { name: `s_${k}` }) : (x: torch.Tensor, y: torch.Tensor) => step(m, x, y);
  let i = 0;
  runners.set(`${mode} ${k}`, async () => { setCpuBlas(k); const [x, y] = data[i++ % data.length]!; return torch.withEagerMode("fused", async () => { const l = fn(x, y); torch.sync(); return await l.item(); }); });
}
const times = new Map<string, number[]>();
for (let round = 0; round < 16; round++)
  for (const [name, r] of runners) {
    for (let s = 0; s < 3; s++) {
      const t0 = performance.now(); await r(); const dt = performance.now() - t0;
      if (round >= 2) (times.get(name) ?? times.set(name, []).get(name)!).push(dt);
    }
  }
for (const [name, t] of times) { t.sort((a, b) => a - b); console.log(`${name.padEnd(16)} median ${t[t.length >> 1]!.toFixed(1)} ms  best ${t[0]!.toFixed(1)} ms`); }
