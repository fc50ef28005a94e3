// Run by test/distributed/checkpoint.test.ts under `torchts run`. argv: <mode> <dir> <shared>
//   save: at any world size, checks save/load round trips, resharding within the run, overwriting,
//         asyncSave, errors (in <dir>); saves state() to <shared>/shared<N> for other world sizes
//   load: loads every other <shared>/shared<M> into the saved and other layouts (saved at 4, loaded at
//         2 or 1); the save run at 4 ranks does it too (saved at 2, loaded at 4)
// Every tensor's values are a function of its global index, so any layout can be checked.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { check, report } from "./checks.js";
const dist = torch.distributed;
const dcp = dist.checkpoint;
const { Shard, Replicate, distributeTensor } = dist.tensor;
type Placement = InstanceType<typeof dist.tensor.Placement>;

const [mode, dir, shared] = process.argv.slice(2) as [string, string, string];
await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const mesh = dist.initDeviceMesh("cpu", [n]);
const mesh2 = n === 4 ? dist.initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] }) : null;

const values = (shape: number[], k: number) => torch.arange(shape.reduce((a, b) => a * b, 1)).reshape(shape).mul(k).add(0.5);
const dt = (shape: number[], k: number, placements: Placement[], m = mesh) => distributeTensor(values(shape, k), m, placements);

/** The shared checkpoint's state: plain tensors, uneven shards on dim 0 and 1, a nested optimizer-like tree and plain values. */
function state(layout: "saved" | "other", fill: "values" | "zeros") {
  const mk = (shape: number[], k: number, placements: Placement[]) => {
    const d = dt(shape, k, placements);
    if (fill === "zeros") torch.noGrad(() => d.zero_());
    return d;
  };
  const plain = (shape: number[], k: number) => (fill === "zeros" ? torch.zeros(shape) : values(shape, k));
  const s = layout === "saved";
  return {
    model: new Map<string, Tensor>([
      ["embed.weight", mk([11, 4], 1, [s ? Shard(0) : Shard(1)])],
      ["proj.weight", mk([6, 9], 2, [s ? Shard(1) : Shard(0)])],
      ["proj.bias", mk([5], 3, [s ? Shard(0) : Replicate()])],
      ["norm.weight", plain([7], 4)],
    ]),
    optim: { state: { "embed.weight": { step: fill === "zeros" ? 0 : 12, expAvg: mk([11, 4], 5, [s ? Shard(0) : Replicate()]) } }, lr: fill === "zeros" ? 0 : 3e-4 },
    extra: { epoch: fill === "zeros" ? 0 : 3, name: fill === "zeros" ? "" : "run-7", best: fill === "zeros" ? 0 : Infinity },
  };
}

async function assertState(got: ReturnType<typeof state>): Promise<void> {
  const want = state("saved", "values");
  for (const [k, v] of want.model) assert.deepEqual(await got.model.get(k)!.tolist(), await v.tolist(), k);
  assert.deepEqual(await got.optim.state["embed.weight"].expAvg.tolist(), await want.optim.state["embed.weight"].expAvg.tolist());
  assert.equal(got.optim.state["embed.weight"].step, 12);
  assert.equal(got.optim.lr, 3e-4);
  assert.deepEqual(got.extra, { epoch: 3, name: "run-7", best: Infinity });
}

