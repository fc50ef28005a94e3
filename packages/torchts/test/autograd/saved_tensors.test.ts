// Backward nodes save only what the gradients they will compute read (PyTorch's rule), so an
// in-place update of a value no gradient reads stays legal, and one that a gradient does read
// still raises. Expected gradients from PyTorch 1.13 (python3-torch), in every eager mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const leaf = (v: number[]) => torch.tensor(v, { dtype: "float32", requiresGrad: true });

for (const mode of ["strict", "fused", "debug"] as const)
  test(`${mode}: in-place updates of values no gradient reads (mul, div, pow by constants)`, async () => {
    await torch.withEagerMode(mode, async () => {
      const a = leaf([1.5, 2, 3]);
      const h = a.mul(2); // the gradient of a reads the constant, not a
      h.mul_(3);
      h.sum().backward();
      assert.deepEqual(await a.grad!.tolist(), [6, 6, 6]);
      const b = leaf([1.5, 2, 4]);
      const y = b.div(2); // the output is read only by the divisor's gradient
      y.mul_(3);
      y.sum().backward();
      assert.deepEqual(await b.grad!.tolist(), [1.5, 1.5, 1.5]);
      const c = leaf([1.5, 2, 4]);
      const z = c.pow(2);
      z.add_(1);
      z.sum().backward();
      assert.deepEqual(await c.grad!.tolist(), [3, 4, 8]);
      const x = leaf([1.5, 2, 3]);
      const w = leaf([4.5, 5, 6]);
      x.mul(w).sum().backward(); // both need the other
      assert.deepEqual(await x.grad!.tolist(), [4.5, 5, 6]);
      assert.deepEqual(await w.grad!.tolist(), [1.5, 2, 3]);
    });
  });

test("an in-place update of a value a gradient reads still raises PyTorch's error", () => {
  const x = leaf([1.5, 2, 3]);
  const w = leaf([4.5, 5, 6]);
  const xm = x.mul(1); // a non-leaf copy of x that mul(w) saves for w's gradient
  const p = xm.mul(w);
  xm.mul_(2);
  assert.throws(() => p.sum().backward(), /modified by an inplace operation/);
  const e = leaf([1.5, 2, 4]);
  const q = e.pow(leaf([2, 2, 2])); // the exponent's gradient reads the output (PyTorch's pow saves it too)
  q.add_(1);
  assert.throws(() => q.sum().backward(), /modified by an inplace operation/);
});

test("div's divisor gradient reads the inputs, as PyTorch's does: its output may be updated in place", async () => {
  const d = leaf([1, 2, 4]);
  const y = torch.tensor([2, 2, 2]).div(d);
  y.add_(1);
  y.sum().backward();
  assert.deepEqual(await d.grad!.tolist(), [-2, -0.5, -0.125]); // -2 / d^2
});
