// torch.utils.data: datasets, default collation, DataLoader batching/shuffling (sync and
// async with prefetch), randomSplit.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const { DataLoader, TensorDataset, Dataset, IterableDataset, randomSplit, defaultCollate } = torch.utils.data;

function squares(n: number) {
  const x = torch.arange(n, { dtype: "float32" }).reshape(n, 1);
  const y = torch.arange(n).mul(torch.arange(n));
  return new TensorDataset(x, y);
}

test("TensorDataset indexes every tensor along dim 0", async () => {
  const ds = squares(5);
  assert.equal(ds.length, 5);
  const [x, y] = ds.getItem(3);
  assert.deepEqual(await x!.tolist(), [3]);
  assert.equal(await y!.item(), 9);
  assert.throws(() => new TensorDataset(torch.zeros(3), torch.zeros(4)), /Size mismatch between tensors/);
});

test("DataLoader batches in order, keeps or drops the last partial batch", async () => {
  const ds = squares(10);
  const dl = new DataLoader(ds, { batchSize: 4 });
  assert.equal(dl.length, 3);
  const batches = [...dl];
  assert.equal(batches.length, 3);
  assert.deepEqual(batches[0][0].shape, [4, 1]);
  assert.deepEqual(await batches[0][1].tolist(), [0, 1, 4, 9]);
  assert.deepEqual(await batches[2][1].tolist(), [64, 81]);
  const dropped = new DataLoader(ds, { batchSize: 4, dropLast: true });
  assert.equal(dropped.length, 2);
  assert.equal([...dropped].length, 2);
  // batchSize null: items pass through uncollated
  const single = [...new DataLoader(ds, { batchSize: null })];
  assert.equal(single.length, 10);
  assert.deepEqual(single[2][0].shape, [1]);
});

test("shuffle is a permutation, reproducible with a torch.Generator or torch.manualSeed", async () => {
  const ds = squares(12);
  const order = async (dl: Iterable<torch.Tensor[]>) => {
    const out: number[] = [];
    for (const [x] of dl) out.push(...((await x!.flatten().tolist()) as number[]));
    return out;
  };
  const a = await order(new DataLoader(ds, { batchSize: 5, shuffle: true, generator: new torch.Generator(42) }));
  const b = await order(new DataLoader(ds, { batchSize: 5, shuffle: true, generator: new torch.Generator(42) }));
  assert.deepEqual(a, b);
  assert.deepEqual([...a].sort((p, q) => p - q), Array.from({ length: 12 }, (_, i) => i));
  assert.notDeepEqual(a, Array.from({ length: 12 }, (_, i) => i));
  // each epoch reshuffles; the same generator seed replays the same epochs
  const g = new torch.Generator(42);
  const dl = new DataLoader(ds, { batchSize: 5, shuffle: true, generator: g });
  const e1 = await order(dl);
  const e2 = await order(dl);
  assert.deepEqual(e1, a);
  assert.notDeepEqual(e1, e2);
  torch.manualSeed(5);
  const m1 = await order(new DataLoader(ds, { batchSize: 3, shuffle: true }));
  torch.manualSeed(5);
  const m2 = await order(new DataLoader(ds, { batchSize: 3, shuffle: true }));
  assert.deepEqual(m1, m2);
});

test("defaultCollate stacks tensors, tensorises numbers, recurses into arrays and objects", async () => {
  const b = defaultCollate([
    { x: torch.tensor([1, 2]), n: 1, f: 0.5, ok: true, s: "a", pair: [1, torch.tensor(3)] },
    { x: torch.tensor([3, 4]), n: 2, f: 1.5, ok: false, s: "b", pair: [2, torch.tensor(4)] },
  ]);
  assert.deepEqual(await b.x.tolist(), [[1, 2], [3, 4]]);
  assert.equal(b.n.dtype, "int64");
  assert.equal(b.f.dtype, "float64");
  assert.deepEqual(await b.f.tolist(), [0.5, 1.5]);
  assert.deepEqual(await b.ok.tolist(), [true, false]);
  assert.deepEqual(b.s, ["a", "b"]);
  assert.deepEqual(await b.pair[0].tolist(), [1, 2]);
  assert.deepEqual(await b.pair[1].tolist(), [3, 4]);
  assert.throws(() => defaultCollate([[1, 2], [3]]), /each element in list of batch should be of equal size/);
});

