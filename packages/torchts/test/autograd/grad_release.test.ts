// The backward engine frees the gradients it creates once the last node reading them has run,
// and never frees gradients user code can see (retain_grad, hooks, autograd.grad results).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const live = () => torch.memory.stats().liveBytes;

test("backward frees intermediate gradients as it goes (only the leaf's .grad stays)", () => {
  const x = torch.randn(1000).requiresGrad_();
  const y = x.exp().mul(2).sin().tanh().sum();
  const before = live();
  y.backward();
  assert.deepEqual(x.grad!.shape, [1000]);
  // x.grad (4,000 bytes) plus at most a few scalars; the four [1000] intermediate gradients are gone
  const grown = live() - before;
  assert.ok(grown >= 4000 && grown < 4000 + 64, `live memory grew by ${grown} bytes`);
});

test("gradients user code sees stay usable: retainGrad, hooks, autograd.grad, custom Functions", async () => {
  const x = torch.randn(8).requiresGrad_();
  const h = x.mul(3);
  h.retainGrad();
  let hooked: torch.Tensor | null = null;
  const k = h.exp();
  k.registerHook((g) => void (hooked = g));
  k.sin().sum().backward();
  const hg = (await h.grad!.tolist()) as number[];
  assert.equal(hg.length, 8);
  assert.equal(((await hooked!.tolist()) as number[]).length, 8);

  const a = torch.randn(5).requiresGrad_();
  const mid = a.mul(2).exp();
  const [ga, gm] = torch.autograd.grad([mid.sin().sum()], [a, mid]);
  assert.equal(((await ga!.tolist()) as number[]).length, 5);
  assert.equal(((await gm!.tolist()) as number[]).length, 5);

  class Twice extends torch.autograd.Function {
    static stash: torch.Tensor | null = null;
    static override forward(_ctx: torch.autograd.FunctionCtx, t: torch.Tensor) {
      return t.mul(2);
    }
    static override backward(_ctx: torch.autograd.FunctionCtx, g: torch.Tensor) {
      Twice.stash = g; // user code keeps the incoming gradient
      return g.mul(2);
    }
  }
  const b = torch.randn(4).requiresGrad_();
  (Twice.apply(b.exp()) as torch.Tensor).sin().sum().backward();
  assert.equal(((await Twice.stash!.tolist()) as number[]).length, 4);
  assert.equal(((await b.grad!.tolist()) as number[]).length, 4);
});

test("after backward, a kept output (the loss) no longer keeps the forward's activations alive", async () => {
  const settle = async () => {
    for (let i = 0; i < 4; i++) {
      (globalThis as { gc?: () => void }).gc?.();
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  torch.manualSeed(0);
  const lin = new torch.nn.Linear(256, 256);
  const ln = new torch.nn.LayerNorm(256);
  const x = torch.randn(512, 256);
  await settle();
  const base = live();
  // activations of 512 x 256 floats (0.5 MiB each) that the graph's nodes and closures read
  const h = torch.nn.functional.gelu(ln.forward(lin.forward(x)), { approximate: "tanh" });
  const loss = torch.nn.functional.logSoftmax(h.mul(h.sigmoid()), -1).mean();
  await settle();
  const held = live() - base;
  assert.ok(held > 2 * 2 ** 20, `the graph should hold the activations before backward (${held} bytes)`);
  loss.backward();
  await settle();
  // only `h` (held by this test, 0.5 MiB), the parameters' gradients (0.26 MiB) and scalars remain
  // while `loss` is still referenced (it was ~9.3 MiB when the backward closures kept their tensors)
  const after = live() - base;
  assert.ok(after < 2 ** 20, `${after} bytes still live after backward with the loss kept`);
  assert.ok(Number.isFinite(await loss.item()));
  assert.throws(() => loss.backward(), /backward through the graph a second time/);
});
