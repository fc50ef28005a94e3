// Run by test/distributed/ddp.test.ts under `torchts run` at world sizes 2 and 4.
// The reference is single-process training computed on every rank from the same seeds: minGPT
// (the example's model, a small config) trained 10 AdamW steps on the whole global batch; DDP
// trains the same model with the batch split across ranks (rank r takes rows r*B/N ..).
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { GPT } from "../../../../../examples/mingpt/model.js";
import { assertClose, check, referenceRun, report } from "./checks.js";
const dist = torch.distributed;
const { nn } = torch;
const DDP = nn.parallel.DistributedDataParallel;

await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const store = dist.getDefaultStore();

const cfg = { vocabSize: 32, blockSize: 16, nLayer: 2, nHead: 2, nEmbd: 32 };
const B = 8; // global batch (divisible by 2 and 4, and by 2 micro-batches at 4 ranks)
const T = 16;
const STEPS = 10;
torch.manualSeed(7);
const data = Array.from({ length: STEPS }, () => torch.randint(0, cfg.vocabSize, [B, T + 1]));
const xy = (d: Tensor): [Tensor, Tensor] => [d.narrow(1, 0, T), d.narrow(1, 1, T)];
function gpt(seed: number): GPT {
  torch.manualSeed(seed);
  return new GPT(cfg);
}
const optimizer = (m: GPT) => m.configureOptimizer({ lr: 3e-3, betas: [0.9, 0.95], weightDecay: 0.1 });
function stepOpt(m: GPT, o: ReturnType<typeof optimizer>): void {
  torch.nn.utils.clipGradNorm_([...m.parameters()], 1.0); // minGPT's clipping (it reads the reduced gradients)
  o.step();
  o.zeroGrad();
}

// single process, the whole batch
const ref = gpt(100);
const refOpt = optimizer(ref);
const { losses: refLosses, params: refParams } = await referenceRun(ref, data, xy, () => stepOpt(ref, refOpt));

/** The attention key biases: softmax is invariant to them, so their true gradient is 0 and what Adam makes of rounding noise differs with the summation order. */
const keyBias = (name: string) => name.endsWith("attn.c_attn.bias");

async function compareWithReference(model: GPT, losses: number[]): Promise<void> {
  for (const [i, l] of losses.entries())
    assert.ok(Math.abs(l - refLosses[i]!) <= 1e-5 * Math.abs(refLosses[i]!), `step ${i + 1}: loss ${l} vs single-process ${refLosses[i]}`);
  for (const [name, p] of model.namedParameters()) {
    const r = refParams.get(name)!;
    if (!keyBias(name)) await assertClose(p, r, name, 1e-5, 1e-5);
    else {
      const C = cfg.nEmbd; // q and v parts compare as usual; the key part within a few Adam steps of noise
      await assertClose(p.narrow(0, 0, C), r.narrow(0, 0, C), `${name} (query part)`, 1e-5, 1e-5);
      await assertClose(p.narrow(0, 2 * C, C), r.narrow(0, 2 * C, C), `${name} (value part)`, 1e-5, 1e-5);
      await assertClose(p.narrow(0, C, C), r.narrow(0, C, C), `${name} (key part)`, 0, 3e-3 * STEPS);
    }
  }
  // and every rank holds the same bits
  const flat = torch.cat([...model.parameters()].map((p) => p.detach().reshape(-1)));
  const first = flat.clone();
  dist.broadcast(first, 0);
  assert.deepEqual(Array.from(await flat.data()), Array.from(await first.data()), "parameters differ between ranks");
}

const globalLoss = async (l: Tensor): Promise<number> => {
  const g = l.detach().clone();
  dist.allReduce(g, { op: dist.ReduceOp.AVG });
  return g.item();
};

const RUNS = [
  { mode: "strict", opts: {} },
  { mode: "strict", opts: { bucketCapMb: 0.02, gradientAsBucketView: true } },
  { mode: "fused", opts: { bucketCapMb: 0.02 } },
] as const;
for (const { mode, opts } of RUNS)
  await check(`minGPT: 10 AdamW steps of DDP ${JSON.stringify(opts)} in ${mode} mode equal single-process training on the whole batch`, () => torch.withEagerMode(mode, async () => {
    const model = gpt(100 + rank); // a different init per rank: DDP broadcasts rank 0's
    const ddp = new DDP(model, opts);
    const o = optimizer(model);
    const losses: number[] = [];
    const m = B / n;
    for (const d of data) {
      const [x, y] = xy(d.narrow(0, rank * m, m));
      const loss = ddp.forward(x, y).loss;
      loss.backward();
      stepOpt(model, o);
      torch.sync(); // fused mode: run the step now (strict: nothing pending)
      losses.push(await globalLoss(loss));
    }
    await compareWithReference(model, losses);
  }));

