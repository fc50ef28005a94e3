// Strict eager runs a composite's formula (gelu, layer_norm: forward, and backward without
// createGraph) as fused kernels (compositeScope / runFusedRegion): the values are bit-identical
// to fused eager and to the op-by-op formula, fewer kernels run, nothing is left pending, the
// region's intermediates are freed, and double backward (createGraph) still works.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { pendingSet } from "../../src/runtime/storage.js";
const F = torch.nn.functional;

async function run(mode: "strict" | "fused", fn: () => torch.Tensor[]): Promise<Float32Array[]> {
  const out = torch.withEagerMode(mode, () => {
    const r = fn();
    torch.sync();
    return r;
  });
  return Promise.all(out.map(async (t) => (await t.data()) as Float32Array));
}

test("gelu and layer_norm forward and backward: strict equals fused to the bit, in fewer kernels than op by op", async () => {
  torch.manualSeed(2);
  const xd = await torch.randn([3, 5, 40]).data();
  const wd = await torch.randn([40]).data(), bd = await torch.randn([40]).data();
  const step = () => {
    const x = torch.tensor(xd).view(3, 5, 40).requiresGrad_(true);
    const w = torch.tensor(wd).requiresGrad_(true), b = torch.tensor(bd).requiresGrad_(true);
    const y = F.gelu(F.layerNorm(x, [40], w, b)).mul(torch.arange(40, { dtype: "float32" })).sum();
    y.backward();
    return [y, x.grad!, w.grad!, b.grad!];
  };
  const strict = await run("strict", step);
  const fused = await run("fused", step);
  strict.forEach((s, i) => assert.deepEqual(s, fused[i], `output ${i}`));
  assert.equal(pendingSet.size, 0, "nothing left pending after strict regions");
  const prof = torch.profiler.profile();
  await run("strict", step);
  prof.stop();
  // op by op this is ~40 kernels (gelu's 5 + backward's 11, layer_norm's 8 + backward's ~14)
  assert.ok(prof.events.length < 28, `${prof.events.length} kernels: ${prof.events.map((e) => e.name).join(", ")}`);
});

test("a region frees its intermediates: repeated strict gelu backward does not grow live memory", async () => {
  const x = torch.randn([64, 256]).requiresGrad_(true);
  // every result is disposed here: anything a region kept behind would stay live (64 KiB a
  // call; the 0-dim seeds of backward wait for the collector)
  const once = () => torch.withEagerMode("strict", () => {
    const y = F.gelu(x);
    const s = y.sum();
    s.backward();
    for (const t of [y, s, x.grad!]) t.dispose();
    x.grad = null;
  });
  once();
  const base = torch.memory.stats().liveBytes;
  for (let i = 0; i < 20; i++) once();
  assert.ok(torch.memory.stats().liveBytes <= base + 1024, `live ${torch.memory.stats().liveBytes} vs ${base}`);
});

test("under createGraph the formulas stay op by op and differentiable (double backward)", async () => {
  const x = torch.tensor([-1.5, -0.2, 0.3, 2.0], { requiresGrad: true });
  const [g] = torch.autograd.grad(F.gelu(x).sum(), x, { createGraph: true });
  const [gg] = torch.autograd.grad(g!.sum(), x);
  // d2/dx2 gelu(x) = phi(x) (2 - x^2)
  const want = [-1.5, -0.2, 0.3, 2.0].map((v) => (Math.exp(-v * v / 2) / Math.sqrt(2 * Math.PI)) * (2 - v * v));
  const got = Array.from((await gg!.data()) as Float32Array);
  got.forEach((v, i) => assert.ok(Math.abs(v - want[i]!) < 1e-5, `${v} vs ${want[i]}`));
});
