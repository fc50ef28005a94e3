// The golden torchvision resnet18 (num_classes=10; conv/fc weights stored as F16) loads from its
// state dict unchanged and reproduces PyTorch's eval logits, per-stage features and train-mode logits.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

const DIR = fileURLToPath(new URL("../fixtures/resnet18/", import.meta.url));

async function maxAbs(a: Tensor, b: Tensor): Promise<number> {
  assert.deepEqual(a.shape, b.shape);
  return (await a.sub(b).abs().max().item()) as number;
}

test("resnet18 loads the torchvision state dict and matches logits and features", async () => {
  const sd = await torch.safetensors.loadFile(DIR + "model.safetensors");
  const exp = await torch.safetensors.loadFile(DIR + "expected.safetensors");
  const model = torch.vision.resnet18({ numClasses: 10 });
  // F16 conv/fc weights are upcast by copy_ into the float32 parameters, as torch's load_state_dict
  const res = model.loadStateDict(sd);
  assert.deepEqual(res, { missingKeys: [], unexpectedKeys: [] });
  assert.equal(model.conv1.weight.dtype, "float32");
  const keys = [...model.stateDict().keys()];
  assert.equal(keys.length, 122);
  assert.ok(keys.includes("layer2.0.downsample.0.weight") && keys.includes("layer4.1.bn2.num_batches_tracked"));
  // torchvision resnet18 has 11,689,512 parameters with 1000 classes; 10 classes drop 990 * 513
  assert.equal([...model.parameters()].reduce((s, p) => s + p.numel(), 0), 11_689_512 - 990 * 513);
  model.eval();
  const f = torch.noGrad(() => model.forwardFeatures(exp.input!));
  for (const k of ["stem", "layer1", "layer2", "layer3", "layer4", "pooled"] as const) {
    const ref = exp[`features.${k}`]!;
    const scale = (await ref.abs().max().item()) as number;
    const d = await maxAbs(f[k], ref);
    assert.ok(d <= 1e-4 * Math.max(1, scale), `features.${k}: max abs diff ${d} (scale ${scale})`);
  }
  const d = await maxAbs(f.logits, exp.logits!);
  assert.ok(d < 1e-4, `eval logits: max abs diff ${d}`);
  assert.deepEqual(await f.logits.argmax(1).tolist(), [8, 8]);

  // train mode: BatchNorm normalises with the batch statistics
  model.train();
  const t = torch.noGrad(() => model.forward(exp.input!));
  const dt = await maxAbs(t, exp.logits_train_mode!);
  assert.ok(dt < 1e-3, `train-mode logits: max abs diff ${dt}`);
  // a train-mode forward updated the running statistics and the batch counter (5 -> 6)
  assert.equal(await (model.bn1 as InstanceType<typeof torch.nn.BatchNorm2d>).numBatchesTracked!.item(), 6);
});

test("resnet50 builds torchvision's module tree", () => {
  const r50 = torch.vision.resnet50({ numClasses: 10 });
  const keys50 = [...r50.stateDict().keys()];
  assert.ok(keys50.includes("layer1.0.conv3.weight") && keys50.includes("layer1.0.downsample.1.running_var"));
  assert.deepEqual(r50.fc.weight.shape, [10, 2048]);
  assert.equal(keys50.length, 320);
  // torchvision resnet50: 25,557,032 parameters with 1000 classes
  assert.equal([...r50.parameters()].reduce((s, p) => s + p.numel(), 0), 25_557_032 - 990 * 2049);
});

test("a small ResNet trains end to end (backward through every block)", async () => {
  torch.manualSeed(0);
  const m = new torch.vision.ResNet(torch.vision.BasicBlock, [1, 1, 1, 1], { numClasses: 3 });
  const x = torch.randn(2, 3, 32, 32);
  const loss = torch.nn.functional.crossEntropy(m.forward(x), torch.tensor([0, 2]));
  loss.backward();
  assert.ok(m.conv1.weight.grad && m.layer4.get(0) && m.fc.weight.grad);
  assert.ok(Number.isFinite(await loss.item()));
});
