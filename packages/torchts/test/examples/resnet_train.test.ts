// The ResNet example in a reduced config: a small torchvision-style ResNet must learn to tell
// four generated shapes apart, and the example must load and evaluate a torchvision checkpoint.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { runExample, tempDir } from "./example_runner.js";

test("ResNet on coloured shapes: test accuracy > 50% (chance 25%) in 30 steps; torchvision resnet18 evaluates", () => {
  const dir = tempDir("resnet-");
  try {
    const ckpt = join(dir, "r.pt");
    const { out, last } = runExample("examples/resnet/train.ts", [
      "--steps", "30", "--batch-size", "16", "--image-size", "24", "--train-size", "600", "--test-size", "200",
      "--checkpoint", ckpt, "--ckpt-every", "15",
    ]);
    assert.ok(last.initialAccuracy < 0.4, `untrained accuracy ${last.initialAccuracy}`);
    assert.ok(last.accuracy > 0.5, `accuracy ${last.initialAccuracy} -> ${last.accuracy}`);
    assert.ok(last.lastLoss < last.firstLoss - 0.4, `loss ${last.firstLoss} -> ${last.lastLoss}`);
    assert.ok(existsSync(ckpt));
    assert.match(out, /step 30\/30 loss [\d.]+ \d+ img\/s ETA 0s/);
    // the torchvision checkpoint loads by name and reproduces PyTorch's logits
    assert.deepEqual(last.torchvision.argmax, [8, 8]);
    assert.ok(last.torchvision.maxAbsDiff < 1e-4, `torchvision logits diff ${last.torchvision.maxAbsDiff}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
