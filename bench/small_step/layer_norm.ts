// One LayerNorm forward and backward (input, weight and bias gradients, then a host read of the
// input's gradient) over the small step's [4, 64, 128] and the 6L/d384 step's [8, 256, 384]: torchts
// strict and fused with the cpu's LayerNorm rows, the same with the composite switched off (the
// decomposition it replaced), and PyTorch 1.13 eager (/usr/bin/python3, 2 threads), in one run at
// 2 threads. Medians of 400 repetitions after 200 of warm-up; ratios to PyTorch's median.
//   node --import tsx bench/small_step/layer_norm.ts [--reps N] [--python /usr/bin/python3]
import { spawnSync } from "node:child_process";
import * as torch from "../../packages/torchts/src/index.js";
import { numberArg } from "../lib.js";

const REPS = numberArg("--reps") ?? 400;
const WARM = 200;
const PYTHON = process.argv.includes("--python") ? process.argv[process.argv.indexOf("--python") + 1]! : "/usr/bin/python3";
if (REPS < 1) throw new Error(`layer_norm: --reps must be at least 1, got ${REPS}`);
const SHAPES = [[4, 64, 128], [8, 256, 384]];
torch.backends.cpu.setNumThreads(2);
const F = torch.nn.functional;

const median = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1]!;

async function torchts(shape: number[], mode: "strict" | "fused"): Promise<number> {
  torch.manualSeed(0);
  const n = shape.at(-1)!;
  const x0 = torch.randn(shape), g = torch.randn(shape);
  const w = torch.ones([n]).requiresGrad_(true), b = torch.zeros([n]).requiresGrad_(true);
  const ts: number[] = [];
  for (let i = 0; i < WARM + REPS; i++) {
    const x = x0.detach().requiresGrad_(true);
    const t0 = performance.now();
    await torch.withEagerMode(mode, async () => {
      F.layerNorm(x, [n], w, b).backward(g);
      torch.sync();
      await x.grad!.sum().item();
    });
    if (i >= WARM) ts.push((performance.now() - t0) * 1000);
    w.grad = null;
    b.grad = null;
  }
  return median(ts);
}

function pytorch(shape: number[]): number | null {
  const src = `
import time, torch
torch.set_num_threads(2)
torch.manual_seed(0)
s = ${JSON.stringify(shape)}
x0 = torch.randn(s); g = torch.randn(s)
w = torch.ones(s[-1], requires_grad=True); b = torch.zeros(s[-1], requires_grad=True)
ts = []
for i in range(${WARM + REPS}):
    x = x0.detach().requires_grad_(True)
    t0 = time.perf_counter()
    torch.nn.functional.layer_norm(x, [s[-1]], w, b).backward(g)
    x.grad.sum().item()
    if i >= ${WARM}: ts.append((time.perf_counter() - t0) * 1e6)
    w.grad = None; b.grad = None
ts.sort()
print(ts[len(ts) // 2])
`;
  const r = spawnSync(PYTHON, ["-c", src], { encoding: "utf8" });
  if (r.status !== 0) {
    console.log(`no PyTorch peer (${PYTHON}: ${(r.stderr || r.error?.message || "").trim().split("\n").at(-1)})`);
    return null;
  }
  return Number(r.stdout.trim());
}

console.log(`LayerNorm forward + backward + host read, median us of ${REPS} after ${WARM}, 2 threads`);
console.log(`shape            torchts strict  fused   decomposed: strict  fused   PyTorch   strict/PT  fused/PT`);
for (const shape of SHAPES) {
  const strict = await torchts(shape, "strict"), fused = await torchts(shape, "fused");
  torch.backends.cpu.setCompositeEnabled("layerNorm", false);
  let dStrict: number, dFused: number;
  try {
    dStrict = await torchts(shape, "strict");
    dFused = await torchts(shape, "fused");
  } finally {
    torch.backends.cpu.setCompositeEnabled("layerNorm", true);
  }
  const pt = pytorch(shape);
  const r = (v: number) => (pt ? `${(v / pt).toFixed(2)}x` : "-");
  const f = (v: number) => v.toFixed(0).padStart(7);
  console.log(`${JSON.stringify(shape).padEnd(16)} ${f(strict)}        ${f(fused)}   ${f(dStrict)}            ${f(dFused)}  ${pt ? f(pt) : "      -"}   ${r(strict).padStart(8)}  ${r(fused).padStart(8)}`);
}
