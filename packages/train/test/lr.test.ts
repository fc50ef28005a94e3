// Warmup-stable-decay: linear warmup, a flat stretch, then a linear / sqrt / cosine decay to min_lr_factor,
// as the optimizer sees it through LambdaLR.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "torchts";
import { wsdFactor, wsdScheduler, type WsdOptions } from "../src/lr.js";

const o: WsdOptions = { steps: 100, warmupSteps: 10, decayRatio: 0.2, decayType: "linear", minLrFactor: 0 };

test("warmup (s + 1) / (warmup + 1), then 1, then the decay over the last decay_ratio of the steps", () => {
  assert.equal(wsdFactor(0, o), 1 / 11);
  assert.equal(wsdFactor(9, o), 10 / 11);
  for (const s of [10, 50, 79]) assert.equal(wsdFactor(s, o), 1);
  assert.ok(Math.abs(wsdFactor(80, o) - (1 - 1 / 20)) < 1e-12);
  assert.ok(Math.abs(wsdFactor(89, o) - 0.5) < 1e-12);
  assert.equal(wsdFactor(99, o), 0);
  const sqrt = { ...o, decayType: "sqrt" as const };
  assert.ok(Math.abs(wsdFactor(84, sqrt) - (1 - Math.sqrt(5 / 20))) < 1e-12);
  const cos = { ...o, decayType: "cosine" as const, minLrFactor: 0.1 };
  assert.ok(Math.abs(wsdFactor(89, cos) - (0.1 + 0.9 * 0.5)) < 1e-12);
  assert.ok(Math.abs(wsdFactor(99, cos) - 0.1) < 1e-12);
  // decay_ratio -1: decay over every step after warmup
  const all = { ...o, decayRatio: -1 };
  assert.ok(Math.abs(wsdFactor(10, all) - (1 - 1 / 90)) < 1e-12);
  assert.equal(wsdFactor(99, all), 0);
  // no decay at all
  assert.equal(wsdFactor(99, { ...o, decayRatio: 0 }), 1);
});

test("the optimizer's lr follows the factor through LambdaLR, and the schedule resumes from its state", () => {
  const p = torch.zeros([2]).requiresGrad_(true);
  const opt = new torch.optim.AdamW([p], { lr: 1e-3 });
  const sched = wsdScheduler(opt, o);
  const lrs: number[] = [];
  for (let s = 0; s < 100; s++) {
    lrs.push(opt.paramGroups[0]!.lr);
    sched.step();
  }
  lrs.forEach((lr, s) => assert.ok(Math.abs(lr - 1e-3 * wsdFactor(s, o)) < 1e-15, `step ${s}`));
  // a new scheduler loaded with a mid-run state continues identically
  const opt2 = new torch.optim.AdamW([p], { lr: 1e-3 });
  const s2 = wsdScheduler(opt2, o);
  const opt3 = new torch.optim.AdamW([p], { lr: 1e-3 });
  const s3 = wsdScheduler(opt3, o);
  for (let s = 0; s < 40; s++) s2.step();
  s3.loadStateDict(s2.stateDict());
  for (let s = 0; s < 50; s++) {
    s2.step();
    s3.step();
    assert.equal(opt3.paramGroups[0]!.lr, opt2.paramGroups[0]!.lr);
  }
});
