// lr schedulers vs PyTorch 1.13 (values in oracle_sched.ts). Each case: build the scheduler,
// then n x { opt.step(); sched.step() }, recording getLastLr() (and momentum / beta1 for OneCycleLR).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { SCHED } from "./oracle_sched.js";

const L = torch.optim.lrScheduler;
type Opt = torch.optim.Optimizer;

function mk(o: { groups?: [number, number]; lr: number; momentum?: number; adam?: boolean }): Opt {
  const p = torch.zeros(1).requiresGrad_();
  const q = torch.zeros(1).requiresGrad_();
  const params = o.groups ? [{ params: [p], lr: o.groups[0] }, { params: [q], lr: o.groups[1] }] : [p];
  if (o.adam) return new torch.optim.Adam(params as never, { lr: o.lr });
  return new torch.optim.SGD(params as never, { lr: o.lr, momentum: o.momentum ?? 0 });
}

function seq(opt: Opt, s: InstanceType<typeof L.LRScheduler>, n: number, mom = false) {
  const out = [s.getLastLr()];
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    opt.step();
    s.step();
    out.push(s.getLastLr());
    const g = opt.paramGroups[0]!;
    if (mom) ms.push(g.betas ? g.betas[0] : g.momentum);
  }
  return mom ? [out, ms] : out;
}

function close(a: unknown, b: unknown, path = "") {
  if (Array.isArray(b)) {
    assert.ok(Array.isArray(a) && a.length === b.length, `${path}: length ${(a as unknown[])?.length} vs ${b.length}`);
    b.forEach((v, i) => close((a as unknown[])[i], v, `${path}[${i}]`));
  } else assert.ok(Math.abs((a as number) - (b as number)) <= 1e-12 + 1e-12 * Math.abs(b as number), `${path}: ${a} vs ${b}`);
}

const cases: Record<string, () => unknown> = {
  step: () => { const o = mk({ groups: [0.1, 0.01], lr: 0.1 }); return seq(o, new L.StepLR(o, 3, 0.5), 10); },
  multistep: () => { const o = mk({ lr: 0.1 }); return seq(o, new L.MultiStepLR(o, [2, 5, 5, 8], 0.1), 10); },
  exp: () => { const o = mk({ lr: 0.1 }); return seq(o, new L.ExponentialLR(o, 0.9), 8); },
  cos: () => { const o = mk({ lr: 0.1 }); return seq(o, new L.CosineAnnealingLR(o, 5, 0.01), 15); },
  linear: () => {
    const o = mk({ lr: 0.1 });
    return seq(o, new L.LinearLR(o, { startFactor: 0.25, endFactor: 1.0, totalIters: 4 }), 7);
  },
  lambda: () => { const o = mk({ lr: 0.1 }); return seq(o, new L.LambdaLR(o, (e) => 0.95 ** e), 6); },
  onecycle_sgd: () => {
    const o = mk({ lr: 0.1, momentum: 0.9 });
    return seq(o, new L.OneCycleLR(o, 1.0, { totalSteps: 10 }), 9, true);
  },
  onecycle_adam3: () => {
    const o = mk({ lr: 0.1, adam: true });
    return seq(o, new L.OneCycleLR(o, 0.5, { totalSteps: 12, threePhase: true, annealStrategy: "linear", pctStart: 0.25 }), 11, true);
  },
  sequential: () => {
    const o = mk({ lr: 1.0 });
    const s1 = new L.LinearLR(o, { startFactor: 0.1, totalIters: 3 });
    const s2 = new L.ExponentialLR(o, 0.9);
    return seq(o, new L.SequentialLR(o, [s1, s2], [3]), 10);
  },
  sequential_cos: () => {
    const o = mk({ lr: 1.0 });
    const s1 = new L.ConstantLR(o, 0.5, 2);
    const s2 = new L.CosineAnnealingLR(o, 4);
    return seq(o, new L.SequentialLR(o, [s1, s2], [2]), 8);
  },
};

for (const [name, f] of Object.entries(cases))
  test(`lrScheduler ${name} matches PyTorch's lr sequence`, () => close(f(), SCHED[name], name));

test("lrScheduler OneCycleLR refuses to step past totalSteps", () => {
  const o = mk({ lr: 0.1, momentum: 0.9 });
  const s = new L.OneCycleLR(o, 1.0, { totalSteps: 3 });
  s.step();
  s.step();
  s.step();
  assert.throws(() => s.step(), /Tried to step 4 times. The specified number of total steps is 3/);
});

test("lrScheduler stateDict round trip continues the same sequence", () => {
  const o = mk({ lr: 0.1 });
  const s = new L.CosineAnnealingLR(o, 5, 0.01);
  for (let i = 0; i < 3; i++) s.step();
  const sd = s.stateDict();
  assert.equal(sd.lastEpoch, 3);
  assert.ok(!("optimizer" in sd));
  const o2 = mk({ lr: 0.1 });
  const s2 = new L.CosineAnnealingLR(o2, 5, 0.01);
  s2.loadStateDict(sd);
  o2.paramGroups[0]!.lr = o.paramGroups[0]!.lr;
  for (let i = 0; i < 5; i++) {
    s.step();
    s2.step();
    close(s2.getLastLr(), s.getLastLr(), `step ${i}`);
  }
  close(s2.getLastLr(), SCHED.cos[8], "cos[8]");

  const o3 = mk({ lr: 1.0 });
  const seqS = new L.SequentialLR(o3, [new L.LinearLR(o3, { startFactor: 0.1, totalIters: 3 }), new L.ExponentialLR(o3, 0.9)], [3]);
  for (let i = 0; i < 4; i++) seqS.step();
  const sd3 = seqS.stateDict();
  assert.equal((sd3._schedulers as unknown[]).length, 2);
  const o4 = mk({ lr: 1.0 });
  const seq4 = new L.SequentialLR(o4, [new L.LinearLR(o4, { startFactor: 0.1, totalIters: 3 }), new L.ExponentialLR(o4, 0.9)], [3]);
  seq4.loadStateDict(sd3);
  o4.paramGroups[0]!.lr = o3.paramGroups[0]!.lr;
  seq4.step();
  close(seq4.getLastLr(), SCHED.sequential[5], "sequential[5]");
});

test("lrScheduler step(epoch) uses the closed form", () => {
  const o = mk({ lr: 0.1 });
  const s = new L.StepLR(o, 3, 0.5);
  s.step(7);
  close(s.getLastLr(), [0.025]);
});
