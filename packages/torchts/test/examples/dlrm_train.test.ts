// The DLRM example in a reduced config: the test AUC must rise well above chance, and resuming
// from a mid-run checkpoint must reproduce the uninterrupted run's losses exactly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { runExample, tempDir } from "./example_runner.js";

const CFG = ["--batch-size", "128", "--train-size", "20000", "--test-size", "2000", "--ckpt-every", "10"];

test("DLRM on synthetic clicks: AUC > 0.7 after 60 steps; resume reproduces the run", () => {
  const dir = tempDir("dlrm-");
  try {
    const full = runExample("examples/dlrm/train.ts", ["--steps", "60", ...CFG, "--checkpoint", join(dir, "full.pt")]).last;
    assert.ok(full.initialAuc < 0.6, `untrained AUC ${full.initialAuc}`);
    assert.ok(full.auc > 0.7, `AUC ${full.initialAuc} -> ${full.auc} (Bayes-optimal ${full.bayesAuc})`);
    assert.ok(full.lastLoss < full.firstLoss - 0.08, `loss ${full.firstLoss} -> ${full.lastLoss}`);

    const ckpt = join(dir, "part.pt");
    const first = runExample("examples/dlrm/train.ts", ["--steps", "30", ...CFG, "--checkpoint", ckpt]);
    assert.deepEqual(first.last.losses, full.losses.slice(0, 30));
    const resumed = runExample("examples/dlrm/train.ts", ["--steps", "60", ...CFG, "--checkpoint", ckpt, "--resume"]);
    assert.match(resumed.out, /resumed from .*part\.pt at step 30/);
    assert.deepEqual(resumed.last.losses, full.losses, "resumed losses equal the uninterrupted run's");
    assert.equal(resumed.last.auc, full.auc);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
