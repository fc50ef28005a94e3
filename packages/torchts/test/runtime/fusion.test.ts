// Fused eager: the scheduler's kernel counts for representative chains, bit-identical results
// to strict eager, unmaterialized intermediates, plan reuse and deferred in-place writes.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { schedulerStats } from "../../src/runtime/scheduler.js";
import { setLogs } from "../../src/runtime/logs.js";

const F = torch.nn.functional;

/** Run fn in fused mode; return its values and the kernels its flush ran (names from the profiler). */
async function fusedKernels(fn: () => torch.Tensor): Promise<{ kernels: string[]; values: number[] }> {
  return torch.withEagerMode("fused", async () => {
    torch.sync();
    const y = fn();
    const prof = torch.profiler.profile();
    torch.sync();
    prof.stop();
    return { kernels: prof.events.map((e) => e.name), values: (await y.flatten().tolist()) as number[] };
  });
}

function inputs() {
  torch.manualSeed(0);
  return { x: torch.randn(4, 8), w: torch.randn(8), b: torch.randn(8), W: torch.randn(6, 8), B: torch.randn(6) };
}

test("fusion: LayerNorm -> GELU -> Linear runs as 4 kernels, decomposed or with the cpu's LayerNorm rows; bit-identical to strict", async () => {
  const { x, w, b, W, B } = inputs();
  const f = () => F.linear(F.gelu(F.layerNorm(x, [8], { weight: w, bias: b })), W, B);
  // the decomposition (the cpu device's layerNorm composite switched off)
  torch.backends.cpu.setCompositeEnabled("layerNorm", false);
  try {
    const { kernels, values } = await fusedKernels(f);
    assert.deepEqual(kernels, [
      "fused_reduction[sum,div]", // mean
      "fused_reduction[sub,mul,sum,div,add,rsqrt]", // centered square -> var -> rstd
      "fused_elementwise[mul,mul,add,mul,mul,erf,add,mul]", // normalize, affine, GELU
      "fused_matmul[matmul,add]", // Linear with its bias as epilogue
    ]);
    assert.deepEqual(values, await torch.withEagerMode("strict", () => f().flatten().tolist()));
  } finally {
    torch.backends.cpu.setCompositeEnabled("layerNorm", true);
  }
  const { kernels, values } = await fusedKernels(f);
  assert.deepEqual(kernels, [
    "composite", // LayerNorm's rows: statistics, normalize, affine
    // GELU: 0.5 * x apart (a group joins its latest producer's, and the two muls that read the
    // composite read nothing of each other; decomposed, the affine was both muls' group)
    "binary",
    "fused_elementwise[mul,erf,add,mul]",
    "fused_matmul[matmul,add]",
  ]);
  assert.deepEqual(values, await torch.withEagerMode("strict", () => f().flatten().tolist()));
});

test("fusion: an elementwise chain is one kernel; a softmax is two reductions and one epilogue", async () => {
  const { x } = inputs();
  const chain = await fusedKernels(() => x.mul(2).add(1).exp().neg().sigmoid());
  assert.deepEqual(chain.kernels, ["fused_elementwise[mul,add,exp,neg,sigmoid]"]);
  // the decomposition (the cpu device's softmax composite switched off)
  torch.backends.cpu.setCompositeEnabled("softmax", false);
  try {
    const sm = await fusedKernels(() => torch.softmax(x, 1));
    assert.equal(sm.kernels.length, 3, sm.kernels.join(" | "));
    assert.deepEqual(sm.values, (await torch.withEagerMode("strict", () => torch.softmax(x, 1).flatten().tolist())) as number[]);
  } finally {
    torch.backends.cpu.setCompositeEnabled("softmax", true);
  }
  const composite = await fusedKernels(() => torch.softmax(x, 1));
  assert.deepEqual(composite.kernels, ["composite"]);
});

test("fusion: views fold into index arithmetic of the kernel that reads them", async () => {
  const { x } = inputs();
  // a transposed, sliced input is read in place: one kernel, no copy
  const r = await fusedKernels(() => x.t().narrow(0, 2, 3).mul(3).add(x.t().narrow(0, 0, 3)));
  assert.deepEqual(r.kernels, ["fused_elementwise[mul,add]"]);
  const want = await torch.withEagerMode("strict", () => x.t().narrow(0, 2, 3).mul(3).add(x.t().narrow(0, 0, 3)).flatten().tolist());
  assert.deepEqual(r.values, want);
});

