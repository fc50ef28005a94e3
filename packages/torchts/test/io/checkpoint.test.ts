// torch.save / torch.load: state dicts, optimizer state and RNG state round-trip exactly, and
// resuming from a checkpoint continues a run bit for bit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";

const nn = torch.nn;

function withDir(f: (dir: string) => Promise<void>): () => Promise<void> {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), "torchts-ckpt-"));
    try {
      await f(dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
}

test(
  "nested objects with tensors, Maps and special numbers round-trip",
  withDir(async (dir) => {
    const t = torch.tensor([[1, 2], [3, 4]], { dtype: "float64" });
    const obj = {
      a: t,
      again: t, // shared: stored once, loaded as one tensor
      view: t.t(),
      half: torch.tensor([0.5, -1], { dtype: "bfloat16" }),
      map: new Map<unknown, unknown>([["x", 1], [2, [true, null]]]),
      nums: [NaN, Infinity, -Infinity, -0, 1e-310, 12345678901234],
      big: 2n ** 70n,
      nothing: undefined,
      $tricky: { $t: "0" },
      s: "text",
    };
    const path = join(dir, "obj.pt");
    await torch.save(obj, path);
    assert.deepEqual(readdirSync(dir), ["obj.pt"]);
    const back = await torch.load(path);
    assert.deepEqual(Object.keys(back).sort(), Object.keys(obj).sort());
    assert.deepEqual(await back.a.tolist(), [[1, 2], [3, 4]]);
    assert.equal(back.a.dtype, "float64");
    assert.equal(back.again, back.a);
    assert.deepEqual(await back.view.tolist(), [[1, 3], [2, 4]]);
    assert.equal(back.half.dtype, "bfloat16");
    assert.deepEqual(back.map, new Map<unknown, unknown>([["x", 1], [2, [true, null]]]));
    assert.deepEqual(back.nums, [NaN, Infinity, -Infinity, -0, 1e-310, 12345678901234]);
    assert.ok(Object.is(back.nums[3], -0));
    assert.equal(back.big, 2n ** 70n);
    assert.ok("nothing" in back && back.nothing === undefined);
    assert.deepEqual(back.$tricky, { $t: "0" });
    // the container is a plain safetensors file
    const meta = await torch.safetensors.loadFileMetadata(path);
    assert.equal(meta.format, "torchts.checkpoint/1");
    // in-memory bytes too
    const bytes = await torch.serialization.serialize({ x: torch.ones(2) });
    assert.deepEqual(await (torch.serialization.deserialize(bytes) as { x: torch.Tensor }).x.tolist(), [1, 1]);
  }),
);

test(
  "clear errors for unsupported values and foreign files",
  withDir(async (dir) => {
    const p = join(dir, "x.pt");
    await assert.rejects(torch.save({ f: () => 1 }, p), /torch\.save: cannot save a function at f/);
    await assert.rejects(torch.save({ d: new Date() }, p), /cannot save a Date at d/);
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    await assert.rejects(torch.save(loop, p), /circular reference at self/);
    await torch.safetensors.saveFile({ w: torch.ones(1) }, p);
    await assert.rejects(torch.load(p), /not a torchts checkpoint .*use torch\.safetensors\.loadFile/);
    writeFileSync(p, "garbage!garbage!");
    await assert.rejects(torch.load(p), /^Error: safetensors: .*x\.pt: header length/);
  }),
);

function makeRun() {
  torch.manualSeed(3);
  const model = new nn.Sequential(new nn.Linear(3, 8), new nn.Tanh(), new nn.Dropout(0.1), new nn.Linear(8, 1));
  const opt = new torch.optim.AdamW(model.parameters(), { lr: 0.01 });
  const sched = new torch.optim.lrScheduler.StepLR(opt, 2, 0.5);
  const step = async () => {
    const x = torch.randn(16, 3);
    const loss = model.forward(x).sub(x.sum(1, true)).pow(2).mean();
    opt.zeroGrad();
    loss.backward();
    opt.step();
    sched.step();
    return loss.item();
  };
  return { model, opt, sched, step };
}

test(
  "model + optimizer + scheduler + RNG state: resuming equals the uninterrupted run",
  withDir(async (dir) => {
    const full = makeRun();
    const ref: number[] = [];
    for (let i = 0; i < 8; i++) ref.push(await full.step());

    const a = makeRun();
    for (let i = 0; i < 4; i++) assert.equal(await a.step(), ref[i]);
    const path = join(dir, "run.pt");
    await torch.save(
      { model: a.model.stateDict(), optim: a.opt.stateDict(), sched: a.sched.stateDict(), rng: torch.getRngState(), step: 4 },
      path,
    );
    torch.manualSeed(999); // scramble everything a fresh process would not have
    const b = makeRun();
    const c = await torch.load(path);
    b.model.loadStateDict(c.model);
    b.opt.loadStateDict(c.optim);
    b.sched.loadStateDict(c.sched);
    torch.setRngState(c.rng);
    assert.equal(c.step, 4);
    assert.ok(c.model instanceof Map);
    for (let i = 4; i < 8; i++) assert.equal(await b.step(), ref[i], `step ${i}`);
  }),
);
