// The DDPM UNet example in a reduced config: the noise-prediction loss must fall and a valid PNG
// grid of samples must be written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { inflateSync } from "node:zlib";
import { runExample, tempDir } from "./example_runner.js";

test("DDPM UNet on generated shapes: loss falls by > 0.3 in 25 steps; samples a PNG grid", () => {
  const dir = tempDir("unet-");
  try {
    const png = join(dir, "samples.png");
    const { last } = runExample("examples/unet/train.ts", [
      "--steps", "25", "--batch-size", "16", "--image-size", "12", "--base", "8", "--lr", "5e-3", "--T", "20", "--samples", "4", "--train-size", "500",
      "--checkpoint", join(dir, "u.pt"), "--out", png,
    ]);
    const firstMean = last.losses.slice(0, 3).reduce((a: number, b: number) => a + b) / 3;
    assert.ok(firstMean > 0.85, `an untrained model predicts ~zero noise: loss ${firstMean}`);
    assert.ok(last.lastLoss < firstMean - 0.3, `loss ${firstMean} -> ${last.lastLoss}`);
    const bytes = new Uint8Array(readFileSync(png));
    assert.deepEqual([...bytes.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
    const dv = new DataView(bytes.buffer, bytes.byteOffset);
    const [w, h] = [dv.getUint32(16), dv.getUint32(20)];
    assert.deepEqual([w, h], [2 * (12 * 4 + 1) + 1, 2 * (12 * 4 + 1) + 1]); // 2x2 grid of 12x12 images scaled 4x
    const idatLen = dv.getUint32(33);
    const raw = inflateSync(bytes.subarray(41, 41 + idatLen));
    assert.equal(raw.length, h * (w + 1));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