test("fusion: intermediates are not materialized, yet stay readable", async () => {
  await torch.withEagerMode("fused", async () => {
    const x = torch.randn(1000);
    const two = torch.tensor(2, { dtype: "float32" });
    torch.sync();
    const before = torch.memory.stats().allocationCount;
    const a = x.mul(two);
    const b = a.add(x);
    const c = b.exp();
    torch.sync();
    assert.equal(torch.memory.stats().allocationCount - before, 1, "only the chain's result was allocated");
    // reading an unmaterialized intermediate recomputes it
    assert.deepEqual(await a.tolist(), await torch.withEagerMode("strict", () => x.mul(2).tolist()));
    assert.ok(Number.isFinite(((await c.tolist()) as number[])[0]!));
    void b;
  });
});

test("fusion: a flush with the same structure reuses the schedule and kernels", async () => {
  await torch.withEagerMode("fused", async () => {
    const run = (v: number) => torch.full([16, 16], v).mul(2).add(1).sum().item();
    await run(1);
    const s0 = schedulerStats();
    const c0 = torch.compiler.cacheStats();
    assert.equal(await run(2), (2 * 2 + 1) * 256);
    const s1 = schedulerStats();
    assert.equal(s1.planMisses, s0.planMisses, "no re-scheduling");
    assert.ok(s1.planHits > s0.planHits);
    assert.equal(torch.compiler.cacheStats().misses, c0.misses, "no new executables");
  });
});

test("fusion: in-place writes are deferred; earlier readers still see the old value", async () => {
  await torch.withEagerMode("fused", async () => {
    const x = torch.ones(3);
    const y = x.mul(2); // pending, reads x
    x.add_(1); // deferred write
    const xv = x.view(3);
    xv.narrow(0, 0, 1).mul_(10); // write through a view
    assert.equal(torch.memory.stats().liveBuffers >= 0, true);
    assert.deepEqual(await y.tolist(), [2, 2, 2]);
    assert.deepEqual(await x.tolist(), [20, 2, 2]);
    const z = x.add(0);
    x.dispose();
    assert.deepEqual(await z.tolist(), [20, 2, 2], "a pending reader survives dispose() of its input");
  });
});

test("fusion: TORCHTS_LOGS-style logs print the graph and the schedule", async () => {
  const lines: string[] = [];
  const restore = setLogs("graph,schedule", (l) => lines.push(l));
  try {
    await torch.withEagerMode("fused", async () => {
      await torch.arange(7, { dtype: "float32" }).mul(3).add(2).sum().item();
    });
  } finally {
    restore();
  }
  assert.ok(lines.some((l) => l.startsWith("[torchts:graph]") && l.includes("arange")), lines.join("\n"));
  assert.ok(lines.some((l) => l.startsWith("[torchts:schedule]") && l.includes("fused_reduction[mul,add,sum]")), lines.join("\n"));
  assert.throws(() => setLogs("bogus"), /TORCHTS_LOGS: unknown log 'bogus'/);
});

test("profiler: per-kernel times and a Chrome trace", async () => {
  const prof = torch.profiler.profile();
  await torch.withEagerMode("strict", async () => {
    await torch.ones(8).mul(2).sum().item();
  });
  prof.stop();
  const names = prof.keyAverages().map((r) => r.name).sort();
  assert.deepEqual(names, ["binary", "full", "reduce"]);
  const trace = JSON.parse(prof.chromeTrace()) as { traceEvents: { ph: string; dur: number }[] };
  assert.equal(trace.traceEvents.length, 3);
  assert.ok(trace.traceEvents.every((e) => e.ph === "X" && e.dur >= 0));
});

test("fused: a training step's flush keeps what backward saved and the loss, so nothing is recomputed", async () => {
  const { GPT } = await import("../../../../examples/mingpt/model.js");
  torch.manualSeed(0);
  const model = new GPT({ vocabSize: 65, blockSize: 32, nLayer: 1, nHead: 2, nEmbd: 32 });
  const opt = model.configureOptimizer({ lr: 3e-4, betas: [0.9, 0.95], weightDecay: 0.1 });
  const x = torch.randint(0, 65, [2, 32]), y = torch.randint(0, 65, [2, 32]);
  for (let i = 0; i < 2; i++) {
    await torch.withEagerMode("fused", async () => {
      const p = torch.profiler.profile();
      const { loss } = model.forward(x, y);
      opt.zeroGrad();
      loss!.backward();
      opt.step();
      torch.sync(); // the whole step, then the loss read: no second flush recomputing the forward
      const before = p.events.length;
      await loss!.item();
      p.stop();
      assert.equal(p.events.length, before, `the loss read ran ${p.events.length - before} more kernels`);
      // the 4 Linear forwards (qkv, proj, fc, fc2) ran once each: the backward did not recompute them
      assert.equal(p.events.filter((e) => e.name === "fused_matmul[matmul,add]").length, 4);
    });
  }
});

