// SequenceBlocks: a request's block table (append, slots, fork with copy-on-write, release).
import { test } from "node:test";
import assert from "node:assert/strict";
import { BlockPool, RadixCache, SequenceBlocks } from "../src/index.js";

test("sequence blocks: appending allocates blocks as the table fills", () => {
  const pool = new BlockPool({ numBlocks: 8, blockSize: 4 });
  const seq = new SequenceBlocks(pool);
  assert.equal(seq.blocksNeeded(0), 0);
  assert.equal(seq.blocksNeeded(5), 2);
  const r = seq.appendTokens([10, 11, 12, 13, 14])!;
  assert.deepEqual(r, { newBlocks: [0, 1], copies: [], start: 0 });
  assert.equal(seq.numTokens, 5);
  assert.deepEqual(seq.blocks, [0, 1]);
  assert.equal(seq.blocksNeeded(3), 0);
  assert.deepEqual(seq.appendTokens([15, 16, 17])!.newBlocks, []);
  assert.equal(seq.blocksNeeded(1), 1);
  assert.deepEqual(seq.appendTokens([18])!, { newBlocks: [2], copies: [], start: 8 });
  assert.deepEqual(seq.tokens, [10, 11, 12, 13, 14, 15, 16, 17, 18]);
  assert.deepEqual(seq.slot(5), { block: 1, offset: 1 });
  assert.deepEqual(Array.from(seq.slotMapping(3, 9)), [3, 4, 5, 6, 7, 8]);
  assert.deepEqual(seq.appendTokens(new Int32Array([19]))!.start, 9);
  assert.equal(seq.release(), 3);
  assert.equal(pool.free, 8);
  assert.equal(seq.released, true);
});

test("sequence blocks: an append the pool cannot hold returns null and changes nothing", () => {
  const pool = new BlockPool({ numBlocks: 2, blockSize: 2 });
  const seq = new SequenceBlocks(pool);
  seq.appendTokens([1, 2, 3]);
  assert.equal(seq.appendTokens([4, 5, 6]), null);
  assert.deepEqual(seq.tokens, [1, 2, 3]);
  assert.deepEqual(seq.blocks, [0, 1]);
  assert.equal(pool.free, 0);
  assert.ok(seq.appendTokens([4]));
  seq.release();
  pool.validate();
});

test("sequence blocks: fork shares every block; the shared partial block is copied on write", () => {
  const pool = new BlockPool({ numBlocks: 8, blockSize: 4 });
  const parent = new SequenceBlocks(pool);
  parent.appendTokens([1, 2, 3, 4, 5, 6]);
  const child = parent.fork();
  assert.deepEqual(child.blocks, parent.blocks);
  assert.deepEqual(child.tokens, parent.tokens);
  assert.equal(pool.refCount(0), 2);
  assert.equal(pool.refCount(1), 2);
  assert.equal(pool.used, 2);
  assert.equal(parent.blocksNeeded(1), 1, "the shared partial block must be copied");
  const r = parent.appendTokens([7])!;
  assert.deepEqual(r.copies, [{ src: 1, dst: 2, slots: 2 }]);
  assert.deepEqual(parent.blocks, [0, 2]);
  assert.equal(pool.refCount(1), 1, "the child owns block 1 alone now");
  assert.equal(child.blocksNeeded(1), 0, "and writes into it in place");
  assert.deepEqual(child.appendTokens([8])!.copies, []);
  assert.deepEqual(child.blocks, [0, 1]);
  // a full shared last block needs no copy: the next token starts a new block
  const a = new SequenceBlocks(pool);
  a.appendTokens([1, 2, 3, 4]);
  const b = a.fork();
  assert.deepEqual(a.appendTokens([5])!.copies, []);
  assert.equal(pool.refCount(a.blocks[0]!), 2);
  for (const s of [parent, child, a, b]) s.release();
  assert.equal(pool.free, pool.total);
  pool.validate();
});

test("sequence blocks: adoptPrefix takes references on a cache match; sharePrefix drops duplicates", () => {
  const pool = new BlockPool({ numBlocks: 8, blockSize: 2 });
  const cache = new RadixCache(pool);
  const first = new SequenceBlocks(pool);
  first.appendTokens([1, 2, 3, 4, 5]);
  cache.insert(first.tokens, first.blocks);
  first.release();
  assert.equal(pool.used, 2);
  const m = cache.match([1, 2, 3, 4, 5], "", { maxTokens: 4 });
  cache.lock(m.node);
  const seq = new SequenceBlocks(pool);
  seq.adoptPrefix([1, 2, 3, 4], m.blocks);
  assert.equal(pool.refCount(m.blocks[0]!), 2);
  assert.deepEqual(seq.appendTokens([5, 6])!.newBlocks.length, 1);
  cache.unlock(m.node);
  seq.release();
  assert.equal(pool.used, 2);
  assert.throws(() => seq.release(), /the table has been released/);
  assert.throws(() => seq.appendTokens([1]), /the table has been released/);
  const t = new SequenceBlocks(pool);
  t.appendTokens([1]);
  assert.throws(() => t.adoptPrefix([1, 2], m.blocks.slice(0, 1)), /already holds 1 tokens/);
  const u = new SequenceBlocks(pool);
  assert.throws(() => u.adoptPrefix([1, 2, 3], m.blocks), /2 blocks of 2 hold 4 tokens, got 3/);
  assert.throws(() => u.adoptPrefix([1, 2, 3, 4], [m.blocks[0]!, m.blocks[0]!]), /a block appears twice/);
  const freeBlock = [0, 1, 2, 3, 4, 5, 6, 7].find((b) => pool.isFree(b))!;
  assert.throws(() => u.adoptPrefix([1, 2], [freeBlock]), /is free; allocate\(\) it first/);
  assert.equal(u.numTokens, 0);
  assert.throws(() => t.sharePrefix(m.blocks), /2 blocks given but the table has 0 full blocks/);
  assert.throws(() => t.slot(1), /position 1 is past the 1 tokens/);
  assert.throws(() => t.slotMapping(0, 2), /not within the 1 tokens/);
  assert.throws(() => t.appendTokens([1.5]), /tokens\[0\] must be a non-negative integer token id/);
  assert.throws(() => t.blocksNeeded(-1), /n must be an integer >= 0/);
  assert.throws(() => new SequenceBlocks({} as never), /expected a BlockPool/);
  t.release();
  cache.clear();
  assert.equal(pool.free, pool.total);
  pool.validate();
});
