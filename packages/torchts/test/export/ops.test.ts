// The core ops the seven models do not reach, each lowered on its own and run by LiteRT.js
// (headless Chromium) and onnxruntime-node: transposed and depthwise convolutions, average
// pooling, argmax, log-softmax, softmax over an inner dim, min/max reductions, cumsum, padding,
// RANGE/FILL that are too large to fold, pow, triangles, comparisons and selects.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { maxAbsDiff } from "./models.js";
import { haveChromium, openRuntimes } from "./browser.js";
import { ort, runOrt } from "./ort.js";

const { nn } = torch;
const F = nn.functional;

function cases(): [string, (x: Tensor) => Tensor][] {
  torch.manualSeed(0);
  const ct = new nn.ConvTranspose2d(4, 3, 4, { stride: 2, padding: 1 });
  const ctOut = new nn.ConvTranspose2d(4, 3, 3, { stride: 2, padding: 1, outputPadding: 1 });
  const dw = new nn.Conv2d(4, 4, 3, { padding: 1, groups: 4 });
  const dwMult = new nn.Conv2d(4, 8, 3, { padding: 1, groups: 4 });
  return [
    ["convTranspose2d", (x) => ct.forward(x)],
    ["convTranspose2d outputPadding", (x) => ctOut.forward(x)],
    ["depthwise conv", (x) => dw.forward(x)],
    ["depthwise conv, multiplier 2", (x) => dwMult.forward(x)],
    ["avgPool2d", (x) => F.avgPool2d(x, 2)],
    ["avgPool2d padded", (x) => F.avgPool2d(x, 3, 2, 1)],
    ["maxPool2d odd size", (x) => F.maxPool2d(x, 2, 2)],
    ["argmax", (x) => x.argmax(1).float()],
    ["argmax keepdim", (x) => x.argmax(-1, true).float()],
    ["logSoftmax", (x) => F.logSoftmax(x, -1)],
    ["softmax over dim 1", (x) => F.softmax(x, 1)],
    ["amax, amin", (x) => x.amax([2, 3], true).add(x.amin(1, true))],
    ["sum, mean, amax", (x) => x.sum(1).add(x.mean(1)).sub(x.amax(1))],
    ["cumsum", (x) => x.cumsum(2)],
    ["pad", (x) => F.pad(x, [1, 2, 0, 3], "constant", 0.5)],
    ["RANGE (too large to fold)", (x) => x.add(torch.arange(80000).reshape(20, 4000).sum(1).reshape(1, 4, 5, 1).float().mul(1e-8))],
    ["FILL (too large to fold)", (x) => x.add(torch.full([300, 300], 2).sum().mul(1e-5))],
    ["pow 3, sqrt", (x) => x.abs().pow(3).add(x.abs().sqrt())],
    ["where, comparisons, clamps", (x) => torch.where(x.gt(0), x.exp(), x.sin().cos()).mul(x.tanh()).sub(x.sigmoid()).div(2).maximum(-0.5).minimum(0.5).neg().floor().add(x.ceil())],
    ["cat", (x) => torch.cat([x, x.mul(2)], 1)],
    ["narrow, select, expand", (x) => x.narrow(2, 1, 3).select(1, 2).unsqueeze(1).expand(2, 4, 3, 6)],
    ["tril, triu", (x) => torch.tril(x, 1).add(torch.triu(x, -1))],
    ["gelu both forms", (x) => F.gelu(x).add(F.gelu(x, { approximate: "tanh" }))],
    ["relu6, leakyRelu", (x) => F.relu6(x.mul(5)).add(F.leakyRelu(x, 0.1))],
  ];
}

test("core ops beyond the models: LiteRT.js and onnxruntime-node equal torchts", { skip: haveChromium ? false : "no Chromium (set TORCHTS_CHROMIUM)", timeout: 180_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-ops-"));
  const rt = await openRuntimes(dir);
  try {
    const x = torch.randn(2, 4, 5, 6);
    const all = cases();
    all.forEach(([, f], i) => writeFileSync(join(dir, `${i}.tflite`), torch.litert.convert(f, [x]).bytes));
    for (const [i, [name, f]] of all.entries()) {
      const want = f(x);
      const [[lite]] = await rt.tflite(`${i}.tflite`, [{ inputs: [x] }]);
      assert.ok((await maxAbsDiff(lite!, want)) < 1e-5, `${name}: LiteRT.js`);
      const sess = await ort.InferenceSession.create(torch.onnx.toBytes(f, [x]));
      const [onnx] = await runOrt(sess, [x]);
      assert.ok((await maxAbsDiff(onnx!, want)) < 1e-5, `${name}: onnxruntime`);
      await sess.release();
    }
  } finally {
    await rt.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
