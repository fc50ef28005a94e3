// An in-place write to a view that covers its whole storage, with no autograd to rebase (an
// optimizer step on a parameter made by .view()), lands like a write to the base: the values,
// the shared version counter and the base all see it, and no stridedScatter of the old contents
// runs. With autograd recording, the base is rebased as before (CopySlices).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

test("sub_ on a full-storage view under noGrad writes in place, with no stridedScatter kernel", async () => {
  for (const mode of ["strict", "fused"] as const) {
    const base = torch.arange(12, { dtype: "float32" });
    const p = base.view(3, 4).requiresGrad_(true);
    const v0 = p._version;
    const prof = torch.profiler.profile();
    torch.withEagerMode(mode, () => {
      torch.noGrad(() => p.sub_(torch.ones([3, 4]).mul(0.5)));
      torch.sync();
    });
    prof.stop();
    assert.ok(!prof.events.some((e) => e.name.startsWith("stridedScatter")), `${mode}: ${prof.events.map((e) => e.name).join(", ")}`);
    assert.equal(p._version, v0 + 1);
    assert.deepEqual(Array.from((await p.data()) as Float32Array), Array.from({ length: 12 }, (_, i) => i - 0.5));
    assert.deepEqual(Array.from((await base.data()) as Float32Array), Array.from({ length: 12 }, (_, i) => i - 0.5));
  }
});

test("with autograd recording, an in-place write through a view still rebases the base", async () => {
  const a = torch.ones([6], { requiresGrad: true });
  const b = a.mul(1);
  const v = b.view(2, 3);
  v.mul_(torch.tensor([[1, 2, 3], [4, 5, 6]]));
  b.sum().backward();
  assert.deepEqual(Array.from((await a.grad!.data()) as Float32Array), [1, 2, 3, 4, 5, 6]);
});

test("an in-place op lands its own result without copying it; a tensor of the caller's is copied", async () => {
  const { recordHooks } = await import("../../src/runtime/scheduler.js");
  for (const mode of ["strict", "fused"] as const) {
    const p = torch.arange(6, { dtype: "float32" });
    const q = torch.ones([6]);
    const src = torch.full([6], 5);
    const buf = p._storage.buf;
    let prims = 0;
    recordHooks.prim = () => void prims++;
    try {
      torch.withEagerMode(mode, () => {
        p.sub_(q); // one sub: its result becomes p's value (before: a second node copied it)
        torch.sync();
      });
    } finally {
      recordHooks.prim = null;
    }
    assert.equal(prims, 1, `${mode}: the primitives p.sub_(q) issued`);
    assert.deepEqual(await p.tolist(), [-1, 0, 1, 2, 3, 4]);
    if (mode === "strict") assert.equal(p._storage.buf, buf, "strict: p keeps its own buffer (the result is copied in and freed)");
    torch.withEagerMode(mode, () => {
      p.copy_(src);
      p.add_(1); // must not reach src: copy_ took a copy
      torch.sync();
    });
    assert.deepEqual(await p.tolist(), [6, 6, 6, 6, 6, 6], mode);
    assert.deepEqual(await src.tolist(), [5, 5, 5, 5, 5, 5], `${mode}: copy_'s source untouched`);
  }
});
