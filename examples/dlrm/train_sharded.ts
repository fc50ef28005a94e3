// The multi-process path of train.ts (`npm run example:dlrm -- --nproc-per-node N`): train.ts
// re-launches itself under `torchts run`, and each worker lands here. The tables are sharded
// row-wise over the ranks and the MLPs replicated under DDP (sharded.ts); every rank draws the same
// global batch (same seed) and trains on its slice, so the run follows single-process training on
// the whole batch. Progress and the AUC are printed by rank 0.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
import { Progress, tailMean } from "../common/train_utils.js";
import { auc } from "./data.js";
import { DLRM, type DLRMConfig } from "./model.js";
import { ShardedDLRM } from "./sharded.js";
const dist = torch.distributed;

/** Set by `torchts run` (and by schedulers speaking torchrun's contract). */
export const underLauncher = (): boolean => process.env.WORLD_SIZE !== undefined && process.env.RANK !== undefined;

/** Run train.ts again under `torchts run --standalone --nproc-per-node n` (same flags otherwise); its exit status. */
export function relaunch(n: number): number {
  const bin = fileURLToPath(new URL("../../packages/torchts/bin/torchts.js", import.meta.url));
  const script = fileURLToPath(new URL("./train.ts", import.meta.url));
  const argv = process.argv.slice(2);
  const at = argv.indexOf("--nproc-per-node");
  if (at >= 0) argv.splice(at, 2);
  const r = spawnSync(process.execPath, [bin, "run", "--standalone", "--nproc-per-node", String(n), script, ...argv], { stdio: "inherit" });
  return r.status ?? 1;
}

interface Split {
  dense: Tensor;
  sparse: Tensor[];
  labels: Tensor;
}

export interface ShardedRun {
  cfg: DLRMConfig;
  steps: number;
  batchSize: number;
  lr: number;
  train: Split;
  test: Split;
  testLabels: ArrayLike<number>;
  bayesAuc: number;
}

/** [start, length) of rank r's part of n rows (torch.chunk's rule). */
function part(rows: number, n: number, r: number): [number, number] {
  const c = Math.ceil(rows / n);
  const start = Math.min(r * c, rows);
  return [start, Math.min(rows, start + c) - start];
}

export async function trainSharded(o: ShardedRun): Promise<void> {
  await dist.initProcessGroup({ backend: "gloo" });
  const rank = dist.getRank();
  const n = dist.getWorldSize();
  if (o.batchSize % n) throw new RangeError(`--batch-size ${o.batchSize} must divide among the ${n} ranks`);
  const local = o.batchSize / n;
  const model = new DLRM(o.cfg); // the same seed on every rank: the same initial model
  const sharded = new ShardedDLRM(model);
  const opt = new torch.optim.Adam(sharded.parameters(), { lr: o.lr });
  const say = (s: string) => rank === 0 && console.log(s);
  const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
  const rows = o.cfg.tableSizes.map((_, t) => sharded.tables.shardRange(`t${t}`).rows);
  say(`DLRM: ${nParams.toLocaleString()} parameters on ${n} ranks: tables ${JSON.stringify(o.cfg.tableSizes)} sharded row-wise (rank 0 holds rows ${JSON.stringify(rows)}), MLPs under DDP; ${o.steps} steps of ${o.batchSize} (${local} per rank)`);

  // every rank scores its part of each chunk (the sharded lookup is collective); rank 0 gathers them
  async function testAuc(): Promise<number> {
    const nTest = o.testLabels.length;
    const mine: { at: number; scores: number[] }[] = [];
    for (let i = 0; i < nTest; i += o.batchSize) {
      const [s, len] = part(Math.min(o.batchSize, nTest - i), n, rank);
      const pick = (t: Tensor) => t.narrow(0, i + s, len);
      const logits = torch.noGrad(() => sharded.forward(pick(o.test.dense), o.test.sparse.map(pick)));
      mine.push({ at: i + s, scores: Array.from(await logits.data()) });
    }
    const all: unknown[] = new Array(n).fill(null);
    await dist.allGatherObject(all, mine);
    const scores = new Float64Array(nTest);
    for (const pieces of all as (typeof mine)[]) for (const p of pieces) scores.set(p.scores, p.at);
    return auc(scores, o.testLabels);
  }

  const auc0 = await testAuc();
  say(`initial test AUC ${auc0.toFixed(4)} (Bayes-optimal ${o.bayesAuc.toFixed(4)})`);
  const bar = new Progress(o.steps, "samples");
  const losses: number[] = [];
  const nTrain = o.train.labels.shape[0]!;
  for (let step = 1; step <= o.steps; step++) {
    const idx = torch.randint(0, nTrain, [o.batchSize]).narrow(0, rank * local, local); // same draw on every rank
    const logits = sharded.forward(o.train.dense.index(idx), o.train.sparse.map((s) => s.index(idx)));
    const loss = torch.nn.functional.binaryCrossEntropyWithLogits(logits, o.train.labels.index(idx));
    opt.zeroGrad();
    loss.backward();
    opt.step();
    const g = loss.detach().clone();
    dist.allReduce(g, { op: dist.ReduceOp.AVG }); // the whole batch's loss
    losses.push(await g.item());
    if (rank === 0) await bar.update(step, losses[losses.length - 1]!, o.batchSize);
  }
  if (rank === 0) bar.end();
  const finalAuc = await testAuc();
  say(`test AUC ${auc0.toFixed(4)} -> ${finalAuc.toFixed(4)} after ${o.steps} steps on ${n} ranks (Bayes-optimal ${o.bayesAuc.toFixed(4)}, ${bar.elapsed().toFixed(1)} s)`);
  say(JSON.stringify({ initialAuc: auc0, auc: finalAuc, bayesAuc: o.bayesAuc, firstLoss: losses[0], lastLoss: tailMean(losses, 20), steps: o.steps, worldSize: n, losses }));
  await dist.destroyProcessGroup();
}
