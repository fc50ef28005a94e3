// BlockPool: allocation, reference counts, and misuse that must throw without changing the pool.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BlockPool } from "../src/index.js";

/** Everything observable about a pool, to check that a failed call changed nothing. */
const snapshot = (p: BlockPool) => ({
  free: p.free,
  used: p.used,
  refs: Array.from({ length: p.total }, (_, b) => p.refCount(b)),
});

test("block pool: sizes, default block size, usage", () => {
  const p = new BlockPool({ numBlocks: 8 });
  assert.equal(p.blockSize, 16);
  assert.equal(p.total, 8);
  assert.equal(p.free, 8);
  assert.equal(p.used, 0);
  assert.equal(p.usage, 0);
  assert.equal(p.blocksFor(0), 0);
  assert.equal(p.blocksFor(16), 1);
  assert.equal(p.blocksFor(17), 2);
  const a = p.allocate(3)!;
  assert.deepEqual(a, [0, 1, 2]);
  assert.equal(p.free, 5);
  assert.equal(p.used, 3);
  assert.equal(p.usage, 3 / 8);
  assert.equal(new BlockPool({ numBlocks: 2, blockSize: 4 }).blockSize, 4);
  p.validate();
});

test("block pool: allocate is all or nothing", () => {
  const p = new BlockPool({ numBlocks: 4, blockSize: 2 });
  assert.deepEqual(p.allocate(0), []);
  const a = p.allocate(3)!;
  assert.equal(a.length, 3);
  const before = snapshot(p);
  assert.equal(p.allocate(2), null);
  assert.deepEqual(snapshot(p), before);
  assert.deepEqual(p.allocate(1)!.length, 1);
  assert.equal(p.allocate(1), null);
  assert.equal(p.free, 0);
  p.validate();
});

test("block pool: reference counts; a block is free again when its count reaches zero", () => {
  const p = new BlockPool({ numBlocks: 4, blockSize: 2 });
  const [b] = p.allocate(1)!;
  assert.equal(p.refCount(b!), 1);
  assert.equal(p.incRef(b!), 2);
  assert.equal(p.incRef(b!), 3);
  assert.equal(p.decRef(b!), 2);
  assert.equal(p.decRef(b!), 1);
  assert.equal(p.used, 1);
  assert.equal(p.decRef(b!), 0);
  assert.equal(p.isFree(b!), true);
  assert.equal(p.used, 0);
  assert.equal(p.free, 4);
  // release(): one decRef per occurrence, returns blocks freed
  const xs = p.allocate(3)!;
  p.incRefAll([xs[0]!, xs[0]!]);
  assert.equal(p.refCount(xs[0]!), 3);
  assert.equal(p.release([xs[0]!, xs[1]!, xs[0]!]), 1);
  assert.equal(p.refCount(xs[0]!), 1);
  assert.throws(() => p.release(xs), /block 1 is already free/);
  assert.equal(p.release([xs[0]!, xs[2]!]), 2);
  assert.equal(p.free, 4);
  p.validate();
});

test("block pool: every misuse throws a clear error and leaves the pool unchanged", () => {
  const p = new BlockPool({ numBlocks: 4, blockSize: 2 });
  const [a, b] = p.allocate(2)!;
  p.incRef(a!);
  const before = snapshot(p);
  const cases: [() => unknown, RegExp][] = [
    [() => p.decRef(3), /block 3 is already free/],
    [() => p.incRef(3), /block 3 is free; allocate\(\) it first/],
    [() => p.decRef(4), /unknown block id 4 \(the pool has blocks 0\.\.3\)/],
    [() => p.decRef(-1), /unknown block id -1/],
    [() => p.incRef(1.5), /unknown block id 1.5/],
    [() => p.refCount(NaN), /unknown block id NaN/],
    [() => p.decRef("0" as unknown as number), /unknown block id "0"/],
    [() => p.allocate(-1), /allocate: n must be an integer >= 0, got -1/],
    [() => p.allocate(1.5), /allocate: n must be an integer >= 0, got 1.5/],
    [() => p.allocate(NaN), /got NaN/],
    [() => p.allocate(Infinity), /got Infinity/],
    [() => p.blocksFor(-3), /numTokens must be an integer >= 0/],
    // all-or-nothing lists: the valid ids before the bad one are not touched
    [() => p.release([a!, b!, 3]), /release: block 3 is already free/],
    [() => p.release([b!, b!]), /block 1 appears 2 times but has only 1 references/],
    [() => p.release([a!, 9]), /unknown block id 9/],
    [() => p.incRefAll([a!, 2]), /incRefAll: block 2 is free/],
    [() => p.release("x" as unknown as number[]), /expected an array of block ids/],
  ];
  for (const [f, msg] of cases) {
    assert.throws(f, msg);
    assert.deepEqual(snapshot(p), before, `pool changed by a call that threw ${msg}`);
  }
  p.validate();
  // double free after a correct free
  p.release([b!]);
  assert.throws(() => p.decRef(b!), /block 1 is already free \(double free/);
  p.validate();
});

test("block pool: bad constructor arguments", () => {
  assert.throws(() => new BlockPool({ numBlocks: 0 }), /numBlocks must be an integer >= 1, got 0/);
  assert.throws(() => new BlockPool({ numBlocks: 2.5 }), /numBlocks must be an integer >= 1, got 2.5/);
  assert.throws(() => new BlockPool({ numBlocks: 4, blockSize: 0 }), /blockSize must be an integer >= 1, got 0/);
  assert.throws(() => new BlockPool(undefined as never), /expected an options object/);
});
