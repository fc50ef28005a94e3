// torch.autocast: matmul/linear/conv run in bfloat16/float16 inside a region, parameters keep
// float32 gradients; GradScaler scales, unscales, skips overflowing steps and adapts the scale.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const F = torch.nn.functional;

async function maxDiff(a: torch.Tensor, b: torch.Tensor): Promise<number> {
  return (await a.float().sub(b.float()).abs().max().item()) as number;
}

test("matmul, linear and conv cast to the autocast dtype; other ops keep their dtype", async () => {
  torch.manualSeed(0);
  const x = torch.randn(4, 8);
  const w = torch.randn(5, 8);
  const b = torch.randn(5);
  const img = torch.randn(1, 2, 6, 6);
  const k = torch.randn(3, 2, 3, 3);
  const out = torch.autocast("cpu", () => ({
    mm: x.matmul(w.t()),
    lin: F.linear(x, w, b),
    conv: F.conv2d(img, k, null, { padding: 1 }),
    convT: F.convTranspose2d(img, k.transpose(0, 1), null),
    add: x.add(1),
    soft: F.softmax(x, -1),
  }));
  assert.equal(out.mm.dtype, "bfloat16");
  assert.equal(out.lin.dtype, "bfloat16");
  assert.equal(out.conv.dtype, "bfloat16");
  assert.equal(out.convT.dtype, "bfloat16");
  assert.equal(out.add.dtype, "float32");
  assert.equal(out.soft.dtype, "float32");
  // exactly the bf16 computation: inputs rounded to bf16, product rounded to bf16
  const ref = F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16());
  assert.equal(await maxDiff(out.lin, ref), 0);
  assert.ok((await maxDiff(out.lin, F.linear(x, w, b))) < 0.15);
  // float16 when asked, and outside the region everything is float32 again
  assert.equal(torch.autocast("cpu", () => x.matmul(w.t()), { dtype: "float16" }).dtype, "float16");
  assert.equal(x.matmul(w.t()).dtype, "float32");
  // regions nest; enabled: false turns autocast off inside; other device types are unaffected
  torch.autocast("cpu", () => {
    assert.equal(torch.amp.isAutocastEnabled("cpu"), true);
    assert.equal(torch.autocast("cpu", () => x.matmul(w.t()), { enabled: false }).dtype, "float32");
    assert.equal(x.matmul(w.t()).dtype, "bfloat16");
  });
  assert.equal(torch.autocast("webgpu", () => x.matmul(w.t())).dtype, "float32");
  assert.equal(torch.amp.isAutocastEnabled("cpu"), false);
  // async regions end when the promise settles
  const r = await torch.autocast("cpu", async () => {
    await Promise.resolve();
    return x.matmul(w.t());
  });
  assert.equal(r.dtype, "bfloat16");
  assert.equal(torch.amp.isAutocastEnabled("cpu"), false);
  // integer matmul is not cast
  assert.equal(torch.autocast("cpu", () => torch.ones(2, 2, { dtype: "int64" }).matmul(torch.ones(2, 2, { dtype: "int64" }))).dtype, "int64");
  assert.throws(() => torch.autocast("cpu", () => 0, { dtype: "int32" }), /autocast: unsupported dtype int32/);
});

test("gradients flow through the casts to float32 parameters", async () => {
  torch.manualSeed(1);
  const lin = new torch.nn.Linear(6, 3);
  const x = torch.randn(5, 6);
  const loss = torch.autocast("cpu", () => lin.forward(x)).float().pow(2).mean();
  loss.backward();
  assert.equal(lin.weight.grad!.dtype, "float32");
  const lin2 = new torch.nn.Linear(6, 3);
  lin2.loadStateDict(lin.stateDict());
  lin2.forward(x).pow(2).mean().backward();
  const rel = (await maxDiff(lin.weight.grad!, lin2.weight.grad!)) / ((await lin2.weight.grad!.abs().max().item()) as number);
  assert.ok(rel < 0.05 && rel > 0, `bf16 gradient relative error ${rel}`);
});

