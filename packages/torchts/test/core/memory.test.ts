// Memory: buffers are released when their tensors become unreachable (FinalizationRegistry),
// or deterministically with `using`, dispose() and torch.scope(). Tests run with --expose-gc.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const gc = (globalThis as { gc?: () => void }).gc;
const macrotask = () => new Promise<void>((r) => setTimeout(r, 0));

/** Collect garbage and let FinalizationRegistry callbacks (which run as tasks) release buffers. */
async function settle(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await macrotask();
  }
  return torch.memory.stats().liveBytes;
}

const crossEntropy = torch.nn.functional.crossEntropy;

test("memory: a 2,000-step training loop without dispose keeps live memory flat", { timeout: 60_000 }, async () => {
  assert.ok(gc, "run with --expose-gc");
  torch.manualSeed(0);
  const x = torch.randn(32, 8);
  const y = x.sum(1).gt(0).long();
  const w1 = torch.randn(8, 16).mul(0.3).requiresGrad_();
  const b1 = torch.zeros(16).requiresGrad_();
  const w2 = torch.randn(16, 2).mul(0.3).requiresGrad_();
  const b2 = torch.zeros(2).requiresGrad_();
  const params = [w1, b1, w2, b2];
  const step = () => {
    const loss = crossEntropy(x.matmul(w1).add(b1).relu().matmul(w2).add(b2), y);
    for (const p of params) p.grad = null;
    loss.backward();
    torch.noGrad(() => {
      for (const p of params) p.sub_(p.grad!.mul(0.1));
    });
    return loss;
  };

  let first = 0;
  for (let i = 0; i < 100; i++) {
    const l = step();
    if (i === 0) first = await l.item();
  }
  const baseline = await settle();
  const samples: number[] = [];
  let last = 0;
  for (let i = 100; i < 2000; i++) {
    const l = step();
    if (i % 100 === 99) {
      samples.push(await settle());
      last = await l.item();
    }
  }
  // Everything alive at the end: x, y, the parameters and their grads (a few KB). Allow
  // slack for objects a single gc pass misses, but not for growth with the step count.
  const bound = baseline + 32 * 1024;
  for (const s of samples)
    assert.ok(s <= bound, `live bytes ${s} exceed ${bound} (baseline ${baseline}); samples ${samples}`);
  assert.ok(baseline < 256 * 1024, `baseline ${baseline}`);
  assert.ok(last < first * 0.5, `training progressed: ${first} -> ${last}`);
});

test("memory: `using` releases at the end of the block", () => {
  const before = torch.memory.stats();
  let escaped: torch.Tensor;
  {
    using t = torch.ones(1000, { dtype: "float64" });
    escaped = t;
    assert.equal(torch.memory.stats().liveBytes, before.liveBytes + 8000);
  }
  assert.equal(torch.memory.stats().liveBytes, before.liveBytes);
  assert.equal(escaped.isDisposed, true);
  assert.throws(() => escaped._tolistSync(), /Tensor has been disposed/);
});

test("memory: dispose() frees the storage shared by all views", () => {
  const before = torch.memory.stats().liveBytes;
  const t = torch.zeros(256);
  const v = t.view(16, 16);
  assert.equal(torch.memory.stats().liveBytes, before + 1024);
  v.dispose();
  assert.equal(t.isDisposed, true);
  assert.equal(torch.memory.stats().liveBytes, before);
});

test("memory: torch.scope disposes intermediates and keeps what it returns", async () => {
  const x = torch.ones(100);
  torch.scope(() => x.mul(2).add(1)); // the number constants 2 and 1 are cached from the first use on
  const before = torch.memory.stats().liveBytes;
  let inner: torch.Tensor[] = [];
  const out = torch.scope(() => {
    const a = x.mul(2);
    const b = a.add(1);
    const c = b.exp();
    inner = [a, b];
    return { result: c.sum(), kept: torch.keep(b.neg()) };
  });
  assert.ok(
    inner.every((t) => t.isDisposed),
    "intermediates disposed",
  );
  assert.equal(x.isDisposed, false, "tensors from outside the scope are untouched");
  assert.equal(out.result.isDisposed, false);
  assert.equal(out.kept.isDisposed, false);
  assert.ok(Math.abs((await out.result.item()) - 100 * Math.exp(3)) < 0.1);
  assert.deepEqual(((await out.kept.tolist()) as number[]).slice(0, 2), [-3, -3]);
  // only the two results (a 0-dim float32 and 100 float32) remain
  assert.equal(torch.memory.stats().liveBytes, before + 4 + 400);
});