await check("minGPT: gradient accumulation with noSync() (2 micro-batches per rank) equals single-process training", async () => {
  const model = gpt(100 + rank);
  const ddp = new DDP(model);
  const o = optimizer(model);
  const losses: number[] = [];
  const m = B / n / 2;
  for (const d of data) {
    const micro = [0, 1].map((k) => xy(d.narrow(0, rank * 2 * m + k * m, m)));
    const l0 = ddp.noSync(() => {
      const loss = ddp.forward(...micro[0]!).loss.div(2);
      loss.backward();
      return loss;
    });
    for (const p of model.parameters()) assert.ok(p.grad, "noSync backward accumulates locally");
    const l1 = ddp.forward(...micro[1]!).loss.div(2);
    l1.backward();
    stepOpt(model, o);
    losses.push(await globalLoss(l0.add(l1)));
  }
  await compareWithReference(model, losses);
});

await check("buckets: one bucket in the first iteration, then rebuilt in gradient-ready order (same on every rank)", async () => {
  torch.manualSeed(3);
  const layers = Array.from({ length: 6 }, () => new nn.Linear(256, 256)); // 6 x 257 KB
  const model = new nn.Sequential(...layers);
  const ddp = new DDP(model, { bucketCapMb: 0.3 });
  const P = [...model.parameters()].length;
  assert.deepEqual(ddp._bucketIndices(), [[...Array(P).keys()].reverse()]);
  const x = torch.randn([4, 256]);
  for (let i = 0; i < 2; i++) {
    ddp.forward(x).sum().backward();
    model.zeroGrad();
  }
  const buckets = ddp._bucketIndices();
  assert.ok(buckets.length > 1, `${buckets.length} buckets`);
  // the last layer's gradients come first; the first bucket fills 1 MB, the others the cap
  assert.deepEqual(buckets.flat().sort((a, b) => a - b), [...Array(P).keys()]);
  assert.ok(buckets[0]!.includes(P - 1) && buckets[0]!.includes(P - 2), `first bucket ${buckets[0]}`);
  assert.ok(buckets.at(-1)!.includes(0), `last bucket ${buckets.at(-1)}`);
  const want = dist.computeBucketAssignmentBySize(
    [...model.parameters()].map((p) => ({ numel: p.numel(), dtype: p.dtype })),
    [dist.DEFAULT_FIRST_BUCKET_BYTES, 0.3 * 1024 * 1024],
    buckets.flat(),
  ).buckets;
  assert.deepEqual(buckets, want);
  const sig = torch.tensor(buckets.flat(), { dtype: "int64" });
  const all = [...Array(n)].map(() => torch.zeros([P], { dtype: "int64" }));
  dist.allGather(all, sig);
  for (const a of all) assert.deepEqual(await a.tolist(), buckets.flat());
});

class Branchy extends nn.Module {
  a = new nn.Linear(4, 4);
  b = new nn.Linear(4, 4);
  c = new nn.Linear(4, 4);
  override forward(x: Tensor, useB: boolean): Tensor {
    const h = this.a.forward(x);
    return (useB ? this.b.forward(h) : h).pow(2).sum();
  }
}
const branchInput = (r: number) => torch.arange(8 * 4).reshape(8, 4).add(r).div(10);

await check("unused parameters without findUnusedParameters: PyTorch's error at the next forward, naming them", () => {
  torch.manualSeed(5);
  const ddp = new DDP(new Branchy());
  ddp.forward(branchInput(rank), false).backward();
  assert.throws(
    () => ddp.forward(branchInput(rank), false),
    (e: Error) =>
      e.message.startsWith("Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss.") &&
      e.message.includes("findUnusedParameters: true") &&
      e.message.includes(`Parameter indices which did not receive grad for rank ${rank}: 2 3 4 5`) &&
      e.message.includes("b.weight, b.bias, c.weight, c.bias"),
  );
});

await check("findUnusedParameters: gradients of parameters used on some ranks are averaged, unused everywhere stay null", async () => {
  torch.manualSeed(5);
  const model = new Branchy();
  const ddp = new DDP(model, { findUnusedParameters: true });
  // the reference: every rank's local gradients, averaged (rank 0 alone uses b)
  const refModel = new Branchy();
  refModel.loadStateDict(model.stateDict());
  for (let it = 0; it < 2; it++) {
    model.zeroGrad();
    refModel.zeroGrad();
    for (let r = 0; r < n; r++) refModel.forward(branchInput(r + it), r === 0).div(n).backward();
    ddp.forward(branchInput(rank + it), rank === 0).backward();
    for (const [name, p] of model.namedParameters()) {
      const want = refModel.getParameter(name).grad;
      if (!want) assert.equal(p.grad, null, `${name}: no rank used it, so its grad stays null`);
      else await assertClose(p.grad!, want, `iteration ${it} ${name}.grad`, 1e-5, 1e-6);
    }
  }
});

