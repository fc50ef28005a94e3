// Float32 decode products: x [M, 768] @ W^T for 40 weights [2048, 768] (252 MB, past the caches, as
// a decode step reads its weights), M = 1-16 rows, three ways interleaved in one process so machine
// noise hits them alike: `native` (the AVX-512 few-row kernel, native/sgemv_avx512.c, where the CPU
// has AVX-512), `before` (the same GEMM choice with that kernel switched off: the wasm few-row kernel
// up to 8 rows, then the bridge's GEMM, as before it) and `wasm` (TORCHTS_CPU_BLAS=off: the wasm
// few-row kernel, then the wasm GEMM). Strict eager, medians of 9 rounds, weight bytes streamed per
// second, and each way's time over native's.
//   T=2 node --import tsx bench/transformers/f32_gemv.ts
import * as torch from "../../packages/torchts/src/index.js";
import { setCpuBlas } from "../../packages/torchts/src/device/cpu/native/blas.js";
import { setNativeSgemv } from "../../packages/torchts/src/device/cpu/native/sgemv.js";

torch.backends.cpu.setNumThreads(Number(process.env.T ?? 2));
const L = 40, K = 768, N = 2048;
const ROWS = [1, 2, 4, 8, 12, 16];
const WAYS = ["native", "before", "wasm"] as const;
const weights = Array.from({ length: L }, () => torch.randn(N, K));
const t = new Map<string, number[]>();
for (let round = 0; round < 10; round++)
  for (const M of ROWS) {
    const x = torch.randn(M, K);
    for (const way of WAYS) {
      setCpuBlas(way === "wasm" ? "off" : "auto");
      setNativeSgemv(way === "native");
      try {
        const t0 = performance.now();
        await torch.withEagerMode("strict", async () => {
          const outs = weights.map((w) => torch.nn.functional.linear(x, w));
          await outs.at(-1)!.data();
        });
        const ms = performance.now() - t0;
        if (round > 0) t.set(`${M} ${way}`, [...(t.get(`${M} ${way}`) ?? []), ms]); // round 0 warms up
      } finally {
        setCpuBlas("auto");
        setNativeSgemv(true);
      }
    }
  }
const med = (a: number[]) => [...a].sort((p, q) => p - q)[a.length >> 1]!;
const info = torch.backends.cpu.info();
console.log(`${L} products x [M, ${K}] @ [${N}, ${K}]^T, ${torch.backends.cpu.getNumThreads()} threads, GEMM ${info.blasKernel || "wasm"}; medians of 9 rounds`);
const gbs = (ms: number) => ((L * N * K * 4) / ms / 1e6).toFixed(1);
for (const M of ROWS) {
  const [n, b, w] = WAYS.map((way) => med(t.get(`${M} ${way}`)!)) as [number, number, number];
  console.log(
    `M ${String(M).padStart(2)}: native ${n.toFixed(2)} ms (${gbs(n)} GB/s)   before ${b.toFixed(2)} ms (${gbs(b)} GB/s, ${(b / n).toFixed(2)}x)   ` +
      `wasm ${w.toFixed(2)} ms (${gbs(w)} GB/s, ${(w / n).toFixed(2)}x)`,
  );
}
process.exit(0);