test("memory: torch.scope frees a flushed fused chain at once (no buffer waits for GC)", () => {
  const x = torch.randn(1024);
  torch.scope(() => x.mul(0.75).add(0.1)); // cache the number constants
  const before = torch.memory.stats().liveBytes;
  for (let i = 0; i < 3; i++)
    torch.scope(() =>
      torch.withEagerMode("fused", () => {
        x.mul(0.75).add(0.1).tanh();
        torch.sync();
      }),
    );
  assert.equal(torch.memory.stats().liveBytes, before);
});

test("memory: stats track allocations and peak", () => {
  torch.memory.resetPeakStats();
  const s0 = torch.memory.stats();
  assert.equal(s0.peakBytes, s0.liveBytes);
  const t = torch.zeros(1024, { dtype: "float64" });
  const s1 = torch.memory.stats();
  assert.equal(s1.liveBytes, s0.liveBytes + 8192);
  assert.equal(s1.liveBuffers, s0.liveBuffers + 1);
  assert.ok(s1.allocationCount > s0.allocationCount);
  t.dispose();
  const s2 = torch.memory.stats();
  assert.equal(s2.liveBytes, s0.liveBytes);
  assert.equal(s2.peakBytes, s0.liveBytes + 8192);
});

test("memory: torch.scope leaves outer tensors usable after views of them and in-place writes into them", async () => {
  for (const mode of ["strict", "fused"] as const)
    await torch.withEagerMode(mode, async () => {
      const x = torch.zeros(4);
      const s = torch.scope(() => x.narrow(0, 0, 2).sum()); // a view of x made inside the scope
      torch.scope(() => {
        x.copy_(torch.where(torch.tensor([true, false, true, false]), torch.ones(4), x));
      });
      torch.scope(() => {
        x.narrow(0, 1, 2).copy_(torch.ones(2).mul(2));
      });
      torch.scope(() => {
        x.add_(1);
      });
      assert.equal(x.isDisposed, false, mode);
      assert.deepEqual(await x.tolist(), [2, 3, 3, 1], mode);
      assert.equal(await s.item(), 0);
    });
});

test("memory: a step's garbage is released by the host read that ends the next step, not one step later", async () => {
  assert.ok(gc, "run with --expose-gc");
  const base = await settle();
  const x = torch.randn(1024, 1024); // 4 MiB
  const MiB = 2 ** 20;
  // a "step" whose intermediates (256 MiB, unreferenced afterwards) exceed the collection threshold
  // (twice the live memory after the last collection plus 128 MiB)
  const step = () => {
    let h = x;
    for (let i = 0; i < 64; i++) h = h.mul(1.0001);
    return h.sum();
  };
  await step().item();
  // the read above forced a collection and waited for its releases: only x and scalars remain
  const after = torch.memory.stats().liveBytes - base;
  assert.ok(after < 8 * MiB, `${(after / MiB).toFixed(1)} MiB still live after the step's host read`);
  torch.memory.resetPeakStats();
  await step().item();
  // one step's garbage at a time (256 MiB), never two steps' worth
  assert.ok(torch.memory.stats().peakBytes - base < 400 * MiB);
  assert.ok(torch.memory.stats().liveBytes - base < 8 * MiB);
});

