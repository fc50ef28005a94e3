// Optimizers vs PyTorch 1.13. Oracle (values in oracle_optim.ts):
//   vals(n,k) = [round(sin(i*0.37+k)*0.5, 6) for i in range(n)]
//   W = vals(6,1).reshape(3,2), b = vals(3,2), x = vals(8,3).reshape(4,2), y = vals(12,4).reshape(4,3)
//   6 x { zero_grad; loss = ((x @ W.T + b - y)**2).mean(); loss.backward(); opt.step() }
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { ORACLE } from "./oracle_optim.js";

const vals = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.round(Math.sin(i * 0.37 + k) * 0.5 * 1e6) / 1e6);

function problem() {
  const W = torch.tensor(vals(6, 1)).reshape(3, 2).detach().requiresGrad_();
  const b = torch.tensor(vals(3, 2)).requiresGrad_();
  const x = torch.tensor(vals(8, 3)).reshape(4, 2);
  const y = torch.tensor(vals(12, 4)).reshape(4, 3);
  return { W, b, x, y };
}

type Make = (ps: torch.Tensor[]) => torch.optim.Optimizer;
const cases: Record<string, Make> = {
  sgd_plain: (p) => new torch.optim.SGD(p, { lr: 0.1 }),
  sgd_momentum: (p) => new torch.optim.SGD(p, { lr: 0.1, momentum: 0.9, dampening: 0.1, weightDecay: 0.01 }),
  sgd_nesterov: (p) => new torch.optim.SGD(p, { lr: 0.1, momentum: 0.9, nesterov: true, weightDecay: 0.05 }),
  sgd_maximize: (p) => new torch.optim.SGD(p, { lr: 0.05, momentum: 0.5, maximize: true }),
  adam: (p) => new torch.optim.Adam(p, { lr: 0.05 }),
  adam_wd_amsgrad: (p) => new torch.optim.Adam(p, { lr: 0.05, betas: [0.8, 0.9], eps: 1e-6, weightDecay: 0.1, amsgrad: true }),
  adamw: (p) => new torch.optim.AdamW(p, { lr: 0.05 }),
  adamw_amsgrad: (p) => new torch.optim.AdamW(p, { lr: 0.05, weightDecay: 0.2, amsgrad: true }),
  rmsprop: (p) => new torch.optim.RMSprop(p, { lr: 0.01 }),
  rmsprop_centered_momentum: (p) =>
    new torch.optim.RMSprop(p, { lr: 0.01, alpha: 0.9, momentum: 0.8, centered: true, weightDecay: 0.1 }),
  adagrad: (p) => new torch.optim.Adagrad(p, { lr: 0.1 }),
  adagrad_decay: (p) => new torch.optim.Adagrad(p, { lr: 0.1, lrDecay: 0.05, weightDecay: 0.1, initialAccumulatorValue: 0.2 }),
};

function close(a: number[], b: number[], tol: number, what: string) {
  assert.equal(a.length, b.length, what);
  a.forEach((v, i) => assert.ok(Math.abs(v - b[i]!) <= tol * (1 + Math.abs(b[i]!)), `${what}[${i}]: ${v} vs ${b[i]}`));
}

async function run(opt: torch.optim.Optimizer, p: ReturnType<typeof problem>, steps: number, losses: number[] = []) {
  for (let s = 0; s < steps; s++) {
    opt.zeroGrad();
    const loss = p.x.matmul(p.W.t()).add(p.b).sub(p.y).pow(2).mean();
    losses.push(await loss.item());
    loss.backward();
    opt.step();
  }
  return losses;
}

for (const [name, make] of Object.entries(cases)) {
  test(`optim ${name} matches PyTorch over 6 steps`, async () => {
    const p = problem();
    const losses = await run(make([p.W, p.b]), p, 6);
    const ref = ORACLE[name]!;
    close(losses, ref.losses, 1e-5, `${name} losses`);
    close(Array.from(await p.W.data()), ref.W, 1e-5, `${name} W`);
    close(Array.from(await p.b.data()), ref.b, 1e-5, `${name} b`);
  });

  test(`optim ${name} stateDict round trip resumes exactly`, async () => {
    const p = problem();
    const opt = make([p.W, p.b]);
    await run(opt, p, 3);
    const sd = opt.stateDict();
    // a fresh problem whose params are copied from the first, with a fresh optimizer that loads the state
    const q = problem();
    torch.noGrad(() => {
      q.W.copy_(p.W);
      q.b.copy_(p.b);
    });
    const opt2 = make([q.W, q.b]);
    opt2.loadStateDict(sd);
    await run(opt2, q, 3);
    const ref = ORACLE[name]!;
    close(Array.from(await q.W.data()), ref.W, 1e-5, `${name} resumed W`);
    close(Array.from(await q.b.data()), ref.b, 1e-5, `${name} resumed b`);
  });
}