if (mode === "save") {
  await check("save then load at the same world size, into the saved layout and into others (resharding)", async () => {
    const d = join(dir, "same");
    await dcp.save(state("saved", "values"), { checkpointId: d });
    for (const layout of ["saved", "other"] as const) {
      const into = state(layout, "zeros");
      await dcp.load(into, { checkpointId: d });
      await assertState(into);
    }
  });

  await check("each rank writes only its pieces: a replicated tensor is written once, shards by their holders", async () => {
    const d = join(dir, "files");
    const meta = await dcp.save(state("saved", "values"), { checkpointId: d });
    assert.equal(meta.worldSize, n);
    assert.equal(meta.tensors["model.norm.weight"]!.chunks.length, 1);
    const emb = meta.tensors["model.embed.weight"]!.chunks; // [11, 4] in chunks of 3 (4 ranks) or 6 (2 ranks)
    assert.deepEqual(emb.map((c) => c.offsets[0]), [...Array(n).keys()].map((r) => r * Math.ceil(11 / n)));
    assert.deepEqual(emb.map((c) => c.file), [...Array(n).keys()].map((r) => `__${r}_${meta.saveId}.distcp`));
    dist.barrier();
    const files = readdirSync(d).sort();
    assert.deepEqual(files, [".metadata", ...[...Array(n).keys()].map((r) => `__${r}_${meta.saveId}.distcp`)].sort());
  });

  await check("a 2-d mesh (Shard, Shard) and nested shards round-trip through a 1-d layout", async () => {
    if (!mesh2) return;
    const d = join(dir, "mesh2");
    const a = dt([7, 5], 2, [Shard(0), Shard(1)], mesh2);
    const b = dt([9, 2], 3, [Shard(0), Shard(0)], mesh2);
    await dcp.save({ a, b }, { checkpointId: d });
    const into = { a: dt([7, 5], 0, [Shard(1)]), b: dt([9, 2], 0, [Replicate()]) };
    torch.noGrad(() => (into.a.zero_(), into.b.zero_()));
    await dcp.load(into, { checkpointId: d });
    assert.deepEqual(await into.a.fullTensor().tolist(), await values([7, 5], 2).tolist());
    assert.deepEqual(await into.b.fullTensor().tolist(), await values([9, 2], 3).tolist());
  });

  await check("saving again over a checkpoint replaces it: the old files go once the new metadata is in", async () => {
    const d = join(dir, "again");
    const first = await dcp.save({ w: plainOf(1) }, { checkpointId: d });
    const second = await dcp.save({ w: plainOf(2) }, { checkpointId: d });
    assert.notEqual(first.saveId, second.saveId);
    dist.barrier();
    assert.ok(readdirSync(d).every((f) => f === ".metadata" || f.includes(second.saveId)), readdirSync(d).join(", "));
    const into = { w: torch.zeros([3]) };
    await dcp.load(into, { checkpointId: d });
    assert.deepEqual(await into.w.tolist(), [2, 2, 2]);
  });

  await check("asyncSave returns once staged: writing the tensors right after does not change the checkpoint", async () => {
    const d = join(dir, "async");
    const w = dt([8, 3], 1, [Shard(0)]);
    const b = torch.full([4], 7);
    const pending = dcp.asyncSave({ w, b }, { checkpointId: d });
    torch.noGrad(() => (w.mul_(0), b.fill_(-1))); // the training goes on
    // a training collective on the default group meanwhile (the save talks on its own)
    const t = torch.ones([2]);
    dist.allReduce(t);
    assert.deepEqual(await t.tolist(), [n, n]);
    await pending;
    const into = { w: dt([8, 3], 0, [Replicate()]), b: torch.zeros([4]) };
    await dcp.load(into, { checkpointId: d });
    assert.deepEqual(await into.w.fullTensor().tolist(), await values([8, 3], 1).tolist());
    assert.deepEqual(await into.b.tolist(), [7, 7, 7, 7]);
  });

  await check("load errors: a missing folder, a missing key, a shape mismatch", async () => {
    await assert.rejects(dcp.load({ w: torch.zeros([3]) }, { checkpointId: join(dir, "nothing-here") }), /no checkpoint at .*nothing-here/);
    await assert.rejects(dcp.load({ nope: torch.zeros([3]) }, { checkpointId: join(dir, "again") }), /Missing key in checkpoint state_dict: nope/);
    await assert.rejects(dcp.load({ w: torch.zeros([4]) }, { checkpointId: join(dir, "again") }), /size mismatch for w: the checkpoint has shape \[3\], the state dict \[4\]/);
  });

  await check(`the shared checkpoint for other world sizes (saved at ${n})`, async () => {
    await dcp.save(state("saved", "values"), { checkpointId: join(shared, `shared${n}`) });
  });
}
if (mode === "load" || n === 4) {
  // (the 4-rank save run also loads what the 2-rank run saved)
  const found = readdirSync(shared).filter((f) => /^shared\d+$/.test(f) && f !== `shared${n}`).sort();
  await check(`checkpoints saved at other world sizes are there (${found.join(", ")})`, () => assert.ok(found.length > 0));
  for (const from of found)
    await check(`a checkpoint saved at ${from.slice(6)} ranks loads at ${n}, into the saved and other layouts`, async () => {
      const meta = JSON.parse(readFileSync(join(shared, from, ".metadata"), "utf8")) as { worldSize: number };
      assert.equal(meta.worldSize, Number(from.slice(6)));
      for (const layout of ["saved", "other"] as const) {
        const into = state(layout, "zeros");
        await dcp.load(into, { checkpointId: join(shared, from) });
        await assertState(into);
      }
    });
}

function plainOf(v: number): Tensor {
  return torch.full([3], v);
}

report(rank);
await dist.destroyProcessGroup();
