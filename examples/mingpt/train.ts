// Train a character-level minGPT on Tiny Shakespeare, then sample from it.
//   npm run example:mingpt -- [--steps 400] [--batch-size 16] [--block-size 64] [--n-layer 2] [--n-embd 64]
//                            [--n-head 4] [--lr 3e-3] [--device cpu] [--mode strict|fused|debug]
//                            [--checkpoint checkpoints/mingpt.safetensors] [--resume] [--sample-tokens 300]
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";
import { GPT } from "./model.js";

function args(): Record<string, string> {
  const out: Record<string, string> = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    if (!a[i]!.startsWith("--")) continue;
    const k = a[i]!.slice(2);
    const v = a[i + 1] && !a[i + 1]!.startsWith("--") ? a[++i]! : "true";
    out[k] = v;
  }
  return out;
}

const A = args();
const num = (k: string, d: number) => (A[k] !== undefined ? Number(A[k]) : d);
const steps = num("steps", 400);
const batchSize = num("batch-size", 16);
const blockSize = num("block-size", 64);
const device = A.device ?? "cpu";
const ckpt = A.checkpoint ?? "checkpoints/mingpt.safetensors";
torch.setEagerMode((A.mode as torch.EagerMode) ?? "strict");
torch.manualSeed(num("seed", 1337));

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
const opt = model.configureOptimizer({ lr: num("lr", 3e-3), betas: [0.9, 0.95], weightDecay: 0.1 });

async function evalLoss(src: torch.Tensor, iters = 4): Promise<number> {
  let s = 0;
  for (let i = 0; i < iters; i++) {
    const [x, y] = batch(src);
    s += await torch.noGrad(() => model.forward(x, y).loss!).item();
  }
  return s / iters;
}

function bar(step: number, total: number, loss: number, tokPerS: number, etaS: number): string {
  const w = 24;
  const filled = Math.round((w * step) / total);
  const eta = etaS >= 60 ? `${Math.floor(etaS / 60)}m${String(Math.round(etaS % 60)).padStart(2, "0")}s` : `${etaS.toFixed(0)}s`;
  return `[${"#".repeat(filled)}${".".repeat(w - filled)}] step ${step}/${total} loss ${loss.toFixed(4)} ${tokPerS.toFixed(0)} tok/s ETA ${eta}`;
}

const startVal = await evalLoss(val);
console.log(`initial val loss ${startVal.toFixed(4)}`);
const t0 = performance.now();
let lossEma = 0;
const tty = process.stderr.isTTY;
for (let step = 1; step <= steps; step++) {
  const [x, y] = batch(train);
  const { loss } = model.forward(x, y);
  opt.zeroGrad();
  loss!.backward();
  torch.nn.utils.clipGradNorm_([...model.parameters()], 1.0);
  opt.step();
  const l = await loss!.item();
  lossEma = step === 1 ? l : 0.9 * lossEma + 0.1 * l;
  const el = (performance.now() - t0) / 1000;
  const line = bar(step, steps, lossEma, (step * batchSize * blockSize) / el, (el / step) * (steps - step));
  if (tty) process.stderr.write(`\r${line}`);
  else if (step % Math.max(1, Math.floor(steps / 10)) === 0 || step === steps) console.log(line);
}
if (tty) process.stderr.write("\n");
const endVal = await evalLoss(val);
console.log(`val loss ${startVal.toFixed(4)} -> ${endVal.toFixed(4)} after ${steps} steps (${((performance.now() - t0) / 1000).toFixed(1)} s)`);

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