test("fused: values a scope disposed while still pending are freed by the flush that ran their readers", async () => {
  // generate()'s decode shape: each step runs in torch.scope and reads one value after it
  torch.manualSeed(0);
  const W = torch.randn(64, 64), cache = torch.randn(1, 4, 32, 16);
  const live: number[] = [];
  await torch.withEagerMode("fused", async () => {
    let x = torch.randn(1, 64);
    for (let step = 0; step < 6; step++) {
      const next = torch.scope(() => {
        const h = x.matmul(W).relu(); // a matmul output read by a fused elementwise chain
        const kv = torch.cat([cache, h.reshape(1, 4, 1, 16)], 2); // a cat read by a later kernel
        return kv.sum(2).reshape(1, 64).tanh();
      });
      const total = next.sum();
      await total.item(); // the host read flushes after the scope disposed h and kv
      total.dispose();
      x.dispose();
      x = next;
      live.push(torch.memory.stats().liveBytes);
    }
  });
  // the first step may allocate what later ones reuse; after it nothing accumulates
  assert.deepEqual(live.slice(2), live.slice(1, -1), `live bytes per step: ${live.join(", ")}`);
});

test("fused: a training step in torch.scope runs the kernels an unscoped one does (what the last scope freed is not recomputed)", () => {
  const counts: number[] = [];
  for (const scoped of [false, true])
    torch.withEagerMode("fused", () => {
      torch.manualSeed(4);
      const w1 = torch.randn(16, 32).mul(0.2).requiresGrad_();
      const w2 = torch.randn(32, 4).mul(0.2).requiresGrad_();
      const x = torch.randn(8, 16);
      const y = torch.randn(8, 4);
      const step = () => {
        const h = torch.nn.functional.gelu(x.matmul(w1).add(1)).mul(0.5);
        const loss = h.matmul(w2).sub(y).pow(2).mean();
        loss.backward();
        torch.noGrad(() => {
          for (const p of [w1, w2]) {
            p.sub_(p.grad!.mul(0.1));
            p.grad = null;
          }
        });
        torch.sync();
        return loss;
      };
      for (let i = 0; i < 3; i++) (scoped ? torch.scope(step) : step()).dispose();
      const prof = torch.profiler.profile();
      (scoped ? torch.scope(step) : step()).dispose();
      prof.stop();
      counts.push(prof.events.length);
    });
  assert.ok(counts[0]! > 0);
  assert.equal(counts[1], counts[0], `kernels per step: unscoped ${counts[0]}, scoped ${counts[1]}`);
});

test("fusion: GELU's backward reads the forward's erf term: one flush computes erf once per element, gradients as strict", async () => {
  // the MLP block of a training step: Linear -> GELU -> Linear, forward and backward in one flush
  const run = (mode: "strict" | "fused", scoped: boolean) =>
    torch.withEagerMode(mode, async () => {
      torch.manualSeed(5);
      const x = torch.randn(8, 16);
      const w1 = torch.randn(16, 32).mul(0.3).requiresGrad_();
      const w2 = torch.randn(32, 4).mul(0.3).requiresGrad_();
      const forward = () => F.gelu(x.matmul(w1).add(0.1)).matmul(w2).pow(2).mean();
      // scoped: the forward's scope ends before backward and disposes what the op kept for it (then
      // the backward recomputes the term from x)
      const loss = scoped ? torch.scope(forward) : forward();
      const prof = torch.profiler.profile();
      loss.backward();
      torch.sync();
      prof.stop();
      const erfs = prof.events.reduce((n, e) => n + (e.name.match(/erf/g)?.length ?? 0), 0);
      return { erfs, g1: (await w1.grad!.flatten().tolist()) as number[], g2: (await w2.grad!.flatten().tolist()) as number[] };
    });
  const strict = await run("strict", false);
  const fused = await run("fused", false);
  assert.equal(fused.erfs, 1, "one erf in the flush's kernels (the backward recomputed it before)");
  assert.deepEqual(fused.g1, strict.g1);
  assert.deepEqual(fused.g2, strict.g2);
  const scoped = await run("fused", true);
  assert.equal(scoped.erfs, 2, "after the forward's scope, the backward recomputes erf from x");
  assert.deepEqual(scoped.g1, strict.g1);
  assert.deepEqual(scoped.g2, strict.g2);
});
