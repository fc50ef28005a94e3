// Train DLRM on a synthetic click dataset and report the test AUC (next to the Bayes-optimal
// AUC of the true click probabilities).
//   npm run example:dlrm -- [--steps 500] [--batch-size 256] [--train-size 200000] [--test-size 5000]
//     [--lr 0.005] [--device cpu|webgpu] [--checkpoint checkpoints/dlrm.pt] [--resume] [--ckpt-every 100]
//   npm run example:dlrm -- --nproc-per-node 2 [...]: N processes under `torchts run`, the tables
//     sharded row-wise over them and the MLPs under DDP (train_sharded.ts; cpu, no checkpoints)
import * as torch from "../../packages/torchts/src/index.js";
import { numArg, Progress, recordStep, resumeIfAsked, setupRun, tailMean } from "../common/train_utils.js";
import { auc, makeClicks } from "./data.js";
import { DLRM } from "./model.js";
import { relaunch, trainSharded, underLauncher } from "./train_sharded.js";

const { args: A, device } = await setupRun();
const nproc = numArg(A, "nproc-per-node", 1);
if (nproc > 1 && !underLauncher()) process.exit(relaunch(nproc));
const steps = numArg(A, "steps", 500);
const batchSize = numArg(A, "batch-size", 256);
const nTrain = numArg(A, "train-size", 200000);
const nTest = numArg(A, "test-size", 5000);
const ckptEvery = numArg(A, "ckpt-every", 100);
const ckpt = A.checkpoint ?? "checkpoints/dlrm.pt";

const nDense = 8;
const tables = [100, 300, 1000, 50];
const bag = 2;
function toTensors(d: ReturnType<typeof makeClicks>, n: number) {
  return {
    dense: torch.tensor(d.dense, { dtype: "float32" }).reshape(n, nDense),
    sparse: d.sparse.map((ids) => torch.tensor(ids, { dtype: "int64" }).reshape(n, bag)),
    labels: torch.tensor(d.labels, { dtype: "float32" }),
  };
}
const trainRaw = makeClicks(nTrain, nDense, tables, bag, 1);
const testRaw = makeClicks(nTest, nDense, tables, bag, 2);
const train = toTensors(trainRaw, nTrain);
const test = toTensors(testRaw, nTest);
const bayesAuc = auc(testRaw.probs, testRaw.labels);

const cfg = { nDense, tableSizes: tables, embDim: 16, bottom: [32], top: [32, 16] };
const lr = numArg(A, "lr", 0.005);
if (underLauncher()) {
  if (device !== "cpu" || A.resume) throw new Error("the sharded run (--nproc-per-node, torchts run) trains on the cpu and does not resume checkpoints");
  await trainSharded({ cfg, steps, batchSize, lr, train, test, testLabels: testRaw.labels, bayesAuc });
  process.exit(0);
}
const model = new DLRM(cfg);
if (device !== "cpu") model.to(device);
const opt = new torch.optim.Adam(model.parameters(), { lr });
const { start, losses } = await resumeIfAsked(A, ckpt, model, opt, device);
const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
console.log(`DLRM: ${nParams.toLocaleString()} parameters, ${tables.length} embedding tables ${JSON.stringify(tables)}, ${steps} steps of ${batchSize} on ${device}`);

// in chunks: EmbeddingBag's cost grows with the square of the batch (a bags x ids matrix)
async function testAuc(): Promise<number> {
  const scores: number[] = [];
  for (let i = 0; i < nTest; i += batchSize) {
    const n = Math.min(batchSize, nTest - i);
    const logits = torch.noGrad(() => model.forward(test.dense.narrow(0, i, n).to(device), test.sparse.map((s) => s.narrow(0, i, n).to(device))));
    scores.push(...(await logits.data()));
  }
  return auc(scores, testRaw.labels);
}

const auc0 = await testAuc();
console.log(`initial test AUC ${auc0.toFixed(4)} (Bayes-optimal ${bayesAuc.toFixed(4)})`);
const bar = new Progress(steps, "samples", start + 1);
const run = { bar, losses, every: ckptEvery, path: ckpt, model, opt };
for (let step = start + 1; step <= steps; step++) {
  const idx = torch.randint(0, nTrain, [batchSize]);
  const logits = model.forward(train.dense.index(idx).to(device), train.sparse.map((s) => s.index(idx).to(device)));
  const loss = torch.nn.functional.binaryCrossEntropyWithLogits(logits, train.labels.index(idx).to(device));
  opt.zeroGrad();
  loss.backward();
  opt.step();
  await recordStep(step, loss, batchSize, run);
}
bar.end();
const finalAuc = await testAuc();
console.log(`test AUC ${auc0.toFixed(4)} -> ${finalAuc.toFixed(4)} after ${steps} steps (Bayes-optimal ${bayesAuc.toFixed(4)}, ${bar.elapsed().toFixed(1)} s); saved ${ckpt}`);
console.log(JSON.stringify({ initialAuc: auc0, auc: finalAuc, bayesAuc, firstLoss: losses[0], lastLoss: tailMean(losses, 20), steps, losses }));
