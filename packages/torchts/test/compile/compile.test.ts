// torch.compile: a whole training step (forward, backward, clipping, AdamW) as one graph;
// guards and recompile reasons; dynamic dims padded to buckets; clear errors instead of
// graph breaks.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { schedulerStats } from "../../src/runtime/scheduler.js";

const F = torch.nn.functional;

function setup() {
  torch.manualSeed(0);
  const model = new torch.nn.Sequential(new torch.nn.Linear(8, 16), new torch.nn.GELU(), new torch.nn.LayerNorm(16), new torch.nn.Linear(16, 4));
  const opt = new torch.optim.AdamW([...model.parameters()], { lr: 1e-2 });
  const step = (x: torch.Tensor, y: torch.Tensor) => {
    const loss = F.crossEntropy(model.forward(x), y);
    opt.zeroGrad({ setToNone: true });
    loss.backward();
    torch.nn.utils.clipGradNorm_([...model.parameters()], 1.0);
    opt.step();
    return loss;
  };
  return { model, step };
}

function batches(n: number) {
  torch.manualSeed(1);
  return Array.from({ length: n }, () => [torch.randn(32, 8), torch.randint(0, 4, [32])] as const);
}

test("compile: a training step gives the strict-eager losses, compiles once and replays without re-scheduling", async () => {
  const data = batches(6);
  const strict = setup();
  const want: number[] = [];
  for (const [x, y] of data) want.push(await torch.withEagerMode("strict", () => strict.step(x, y)).item());

  torch.compiler.resetStats();
  const c = setup();
  const step = torch.compile(c.step);
  const got: number[] = [];
  let misses = 0;
  for (const [i, [x, y]] of data.entries()) {
    const before = schedulerStats().planMisses;
    got.push(await step(x, y).item());
    if (i >= 3) misses += schedulerStats().planMisses - before;
  }
  for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got[i]! - want[i]!) <= 1e-6 * Math.abs(want[i]!), `step ${i}: ${got[i]} vs ${want[i]}`);
  assert.ok(got[5]! < got[0]!, "it trains");
  assert.equal(misses, 0, "steady-state calls reuse the schedule (no re-scheduling, no codegen)");
  const s = torch.compiler.stats();
  assert.equal(s.compiles + s.loads, 1);
  assert.equal(s.hits, 5);
  assert.equal(s.recompiles, 0);
});

test("compile: a guard failure recompiles and says why", async () => {
  torch.compiler.resetStats();
  const f = torch.compile((a: torch.Tensor) => a.mul(2).add(1), { name: "affine" });
  await f(torch.ones(3)).sum().item();
  await f(torch.ones(3)).sum().item();
  assert.deepEqual(await f(torch.ones(2, 2)).tolist(), [[3, 3], [3, 3]]);
  f(torch.ones(2, 2, { dtype: "float64" }));
  const s = torch.compiler.stats();
  assert.equal(s.hits, 1);
  assert.equal(s.recompiles, 2);
  assert.match(s.recompileReasons[0]!, /^affine: arg0\.shape changed from \[3\] to \[2,2\]$/);
  assert.match(s.recompileReasons[1]!, /arg0\.dtype changed from float32 to float64/);
});

test("compile: a module's parameters are guarded", async () => {
  torch.compiler.resetStats();
  const lin = new torch.nn.Linear(3, 2);
  const f = torch.compile(lin);
  const x = torch.ones(1, 3);
  f(x);
  f(x);
  lin.weight = new torch.nn.Parameter(torch.zeros(2, 3));
  const out = (await f(x).tolist()) as number[][];
  assert.deepEqual(out, [(await lin.bias!.tolist()) as number[]]);
  const s = torch.compiler.stats();
  assert.equal(s.recompiles, 1);
  assert.match(s.recompileReasons[0]!, /module0\.parameters changed/);
});

test("compile: async functions and host reads inside are errors naming the call", async () => {
  assert.throws(() => torch.compile(async (a: torch.Tensor) => a.add(1)), /'<anonymous>' is an async function|is an async function/);
  const bad = torch.compile(function readsHost(a: torch.Tensor) {
    const b = a.mul(2);
    String(b); // printing reads values
    return b;
  });
  assert.throws(() => bad(torch.ones(2)), /torch\.compile: 'readsHost' reads a tensor value on the host \(printing\) at .*compile\.test\.ts/);
  const sync = torch.compile(function syncs(a: torch.Tensor) {
    const b = a.mul(2);
    torch.sync();
    return b;
  });
  assert.throws(() => sync(torch.ones(2)), /'syncs' reads a tensor value on the host \(torch\.sync\(\)\)/);
  // the failed traces left nothing behind that breaks later work
  assert.deepEqual(await torch.ones(2).add(1).tolist(), [2, 2]);
});

