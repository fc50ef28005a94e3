// The device's measured matmul peak, for MFU when the config gives none: the best FLOP/s of a few
// square matmuls in the training dtype (2 n^3 FLOPs each: one fused multiply-add per inner-product term).
// The best of several: on a machine shared with other work a single timing understates the peak.
import * as torch from "torchts";

export async function measurePeakFlops(device = "cpu", dtype: torch.DType = "float32", n = dtype === "float32" ? 1024 : 256, reps = 10): Promise<number> {
  // (half-precision matmuls are emulated on the cpu device, far slower: a smaller product)
  const a = torch.randn([n, n], { generator: new torch.Generator().manualSeed(1) }).to(device).to(dtype);
  const b = torch.randn([n, n], { generator: new torch.Generator().manualSeed(2) }).to(device).to(dtype);
  await torch.noGrad(() => a.matmul(b)).sum().item(); // warm the kernel
  let best = Infinity;
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    const c = torch.noGrad(() => a.matmul(b));
    await c.narrow(0, 0, 1).narrow(1, 0, 1).item(); // wait for the product
    best = Math.min(best, performance.now() - t);
  }
  return (2 * n ** 3) / (best / 1000);
}
