// Train a small torchvision-style ResNet on generated coloured shapes, report held-out accuracy,
// then load a torchvision resnet18 checkpoint and evaluate it.
//   npm run example:resnet -- [--steps 150] [--batch-size 32] [--image-size 32] [--train-size 4000]
//     [--lr 2e-3] [--device cpu|webgpu] [--checkpoint checkpoints/resnet.pt] [--resume]
//     [--ckpt-every 50] [--torchvision packages/torchts/test/fixtures/resnet18 | none]
import { existsSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";
import { numArg, Progress, recordStep, resumeIfAsked, setupRun, tailMean } from "../common/train_utils.js";
import { CLASSES, makeShapes } from "./shapes.js";

const { args: A, device } = await setupRun();
const steps = numArg(A, "steps", 150);
const batchSize = numArg(A, "batch-size", 32);
const size = numArg(A, "image-size", 32);
const nTrain = numArg(A, "train-size", 4000);
const nTest = numArg(A, "test-size", 500);
const ckptEvery = numArg(A, "ckpt-every", 50);
const ckpt = A.checkpoint ?? "checkpoints/resnet.pt";

const toTensor = (d: { images: Float32Array; labels: number[] }, n: number) => ({
  x: torch.tensor(d.images, { dtype: "float32" }).reshape(n, 3, size, size),
  y: torch.tensor(d.labels, { dtype: "int64" }),
});
const train = toTensor(makeShapes(nTrain, size, 1), nTrain);
const test = toTensor(makeShapes(nTest, size, 2), nTest);
// per-channel normalisation from the training set
const mean = train.x.mean([0, 2, 3], true);
const std = train.x.sub(mean).pow(2).mean([0, 2, 3], true).sqrt();
const norm = (x: torch.Tensor) => x.sub(mean).div(std);

const model = new torch.vision.ResNet(torch.vision.BasicBlock, [1, 1, 1, 1], {
  numClasses: CLASSES.length,
  widths: [16, 16, 32, 64, 128],
});
if (device !== "cpu") model.to(device);
const opt = new torch.optim.Adam(model.parameters(), { lr: numArg(A, "lr", 2e-3) });
const { start, losses } = await resumeIfAsked(A, ckpt, model, opt, device);
const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
console.log(`ResNet (BasicBlock [1,1,1,1]): ${nParams.toLocaleString()} parameters, ${CLASSES.length} classes, ${steps} steps of ${batchSize} ${size}x${size} images on ${device}`);

async function accuracy(): Promise<number> {
  model.eval();
  let correct = 0;
  for (let i = 0; i < nTest; i += 250) {
    const n = Math.min(250, nTest - i);
    const logits = torch.noGrad(() => model.forward(norm(test.x.narrow(0, i, n)).to(device)));
    correct += (await logits.argmax(1).eq(test.y.narrow(0, i, n).to(device)).sum().item()) as number;
  }
  model.train();
  return correct / nTest;
}

const acc0 = await accuracy();
console.log(`initial test accuracy ${(100 * acc0).toFixed(1)}%`);
const bar = new Progress(steps, "img", start + 1);
const run = { bar, losses, every: ckptEvery, path: ckpt, model, opt };
for (let step = start + 1; step <= steps; step++) {
  // the step in torch.scope: its activations are freed as it ends (parameters, BatchNorm's running
  // statistics and the optimizer's state stay)
  const loss = torch.scope(() => {
    const idx = torch.randint(0, nTrain, [batchSize]);
    const x = norm(train.x.index(idx)).to(device);
    const y = train.y.index(idx).to(device);
    const loss = torch.nn.functional.crossEntropy(model.forward(x), y);
    opt.zeroGrad();
    loss.backward();
    opt.step();
    return loss;
  });
  await recordStep(step, loss, batchSize, run);
}
bar.end();
const acc = await accuracy();
console.log(`test accuracy ${(100 * acc0).toFixed(1)}% -> ${(100 * acc).toFixed(1)}% after ${steps} steps (${bar.elapsed().toFixed(1)} s); saved ${ckpt}`);

// A torchvision checkpoint: resnet18 state-dict names load directly.
let torchvision: { maxAbsDiff: number; argmax: number[] } | null = null;
const tvDir = A.torchvision ?? new URL("../../packages/torchts/test/fixtures/resnet18", import.meta.url).pathname;
if (tvDir !== "none" && existsSync(join(tvDir, "model.safetensors"))) {
  const sd = await torch.safetensors.loadFile(join(tvDir, "model.safetensors"));
  const tv = torch.vision.resnet18({ numClasses: sd["fc.weight"]!.shape[0]! });
  tv.loadStateDict(sd);
  tv.eval();
  if (device !== "cpu") tv.to(device);
  const exp = existsSync(join(tvDir, "expected.safetensors")) ? await torch.safetensors.loadFile(join(tvDir, "expected.safetensors")) : null;
  const input = exp?.input ?? torch.randn(2, 3, 64, 64);
  const logits = torch.noGrad(() => tv.forward(input.to(device))).to("cpu");
  const argmax = (await logits.argmax(1).tolist()) as number[];
  const maxAbsDiff = exp?.logits ? ((await logits.sub(exp.logits).abs().max().item()) as number) : NaN;
  torchvision = { maxAbsDiff, argmax };
  console.log(`torchvision resnet18 from ${tvDir}: argmax ${JSON.stringify(argmax)}, max |logits - PyTorch| = ${maxAbsDiff.toExponential(2)}`);
}
console.log(JSON.stringify({ initialAccuracy: acc0, accuracy: acc, firstLoss: losses[0], lastLoss: tailMean(losses, 10), steps, torchvision }));
