// Hardware limits on this machine, measured with the same instructions the kernels use: the
// float32 FMA peak of wasm SIMD (1 thread and all threads) and, where torchts' AVX-512 GEMM runs
// the products, of the 512-bit units; and copy bandwidth (read + write bytes).
import { arenaF32, fmaPeak, productPeak, setNumThreads, getNumThreads, unaryF32 } from "../../packages/torchts/src/device/cpu/wasm/index.js";
import { emit, round, time } from "../lib.js";

const S = "probe";
const all = getNumThreads();
setNumThreads(1);
const one = fmaPeak(2048)!;
emit({ suite: S, workload: "fma peak", variant: "1 thread", gflops: round(one.flops / 1e9) });
setNumThreads(all);
fmaPeak(64);
await new Promise((r) => setTimeout(r, 500)); // let the workers start
const peak = fmaPeak(8192)!;
emit({ suite: S, workload: "fma peak", variant: `${peak.threads} threads`, gflops: round(peak.flops / 1e9) });
const native = productPeak();
if (native && native.unit !== "wasm SIMD")
  emit({ suite: S, workload: "fma peak", variant: `${native.unit}, ${native.threads} threads`, gflops: round(native.flops / 1e9), note: "the units float32 products run on" });
const n = 32 << 20; // 128 MiB each way: far past the caches
const a = arenaF32(n)!, b = arenaF32(n)!;
a.data.fill(1);
b.data.fill(0);
const t = await time(() => unaryF32("identity", a.data, 0, n, b.data), { warmup: 1, minReps: 5, maxReps: 8 });
emit({ suite: S, workload: "memory bandwidth", variant: `copy, ${peak.threads} threads`, ms: round(t.best), gbs: round((8 * n) / t.best / 1e6) });
