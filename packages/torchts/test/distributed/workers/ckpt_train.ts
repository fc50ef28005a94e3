// Run by test/distributed/checkpoint.test.ts under `torchts run --max-restarts 1`: DDP minGPT
// training that saves a distributed checkpoint every SAVE_EVERY steps (to one folder, overwritten)
// and resumes from it when it exists. argv: <dir> <steps> <saveEvery>.
// With CRASH_AT_SAVE=k, rank 0 of the first attempt is killed (SIGKILL) inside its k-th save, at
// the worst moment: every rank's data file is written and the new `.metadata` is about to replace
// the old one (fault injection: the rename is intercepted). The restarted group must resume from
// the previous checkpoint and print the same losses as a run that was never killed.
import { createRequire, syncBuiltinESMExports } from "node:module";
import { basename } from "node:path";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { GPT } from "../../../../../examples/mingpt/model.js";
const dist = torch.distributed;
const dcp = dist.checkpoint;

const [dir, stepsArg, everyArg] = process.argv.slice(2) as [string, string, string];
const STEPS = Number(stepsArg);
const EVERY = Number(everyArg);
await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const attempt = Number(process.env.TORCHELASTIC_RESTART_COUNT ?? 0);
const crashAt = Number(process.env.CRASH_AT_SAVE ?? 0);

let saves = 0;
if (crashAt && rank === 0 && attempt === 0) {
  const fsp = createRequire(import.meta.url)("node:fs/promises") as typeof import("node:fs/promises");
  const rename = fsp.rename;
  fsp.rename = (async (from: string, to: string) => {
    if (basename(String(to)) === ".metadata" && saves === crashAt) {
      console.log(`KILLED in save ${saves}`);
      process.kill(process.pid, "SIGKILL");
      await new Promise(() => {});
    }
    return rename(from, to);
  }) as typeof rename;
  syncBuiltinESMExports();
}

const cfg = { vocabSize: 32, blockSize: 16, nLayer: 1, nHead: 2, nEmbd: 32 };
const B = 4 * n;
torch.manualSeed(1);
const model = new GPT(cfg);
const ddp = new torch.nn.parallel.DistributedDataParallel(model);
const opt = model.configureOptimizer({ lr: 3e-3, betas: [0.9, 0.95], weightDecay: 0.1 });

let start = 1;
try {
  await dcp.readMetadata(dir);
  const [msd, osd] = dcp.getStateDict(model, opt);
  const sd = { model: msd, optim: osd, step: 0 };
  await dcp.load(sd, { checkpointId: dir });
  dcp.setStateDict(model, opt, { modelStateDict: msd, optimStateDict: osd });
  start = sd.step + 1;
  if (rank === 0) console.log(`RESUMED at step ${start} (attempt ${attempt})`);
} catch (e) {
  if (!/no checkpoint at/.test((e as Error).message)) throw e;
}

for (let step = start; step <= STEPS; step++) {
  torch.manualSeed(1000 + step); // the batch is a function of the step (so a resumed run sees the same data)
  const data = torch.randint(0, cfg.vocabSize, [B, cfg.blockSize + 1]);
  const mine = data.narrow(0, rank * (B / n), B / n);
  const loss: Tensor = ddp.forward(mine.narrow(1, 0, cfg.blockSize), mine.narrow(1, 1, cfg.blockSize)).loss;
  loss.backward();
  opt.step();
  opt.zeroGrad();
  const g = loss.detach().clone();
  dist.allReduce(g, { op: dist.ReduceOp.AVG });
  const v = await g.item();
  if (rank === 0) console.log(`LOSS ${step} ${v}`);
  if (step % EVERY === 0) {
    saves++;
    const [msd, osd] = dcp.getStateDict(model, opt);
    await dcp.save({ model: msd, optim: osd, step }, { checkpointId: dir });
  }
}
await dist.destroyProcessGroup();
