// Hardware probes used by the benchmarks: the FMA peak (12 independent multiply-add chains,
// enough to cover FMA latency x throughput on current x86/ARM) and, via ew_identity, copy
// bandwidth. The peak is what MFU and "ratio to the hardware limit" are measured against.
// 12 chains + 2 constants fit V8's 15 allocatable xmm registers on x64; 16 chains spilled
// and measured about half the real peak.
import { Fn, I32, OP, SIMD, V128 } from "./emitter.js";
import { wasmRuntime } from "./runtime.js";
import { blasBridge, bridgePoolFn } from "../native/blas.js";

const CHAINS = 12;
const ITERS_PER_UNIT = 1024;

/** probe_fma(lo, hi, _, _): (hi-lo) * 1024 iterations of 12 vector FMAs (or mul+add). */
export function probeFns(fma: boolean): Fn[] {
  const f = new Fn("probe_fma", [I32, I32, I32, I32], [I32]);
  const acc = Array.from({ length: CHAINS }, () => f.local(V128));
  const k = f.local(I32);
  const m = f.local(V128), c = f.local(V128);
  f.f32x4(0.999999).set(m);
  f.f32x4(1e-7).set(c);
  acc.forEach((a, i) => f.f32x4(i).set(a));
  f.get(1).get(0).op(OP.i32sub).i32(ITERS_PER_UNIT).op(OP.i32mul).set(k);
  f.loop(() => {
    for (const a of acc) {
      if (fma) f.get(a).get(m).get(c).simd(SIMD.relaxedMadd).set(a);
      else f.get(a).get(m).simd(SIMD.f32x4mul).get(c).simd(SIMD.f32x4add).set(a);
    }
    f.get(k).i32(1).op(OP.i32sub).tee(k).op(OP.brIf, 0);
  });
  // keep the chains live: return a bit pattern derived from all of them
  f.get(acc[0]!);
  for (let i = 1; i < CHAINS; i++) f.get(acc[i]!).simd(SIMD.f32x4add);
  f.simd(SIMD.i32x4truncSatF32x4S).op(0xfd, 0x1b, 0); // i32x4.extract_lane 0
  return [f];
}

/** Measured float32 FLOP/s of `units` x 1024 x 12 FMAs split over the threads. */
export function fmaPeak(units = 4096): { flops: number; threads: number } | null {
  const rt = wasmRuntime();
  if (!rt) return null;
  const flopsPerUnit = ITERS_PER_UNIT * CHAINS * 8;
  rt.pool.run(rt.fn.probe_fma!, 64, [0, 0], 1, 1); // warm up (tier-up, workers)
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    rt.pool.run(rt.fn.probe_fma!, units, [0, 0], 1, 1);
    best = Math.min(best, performance.now() - t0);
  }
  return { flops: (units * flopsPerUnit) / (best / 1000), threads: Math.min(rt.pool.threads, rt.pool.ready() + 1) };
}

/** FLOPs of one native probe unit: 4096 iterations x 24 FMAs x lanes (16 AVX-512, 8 AVX2) x 2. */
const nativeFlopsPerUnit = (lanes: number) => 4096 * 24 * lanes * 2;

/**
 * The FMA peak of the units float32 products run on: the 512-bit or 256-bit units when torchts'
 * AVX-512 or AVX2 GEMM runs them (measured on the pool's threads, like fmaPeak), else fmaPeak's
 * wasm SIMD figure. A rep is ~7 ms of FMAs on two threads (AVX-512): long enough that a worker
 * waking late (a halted vCPU can take a fraction of a millisecond) does not leave the caller doing it alone.
 */
export function productPeak(): { flops: number; threads: number; unit: string } | null {
  const rt = wasmRuntime();
  const blas = blasBridge();
  if (!rt || (blas?.kernel !== "avx512" && blas?.kernel !== "avx2")) {
    const p = fmaPeak(8192);
    return p && { ...p, unit: "wasm SIMD" };
  }
  const wide = blas.kernel === "avx512";
  const units = wide ? 1024 : 2048;
  const fn = bridgePoolFn(rt, blas.bridge, "fmaProbe");
  rt.pool.run(fn, units, [blas.code], 1, 1); // warm up (workers, clocks)
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    rt.pool.run(fn, units, [blas.code], 1, 1);
    best = Math.min(best, performance.now() - t0);
  }
  return { flops: (units * nativeFlopsPerUnit(wide ? 16 : 8)) / (best / 1000), threads: Math.min(rt.pool.threads, rt.pool.ready() + 1), unit: wide ? "AVX-512" : "AVX2" };
}