test("GradScaler: scale, unscale_, skip on overflow, backoff and growth", async () => {
  const p = torch.tensor([1, 2], { dtype: "float32" }).requiresGrad_();
  const opt = new torch.optim.SGD([p], { lr: 0.1 });
  const scaler = new torch.amp.GradScaler("cpu", { initScale: 1024, growthInterval: 2 });
  assert.equal(scaler.getScale(), 1024);

  // a clean step: grads are unscaled before the update
  let loss = p.mul(torch.tensor([3, 4])).sum();
  const scaled = scaler.scale(loss);
  assert.equal(await scaled.item(), 1024 * 11);
  scaled.backward();
  assert.deepEqual(await p.grad!.tolist(), [3 * 1024, 4 * 1024]);
  scaler.unscale_(opt);
  assert.deepEqual(await p.grad!.tolist(), [3, 4]);
  assert.throws(() => scaler.unscale_(opt), /unscale_\(\) has already been called/);
  await scaler.step(opt);
  assert.deepEqual(await p.tolist(), [1 - 0.3, 2 - 0.4].map((v) => Math.fround(v)));
  await scaler.update();
  assert.equal(scaler.getScale(), 1024);
  assert.equal(scaler.getGrowthTracker(), 1);

  // an overflowing step is skipped and the scale backs off
  opt.zeroGrad();
  loss = p.mul(torch.tensor([Infinity, 1])).sum();
  scaler.scale(loss).backward();
  const before = await p.tolist();
  await scaler.step(opt);
  assert.deepEqual(await p.tolist(), before, "step skipped");
  await scaler.update();
  assert.equal(scaler.getScale(), 512);
  assert.equal(scaler.getGrowthTracker(), 0);

  // growthInterval clean steps double it
  for (let i = 0; i < 2; i++) {
    opt.zeroGrad();
    scaler.scale(p.sum()).backward();
    await scaler.step(opt);
    await scaler.update();
  }
  assert.equal(scaler.getScale(), 1024);
  const sd = scaler.stateDict();
  assert.deepEqual(sd, { scale: 1024, growth_factor: 2, backoff_factor: 0.5, growth_interval: 2, _growth_tracker: 0 });
  const s2 = new torch.amp.GradScaler();
  s2.loadStateDict(sd);
  assert.equal(s2.getScale(), 1024);
  await assert.rejects(new torch.amp.GradScaler().update(), /No inf checks were recorded/);
  // disabled: a pass-through
  const off = new torch.amp.GradScaler("cpu", { enabled: false });
  assert.equal(off.scale(loss), loss);
  assert.equal(off.getScale(), 1);
});

test("float16 autocast + GradScaler trains a small regression", async () => {
  torch.manualSeed(2);
  const model = new torch.nn.Sequential(new torch.nn.Linear(4, 32), new torch.nn.ReLU(), new torch.nn.Linear(32, 1));
  const opt = new torch.optim.Adam(model.parameters(), { lr: 0.01 });
  const scaler = new torch.amp.GradScaler("cpu", { initScale: 2 ** 20 });
  const w = torch.tensor([[1], [-1], [2], [0.5]], { dtype: "float32" });
  const losses: number[] = [];
  for (let i = 0; i < 60; i++) {
    const x = torch.randn(64, 4);
    const loss = torch.autocast("cpu", () => model.forward(x), { dtype: "float16" }).float().sub(x.matmul(w)).pow(2).mean();
    opt.zeroGrad();
    scaler.scale(loss).backward();
    await scaler.step(opt);
    await scaler.update();
    losses.push(await loss.item());
  }
  for (const p of model.parameters()) assert.equal(p.dtype, "float32");
  const first = losses.slice(0, 5).reduce((a, b) => a + b) / 5;
  const last = losses.slice(-5).reduce((a, b) => a + b) / 5;
  assert.ok(last < first * 0.2, `loss ${first} -> ${last}`);
  assert.ok(scaler.getScale() < 2 ** 20, "huge initial scale overflowed float16 at least once and backed off");
});