await check("construction broadcasts rank 0's parameters and buffers; broadcastBuffers syncs them at every forward", async () => {
  class WithBuffer extends nn.Module {
    lin = new nn.Linear(3, 3);
    constructor() {
      super();
      this.registerBuffer("shift", torch.zeros([3]));
    }
    override forward(x: Tensor): Tensor {
      return this.lin.forward(x).add((this as unknown as { shift: Tensor }).shift);
    }
  }
  torch.manualSeed(50 + rank);
  const m = new WithBuffer();
  const ddp = new DDP(m);
  const w = m.lin.weight.detach().clone();
  dist.broadcast(w, 0);
  assert.deepEqual(await m.lin.weight.tolist(), await w.tolist());
  const shift = (m as unknown as { shift: Tensor }).shift;
  shift.fill_(rank + 1); // diverges, as running statistics would
  ddp.forward(torch.ones([1, 3])).sum().backward();
  assert.deepEqual(await shift.tolist(), [1, 1, 1]);
  const noBroadcast = new DDP(new WithBuffer(), { broadcastBuffers: false });
  const s2 = (noBroadcast.module as unknown as { shift: Tensor }).shift;
  s2.fill_(rank + 1);
  noBroadcast.forward(torch.ones([1, 3])).sum().backward();
  assert.deepEqual(await s2.tolist(), [rank + 1, rank + 1, rank + 1]);
});

await check("options are checked", () => {
  const m = new nn.Linear(2, 2);
  assert.throws(() => new DDP(m, { bucketCapMb: -1 }), /bucketCapMb/);
  assert.throws(() => new DDP(m, { bucketCap: 1 } as never), /unexpected keyword argument 'bucketCap'/);
  assert.throws(() => new DDP(m.requiresGrad_(false)), /doesn't have any parameter that requires a gradient/);
});

// ---- overlap: rank 0 trains; the other ranks join each bucket's all-reduce DELAY ms after the
// previous one finished (a link that takes DELAY per collective). In each of three rounds rank 0
// measures compute (a step without synchronization), communication (the same all-reduces with
// nothing to compute, through the same delays; DELAY makes it about equal to the compute) and a
// synchronized step: without overlap the step would take compute + communication. The best round
// counts (the machine is shared: each round's three numbers are taken back to back).
await check("overlap: the all-reduces of early buckets run while backward computes (a step takes less than compute + communication)", async () => {
  torch.manualSeed(11);
  const model = new nn.Sequential(...Array.from({ length: 10 }, () => new nn.Linear(320, 320)));
  const ddp = new DDP(model, { bucketCapMb: 0.4 });
  const params = [...model.parameters()];
  const x = torch.randn([1536, 320]);
  const step = () => {
    ddp.forward(x).pow(2).mean().backward();
    for (const p of params) p.grad!._contiguousHost(); // every reduced gradient has arrived
    model.zeroGrad();
  };
  step(); // one bucket
  step(); // rebuilt buckets
  const buckets = ddp._bucketIndices();
  assert.ok(buckets.length >= 3, `${buckets.length} buckets`);
  const numels = buckets.map((b) => b.reduce((s, i) => s + params[i]!.numel(), 0));
  const ROUNDS = 3;
  if (rank === 0) {
    // how many buckets were on their way when each gradient arrived (the test's hooks run after DDP's)
    const launchedAt: number[] = [];
    const rounds: { compute: number; comm: number; step: number }[] = [];
    for (let k = 0; k < ROUNDS; k++) {
      let t0 = performance.now();
      ddp.noSync(step);
      const compute = performance.now() - t0;
      const delay = compute / buckets.length;
      await store.set(`overlap/${k}/comm`, String(delay));
      t0 = performance.now();
      await Promise.all(numels.map((m) => dist.allReduce(torch.zeros([m]), { op: dist.ReduceOp.AVG, asyncOp: true })!.wait()));
      const comm = performance.now() - t0;
      const hooks = k === 0 ? params.map((p) => p.registerPostAccumulateGradHook(() => launchedAt.push(ddp._reducer.buckets.filter((b) => b.work).length))) : [];
      await store.set(`overlap/${k}/step`, String(delay));
      t0 = performance.now();
      step();
      rounds.push({ compute, comm, step: performance.now() - t0 });
      for (const h of hooks) h.remove();
    }
    console.log(`overlap at ${n} ranks (${buckets.length} buckets): ${rounds.map((r) => `compute ${r.compute.toFixed(0)} + communication ${r.comm.toFixed(0)} vs step ${r.step.toFixed(0)} ms`).join("; ")}`);
    assert.equal(launchedAt.length, params.length);
    assert.ok(launchedAt.slice(0, -1).some((k) => k > 0), `no bucket was launched before the last gradient: ${launchedAt}`);
    const best = rounds.reduce((a, r) => (r.step / (r.compute + r.comm) < a.step / (a.compute + a.comm) ? r : a));
    assert.ok(best.step < best.compute + best.comm, `step ${best.step.toFixed(0)} ms >= compute ${best.compute.toFixed(0)} ms + communication ${best.comm.toFixed(0)} ms`);
  } else
    for (let k = 0; k < ROUNDS; k++)
      for (const phase of ["comm", "step"]) {
        const delay = Number(await store.get(`overlap/${k}/${phase}`));
        for (const m of numels) {
          await new Promise((r) => setTimeout(r, delay));
          await dist.allReduce(torch.zeros([m]), { op: dist.ReduceOp.AVG, asyncOp: true })!.wait();
        }
      }
  dist.barrier();
});

report(rank);
await dist.destroyProcessGroup();
