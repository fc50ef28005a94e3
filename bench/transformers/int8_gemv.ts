// linearInt8's decode products (the ~100M Llama's shapes, int8 per-channel weights, 1-8 rows)
// on the native AVX-512 kernel (TORCHTS_CPU_BLAS=avx512), the native AVX2 kernel (avx2; one row
// stays on wasm there) and the wasm kernel (off), interleaved in one
// process so machine noise hits both alike: strict, medians of 15 rounds, and the weight bytes
// streamed per second. Kernels the machine lacks are skipped.
//   T=2 node --import tsx bench/transformers/int8_gemv.ts
import * as torch from "../../packages/torchts/src/index.js";
import { setCpuBlas } from "../../packages/torchts/src/device/cpu/native/blas.js";
import { linearInt8 } from "../../packages/torchts/src/nn/functional/quantized.js";
import { quantizeWeight } from "../../packages/torchts/src/transformers/index.js";

torch.backends.cpu.setNumThreads(Number(process.env.T ?? 2));
const kernels = (["avx512", "avx2", "off"] as const).filter((k) => {
  try {
    setCpuBlas(k);
    return true;
  } catch {
    return false;
  }
});
// [K, N]: q/o, k/v, gate/up, down, lm_head (d 768, 4 kv heads of 64, MLP 2048, vocab 16000)
const shapes: [number, number][] = [[768, 768], [768, 256], [768, 2048], [2048, 768], [768, 16000]];
const weights = await Promise.all(shapes.map(async ([K, N]) => quantizeWeight(torch.randn(N, K), 8)));
const t = new Map<string, number[]>();
for (let round = 0; round < 15; round++)
  for (const M of [1, 2, 4, 8])
    shapes.forEach(([K, N], i) => {
      const { q, scale } = weights[i]!;
      const x = torch.randn(M, K);
      for (const k of kernels) {
        setCpuBlas(k);
        const reps = N >= 16000 ? 3 : 20;
        torch.withEagerMode("strict", () => linearInt8(x, q, scale, null)).dispose();
        const t0 = performance.now();
        for (let r = 0; r < reps; r++) torch.withEagerMode("strict", () => linearInt8(x, q, scale, null)).dispose();
        const key = `${M} ${K}x${N} ${k}`;
        (t.get(key) ?? t.set(key, []).get(key)!).push((performance.now() - t0) / reps);
      }
    });
setCpuBlas("auto");
for (const M of [1, 2, 4, 8])
  for (const [K, N] of shapes) {
    const row = kernels.map((k) => {
      const v = t.get(`${M} ${K}x${N} ${k}`)!.sort((a, b) => a - b);
      const m = v[v.length >> 1]!;
      return `${k === "off" ? "wasm" : k} ${m.toFixed(3)} ms ${((K * N) / m / 1e6).toFixed(2)} GB/s`;
    });
    console.log(`M ${M}, [${K}] x [${N}, ${K}] int8: ${row.join(" | ")}`);
  }
