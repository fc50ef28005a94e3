// AccumulateGrad takes an unshared gradient that the backward itself made as .grad without a
// copy (as PyTorch's does), and copies whatever anything else can still see: a gradient passed to
// two leaves (add's backward), the caller's own gradient, a gradient a hook saw, and a second
// accumulation. In-place updates of one .grad never show up anywhere else.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const vals = async (t: torch.Tensor) => Array.from((await t.data()) as Float32Array);

for (const mode of ["strict", "fused"] as const)
  test(`${mode}: .grad is never shared with another leaf, the caller's gradient or a hook's tensor`, async () => {
    await torch.withEagerMode(mode, async () => {
      const a = torch.ones([4], { requiresGrad: true }), b = torch.ones([4], { requiresGrad: true });
      a.add(b).mul(3).sum().backward(); // add's backward hands the same gradient to both leaves
      a.grad!.mul_(2);
      assert.deepEqual(await vals(a.grad!), [6, 6, 6, 6]);
      assert.deepEqual(await vals(b.grad!), [3, 3, 3, 3]);

      const x = torch.ones([3], { requiresGrad: true });
      const gOut = torch.tensor([1, 2, 3]);
      x.add(0).backward(gOut); // the caller's gradient passes straight through
      x.grad!.zero_();
      assert.deepEqual(await vals(gOut), [1, 2, 3]);

      const h = torch.ones([2], { requiresGrad: true });
      let seen: torch.Tensor | null = null;
      h.registerHook((g) => void (seen = g));
      h.mul(5).sum().backward();
      h.grad!.add_(1);
      assert.deepEqual(await vals(seen!), [5, 5]);
      assert.deepEqual(await vals(h.grad!), [6, 6]);

      const w = torch.ones([2, 2], { requiresGrad: true });
      w.mul(2).sum().backward();
      const first = w.grad!;
      w.mul(3).sum().backward(); // accumulates into a new tensor
      assert.deepEqual(await vals(w.grad!), [5, 5, 5, 5]);
      assert.deepEqual(await vals(first), [2, 2, 2, 2]);
    });
  });

test("a gradient the backward made and nobody shares becomes .grad without a copy kernel", () => {
  const w = torch.randn([8, 16], { requiresGrad: true });
  const x = torch.randn([4, 8]);
  const prof = torch.profiler.profile();
  torch.withEagerMode("strict", () => x.matmul(w).sum().backward());
  prof.stop();
  const copies = prof.events.filter((e) => e.name === "unary").length;
  assert.equal(copies, 0, prof.events.map((e) => e.name).join(", "));
});
