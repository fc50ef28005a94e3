// Deterministic frees in strict eager (no garbage collector involved; the tests never collect):
// a public op frees the intermediates its result does not hold when it returns, an intermediate
// autograd saved is freed when the node that saved it is released after backward, and an
// in-place write lands in the destination's own buffer. Values and gradients are the same as in
// fused eager, where none of this applies.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

const F = torch.nn.functional;
const live = () => torch.memory.stats().liveBytes;
const bytes = (...ts: Tensor[]) => ts.reduce((n, t) => n + 4 * t.numel(), 0);

test("op temporaries: a composite op leaves only its result allocated", () => {
  torch.manualSeed(0);
  const x = torch.randn(64, 32);
  const w = torch.randn(48, 32);
  const b = torch.randn(48);
  const d = x.abs().add(1);
  for (const [name, f] of [
    ["linear", () => F.linear(x, w, b)],
    ["gelu tanh", () => F.gelu(x, { approximate: "tanh" })],
    ["gelu", () => F.gelu(x)],
    ["layerNorm", () => F.layerNorm(x, [32])],
    ["addcdiv", () => torch.addcdiv(x, x, d, { value: 0.5 })],
  ] as [string, () => Tensor][]) {
    f().dispose(); // the first call may create cached scalar constants, which stay
    const before = live();
    const y = f();
    assert.equal(live() - before, bytes(y), `${name}: only the result is allocated`);
  }
});

test("op temporaries: results in arrays and objects are kept", async () => {
  const x = torch.tensor([[3, 1, 2], [6, 5, 4]], { dtype: "float32" });
  const { values, indices } = torch.max(x.mul(2), 1);
  assert.deepEqual(await values.tolist(), [6, 12]);
  assert.deepEqual(await indices.tolist(), [0, 0]);
  const parts = torch.split(x.add(1), 1, 0);
  assert.deepEqual(await parts[1]!.tolist(), [[7, 6, 5]]);
  const [q, r] = torch.sort(x.neg(), { dim: 1 }) as unknown as [Tensor, Tensor];
  assert.deepEqual(await q.tolist(), [[-3, -2, -1], [-6, -5, -4]]);
  assert.deepEqual(await r.tolist(), [[0, 2, 1], [0, 1, 2]]);
});

test("op temporaries: intermediates saved for backward are freed when backward releases them", async () => {
  const grads: Record<string, number[][]> = {};
  // the decomposed LayerNorm (the cpu's LayerNorm rows recompute the statistics in backward instead)
  torch.backends.cpu.setCompositeEnabled("layerNorm", false);
  try {
    for (const mode of ["strict", "fused"] as const)
      await torch.withEagerMode(mode, async () => {
        torch.manualSeed(1);
        const x = torch.randn(16, 8).requiresGrad_();
        const w = torch.randn(8).requiresGrad_();
        F.layerNorm(x, [8], w).mul(1).sum(); // (cached scalar constants)
        const seed = torch.tensor(1);
        const before = live();
        const y = F.layerNorm(x, [8], w); // saves its mean and 1/std (16 floats each), which it does not return
        const held = live() - before;
        const sq = y.mul(y);
        const loss = sq.sum();
        loss.backward(seed);
        if (mode === "strict") {
          assert.equal(held, bytes(y) + 2 * 16 * 4, "the saved statistics are held until backward");
          // the statistics went with the node: what is left is what the caller holds
          assert.equal(live() - before, bytes(y, sq, loss, x.grad!, w.grad!));
        }
        grads[mode] = (await x.grad!.tolist()) as number[][];
      });
  } finally {
    torch.backends.cpu.setCompositeEnabled("layerNorm", true);
  }
  assert.deepEqual(grads.strict, grads.fused, "the same gradients in both modes");
  // with the cpu's LayerNorm rows nothing but the result is held, and backward frees its packed gradients' rest
  await torch.withEagerMode("strict", async () => {
    torch.manualSeed(1);
    const x = torch.randn(16, 8).requiresGrad_();
    const w = torch.randn(8).requiresGrad_();
    F.layerNorm(x, [8], w).mul(1).sum();
    const seed = torch.tensor(1);
    const before = live();
    const y = F.layerNorm(x, [8], w);
    assert.equal(live() - before, bytes(y), "no statistics saved");
    const sq = y.mul(y);
    const loss = sq.sum();
    loss.backward(seed);
    assert.equal(live() - before, bytes(y, sq, loss, x.grad!, w.grad!));
    const g = (await x.grad!.tolist()) as number[][];
    g.forEach((row, i) => row.forEach((v, j) => assert.ok(Math.abs(v - grads.strict![i]![j]!) < 1e-5, `dx[${i}][${j}]`)));
  });
});

test("op temporaries: retainGraph keeps saved intermediates for a second backward", async () => {
  torch.manualSeed(2);
  const x = torch.randn(4, 6).requiresGrad_();
  const y = F.layerNorm(x, [6]).pow(2).sum();
  y.backward(undefined, { retainGraph: true });
  const g1 = (await x.grad!.tolist()) as number[][];
  x.grad = null;
  y.backward();
  assert.deepEqual(await x.grad!.tolist(), g1);
  assert.throws(() => y.backward(), /backward through the graph a second time/);
});

test("op temporaries: an in-place write keeps the destination's buffer", async () => {
  const p = torch.zeros(1000);
  const view = p.narrow(0, 10, 3);
  const buf = p._storage.buf;
  const src = torch.arange(1000, { dtype: "float32" });
  const version = p._storage.version;
  torch.noGrad(() => {
    p.copy_(src);
    p.mul_(2).add_(1);
  });
  assert.equal(p._storage.buf, buf, "the same buffer");
  assert.equal(p._storage.version, version + 3);
  assert.deepEqual(await view.tolist(), [21, 23, 25]);
  assert.equal((await src.tolist() as number[])[999], 999, "the source is untouched");
  // with autograd recording, the write still rebases the history
  const a = torch.ones(3).requiresGrad_();
  const h = a.mul(2);
  h.add_(1);
  h.mul(3).sum().backward();
  assert.deepEqual(await a.grad!.tolist(), [6, 6, 6]);
  assert.deepEqual(await h.tolist(), [3, 3, 3]);
});