test("optim param groups carry their own options; addParamGroup; errors", async () => {
  const a = torch.ones(2).requiresGrad_();
  const b = torch.ones(2).requiresGrad_();
  const opt = new torch.optim.SGD([{ params: [a] }, { params: [b], lr: 0.5 }], { lr: 0.1 });
  assert.equal(opt.paramGroups[0]!.lr, 0.1);
  assert.equal(opt.paramGroups[1]!.lr, 0.5);
  a.sum().backward();
  b.sum().backward();
  opt.step();
  assert.deepEqual(await a.tolist(), [0.9, 0.9].map((v) => Math.fround(v)));
  assert.deepEqual(await b.tolist(), [0.5, 0.5]);
  assert.throws(() => opt.addParamGroup({ params: [a] }), /some parameters appear in more than one parameter group/);
  const c = torch.zeros(1).requiresGrad_();
  opt.addParamGroup({ params: [c], momentum: 0.9 });
  assert.equal(opt.paramGroups[2]!.lr, 0.1);
  assert.equal(opt.paramGroups[2]!.momentum, 0.9);
  assert.throws(() => new torch.optim.SGD([], { lr: 0.1 }), /empty parameter list/);
  assert.throws(() => new torch.optim.Adam([a], { lr: -1 }), /Invalid learning rate: -1/);
  assert.throws(() => new torch.optim.SGD([a], { lr: 0.1, nesterov: true }), /Nesterov momentum requires a momentum and zero dampening/);
  assert.throws(() => new torch.optim.Adam([a], { betas: [1.0, 0.9] }), /Invalid beta parameter at index 0/);
});

test("optim zeroGrad setToNone and zero-fill", async () => {
  const a = torch.ones(2).requiresGrad_();
  const opt = new torch.optim.SGD([a], { lr: 0.1 });
  a.sum().backward();
  opt.zeroGrad({ setToNone: false });
  assert.deepEqual(await a.grad!.tolist(), [0, 0]);
  opt.zeroGrad();
  assert.equal(a.grad, null);
  // params without grad are skipped by step
  opt.step();
  assert.deepEqual(await a.tolist(), [1, 1]);
});

test("optim step(closure) evaluates the closure with grad enabled and returns its loss", async () => {
  const a = torch.tensor([2], { dtype: "float32" }).requiresGrad_();
  const opt = new torch.optim.SGD([a], { lr: 0.25 });
  const loss = torch.noGrad(() =>
    opt.step(() => {
      opt.zeroGrad();
      const l = a.mul(a).sum();
      l.backward();
      return l;
    }),
  );
  assert.equal(await (loss as torch.Tensor).item(), 4);
  assert.deepEqual(await a.tolist(), [1]); // 2 - 0.25 * 4
});

test("optim works in every eager mode", async () => {
  for (const mode of ["debug", "strict", "fused"] as const) {
    await torch.withEagerMode(mode, async () => {
      const p = problem();
      await run(new torch.optim.AdamW([p.W, p.b], { lr: 0.05, weightDecay: 0.2, amsgrad: true }), p, 6);
      close(Array.from(await p.W.data()), ORACLE.adamw_amsgrad!.W, 1e-5, `${mode} W`);
    });
  }
});

test("Adam/AdamW fused: true gives the per-op update's exact values in a few fused kernels", async () => {
  const values = async (fused: boolean, amsgrad: boolean, Opt: typeof torch.optim.Adam) => {
    const p = problem();
    torch.sync(); // pending work of earlier (fused-mode) tests must not land in this profile
    const prof = torch.profiler.profile();
    await run(new Opt([p.W, p.b], { lr: 0.05, weightDecay: 0.2, amsgrad, fused }), p, 6);
    prof.stop();
    const ka = prof.keyAverages();
    const kernels = ka.filter((k) => k.name.startsWith("fused_elementwise")).reduce((s, k) => s + k.count, 0);
    const total = ka.reduce((s, k) => s + k.count, 0);
    return { W: Array.from(await p.W.data()), b: Array.from(await p.b.data()), kernels, total };
  };
  for (const Opt of [torch.optim.Adam, torch.optim.AdamW])
    for (const amsgrad of [false, true]) {
      const plain = await values(false, amsgrad, Opt);
      const fused = await values(true, amsgrad, Opt);
      assert.deepEqual(fused.W, plain.W, `${Opt.name} amsgrad=${amsgrad}: W`);
      assert.deepEqual(fused.b, plain.b, `${Opt.name} amsgrad=${amsgrad}: b`);
      assert.equal(plain.kernels, 0);
      // the same forward/backward; the update's ~14 single-op kernels per parameter become a few
      assert.ok(fused.kernels >= 12 && fused.kernels <= 6 * 12, `${fused.kernels} fused kernels for 6 steps x 2 parameters`);
      assert.ok(fused.total < 0.75 * plain.total, `kernels: fused ${fused.total}, per-op ${plain.total}`);
    }
  close(Array.from((await (async () => {
    const p = problem();
    await run(new torch.optim.AdamW([p.W, p.b], { lr: 0.05, weightDecay: 0.2, amsgrad: true, fused: true }), p, 6);
    return p.W.data();
  })())), ORACLE.adamw_amsgrad!.W, 1e-5, "fused AdamW vs PyTorch");
  assert.throws(() => new torch.optim.Adam([problem().W], { fused: 1 as unknown as boolean }), /fused must be a boolean/);
});