test("compile: dynamic sequence lengths pad to buckets and compile at most once per bucket", async () => {
  torch.compiler.resetStats();
  torch.manualSeed(0);
  const emb = new torch.nn.Embedding(10, 8);
  const head = new torch.nn.Linear(8, 10);
  // a causal, position-wise model: padding at the end never changes earlier positions
  const lossOf = (x: torch.Tensor, y: torch.Tensor) =>
    F.crossEntropy(head.forward(emb.forward(x).cumsum(1)).flatten(0, 1), y.flatten(), { ignoreIndex: -100 });
  const f = torch.compile(lossOf, {
    dynamic: [
      { arg: 0, dim: 1, min: 1, max: 16, buckets: [4, 8, 16] },
      { arg: 1, dim: 1, min: 1, max: 16, buckets: [4, 8, 16], padValue: -100 },
    ],
  });
  for (const T of [3, 4, 2, 7, 5, 8, 16, 9, 1]) {
    const x = torch.randint(0, 10, [2, T]);
    const y = torch.randint(0, 10, [2, T]);
    const want = await torch.noGrad(() => lossOf(x, y)).item();
    const got = await torch.noGrad(() => f(x, y)).item();
    assert.ok(Math.abs(got - want) < 1e-6, `T=${T}: ${got} vs ${want}`);
  }
  const s = torch.compiler.stats();
  assert.equal(s.compiles + s.loads, 3, "one compile per bucket (4, 8, 16)");
  assert.equal(s.hits, 6);
  assert.throws(() => f(torch.zeros(2, 17, { dtype: "int64" }), torch.zeros(2, 17, { dtype: "int64" })), /outside the declared bounds \[1, 16\]/);
});

test("compile: intermediates are freed after their last use and recomputed if read later", async () => {
  torch.manualSeed(0);
  const a = torch.randn(16, 8);
  const scale = torch.tensor(0.1, { dtype: "float32" });
  let kept: torch.Tensor | null = null;
  const f = torch.compile((x: torch.Tensor) => {
    kept = x.matmul(x.t()).mul(scale); // an intermediate the caller holds on to
    return kept.exp().sum(1).log();
  });
  f(a);
  f(a); // the second recorded call builds the replay program (whose intermediate buffers stay allocated)
  let before = torch.memory.stats().liveBuffers;
  f(a); // replays
  before = torch.memory.stats().liveBuffers - before; // the first replay allocates the spare buffers of written state (none here)
  const b0 = torch.memory.stats().liveBuffers;
  const out = f(a);
  assert.equal(before, 1, "a replay leaves only the returned value in memory");
  assert.equal(torch.memory.stats().liveBuffers - b0, 1, "only the returned value is left in memory");
  const want = torch.withEagerMode("strict", () => a.matmul(a.t()).mul(scale));
  assert.deepEqual(await kept!.tolist(), await want.tolist(), "a freed intermediate is recomputed on read");
  assert.deepEqual(await out.tolist(), await torch.withEagerMode("strict", () => want.exp().sum(1).log().tolist()));
});

test("compile: parameter guards see freezing, a replaced child module and module.to(dtype) (cached between calls)", async () => {
  torch.compiler.resetStats();
  torch.manualSeed(0);
  const net = new torch.nn.Sequential(new torch.nn.Linear(3, 4), new torch.nn.Linear(4, 2));
  const f = torch.compile((x: torch.Tensor) => net.forward(x), { modules: [net], name: "net" });
  const x = torch.ones(1, 3);
  f(x);
  f(x); // hit: the parameter description is reused
  (net as unknown as { 0: torch.nn.Linear })[0].weight.requiresGrad_(false);
  f(x);
  net.addModule("1", new torch.nn.Linear(4, 2));
  const y = f(x);
  assert.ok((await y.sub(net.forward(x)).abs().max().item()) < 1e-6, "the replaced layer is used");
  net.to("float64");
  assert.equal(f(x.double()).dtype, "float64");
  const s = torch.compiler.stats();
  assert.equal(s.hits, 1);
  assert.equal(s.recompiles, 3);
  assert.match(s.recompileReasons[0]!, /module0\.parameters changed .*\(frozen\)/);
  assert.match(s.recompileReasons[1]!, /module0\.parameters changed/);
  assert.match(s.recompileReasons[2]!, /float64/);
});
