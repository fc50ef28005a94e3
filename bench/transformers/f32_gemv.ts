// Float32 decode products: x [M, 768] @ W^T for 40 weights [2048, 768] (252 MB, past the caches, as
// a decode step reads its weights), M = 1-16 rows, on the GEMM choice `auto` (the native AVX-512
// few-row kernel for M <= 16 where the CPU has AVX-512, else the GEMM) and `off` (the wasm few-row
// kernel for M <= 8, then the wasm GEMM), interleaved in one process so machine noise hits both
// alike: strict eager, medians of 9 rounds, and the weight bytes streamed per second.
//   T=2 node --import tsx bench/transformers/f32_gemv.ts
import * as torch from "../../packages/torchts/src/index.js";
import { setCpuBlas } from "../../packages/torchts/src/device/cpu/native/blas.js";

torch.backends.cpu.setNumThreads(Number(process.env.T ?? 2));
const L = 40, K = 768, N = 2048;
const weights = Array.from({ length: L }, () => torch.randn(N, K));
const t = new Map<string, number[]>();
for (let round = 0; round < 10; round++)
  for (const M of [1, 2, 4, 8, 12, 16]) {
    const x = torch.randn(M, K);
    for (const k of ["auto", "off"] as const) {
      setCpuBlas(k);
      try {
        const t0 = performance.now();
        await torch.withEagerMode("strict", async () => {
          const outs = weights.map((w) => torch.nn.functional.linear(x, w));
          await outs.at(-1)!.data();
        });
        const ms = performance.now() - t0;
        if (round > 0) t.set(`${M} ${k}`, [...(t.get(`${M} ${k}`) ?? []), ms]); // round 0 warms up
      } finally {
        setCpuBlas("auto");
      }
    }
  }
const med = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1]!;
const info = torch.backends.cpu.info();
console.log(`${L} products x [M, ${K}] @ [${N}, ${K}]^T, ${torch.backends.cpu.getNumThreads()} threads, GEMM ${info.blasKernel || "wasm"}; medians of 9 rounds`);
for (const M of [1, 2, 4, 8, 12, 16]) {
  const a = med(t.get(`${M} auto`)!), o = med(t.get(`${M} off`)!);
  const gbs = (ms: number) => ((L * N * K * 4) / ms / 1e6).toFixed(1);
  console.log(`M ${String(M).padStart(2)}: auto ${a.toFixed(2)} ms (${gbs(a)} GB/s)   off ${o.toFixed(2)} ms (${gbs(o)} GB/s)   off / auto ${(o / a).toFixed(2)}x`);
}
process.exit(0);
