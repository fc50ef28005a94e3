// Run under `torchts run` by bench/distributed/distributed.ts: DDP minGPT training throughput with a
// fixed batch per rank (weak scaling), so N ranks process N times the tokens of one. Rank 0 prints
// `ROW {...}`: the median step time over the measured steps (after warm-up steps, the first of
// which builds DDP's buckets) and tokens per second for the whole group.
import * as torch from "../../packages/torchts/src/index.js";
import { GPT } from "../../examples/mingpt/model.js";
const dist = torch.distributed;

await dist.initProcessGroup({ backend: "gloo", timeout: 600_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const quick = process.argv.includes("--quick");
const cfg = { vocabSize: 65, blockSize: 64, nLayer: 2, nHead: 4, nEmbd: 128 };
const B = 8; // per rank
torch.manualSeed(1);
const model = new GPT(cfg);
const ddp = new torch.nn.parallel.DistributedDataParallel(model);
const opt = model.configureOptimizer({ lr: 3e-3, betas: [0.9, 0.95], weightDecay: 0.1 });
const WARM = 3;
const STEPS = quick ? 5 : 12;
const times: number[] = [];
for (let s = 0; s < WARM + STEPS; s++) {
  torch.manualSeed(100 + s * n + rank);
  const d = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize + 1]);
  dist.barrier();
  const t0 = performance.now();
  const loss = ddp.forward(d.narrow(1, 0, cfg.blockSize), d.narrow(1, 1, cfg.blockSize)).loss;
  loss.backward();
  opt.step();
  opt.zeroGrad();
  await loss.item();
  if (s >= WARM) times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
const med = torch.tensor([times[Math.floor(times.length / 2)]!]);
dist.allReduce(med, { op: dist.ReduceOp.MAX });
const ms = await med.item();
const params = [...model.parameters()].reduce((a, p) => a + p.numel(), 0);
if (rank === 0) console.log(`ROW ${JSON.stringify({ kind: "ddp", n, ms, tokensPerSec: (n * B * cfg.blockSize) / (ms / 1e3), params, steps: STEPS })}`);
await dist.destroyProcessGroup();