test("memory: number operands are shared 0-dim constants that no scope frees, even through a view", async () => {
  const x = torch.arange(4, { dtype: "float32" });
  const c = Math.fround(0.37);
  const allocs = () => torch.memory.stats().allocationCount;
  for (const mode of ["strict", "fused"] as const)
    await torch.withEagerMode(mode, async () => {
      // first use inside a scope: the constant is created there, and broadcast views of it too
      const y = torch.scope(() => x.mul(0.37).add(x.mul(0.37)));
      assert.deepEqual(
        Array.from(await y.data()),
        [0, 1, 2, 3].map((i) => Math.fround(Math.fround(i * c) * 2)),
      );
      const before = allocs();
      const z = torch.scope(() => x.mul(0.37)); // the same constant, after that scope ended
      assert.deepEqual(
        Array.from(await z.data()),
        [0, 1, 2, 3].map((i) => Math.fround(i * c)),
      );
      assert.equal(allocs() - before, 1, `${mode}: x * 0.37 allocates only its result`);
      assert.ok(Object.is((await x.narrow(0, 1, 1).mul(-0).data())[0], -0), "-0 and 0 are different constants");
      assert.ok(Object.is((await x.narrow(0, 1, 1).mul(0).data())[0], 0));
    });
});

test("memory: a nested torch.scope's results belong to the enclosing scope; torch.keep still exempts from all", async () => {
  const x = torch.ones([4, 4]);
  let inner: torch.Tensor | null = null,
    kept: torch.Tensor | null = null,
    keptView: torch.Tensor | null = null;
  const out = torch.scope(() => {
    inner = torch.scope(() => x.mul(3)); // returned from the inner scope, not from the outer one
    kept = torch.scope(() => {
      const k = torch.keep(x.add(1));
      keptView = k.view(16); // a view of a kept tensor shares its storage: it must survive too
      return keptView;
    });
    return inner.add(1);
  });
  assert.equal(inner!.isDisposed, true, "the inner result was freed when the outer scope ended");
  assert.equal(out.isDisposed, false);
  assert.deepEqual(Array.from((await out.data()) as Float32Array), new Array(16).fill(4));
  assert.equal(kept!.isDisposed, false);
  assert.deepEqual(Array.from((await keptView!.data()) as Float32Array), new Array(16).fill(2));
});

test("memory: a torch.scope may end before backward: what autograd saved stays for it and that backward frees it", async () => {
  for (const mode of ["strict", "fused"] as const)
    await torch.withEagerMode(mode, async () => {
      torch.manualSeed(1);
      const w = torch.randn(8, 8).requiresGrad_();
      const x = torch.randn(4, 8);
      const f = () => x.matmul(w).relu().mul(2).sum();
      f().backward(); // caches the number constant
      const want = Array.from((await w.grad!.data()) as Float32Array);
      w.grad = null;
      const live = () => torch.memory.stats().liveBytes;
      let before = await settle();
      const unscoped = await (async () => {
        const _plain = f();
        torch.sync();
        return live() - before; // the loss and its intermediates, which wait for the collector
      })();
      before = await settle();
      const loss = torch.scope(f);
      torch.sync();
      const saved = live() - before - 4; // what relu saved for backward
      // (fused eager only materializes the loss and what autograd saved: there is nothing more to free)
      assert.ok(
        saved > 0 && (mode === "fused" ? saved <= unscoped - 4 : saved < unscoped - 4),
        `${mode}: the scope freed all but what backward needs (${saved} of ${unscoped - 4} bytes)`,
      );
      // backward in a scope of its own, so that its temporaries go too: the gradient it set stays
      torch.scope(() => {
        loss.backward();
        torch.sync();
      });
      assert.deepEqual(
        Array.from((await w.grad!.data()) as Float32Array),
        want,
        `${mode}: the gradient through a finished scope`,
      );
      // left: the loss and w.grad (256 bytes): what relu saved is gone, in strict without a collection
      // (fused eager moves a value still read by nodes left pending aside, for the collector)
      if (mode === "fused") await settle();
      assert.equal(live() - before, 4 + 256, `${mode}: backward freed what the scope left for it`);
    });
});

