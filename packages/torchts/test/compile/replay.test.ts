// torch.compile replay: once two recorded calls agree, later calls run the recorded kernels
// directly. Replays must give bit-identical results to running the function (the re-run path),
// advance host state (optimizer steps, the random generator) exactly as it would, recompile on
// guard failures and never enter the op library.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { schedulerStats } from "../../src/runtime/scheduler.js";
import { cacheStats } from "../../src/runtime/cache.js";

const F = torch.nn.functional;

function setup(replay: boolean) {
  torch.manualSeed(0);
  const model = new torch.nn.Sequential(
    new torch.nn.Linear(8, 32),
    new torch.nn.GELU(),
    new torch.nn.Dropout(0.2),
    new torch.nn.LayerNorm(32),
    new torch.nn.Linear(32, 4),
  );
  const opt = new torch.optim.AdamW([...model.parameters()], { lr: 1e-2, weightDecay: 0.1 });
  const sched = new torch.optim.lrScheduler.LambdaLR(opt, (e) => 1 / (1 + e)); // lr changes every step
  const step = torch.compile(
    (x: torch.Tensor, y: torch.Tensor) => {
      const loss = F.crossEntropy(model.forward(x), y);
      opt.zeroGrad({ setToNone: true });
      loss.backward();
      const norm = torch.nn.utils.clipGradNorm_([...model.parameters()], 1.0);
      opt.step();
      return { loss, norm };
    },
    { modules: [model], replay },
  );
  return { model, opt, sched, step };
}

/** A compiled cross-entropy training step of `model` with `opt`. */
function compiledStep(model: InstanceType<typeof torch.nn.Module>, opt: torch.optim.Optimizer, replay: boolean, name: string) {
  return torch.compile(
    (x: torch.Tensor, y: torch.Tensor) => {
      const loss = F.crossEntropy(model.forward(x) as torch.Tensor, y);
      opt.zeroGrad();
      loss.backward();
      opt.step();
      return loss;
    },
    { modules: [model], replay, name },
  );
}

function batches(n: number, b = 16) {
  torch.manualSeed(1);
  return Array.from({ length: n }, () => [torch.randn(b, 8), torch.randint(0, 4, [b])] as const);
}

async function train(replay: boolean, data: ReturnType<typeof batches>) {
  const r = setup(replay);
  torch.manualSeed(7); // dropout masks come from the default generator
  const losses: number[] = [];
  const norms: number[] = [];
  for (const [x, y] of data) {
    const { loss, norm } = r.step(x, y) as { loss: torch.Tensor; norm: torch.Tensor };
    losses.push(await loss.item());
    norms.push(await norm.item());
    r.sched.step();
  }
  const params = await Promise.all([...r.model.parameters()].map((p) => p.data()));
  const grads = await Promise.all([...r.model.parameters()].map((p) => p.grad!.data()));
  return { ...r, losses, norms, params, grads, rng: torch.getRngState() };
}

test("replay: AdamW + lr scheduler + dropout give bit-identical results to running the function", async () => {
  const data = batches(7);
  torch.compiler.resetStats();
  const rerun = await train(false, data);
  assert.equal(torch.compiler.stats().replays, 0);
  const replayed = await train(true, data);
  const s = torch.compiler.stats();
  assert.ok(s.replays >= 3, `later calls replay (replays ${s.replays}, disabled: ${s.replayDisabled.join("; ")})`);
  assert.deepEqual(replayed.losses, rerun.losses, "losses");
  assert.deepEqual(replayed.norms, rerun.norms, "grad norms");
  replayed.params.forEach((p, i) => assert.deepEqual(p, rerun.params[i], `parameter ${i}`));
  replayed.grads.forEach((g, i) => assert.deepEqual(g, rerun.grads[i], `gradient ${i} left on the parameter`));
  assert.deepEqual(replayed.rng, rerun.rng, "the random generator advanced as the function would have advanced it");
  const steps = [...replayed.opt.state.values()].map((st) => st.step);
  assert.ok(steps.every((n) => n === data.length), `optimizer step counts advanced on replays (${steps})`);
  assert.equal(replayed.opt.paramGroups[0]!.lr, rerun.opt.paramGroups[0]!.lr);
  assert.ok(replayed.losses.at(-1)! < replayed.losses[0]!, "it trains");
});

