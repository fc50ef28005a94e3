// Autograd behaviour, checked against values PyTorch 1.13 gives for the same programs.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const leaf = (v: number[]) => torch.tensor(v, { dtype: "float32", requiresGrad: true });
const close = (a: number[], b: number[], tol = 1e-5) =>
  assert.ok(a.length === b.length && a.every((v, i) => Math.abs(v - b[i]!) <= tol), `${a} vs ${b}`);

test("autograd: backward(gradient) on a non-scalar output", async () => {
  const x = leaf([1, 2, 3]);
  const y = x.mul(x);
  y.backward(torch.tensor([1, 0.1, 0.01]));
  close((await x.grad!.tolist()) as number[], [2, 0.4, 0.06]);
  assert.throws(() => x.mul(2).backward(), /grad can be implicitly created only for scalar outputs/);
  assert.throws(() => x.mul(2).backward(torch.ones(2)), /Mismatch in shape/);
});

test("autograd: gradients accumulate into .grad until reset", async () => {
  const x = leaf([1, 2, 3]);
  x.mul(x).sum().backward();
  x.mul(x).sum().backward();
  assert.deepEqual(await x.grad!.tolist(), [4, 8, 12]);
  assert.equal(x.grad!.requiresGrad, false);
  x.grad = null;
  x.mul(3).sum().backward();
  assert.deepEqual(await x.grad!.tolist(), [3, 3, 3]);
  // a tensor used twice in one graph sums both paths
  const w = leaf([2]);
  w.mul(w).add(w.mul(5)).sum().backward(); // d/dw (w^2 + 5w) = 2w + 5
  assert.deepEqual(await w.grad!.tolist(), [9]);
});

test("autograd: noGrad, enableGrad, inferenceMode and isGradEnabled", () => {
  const x = leaf([1, 2]);
  const y = torch.noGrad(() => x.mul(2));
  assert.equal(y.requiresGrad, false);
  assert.equal(y.gradFn, null);
  const z = torch.noGrad(() => {
    assert.equal(torch.isGradEnabled(), false);
    return torch.enableGrad(() => x.mul(2));
  });
  assert.equal(z.requiresGrad, true);
  assert.equal(z.gradFn!.name, "MulBackward0");
  const w = torch.inferenceMode(() => {
    assert.equal(torch.isInferenceMode(), true);
    return x.exp();
  });
  assert.equal(w.requiresGrad, false);
  assert.equal(torch.isInferenceMode(), false);
  assert.equal(torch.isGradEnabled(), true);
  // restored after a throw, too
  assert.throws(() =>
    torch.noGrad(() => {
      throw new Error("x");
    }),
  );
  assert.equal(torch.isGradEnabled(), true);
});

test("autograd: detach shares storage and cuts the graph", async () => {
  const x = leaf([1, 2]);
  const y = x.mul(3);
  const d = y.detach();
  assert.equal(d.requiresGrad, false);
  assert.equal(d.storage, y.storage);
  const out = y.mul(d).sum(); // d is a constant: dout/dx = 3 * d = [9, 18]
  out.backward();
  assert.deepEqual(await x.grad!.tolist(), [9, 18]);
});

test("autograd: retainGrad keeps a non-leaf's gradient", async () => {
  const x = leaf([1, 2, 3]);
  const z = x.mul(2);
  z.retainGrad();
  assert.equal(z.retainsGrad, true);
  const h = x.add(1); // not retained
  z.mul(h).sum().backward();
  assert.deepEqual(await z.grad!.tolist(), [2, 3, 4]); // d/dz sum(z*h) = h
  assert.equal(h.grad, null);
  assert.deepEqual(await x.grad!.tolist(), [6, 10, 14]); // 2h + z
});

