// Gradients of view ops that PyTorch computes without scatter kernels: split/chunk (one
// SplitBackward0 node whose gradient is a cat), permutations (the inverse permutation, a view)
// and a transposed weight in matmul (its gradient comes out in the weight's own layout).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const kernels = (fn: () => void) => {
  const p = torch.profiler.profile();
  fn();
  torch.sync();
  p.stop();
  return p.keyAverages().map((k) => k.name);
};

test("split: one SplitBackward0 node, unused parts get zeros, the gradient is one cat", async () => {
  const x = torch.arange(12).float().reshape(2, 6).requiresGrad_();
  const [a, b, c] = x.split([1, 2, 3], 1) as [torch.Tensor, torch.Tensor, torch.Tensor];
  assert.equal(a.gradFn?.name, "SplitBackward0");
  assert.equal(a.gradFn, c.gradFn);
  const loss = a.mul(2).sum().add(c.pow(2).sum());
  const names = kernels(() => loss.backward());
  assert.ok(!names.includes("stridedScatter"), `kernels: ${names.join(", ")}`);
  assert.deepEqual(await x.grad!.tolist(), [
    [2, 0, 0, 6, 8, 10],
    [2, 0, 0, 18, 20, 22],
  ]);
  void b;
});

test("split/chunk gradients match narrow's and support double backward", async () => {
  torch.manualSeed(0);
  const x = torch.randn(3, 8).requiresGrad_();
  const parts = x.chunk(3, 1);
  const y = parts[0]!.pow(3).sum().add(parts[2]!.sin().sum());
  const [g] = torch.autograd.grad(y, x, { createGraph: true }) as [torch.Tensor];
  const ref = torch.cat([x.narrow(1, 0, 3).pow(2).mul(3), torch.zeros(3, 3), x.narrow(1, 6, 2).cos()], 1);
  assert.ok((await g.sub(ref).abs().max().item()) < 1e-6);
  const [gg] = torch.autograd.grad(g.sum(), x) as [torch.Tensor];
  const ref2 = torch.cat([x.narrow(1, 0, 3).mul(6), torch.zeros(3, 3), x.narrow(1, 6, 2).sin().neg()], 1);
  assert.ok((await gg.sub(ref2).abs().max().item()) < 1e-5);
});

test("permute's gradient is a view; a Linear weight's gradient needs no transposing scatter", async () => {
  torch.manualSeed(0);
  const x = torch.randn(2, 3, 4).requiresGrad_();
  const names = kernels(() => x.permute(2, 0, 1).mul(torch.arange(24).float().reshape(4, 2, 3)).sum().backward());
  assert.ok(!names.includes("stridedScatter"), `kernels: ${names.join(", ")}`);
  const expect = torch.arange(24).float().reshape(4, 2, 3).permute(1, 2, 0);
  assert.deepEqual(await x.grad!.tolist(), await expect.tolist());

  const lin = new torch.nn.Linear(5, 7);
  const inp = torch.randn(4, 5);
  const n2 = kernels(() => lin.forward(inp).pow(2).sum().backward());
  assert.ok(!n2.includes("stridedScatter"), `kernels: ${n2.join(", ")}`);
  // dW = (2 y)^T x with y = x W^T + b
  const y = inp.matmul(lin.weight.detach().t()).add(lin.bias!.detach());
  const ref = y.mul(2).t().matmul(inp);
  assert.ok((await lin.weight.grad!.sub(ref).abs().max().item()) < 1e-5);
  assert.ok(lin.weight.grad!.isContiguous());
});
