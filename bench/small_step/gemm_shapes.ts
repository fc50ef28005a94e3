// The small step's GEMMs alone: each forward shape (M = B*T = 256 rows) and the batched attention
// products, torchts strict (wasm SIMD, 2 threads) against PyTorch's torch.mm/bmm (OpenBLAS,
// 2 threads), median of many calls, in one run. Says how much of the step's matmul time is GEMM
// efficiency rather than overhead, and how torchts' batched form of x @ W (the weight broadcast
// over the batch, stride 0) compares with the folded [B*T, K] @ [K, N] form PyTorch uses.
//   node --import tsx bench/small_step/gemm_shapes.ts
import { execFileSync } from "node:child_process";
import * as torch from "../../packages/torchts/src/index.js";

const shapes: [string, number[], number[]][] = [
  ["qkv   [256,128]@[128,384]", [256, 128], [128, 384]],
  ["proj  [256,128]@[128,128]", [256, 128], [128, 128]],
  ["fc    [256,128]@[128,512]", [256, 128], [128, 512]],
  ["fc2   [256,512]@[512,128]", [256, 512], [512, 128]],
  ["lm    [256,128]@[128,96]", [256, 128], [128, 96]],
  ["att   [16,64,32]@[16,32,64]", [16, 64, 32], [16, 32, 64]],
  ["att@v [16,64,64]@[16,64,32]", [16, 64, 64], [16, 64, 32]],
  ["fc as torchts runs it: [4,64,128]@[128,512] (batched, W broadcast)", [4, 64, 128], [128, 512]],
];
const REPS = 200;
const flops = (a: number[], b: number[]) => 2 * a.slice(0, -1).reduce((x, y) => x * y, 1) * a.at(-1)! * b.at(-1)!;
const med = (t: number[]) => [...t].sort((p, q) => p - q)[t.length >> 1]!;

async function tsTime(a: number[], b: number[]): Promise<number> {
  const x = torch.randn(a), w = torch.randn(b);
  const t: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const t0 = performance.now();
    const y = torch.withEagerMode("strict", () => x.matmul(w)); // strict: the kernel has run when matmul returns
    t.push(performance.now() - t0);
    y.dispose();
  }
  return med(t);
}
const py = `
import torch, time, json, sys
torch.set_num_threads(2)
out = []
for a, b in json.loads(sys.argv[1]):
    x, w = torch.randn(a), torch.randn(b)
    f = torch.mm if len(a) == 2 and len(b) == 2 else torch.matmul
    ts = []
    for i in range(${REPS}):
        t0 = time.perf_counter(); y = f(x, w); ts.append((time.perf_counter() - t0) * 1000)
    out.append(sorted(ts)[len(ts) // 2])
print(json.dumps(out))`;
for (const [, a, b] of shapes) await tsTime(a, b); // warm-up pass: kernels generated, workers spinning
const ptMs = JSON.parse(execFileSync("/usr/bin/python3", ["-c", py, JSON.stringify(shapes.map(([, a, b]) => [a, b]))], { encoding: "utf8" })) as number[];
console.log(`| GEMM | MFLOP | torchts ms | GFLOP/s | PyTorch ms | GFLOP/s | torchts / PyTorch |`);
console.log(`|---|---:|---:|---:|---:|---:|---:|`);
for (let i = 0; i < shapes.length; i++) {
  const [name, a, b] = shapes[i]!;
  const f = flops(a, b);
  const ts = await tsTime(a, b);
  console.log(`| ${name} | ${(f / 1e6).toFixed(1)} | ${ts.toFixed(3)} | ${(f / ts / 1e6).toFixed(0)} | ${ptMs[i]!.toFixed(3)} | ${(f / ptMs[i]! / 1e6).toFixed(0)} | ${(ts / ptMs[i]!).toFixed(2)}x |`);
}