test("replay: does not enter the op library, the scheduler or the compile cache", async () => {
  const data = batches(6);
  const r = setup(true);
  for (const [x, y] of data.slice(0, 3)) await (r.step(x, y) as { loss: torch.Tensor }).loss.item();
  const before = { ...schedulerStats(), ...cacheStats(), replays: torch.compiler.stats().replays };
  let prims = 0;
  const { recordHooks } = await import("../../src/runtime/scheduler.js");
  const prev = recordHooks.prim;
  recordHooks.prim = () => void prims++; // counts every primitive the dispatcher is asked to run
  try {
    for (const [x, y] of data.slice(3)) {
      const { loss } = r.step(x, y) as { loss: torch.Tensor };
      assert.ok(Number.isFinite(await loss.item()));
    }
  } finally {
    recordHooks.prim = prev;
  }
  const after = { ...schedulerStats(), ...cacheStats(), replays: torch.compiler.stats().replays };
  assert.equal(after.replays - before.replays, 3);
  assert.equal(prims, 0, "no primitive was dispatched");
  assert.equal(after.flushes, before.flushes, "no scheduler flush");
  assert.equal(after.hits + after.misses, before.hits + before.misses, "no compile-cache lookup");
});

test("replay: a call that changes a guarded shape recompiles, and the old entry still replays", async () => {
  const data = batches(5);
  const [xs, ys] = batches(1, 8)[0]!;
  const calls = [...data.slice(0, 4), [xs, ys] as const, data[4]!];
  const run = async (replay: boolean) => {
    const r = setup(replay);
    torch.manualSeed(7);
    const losses: number[] = [];
    for (const [x, y] of calls) losses.push(await (r.step(x, y) as { loss: torch.Tensor }).loss.item());
    return losses;
  };
  const want = await run(false);
  torch.compiler.resetStats();
  const got = await run(true);
  const s = torch.compiler.stats();
  assert.deepEqual(got, want, "losses equal the re-run path's, across the shape change");
  assert.equal(s.recompiles, 1);
  assert.match(s.recompileReasons[0]!, /arg0\.shape changed from \[16,8\] to \[8,8\]/);
  // calls 1-3 record (AdamW creates its state in call 1, so calls 2 and 3 are the pair that agrees),
  // call 4 replays, the new shape runs the function, the old shape replays again
  assert.equal(s.replays, 2);
});

test("replay: a host number that changes with no declared source keeps the function on the re-run path", async () => {
  torch.compiler.resetStats();
  let k = 0;
  const f = torch.compile((x: torch.Tensor) => x.mul(++k), { name: "counter" });
  const x = torch.ones(4);
  for (let i = 1; i <= 6; i++) assert.deepEqual(await f(x).tolist(), [i, i, i, i]);
  const s = torch.compiler.stats();
  assert.equal(s.replays, 0);
  assert.equal(s.replayDisabled.length, 1);
  assert.match(s.replayDisabled[0]!, /^counter: .*changes between calls/);
});

test("replay: numbers declared with hostScalars are recomputed on every replay", async () => {
  torch.compiler.resetStats();
  let k = 0;
  const f = torch.compile((x: torch.Tensor) => {
    const [s] = torch.compiler.hostScalars(() => [++k]);
    return x.mul(s!).add(0.5);
  }, { name: "declared" });
  const x = torch.ones(3);
  for (let i = 1; i <= 6; i++) assert.deepEqual(await f(x).tolist(), [i + 0.5, i + 0.5, i + 0.5]);
  assert.equal(k, 6);
  assert.ok(torch.compiler.stats().replays >= 3);
});

test("replay: returned tensors are fresh each call and arguments are read where they are now", async () => {
  const f = torch.compile((x: torch.Tensor) => x.exp().sum());
  const big = torch.arange(0, 20, 1, { dtype: "float32" }).reshape([5, 4]);
  const outs: torch.Tensor[] = [];
  for (let i = 0; i < 5; i++) outs.push(f(big.select(0, i))); // views at different offsets of one storage
  const got = await Promise.all(outs.map((o) => o.item()));
  const want = await Promise.all([0, 1, 2, 3, 4].map((i) => torch.withEagerMode("strict", () => big.select(0, i).exp().sum()).item()));
  assert.deepEqual(got, want);
  assert.ok(torch.compiler.stats().replays >= 2);
});

test("replay: a compiled module replays inference, and keeps the re-run path when its output needs backward()", async () => {
  torch.manualSeed(0);
  const model = new torch.nn.Sequential(new torch.nn.Linear(6, 12), new torch.nn.Tanh(), new torch.nn.Linear(12, 3));
  const fwd = torch.compile(model);
  const xs = Array.from({ length: 5 }, () => torch.randn(4, 6));
  torch.compiler.resetStats();
  for (const x of xs) {
    const got = torch.noGrad(() => fwd(x)) as torch.Tensor;
    const want = torch.noGrad(() => torch.withEagerMode("fused", () => model.forward(x)));
    assert.deepEqual(await got.tolist(), await want.tolist());
  }
  assert.equal(torch.compiler.stats().replays, 3);
  // with grad enabled the output's graph must stay alive for a backward() outside: never replayed
  const train = torch.compile(model, { name: "train" });
  for (const x of xs) {
    const y = train(x) as torch.Tensor;
    y.sum().backward();
  }
  const s = torch.compiler.stats();
  assert.equal(s.replays, 3);
  assert.match(s.replayDisabled.join("\n"), /train: it returns a tensor whose autograd graph is still alive/);
  assert.ok([...model.parameters()].every((p) => p.grad !== null));
});

