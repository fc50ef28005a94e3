// Random numbers: Philox counter-based streams that are identical in every eager mode (and
// on every device), but deliberately not PyTorch's mt19937 CPU stream, so the checks here are
// reproducibility and distribution sanity, not PyTorch values.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const MODES = ["debug", "strict", "fused"] as const;

test("random: manualSeed(0); rand(5) is identical in all eager modes", async () => {
  const runs: unknown[] = [];
  for (const m of MODES)
    runs.push(
      await torch.withEagerMode(m, async () => {
        torch.manualSeed(0);
        const a = torch.rand(5);
        const b = torch.randn(2, 3); // the second draw continues the same stream
        return [await a.tolist(), await b.tolist()];
      }),
    );
  assert.deepEqual(runs[1], runs[0]);
  assert.deepEqual(runs[2], runs[0]);
  const [u] = runs[0] as [number[]];
  assert.equal(u.length, 5);
  assert.ok(u.every((v) => v >= 0 && v < 1));
  assert.equal(new Set(u).size, 5);
});

test("random: the fused-mode stream does not depend on when the graph runs", async () => {
  torch.manualSeed(3);
  const eager = [await torch.rand(4).tolist(), await torch.rand(4).tolist()];
  const lazy = await torch.withEagerMode("fused", async () => {
    torch.manualSeed(3);
    const a = torch.rand(4);
    const b = torch.rand(4);
    return [await b.tolist(), await a.tolist()].reverse(); // read in the opposite order
  });
  assert.deepEqual(lazy, eager);
});

test("random: seeding, generators and RNG state", async () => {
  torch.manualSeed(42);
  const a = await torch.rand(3).tolist();
  const state = torch.getRngState();
  const b = await torch.rand(3).tolist();
  torch.manualSeed(42);
  assert.deepEqual(await torch.rand(3).tolist(), a);
  torch.setRngState(state);
  assert.deepEqual(await torch.rand(3).tolist(), b);
  assert.notDeepEqual(a, b);
  const g = new torch.Generator(42);
  assert.deepEqual(await torch.rand(3, { generator: g }).tolist(), a, "a Generator seeded alike gives the same stream");
  torch.manualSeed(1);
  assert.notDeepEqual(await torch.rand(3).tolist(), a);
});

test("random: randn has mean ~0 and std ~1 over 10k samples", async () => {
  torch.manualSeed(0);
  const x = torch.randn(10000);
  assert.equal(x.dtype, "float32");
  const mean = await x.mean().item();
  const std = await x.std().item();
  // 10k samples: the standard error of the mean is 0.01
  assert.ok(Math.abs(mean) < 0.04, `mean ${mean}`);
  assert.ok(Math.abs(std - 1) < 0.04, `std ${std}`);
  const frac = await x.abs().lt(1).float().mean().item(); // P(|z| < 1) = 0.6827
  assert.ok(Math.abs(frac - 0.6827) < 0.03, `P(|z|<1) ${frac}`);
  const u = torch.rand(10000);
  assert.ok(Math.abs((await u.mean().item()) - 0.5) < 0.02);
  assert.ok((await u.min().item()) >= 0 && (await u.max().item()) < 1);
  const n = torch.normal(3, 2, [10000]);
  assert.ok(Math.abs((await n.mean().item()) - 3) < 0.1);
  assert.ok(Math.abs((await n.std().item()) - 2) < 0.1);
});

test("random: randint stays in [low, high) and hits every value", async () => {
  torch.manualSeed(0);
  const r = torch.randint(-3, 4, [2000]);
  assert.equal(r.dtype, "int64");
  const vals = (await r.tolist()) as number[];
  assert.ok(vals.every((v) => Number.isInteger(v) && v >= -3 && v < 4));
  assert.deepEqual(
    [...new Set(vals)].sort((p, q) => p - q),
    [-3, -2, -1, 0, 1, 2, 3],
  );
  const r2 = torch.randint(5, [3, 4]);
  assert.deepEqual(r2.shape, [3, 4]);
  assert.ok(((await r2.flatten().tolist()) as number[]).every((v) => v >= 0 && v < 5));
  assert.throws(() => torch.randint(3, 3, [2]), /from=3 >= to=3/);
});

test("random: randperm is a permutation", async () => {
  torch.manualSeed(0);
  const p = torch.randperm(50);
  assert.equal(p.dtype, "int64");
  const v = (await p.tolist()) as number[];
  assert.deepEqual(
    [...v].sort((a, b) => a - b),
    Array.from({ length: 50 }, (_, i) => i),
  );
  assert.notDeepEqual(
    v,
    Array.from({ length: 50 }, (_, i) => i),
  );
});

test("random: bernoulli", async () => {
  torch.manualSeed(0);
  const p = torch.tensor([0, 1, 0.5]).expand(4000, 3).contiguous();
  const b = torch.bernoulli(p);
  assert.equal(b.dtype, "float32");
  const m = (await b.mean(0).tolist()) as number[];
  assert.equal(m[0], 0);
  assert.equal(m[1], 1);
  assert.ok(Math.abs(m[2]! - 0.5) < 0.04, `mean ${m[2]}`);
  const vals = new Set((await b.flatten().tolist()) as number[]);
  assert.deepEqual([...vals].sort(), [0, 1]);
});

test("random: multinomial", async () => {
  torch.manualSeed(0);
  const probs = torch.tensor([0, 1, 3]);
  const s = torch.multinomial(probs.float(), 4000, { replacement: true });
  assert.equal(s.dtype, "int64");
  assert.deepEqual(s.shape, [4000]);
  const v = (await s.tolist()) as number[];
  assert.equal(v.filter((i) => i === 0).length, 0, "zero-probability class never drawn");
  const frac2 = v.filter((i) => i === 2).length / v.length;
  assert.ok(Math.abs(frac2 - 0.75) < 0.04, `P(2) ${frac2}`);

  const w = torch.multinomial(
    torch.tensor(
      [
        [1, 1, 1, 1],
        [0, 5, 1, 0],
      ],
      { dtype: "float32" },
    ),
    2,
  );
  assert.deepEqual(w.shape, [2, 2]);
  const rows = (await w.tolist()) as number[][];
  assert.notEqual(rows[0]![0], rows[0]![1], "without replacement: distinct indices");
  assert.deepEqual([...rows[1]!].sort(), [1, 2], "only the nonzero classes");
  assert.throws(() => torch.multinomial(torch.ones(3), 4), /cannot sample n_sample > prob_dist.size\(-1\)/);
});
