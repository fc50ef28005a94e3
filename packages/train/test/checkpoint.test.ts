// The checkpoint manager's two backends: DCP (torchts.distributed.checkpoint) and torch.save files.
// A save round-trips the state, async saves write a staged copy, folders without their commit marker
// are never loaded, keep_latest_k prunes, and a missing load_step names the steps there are.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "torchts";
import { CheckpointManager, type CheckpointBackend, type TrainState } from "../src/checkpoint.js";
import { tmp } from "./helpers.js";

const state = (w: torch.Tensor, step: number): TrainState => ({
  step,
  model: new Map([["w", w]]),
  optimizer: { state: {}, paramGroups: [{ lr: 0.5, params: ["w"] }] },
  lr_scheduler: { lastEpoch: step, baseLrs: [0.5] },
  dataloader: { epoch: 1, cursor: 24 },
  rng: { seed: [1, 2], offset: 8 },
});

for (const backend of ["dcp", "file"] as CheckpointBackend[]) {
  test(`${backend}: save, async save of a staged copy, load, prune, incomplete folders ignored`, async () => {
    const folder = join(tmp(`ckpt-${backend}`), "checkpoint");
    const m = new CheckpointManager({ folder, keepLatestK: 2, async: false, backend, rank: 0, writes: true });
    const w = torch.tensor([1, 2, 3], { dtype: "float32" });
    await m.save(10, state(w, 10));
    const am = new CheckpointManager({ folder, keepLatestK: 2, async: true, backend, rank: 0, writes: true });
    await am.save(20, state(w, 20));
    torch.noGrad(() => w.copy_(torch.tensor([7, 8, 9], { dtype: "float32" }))); // after staging: not in step 20
    await am.wait();
    assert.deepEqual(m.steps(), [10, 20]);
    const into = state(torch.zeros([3]), 0);
    const got = await m.load(20, into);
    assert.equal(got.step, 20);
    assert.deepEqual(await (got.model as Map<string, torch.Tensor>).get("w")!.tolist(), [1, 2, 3]);
    assert.deepEqual(got.dataloader, { epoch: 1, cursor: 24 });
    assert.deepEqual(got.rng, { seed: [1, 2], offset: 8 });
    if (backend === "dcp") assert.deepEqual(await (into.model as Map<string, torch.Tensor>).get("w")!.tolist(), [1, 2, 3], "dcp loads in place");
    // a folder without its commit marker (a killed save) is not a checkpoint
    mkdirSync(join(folder, "step-30"), { recursive: true });
    writeFileSync(join(folder, "step-30", "rank0.pt"), "partial");
    assert.deepEqual(m.steps(), [10, 20]);
    assert.equal(m.resolveLoadStep(-1), 20);
    assert.equal(m.resolveLoadStep(0), null);
    assert.throws(() => m.resolveLoadStep(30), /checkpoint\.load_step = 30: no complete checkpoint .*step-30 \(complete steps: 10, 20\)/);
    // keep_latest_k = 2: a third save drops the oldest
    await m.save(40, state(w, 40));
    assert.deepEqual(m.steps(), [20, 40]);
    assert.ok(!existsSync(join(folder, "step-10")));
  });
}
