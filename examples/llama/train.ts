// Build a Llama / Qwen2 / Qwen3 model from a config, train it on Tiny Shakespeare characters and
// save a Hugging Face model folder (config.json, generation_config.json, model.safetensors).
//   npm run example:llama -- [--arch llama|qwen2|qwen3] [--steps 120] [--batch-size 8] [--block-size 64]
//     [--hidden 64] [--layers 2] [--heads 4] [--kv-heads 2] [--lr 3e-3] [--device cpu|webgpu]
//     [--out checkpoints/llama-shakespeare] [--checkpoint checkpoints/llama.pt] [--resume] [--ckpt-every 40]
//     [--amp bf16|fp16] (autocast matmuls; fp16 adds a GradScaler)
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";
import { numArg, Progress, recordStep, resumeIfAsked, setupRun } from "../common/train_utils.js";
import { CausalLM, makeConfig, savePretrained, type HFConfig } from "./model.js";

const { args: A, device } = await setupRun(1337);
const arch = (A.arch ?? "llama") as HFConfig["model_type"];
if (!["llama", "qwen2", "qwen3"].includes(arch)) throw new Error(`--arch must be llama, qwen2 or qwen3, got '${arch}'`);
const steps = numArg(A, "steps", 120);
const batchSize = numArg(A, "batch-size", 8);
const blockSize = numArg(A, "block-size", 64);
const ckptEvery = numArg(A, "ckpt-every", 40);
const out = A.out ?? `checkpoints/${arch}-shakespeare`;
const ckpt = A.checkpoint ?? `checkpoints/${arch}.pt`;

const text = readFileSync(new URL("../data/tinyshakespeare.txt", import.meta.url), "utf8");
const chars = [...new Set(text)].sort();
const stoi = new Map(chars.map((c, i) => [c, i]));
const data = torch.tensor(Array.from(text, (c) => stoi.get(c)!), { dtype: "int64" });
const nTrain = Math.floor(data.numel() * 0.9);
const train = data.narrow(0, 0, nTrain);
const val = data.narrow(0, nTrain, data.numel() - nTrain);

function batch(src: torch.Tensor): [torch.Tensor, torch.Tensor] {
  const ix = torch.randint(0, src.numel() - blockSize - 1, [batchSize, 1]);
  const chunk = src.index(ix.add(torch.arange(blockSize + 1).unsqueeze(0)));
  return [chunk.narrow(1, 0, blockSize).to(device), chunk.narrow(1, 1, blockSize).to(device)];
}

const hidden = numArg(A, "hidden", 64);
const heads = numArg(A, "heads", 4);
const config = makeConfig(arch, {
  vocabSize: chars.length,
  hidden,
  layers: numArg(A, "layers", 2),
  heads,
  kvHeads: numArg(A, "kv-heads", 2),
  intermediate: numArg(A, "intermediate", Math.round((8 / 3) * hidden / 8) * 8),
  maxPos: Math.max(blockSize, 128),
});
const model = new CausalLM(config);
if (device !== "cpu") model.to(device);
const opt = new torch.optim.AdamW(model.parameters(), { lr: numArg(A, "lr", 3e-3), betas: [0.9, 0.95], weightDecay: 0.1 });
const amp = A.amp === "bf16" ? "bfloat16" : A.amp === "fp16" ? "float16" : null;
if (A.amp && !amp) throw new Error(`--amp must be bf16 or fp16, got '${A.amp}'`);
const scaler = new torch.amp.GradScaler(device, { enabled: amp === "float16" });
const { start, losses } = await resumeIfAsked(A, ckpt, model, opt, device);
const nParams = [...model.parameters()].reduce((s, p) => s + p.numel(), 0);
console.log(`${config.architectures[0]}: ${nParams.toLocaleString()} parameters, vocab ${chars.length}, ${steps} steps of ${batchSize}x${blockSize} tokens on ${device}${amp ? ` (autocast ${amp})` : ""}`);

// a fixed validation set (its own generator, so it does not move the training RNG)
const valGen = new torch.Generator().manualSeed(4242);
const valIx = torch.randint(0, val.numel() - blockSize - 1, [8, 1], { generator: valGen });
const valChunk = val.index(valIx.add(torch.arange(blockSize + 1).unsqueeze(0)));
const valX = valChunk.narrow(1, 0, blockSize).to(device);
const valY = valChunk.narrow(1, 1, blockSize).to(device);
const evalLoss = async () => torch.noGrad(() => model.forward(valX, valY).loss!).item();

const startVal = await evalLoss();
console.log(`initial val loss ${startVal.toFixed(4)}`);
const bar = new Progress(steps, "tok", start + 1);
const run = { bar, losses, every: ckptEvery, path: ckpt, model, opt };
for (let step = start + 1; step <= steps; step++) {
  const [x, y] = batch(train);
  const { loss } = amp ? torch.autocast(device, () => model.forward(x, y), { dtype: amp }) : model.forward(x, y);
  opt.zeroGrad();
  scaler.scale(loss!).backward();
  scaler.unscale_(opt);
  torch.nn.utils.clipGradNorm_([...model.parameters()], 1.0);
  await scaler.step(opt);
  await scaler.update();
  await recordStep(step, loss!, batchSize * blockSize, run);
}
bar.end();
const endVal = await evalLoss();
console.log(`val loss ${startVal.toFixed(4)} -> ${endVal.toFixed(4)} after ${steps} steps (${bar.elapsed().toFixed(1)} s)`);
const files = await savePretrained(model, out);
// the character vocabulary: token id i is chars[i]
writeFileSync(join(out, "vocab_chars.json"), JSON.stringify(chars) + "\n");
console.log(`saved Hugging Face folder ${out}: ${[...files, "vocab_chars.json"].join(", ")}`);
console.log(JSON.stringify({ arch, initialValLoss: startVal, finalValLoss: endVal, steps, out, losses }));
