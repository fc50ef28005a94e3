// Row paths of the cpu gather and scatter_add kernels: an index constant along contiguous rows
// (embedding, index_select and embedding's backward) copies or adds whole rows. Values equal the
// element loop's (rows in index order, each add rounded to float32), a bad index still raises
// PyTorch's error naming the op, and other layouts keep the element loop.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
const F = torch.nn.functional;

function lcg(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 4294967296) * 2 - 1;
}

test("embedding and index_select copy whole rows; the gradient adds whole rows in index order", async () => {
  const [V, D, N] = [37, 24, 90];
  const r = lcg(5);
  const w = Float32Array.from({ length: V * D }, r);
  const ids = Array.from({ length: N }, (_, i) => (i * 7 + (i % 5)) % V);
  const g = Float32Array.from({ length: N * D }, r);
  for (const mode of ["strict", "fused"] as const) {
    const W = torch.tensor(w).view(V, D).requiresGrad_(true);
    const idx = torch.tensor(ids, { dtype: "int64" });
    const y = torch.withEagerMode(mode, () => F.embedding(idx, W));
    const got = (await y.data()) as Float32Array;
    for (let i = 0; i < N; i++) assert.deepEqual(got.slice(i * D, (i + 1) * D), w.slice(ids[i]! * D, (ids[i]! + 1) * D), `${mode} row ${i}`);
    const sel = (await torch.withEagerMode(mode, () => torch.indexSelect(W.detach(), 0, idx)).data()) as Float32Array;
    assert.deepEqual(sel, got);
    torch.withEagerMode(mode, () => y.backward(torch.tensor(g).view(N, D)));
    const want = new Float32Array(V * D);
    for (let i = 0; i < N; i++) for (let c = 0; c < D; c++) want[ids[i]! * D + c] = Math.fround(want[ids[i]! * D + c]! + g[i * D + c]!);
    assert.deepEqual((await W.grad!.data()) as Float32Array, want, `${mode} gradient`);
  }
});

test("a bad index on the row path raises the op's index error and leaves the tensors usable", async () => {
  const x = torch.randn([5, 8]);
  const bad = torch.tensor([[1], [5]], { dtype: "int64" }).expand(2, 8);
  assert.throws(() => torch.withEagerMode("strict", () => torch.gather(x, 0, bad)), /index 5 is out of bounds for dimension 0 with size 5/);
  const ok = torch.tensor([[4], [0]], { dtype: "int64" }).expand(2, 8);
  const y = (await torch.gather(x, 0, ok).data()) as Float32Array;
  const xs = (await x.data()) as Float32Array;
  assert.deepEqual(y, Float32Array.from([...xs.slice(32, 40), ...xs.slice(0, 8)]));
  const src = torch.ones([2, 8]);
  assert.throws(() => torch.withEagerMode("strict", () => torch.zeros([5, 8]).scatterAdd(0, bad, src)), /out of bounds/);
});