test("autograd: torch.autograd.grad with createGraph gives double backward", async () => {
  const x = leaf([1, 2, 3]);
  const y = x.pow(3).sum();
  const [g] = torch.autograd.grad(y, x, { createGraph: true });
  assert.deepEqual(await g!.tolist(), [3, 12, 27]); // 3x^2
  assert.equal(g!.requiresGrad, true);
  assert.equal(x.grad, null, "autograd.grad does not touch .grad");
  g!.sum().backward();
  assert.deepEqual(await x.grad!.tolist(), [6, 12, 18]); // 6x
  // second-order through a nonlinearity: d2/dx2 sin(x) = -sin(x)
  const t = leaf([0.5]);
  const [dt] = torch.autograd.grad(t.sin().sum(), t, { createGraph: true });
  const [d2] = torch.autograd.grad(dt!.sum(), t);
  close((await d2!.tolist()) as number[], [-Math.sin(0.5)]);
  // unused inputs
  const u = leaf([1]);
  assert.throws(() => torch.autograd.grad(x.sum(), [x, u]), /appears to not have been used in the graph/);
  const r = torch.autograd.grad(x.sum(), [x, u], { allowUnused: true });
  assert.equal(r[1], null);
});

// torch.autograd is a value namespace, so the ctx type is spelled through InstanceType.
type Ctx = InstanceType<typeof torch.autograd.FunctionCtx>;

test("autograd: custom torch.autograd.Function", async () => {
  class Cube extends torch.autograd.Function {
    static override forward(ctx: Ctx, x: torch.Tensor): torch.Tensor {
      ctx.saveForBackward(x);
      return x.pow(3);
    }
    static override backward(ctx: Ctx, g: torch.Tensor): torch.Tensor {
      const [x] = ctx.savedTensors;
      return g.mul(x!.pow(2)).mul(3);
    }
  }
  const x = leaf([1, 2]);
  const y = Cube.apply<torch.Tensor>(x);
  assert.deepEqual(await y.tolist(), [1, 8]);
  assert.equal(y.gradFn!.name, "CubeBackward");
  y.sum().backward();
  assert.deepEqual(await x.grad!.tolist(), [3, 12]);
  // without grad-requiring inputs no node is recorded
  assert.equal(Cube.apply<torch.Tensor>(torch.ones(2)).gradFn, null);
});

test("autograd: registerHook on non-leaf and leaf tensors", async () => {
  const x = leaf([1, 2]);
  const y = x.mul(3);
  const seen: number[][] = [];
  const handle = y.registerHook((g) => {
    seen.push(g._tolistSync() as number[]);
    return g.mul(10);
  });
  y.sum().backward();
  assert.deepEqual(seen, [[1, 1]]);
  assert.deepEqual(await x.grad!.tolist(), [30, 30]);
  handle.remove();
  x.grad = null;
  x.mul(3).sum().backward();
  assert.deepEqual(await x.grad!.tolist(), [3, 3]);

  const w = leaf([1]);
  w.registerHook((g) => g.mul(-1));
  w.mul(4).sum().backward();
  assert.deepEqual(await w.grad!.tolist(), [-4]);
  assert.throws(() => torch.ones(1).registerHook(() => undefined), /doesn't require gradient/);
});

test("autograd: registerPostAccumulateGradHook runs after .grad is updated", async () => {
  const p = leaf([1, 2]);
  const calls: number[][] = [];
  p.registerPostAccumulateGradHook((t) => {
    calls.push(t.grad!._tolistSync() as number[]);
  });
  p.mul(2).sum().backward();
  p.mul(2).sum().backward();
  assert.deepEqual(calls, [
    [2, 2],
    [4, 4],
  ]);
  assert.throws(() => p.mul(2).registerPostAccumulateGradHook(() => {}), /non-leaf/);
});

test("autograd: requiresGrad rules", () => {
  assert.throws(
    () => torch.tensor([1, 2]).requiresGrad_(),
    /only Tensors of floating point dtype can require gradients/,
  );
  const x = leaf([1]);
  assert.equal(x.isLeaf, true);
  const y = x.mul(2);
  assert.equal(y.isLeaf, false);
  assert.throws(() => (y.requiresGrad = false), /you can only change requires_grad flags of leaf variables/);
});
