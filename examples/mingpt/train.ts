// Train a character-level minGPT on Tiny Shakespeare, then sample from it.
//   npm run example:mingpt -- [--steps 400] [--batch-size 16] [--block-size 64] [--n-layer 2] [--n-embd 64]
//                            [--n-head 4] [--lr 3e-3] [--device cpu] [--mode strict|fused|debug]
//                            [--checkpoint checkpoints/mingpt.safetensors] [--resume] [--sample-tokens 300]
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";
import { numArg, Progress, setupRun } from "../common/train_utils.js";
import { GPT } from "./model.js";

const { args: A, device } = await setupRun(1337);
const num = (k: string, d: number) => numArg(A, k, d);
const steps = num("steps", 400);
const batchSize = num("batch-size", 16);
const blockSize = num("block-size", 64);
const ckpt = A.checkpoint ?? "checkpoints/mingpt.safetensors";

const text = readFileSync(new URL("../data/tinyshakespeare.txt", import.meta.url), "utf8");
const chars = [...new Set(text)].sort();
const stoi = new Map(chars.map((c, i) => [c, i]));
const encode = (s: string) => Array.from(s, (c) => stoi.get(c)!);
const decode = (ids: number[]) => ids.map((i) => chars[i]).join("");
const data = torch.tensor(encode(text), { dtype: "int64" });
const nTrain = Math.floor(data.numel() * 0.9);
const train = data.narrow(0, 0, nTrain);
const val = data.narrow(0, nTrain, data.numel() - nTrain);

function batch(src: torch.Tensor): [torch.Tensor, torch.Tensor] {
  const ix = torch.randint(0, src.numel() - blockSize - 1, [batchSize, 1]);
  const offs = ix.add(torch.arange(blockSize + 1).unsqueeze(0)); // [B, T+1]
  const chunk = src.index(offs);
  return [chunk.narrow(1, 0, blockSize).to(device), chunk.narrow(1, 1, blockSize).to(device)];
}

const model = new GPT({
  vocabSize: chars.length,
  blockSize,
  nLayer: num("n-layer", 2),
  nHead: num("n-head", 4),
  nEmbd: num("n-embd", 64),
});
if (device !== "cpu") model.to(device);
if (A.resume && existsSync(ckpt)) {
  model.loadStateDict(new Map(Object.entries(await torch.safetensors.loadFile(ckpt))));
  console.log(`resumed from ${ckpt}`);
}
const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
console.log(`minGPT: ${nParams.toLocaleString()} parameters, vocab ${chars.length}, ${steps} steps of ${batchSize}x${blockSize} tokens on ${device} (${torch.getEagerMode()} eager)`);
// fused AdamW (as nanoGPT uses when available): the same values, a few kernels per parameter
const opt = model.configureOptimizer({ lr: num("lr", 3e-3), betas: [0.9, 0.95], weightDecay: 0.1, fused: true });

async function evalLoss(src: torch.Tensor, iters = 4): Promise<number> {
  let s = 0;
  for (let i = 0; i < iters; i++) {
    const [x, y] = batch(src);
    s += await torch.noGrad(() => model.forward(x, y).loss!).item();
  }
  return s / iters;
}

const startVal = await evalLoss(val);
console.log(`initial val loss ${startVal.toFixed(4)}`);
const bar = new Progress(steps, "tok");
for (let step = 1; step <= steps; step++) {
  const [x, y] = batch(train);
  // the step in torch.scope: its activations are freed when it ends, not when the garbage collector
  // runs (gradients, parameters and the optimizer's state stay)
  const loss = torch.scope(() => {
    const { loss } = model.forward(x, y);
    opt.zeroGrad();
    loss!.backward();
    torch.nn.utils.clipGradNorm_([...model.parameters()], 1.0);
    opt.step();
    torch.sync(); // fused mode: run the step's pending work now (like xm.mark_step()); strict: nothing pending
    return loss!;
  });
  await bar.update(step, await loss.item(), batchSize * blockSize);
  loss.dispose();
}
bar.end();
const endVal = await evalLoss(val);
console.log(`val loss ${startVal.toFixed(4)} -> ${endVal.toFixed(4)} after ${steps} steps (${bar.elapsed().toFixed(1)} s)`);

mkdirSync(dirname(ckpt), { recursive: true });
const sd: Record<string, torch.Tensor> = {};
for (const [k, v] of model.stateDict()) sd[k] = v;
await torch.safetensors.saveFile(sd, ckpt, { format: "pt", model: "mingpt" });
console.log(`saved ${ckpt}`);

model.eval();
const prompt = "ROMEO:";
const out = model.generate(torch.tensor([encode(prompt)], { dtype: "int64" }), num("sample-tokens", 300), { temperature: 0.8, topK: 20 });
console.log("--- sample ---");
console.log(decode((await out.select(0, 0).tolist()) as number[]));
console.log(JSON.stringify({ initialValLoss: startVal, finalValLoss: endVal, steps }));
