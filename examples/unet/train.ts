// Train a small DDPM UNet on generated 16x16 shape images (filled circles, squares and rings in
// white on black) and sample a PNG grid.
//   npm run example:unet -- [--steps 200] [--batch-size 16] [--image-size 16] [--base 8] [--T 50]
//     [--lr 2e-3] [--samples 16] [--device cpu|webgpu] [--out checkpoints/unet_samples.png]
//     [--checkpoint checkpoints/unet.pt] [--resume] [--ckpt-every 100]
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";
import { mulberry32, numArg, Progress, recordStep, resumeIfAsked, setupRun, tailMean } from "../common/train_utils.js";
import { Diffusion, UNet } from "./model.js";
import { gridPng } from "./png.js";

const { args: A, device } = await setupRun();
const steps = numArg(A, "steps", 200);
const batchSize = numArg(A, "batch-size", 16);
const size = numArg(A, "image-size", 16);
const nSamples = numArg(A, "samples", 16);
const ckptEvery = numArg(A, "ckpt-every", 100);
const ckpt = A.checkpoint ?? "checkpoints/unet.pt";
const outPng = A.out ?? "checkpoints/unet_samples.png";

/** n images [n, 1, size, size] in {-1, 1}: one filled circle, square or ring each. */
function makeImages(n: number, seed: number): torch.Tensor {
  const r = mulberry32(seed);
  const px = new Float32Array(n * size * size).fill(-1);
  for (let i = 0; i < n; i++) {
    const kind = Math.floor(r() * 3);
    const rad = size * (0.18 + 0.14 * r());
    const cx = rad + 1 + r() * (size - 2 * rad - 2);
    const cy = rad + 1 + r() * (size - 2 * rad - 2);
    for (let y = 0; y < size; y++)
      for (let x = 0; x < size; x++) {
        const dx = x + 0.5 - cx;
        const dy = y + 0.5 - cy;
        const d = Math.hypot(dx, dy);
        const on = kind === 0 ? d <= rad : kind === 1 ? Math.max(Math.abs(dx), Math.abs(dy)) <= rad * 0.85 : d <= rad && d >= rad * 0.55;
        if (on) px[i * size * size + y * size + x] = 1;
      }
  }
  return torch.tensor(px, { dtype: "float32" }).reshape(n, 1, size, size);
}

const data = makeImages(numArg(A, "train-size", 2000), 1);
const nData = data.shape[0]!;
const diffusion = new Diffusion(numArg(A, "T", 50));
const model = new UNet(1, numArg(A, "base", 8));
if (device !== "cpu") model.to(device);
const opt = new torch.optim.Adam(model.parameters(), { lr: numArg(A, "lr", 2e-3) });
const { start, losses } = await resumeIfAsked(A, ckpt, model, opt, device);
const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
console.log(`DDPM UNet: ${nParams.toLocaleString()} parameters, T=${diffusion.T}, ${steps} steps of ${batchSize} ${size}x${size} images on ${device}`);

const bar = new Progress(steps, "img", start + 1);
const run = { bar, losses, every: ckptEvery, path: ckpt, model, opt };
for (let step = start + 1; step <= steps; step++) {
  // the step in torch.scope: its activations are freed as it ends (parameters and optimizer state stay)
  const loss = torch.scope(() => {
    const x0 = data.index(torch.randint(0, nData, [batchSize])).to(device);
    const t = torch.randint(0, diffusion.T, [batchSize]).to(device);
    const { xt, eps } = diffusion.noise(x0, t);
    const loss = torch.nn.functional.mseLoss(model.forward(xt, t), eps);
    opt.zeroGrad();
    loss.backward();
    opt.step();
    return loss;
  });
  await recordStep(step, loss, batchSize, run);
}
bar.end();
console.log(`noise-prediction loss ${losses[0]?.toFixed(4)} -> ${tailMean(losses, 20).toFixed(4)} after ${steps} steps (${bar.elapsed().toFixed(1)} s); saved ${ckpt}`);

model.eval();
const t0 = performance.now();
const samples = diffusion.sample(model, nSamples, size, device).to("cpu");
const flat = await samples.data();
mkdirSync(dirname(outPng), { recursive: true });
writeFileSync(outPng, gridPng(flat, nSamples, size, size, Math.ceil(Math.sqrt(nSamples)), 4));
// samples of a trained model are mostly saturated (black background, white shapes) like the data
let saturated = 0;
for (const v of flat) if (Math.abs(v) > 0.8) saturated++;
const saturatedFraction = saturated / flat.length;
console.log(`sampled ${nSamples} images with ${diffusion.T} steps in ${((performance.now() - t0) / 1000).toFixed(1)} s -> ${outPng} (${(100 * saturatedFraction).toFixed(0)}% of pixels near black/white)`);
console.log(JSON.stringify({ firstLoss: losses[0], lastLoss: tailMean(losses, 20), steps, saturatedFraction, png: outPng, losses }));