test("custom Dataset, collateFn and IterableDataset", async () => {
  class Words extends Dataset<string> {
    words = ["a", "bb", "ccc", "dddd", "eeeee"];
    getItem(i: number) {
      return this.words[i]!;
    }
    get length() {
      return this.words.length;
    }
  }
  const dl = new DataLoader(new Words(), { batchSize: 2, collateFn: (b: string[]) => b.join("+") });
  assert.deepEqual([...dl], ["a+bb", "ccc+dddd", "eeeee"]);
  class Count extends IterableDataset<number> {
    *[Symbol.iterator]() {
      for (let i = 0; i < 7; i++) yield i;
    }
  }
  const it = [...new DataLoader(new Count(), { batchSize: 3 })];
  assert.equal(it.length, 3);
  assert.deepEqual(await it[2].tolist(), [6]);
  assert.throws(() => new DataLoader(new Count(), { shuffle: true }), /expected unspecified shuffle option/);
});

test("async iteration prefetches the next batch while the caller works", async () => {
  const fetched: number[] = [];
  class Slow extends Dataset<number> {
    getItem(i: number) {
      fetched.push(i);
      return i;
    }
    get length() {
      return 6;
    }
  }
  const dl = new DataLoader(new Slow(), { batchSize: 2, prefetchFactor: 1 });
  const seen: number[][] = [];
  for await (const b of dl) {
    seen.push((await b.tolist()) as number[]);
    // while we "train" on this batch, the loader has queued the next one
    await new Promise((r) => setImmediate(r));
    if (seen.length < 3) assert.equal(fetched.length, 2 * (seen.length + 1), "next batch prepared during the caller's work");
  }
  assert.deepEqual(seen, [[0, 1], [2, 3], [4, 5]]);
  // async datasets (getItem returning a Promise) work with for await
  class AsyncDs extends Dataset<Promise<number>> {
    async getItem(i: number) {
      return i * 10;
    }
    get length() {
      return 3;
    }
  }
  const out: unknown[] = [];
  for await (const b of new DataLoader(new AsyncDs(), { batchSize: 2 })) out.push(await (b as torch.Tensor).tolist());
  assert.deepEqual(out, [[0, 10], [20]]);
  assert.throws(() => [...new DataLoader(new AsyncDs(), { batchSize: 2 })], /iterate the DataLoader with `for await`/);
});

test("randomSplit partitions the dataset (counts or fractions), reproducibly", async () => {
  const ds = squares(10);
  const [a, b] = randomSplit(ds, [7, 3], { generator: new torch.Generator(1) });
  assert.equal(a!.length, 7);
  assert.equal(b!.length, 3);
  const all = [...a!.indices, ...b!.indices].sort((p, q) => p - q);
  assert.deepEqual(all, Array.from({ length: 10 }, (_, i) => i));
  const [c] = randomSplit(ds, [7, 3], { generator: new torch.Generator(1) });
  assert.deepEqual(c!.indices, a!.indices);
  const parts = torch.utils.data.random_split(ds, [0.5, 0.3, 0.2], { generator: new torch.Generator(2) });
  assert.deepEqual(parts.map((p) => p.length), [5, 3, 2]);
  assert.equal(await (parts[0]!.getItem(0)[1] as torch.Tensor).item(), parts[0]!.indices[0]! ** 2);
  assert.throws(() => randomSplit(ds, [4, 4]), /Sum of input lengths does not equal the length of the input dataset!/);
});
