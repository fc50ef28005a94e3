// Child process of disk_cache.test.ts: trains a small model for a few compiled steps and
// prints its losses and what it compiled as JSON.
import * as torch from "../../src/index.js";
import { diskCacheStats } from "../../src/runtime/disk_cache.js";

const F = torch.nn.functional;
torch.manualSeed(0);
const model = new torch.nn.Sequential(new torch.nn.Linear(8, 16), new torch.nn.GELU(), new torch.nn.LayerNorm(16), new torch.nn.Linear(16, 4));
const opt = new torch.optim.AdamW([...model.parameters()], { lr: 1e-2 });
const step = torch.compile((x: torch.Tensor, y: torch.Tensor) => {
  const loss = F.crossEntropy(model.forward(x), y);
  opt.zeroGrad({ setToNone: true });
  loss.backward();
  opt.step();
  return loss;
});
const losses: number[] = [];
try {
  for (let i = 0; i < 4; i++) {
    torch.manualSeed(10 + i);
    losses.push(await step(torch.randn(16, 8), torch.randint(0, 4, [16])).item());
  }
  const s = torch.compiler.stats();
  console.log(JSON.stringify({ ok: true, losses, compiles: s.compiles, loads: s.loads, codegen: torch.compiler.cacheStats().codegen, disk: diskCacheStats() }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: (e as Error).message }));
}
