// The small step's products (and one prefill product) on each float32 GEMM torchts can run them on,
// interleaved in one process so machine noise hits every kernel alike: strict matmul, medians of 15
// rounds. Kernels the machine lacks are skipped.
//   T=2 K=avx2,off,openblas node --import tsx bench/small_step/gemm_kernels.ts
import * as torch from "../../packages/torchts/src/index.js";
import { setCpuBlas } from "../../packages/torchts/src/device/cpu/native/blas.js";
torch.backends.cpu.setNumThreads(Number(process.env.T ?? 2));
const shapes: [number[], number[], boolean][] = [[[256, 128], [128, 384], false], [[256, 128], [128, 128], false], [[256, 128], [128, 512], false], [[256, 512], [512, 128], false], [[128, 256], [256, 384], true], [[16, 64, 32], [16, 32, 64], false], [[512, 768], [768, 2048], false]];
// a kernel the machine lacks (or no bridge) makes setCpuBlas throw: skipped
const kernels = ((process.env.K ?? "avx512,avx2,off,openblas").split(",") as ("avx512" | "avx2" | "openblas" | "off")[]).filter((k) => {
  try {
    setCpuBlas(k);
    return true;
  } catch {
    return false;
  }
});
const t = new Map<string, number[]>();
for (let round = 0; round < 15; round++)
  for (const [a, b, tr] of shapes)
    for (const k of kernels) {
      setCpuBlas(k);
      const x = tr ? torch.randn([a[1]!, a[0]!]).t() : torch.randn(a), w = torch.randn(b);
      const reps = a[0]! >= 512 ? 2 : 10;
      for (let i = 0; i < 2; i++) torch.withEagerMode("strict", () => x.matmul(w)).dispose();
      const t0 = performance.now();
      for (let i = 0; i < reps; i++) torch.withEagerMode("strict", () => x.matmul(w)).dispose();
      const key = `${a.join("x")}${tr ? "ᵀ" : ""} @ ${b.join("x")} ${k}`;
      (t.get(key) ?? t.set(key, []).get(key)!).push((performance.now() - t0) / reps);
    }
for (const [a, b, tr] of shapes) {
  const fl = 2 * a.slice(0, -1).reduce((p, q) => p * q, 1) * (tr ? a[1]! : a.at(-1)!) * b.at(-1)!;
  const row = kernels.map((k) => { const v = t.get(`${a.join("x")}${tr ? "ᵀ" : ""} @ ${b.join("x")} ${k}`)!.sort((p, q) => p - q); const m = v[v.length >> 1]!; return `${k} ${m.toFixed(3)} ms ${(fl / m / 1e6).toFixed(0)} GF/s`; });
  console.log(`${a.join("x")}${tr ? "ᵀ" : ""} @ ${b.join("x")}: ${row.join(" | ")}`);
}
