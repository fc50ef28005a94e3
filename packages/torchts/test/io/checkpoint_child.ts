// Child process for checkpoint_kill.test.ts: trains a tiny MLP with Adam and dropout, writing a
// checkpoint (model, optimizer, RNG, step, losses, plus padding so each write takes a while)
// after every step. Prints "begin <step>" before and "saved <step>" after each write, and one
// JSON line of all losses at the end.
//   node --import tsx checkpoint_child.ts <ckpt> <steps> [--resume] [--pad-mb N]
import { existsSync } from "node:fs";
import * as torch from "../../src/index.js";

const [ckpt, stepsArg, ...rest] = process.argv.slice(2);
const steps = Number(stepsArg);
const resume = rest.includes("--resume");
const padMb = rest.includes("--pad-mb") ? Number(rest[rest.indexOf("--pad-mb") + 1]) : 0;
const nn = torch.nn;

torch.manualSeed(7);
const model = new nn.Sequential(new nn.Linear(4, 16), new nn.ReLU(), new nn.Dropout(0.2), new nn.Linear(16, 1));
const opt = new torch.optim.Adam(model.parameters(), { lr: 0.02 });
const w = torch.tensor([[1], [-2], [0.5], [3]], { dtype: "float32" });
let start = 0;
let losses: number[] = [];
if (resume && existsSync(ckpt!)) {
  const c = await torch.load(ckpt!);
  model.loadStateDict(c.model);
  opt.loadStateDict(c.optim);
  torch.setRngState(c.rng);
  start = c.step;
  losses = c.losses;
  process.stdout.write(`resumed ${start}\n`);
}
const pad = torch.zeros(padMb * 262144);
for (let step = start + 1; step <= steps; step++) {
  const x = torch.randn(32, 4); // the batch comes from the RNG, so resuming must restore it
  const y = x.matmul(w);
  const loss = model.forward(x).sub(y).pow(2).mean();
  opt.zeroGrad();
  loss.backward();
  opt.step();
  losses.push(await loss.item());
  process.stdout.write(`begin ${step}\n`);
  await torch.save({ model: model.stateDict(), optim: opt.stateDict(), rng: torch.getRngState(), step, losses, pad }, ckpt!);
  process.stdout.write(`saved ${step}\n`);
}
process.stdout.write(JSON.stringify({ losses }) + "\n");