test("memory: a training step in one torch.scope keeps gradients, module buffers and optimizer state, and live memory stays flat", async () => {
  for (const mode of ["strict", "fused"] as const)
    for (const Opt of ["adam", "sgd"] as const)
      await torch.withEagerMode(mode, async () => {
        const make = () => {
          torch.manualSeed(2);
          const model = new torch.nn.Sequential(
            new torch.nn.Linear(6, 16),
            new torch.nn.BatchNorm1d(16),
            new torch.nn.ReLU(),
            new torch.nn.Linear(16, 3),
          );
          const opt =
            Opt === "adam"
              ? new torch.optim.Adam(model.parameters(), { lr: 0.01 })
              : new torch.optim.SGD(model.parameters(), { lr: 0.05, momentum: 0.9 });
          return { model, opt };
        };
        torch.manualSeed(3);
        const xs = [0, 1, 2, 3, 4, 5].map(() => torch.randn(12, 6));
        const ys = xs.map((x) => x.sum(1).gt(0).long());
        // zero_grad at the end: the gradients go with the scope that made them
        const step = (m: ReturnType<typeof make>, i: number, zeroAfter = true) => {
          const loss = crossEntropy(m.model.forward(xs[i]!), ys[i]!);
          loss.backward();
          m.opt.step();
          if (zeroAfter) m.opt.zeroGrad();
          torch.sync();
          return loss;
        };
        const plain = make();
        const want: number[] = [];
        for (let i = 0; i < xs.length; i++) want.push(await step(plain, i).item());
        const scoped = make();
        await settle();
        const lives: number[] = [];
        for (let i = 0; i < xs.length; i++) {
          const loss = torch.scope(() => step(scoped, i));
          assert.equal(await loss.item(), want[i], `${mode} ${Opt} step ${i}: the same loss in a scope`);
          loss.dispose(); // the one thing the scope left: the caller frees it
          // fused eager: an in-place update of optimizer state moves the old value aside for
          // pending nodes that read it, which only the collector can find unreachable
          lives.push(mode === "fused" ? await settle() : torch.memory.stats().liveBytes);
        }
        // the first step creates the optimizer's state; from the second on, each step frees what it
        // made (in strict without a collection)
        assert.equal(lives[xs.length - 1], lives[1], `${mode} ${Opt}: live bytes by step ${lives.join(", ")}`);
        // a step that leaves its gradients for the caller: the scope keeps the ones parameters hold
        step(plain, 0, false);
        torch.scope(() => step(scoped, 0, false));
        const [pp, sp] = [[...plain.model.parameters()], [...scoped.model.parameters()]];
        for (let k = 0; k < pp.length; k++) {
          assert.equal(sp[k]!.grad!.isDisposed, false, "the gradients a scope set stay with their parameters");
          assert.deepEqual(await sp[k]!.grad!.tolist(), await pp[k]!.grad!.tolist());
          assert.deepEqual(await sp[k]!.tolist(), await pp[k]!.tolist());
        }
        const bn = scoped.model.get(1) as torch.nn.BatchNorm1d;
        assert.deepEqual(
          await bn.runningMean!.tolist(),
          await (plain.model.get(1) as torch.nn.BatchNorm1d).runningMean!.tolist(),
          "module buffers survive",
        );
      });
});

test("memory: tensors a scope stores on a module (buffers, parameters, plain attributes) outlive it", async () => {
  const m = new torch.nn.Linear(2, 2) as torch.nn.Linear & { extra?: torch.Tensor };
  const x = torch.ones([2]);
  torch.scope(() => {
    m.registerBuffer("stat", x.mul(3));
    m.extra = x.add(1).view(1, 2); // a view: its base's storage stays too
    m.weight = new torch.nn.Parameter(x.mul(5).expand(2, 2).contiguous());
    x.mul(7); // not stored: freed
  });
  assert.deepEqual(await (m as unknown as { stat: torch.Tensor }).stat.tolist(), [3, 3]);
  assert.deepEqual(await m.extra!.tolist(), [[2, 2]]);
  assert.deepEqual(await m.weight.tolist(), [
    [5, 5],
    [5, 5],
  ]);
});