test("replay: grad mode is guarded", async () => {
  torch.manualSeed(0);
  const lin = new torch.nn.Linear(3, 2);
  const f = torch.compile(lin, { name: "lin" });
  const x = torch.randn(2, 3);
  for (let i = 0; i < 4; i++) torch.noGrad(() => f(x));
  torch.compiler.resetStats();
  const y = f(x) as torch.Tensor;
  assert.ok(y.requiresGrad, "with grad enabled the function runs and builds the graph");
  assert.match(torch.compiler.stats().recompileReasons[0]!, /gradEnabled changed from false to true/);
});

test("replay: arguments that alias differently, or that the function writes in place, run the function", async () => {
  torch.compiler.resetStats();
  const add = torch.compile((x: torch.Tensor, y: torch.Tensor) => x.mul(2).add(y), { name: "add" });
  const a = torch.tensor([1, 2, 3]);
  const b = torch.tensor([10, 20, 30]);
  for (let i = 0; i < 3; i++) assert.deepEqual(await add(a, b).tolist(), [12, 24, 36]);
  assert.deepEqual(await add(a, a).tolist(), [3, 6, 9], "an aliasing pattern the program was not recorded with");
  assert.deepEqual(await add(b, a).tolist(), [21, 42, 63]);
  const s = torch.compiler.stats();
  assert.equal(s.replays, 2);
  const inc = torch.compile((x: torch.Tensor) => x.add_(1), { name: "inc" });
  const c = torch.zeros(2);
  for (let i = 0; i < 6; i++) inc(c);
  assert.deepEqual(await c.tolist(), [6, 6]);
  assert.match(torch.compiler.stats().replayDisabled.join("\n"), /inc: .*writes an argument in place/);
});

test("replay: SGD (momentum), RMSprop and Adagrad with a step scheduler replay bit-identically", async () => {
  const makers: [string, (ps: torch.Tensor[]) => torch.optim.Optimizer][] = [
    ["SGD", (ps) => new torch.optim.SGD(ps, { lr: 0.1, momentum: 0.9, weightDecay: 1e-3 })],
    ["RMSprop", (ps) => new torch.optim.RMSprop(ps, { lr: 1e-2, momentum: 0.5, centered: true })],
    ["Adagrad", (ps) => new torch.optim.Adagrad(ps, { lr: 0.1, lrDecay: 0.01 })],
  ];
  const data = batches(7);
  for (const [name, make] of makers) {
    const run = async (replay: boolean) => {
      torch.manualSeed(0);
      const model = new torch.nn.Sequential(new torch.nn.Linear(8, 16), new torch.nn.ReLU(), new torch.nn.Linear(16, 4));
      const opt = make([...model.parameters()]);
      const sched = new torch.optim.lrScheduler.StepLR(opt, 2, 0.5);
      const step = compiledStep(model, opt, replay, name);
      const losses: number[] = [];
      for (const [x, y] of data) {
        losses.push(await (step(x, y) as torch.Tensor).item());
        sched.step();
      }
      const params = await Promise.all([...model.parameters()].map((p) => p.data()));
      return { losses, params, steps: [...opt.state.values()].map((s) => s.step) };
    };
    const want = await run(false);
    const before = torch.compiler.stats().replays;
    const got = await run(true);
    assert.ok(torch.compiler.stats().replays - before >= 3, `${name} replays`);
    assert.deepEqual(got.losses, want.losses, `${name} losses`);
    got.params.forEach((p, i) => assert.deepEqual(p, want.params[i], `${name} parameter ${i}`));
    assert.deepEqual(got.steps, want.steps, `${name} step counts`);
  }
});

test("replay: module buffers updated in place (BatchNorm running stats) follow the re-run path exactly", async () => {
  const data = batches(6);
  const run = async (replay: boolean) => {
    torch.manualSeed(0);
    const model = new torch.nn.Sequential(new torch.nn.Linear(8, 16), new torch.nn.BatchNorm1d(16), new torch.nn.ReLU(), new torch.nn.Linear(16, 4));
    const opt = new torch.optim.SGD([...model.parameters()], { lr: 0.05 });
    const step = compiledStep(model, opt, replay, "bn");
    const losses: number[] = [];
    for (const [x, y] of data) losses.push(await (step(x, y) as torch.Tensor).item());
    const bufs = await Promise.all([...model.namedBuffers()].map(([, b]) => b.data()));
    return { losses, bufs };
  };
  const want = await run(false);
  const before = torch.compiler.stats().replays;
  const got = await run(true);
  assert.ok(torch.compiler.stats().replays - before >= 3);
  assert.deepEqual(got.losses, want.losses);
  got.bufs.forEach((b, i) => assert.deepEqual(b, want.bufs[i], `buffer ${i}`));
});
