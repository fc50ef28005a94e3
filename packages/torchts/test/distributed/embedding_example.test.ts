// The DLRM example across 2 processes (`npm run example:dlrm -- --nproc-per-node 2`): train.ts
// re-launches itself under `torchts run`, the tables are sharded row-wise and the MLPs run under
// DDP; the test AUC must rise well above chance, as in the single-process example test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { runExample } from "../examples/example_runner.js";

test("DLRM with --nproc-per-node 2: sharded tables + DDP reach AUC > 0.7 after 60 steps", () => {
  const args = ["--nproc-per-node", "2", "--steps", "60", "--batch-size", "128", "--train-size", "20000", "--test-size", "2000"];
  const { out, last } = runExample("examples/dlrm/train.ts", args);
  assert.match(out, /on 2 ranks: tables \[100,300,1000,50\] sharded row-wise \(rank 0 holds rows \[50,150,500,25\]\), MLPs under DDP; 60 steps of 128 \(64 per rank\)/);
  assert.equal(last.worldSize, 2);
  assert.equal(last.losses.length, 60);
  assert.ok(last.initialAuc < 0.6, `untrained AUC ${last.initialAuc}`);
  assert.ok(last.auc > 0.7, `AUC ${last.initialAuc} -> ${last.auc} (Bayes-optimal ${last.bayesAuc})`);
  assert.ok(last.lastLoss < last.firstLoss - 0.08, `loss ${last.firstLoss} -> ${last.lastLoss}`);
});
