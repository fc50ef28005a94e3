// RadixCache: longest-prefix match, salts, locks, LRU eviction of unlocked leaves, stats, ordering.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BlockPool, RadixCache, SequenceBlocks } from "../src/index.js";

const range = (start: number, n: number) => Array.from({ length: n }, (_, i) => start + i);

/** Allocates blocks for `tokens` as a request would, inserts them, and drops the request's references. */
function cacheTokens(cache: RadixCache, tokens: number[], salt = "") {
  const seq = new SequenceBlocks(cache.pool);
  assert.ok(seq.appendTokens(tokens));
  const r = cache.insert(seq.tokens, seq.blocks, salt);
  seq.release();
  return r;
}

const treeSnapshot = (cache: RadixCache) => ({
  nodes: [...cache.nodes()].map((n) => JSON.stringify(n)).sort(),
  cached: cache.cachedBlocks,
  protected: cache.protectedBlocks,
  free: cache.pool.free,
  refs: Array.from({ length: cache.pool.total }, (_, b) => cache.pool.refCount(b)),
});

test("radix cache: whole-block longest-prefix match, partial blocks are never cached", () => {
  const cache = new RadixCache(new BlockPool({ numBlocks: 16, blockSize: 4 }));
  const miss = cache.match(range(0, 10));
  assert.equal(miss.tokens, 0);
  assert.deepEqual(miss.blocks, []);
  assert.equal(miss.node.depth, 0);
  const ins = cacheTokens(cache, range(0, 10)); // 2 full blocks + 2 tokens
  assert.equal(ins.cachedTokens, 0);
  assert.equal(ins.newBlocks.length, 2);
  assert.equal(ins.node.depth, 8);
  assert.equal(cache.cachedBlocks, 2);
  assert.equal(cache.pool.used, 2, "the partial block went back to the pool");
  const hit = cache.match(range(0, 10));
  assert.equal(hit.tokens, 8);
  assert.deepEqual(hit.blocks, ins.blocks);
  assert.equal(cache.match(range(0, 7)).tokens, 4);
  assert.equal(cache.match(range(0, 10), "", { maxTokens: 7 }).tokens, 4);
  assert.equal(cache.match([0, 1, 2, 9, 4, 5, 6, 7]).tokens, 0, "a mismatch inside the first block");
  assert.equal(cache.match([0, 1, 2, 3, 4, 5, 6, 99]).tokens, 4, "a mismatch inside the second block");
  assert.equal(cache.peek(range(0, 10)), 8);
  cache.validate();
});

test("radix cache: a 1,500-token prompt sent twice hits >= 1,500 - blockSize tokens; another salt hits 0", () => {
  const cache = new RadixCache(new BlockPool({ numBlocks: 200 }));
  const prompt = Array.from({ length: 1500 }, (_, i) => (i * 7919) % 32000);
  const first = cache.match(prompt, "", { maxTokens: prompt.length - 1 });
  assert.equal(first.tokens, 0);
  cacheTokens(cache, prompt);
  const second = cache.match(prompt, "", { maxTokens: prompt.length - 1 });
  assert.ok(second.tokens >= 1500 - 16, `${second.tokens}`);
  assert.equal(second.tokens, 1488);
  assert.equal(cache.match(prompt, "tenant-b", { maxTokens: prompt.length - 1 }).tokens, 0);
  assert.deepEqual(cache.stats, { queries: 4500, hits: 1488, lookups: 3, insertedBlocks: 93, evictedBlocks: 0 });
  assert.equal(cache.hitRate, 1488 / 4500);
  cache.validate();
});

test("radix cache: different salts never share nodes or blocks", () => {
  const cache = new RadixCache(new BlockPool({ numBlocks: 16, blockSize: 2 }));
  const a = cacheTokens(cache, range(0, 6), "a");
  const b = cacheTokens(cache, range(0, 6), "b");
  const none = cacheTokens(cache, range(0, 6));
  assert.equal(b.cachedTokens, 0);
  assert.equal(none.cachedTokens, 0);
  const all = [...a.blocks, ...b.blocks, ...none.blocks];
  assert.equal(new Set(all).size, 9);
  assert.deepEqual(cache.match(range(0, 6), "a").blocks, a.blocks);
  assert.deepEqual(cache.match(range(0, 6), "b").blocks, b.blocks);
  assert.deepEqual(cache.match(range(0, 6), undefined).blocks, none.blocks);
  assert.equal(cache.match(range(0, 6), "c").tokens, 0);
  assert.equal(cache.match(range(0, 6), "a").node.salt, "a");
  cache.validate();
});

test("radix cache: insert shares the cached prefix, takes references only on new blocks", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool);
  const first = cacheTokens(cache, [1, 2, 3, 4, 5, 6]);
  // a second request with the same first 4 tokens, computed separately (duplicate KV), then diverging
  const seq = new SequenceBlocks(pool);
  seq.appendTokens([1, 2, 3, 4, 7, 8, 9]);
  const dup = seq.blocks.slice();
  const r = cache.insert(seq.tokens, seq.blocks, "");
  assert.equal(r.cachedTokens, 4);
  assert.deepEqual(r.newBlocks, [dup[2]]);
  assert.deepEqual(r.blocks, [first.blocks[0], first.blocks[1], dup[2]]);
  assert.equal(pool.refCount(dup[0]!), 1, "the tree did not take the duplicate");
  assert.equal(pool.refCount(dup[2]!), 2, "the tree took the new block");
  // switch to the tree's copies: the duplicates go back to the pool
  const freeBefore = pool.free;
  assert.equal(seq.sharePrefix(r.blocks), 2);
  assert.equal(pool.free, freeBefore + 2);
  assert.deepEqual(seq.blocks.slice(0, 3), r.blocks);
  assert.equal(pool.refCount(first.blocks[0]!), 2);
  seq.release();
  assert.equal(pool.used, cache.cachedBlocks);
  // the tree split [1..6] after 2 blocks: node for [1..4] with children [5,6] and [7,8]
  assert.equal(cache.nodeCount, 3);
  assert.equal(cache.match([1, 2, 3, 4, 5, 6]).tokens, 6);
  assert.equal(cache.match([1, 2, 3, 4, 7, 8]).tokens, 6);
  // inserting what is already cached changes nothing
  const again = cacheTokens(cache, [1, 2, 3, 4, 5, 6]);
  assert.equal(again.cachedTokens, 6);
  assert.deepEqual(again.newBlocks, []);
  assert.equal(pool.used, cache.cachedBlocks);
  cache.validate();
  pool.validate();
});

test("radix cache: lock counts along the path; locked nodes are never evicted", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool);
  cacheTokens(cache, [1, 2, 3, 4, 5, 6]);
  cacheTokens(cache, [1, 2, 3, 4, 7, 8]);
  cacheTokens(cache, [9, 9]);
  const m = cache.match([1, 2, 3, 4, 5, 6, 0]);
  assert.equal(m.tokens, 6);
  cache.lock(m.node);
  cache.lock(m.node);
  assert.equal(m.node.lockCount, 2);
  assert.equal(cache.protectedBlocks, 3, "the node [5,6] and its parent [1..4]");
  assert.equal(cache.evictableBlocks, 2);
  assert.equal(cache.evict(100), 2, "only [7,8] and [9,9] can go");
  assert.equal(cache.match([1, 2, 3, 4, 7, 8]).tokens, 4);
  assert.equal(cache.match([9, 9]).tokens, 0);
  assert.equal(m.node.evicted, false);
  cache.unlock(m.node);
  assert.equal(cache.evict(100), 0);
  cache.unlock(m.node);
  assert.equal(cache.protectedBlocks, 0);
  assert.throws(() => cache.unlock(m.node), /is not locked \(unlock without lock\)/);
  assert.equal(cache.evict(100), 3);
  assert.equal(m.node.evicted, true);
  assert.throws(() => cache.lock(m.node), /has been evicted; match\(\) again/);
  assert.equal(pool.free, pool.total);
  const other = new RadixCache(pool);
  assert.throws(() => other.lock(cache.match([1]).node), /not a node of this cache/);
  assert.throws(() => cache.lock({} as never), /not a node of this cache/);
  cache.validate();
});

test("radix cache: a match that ends inside a node splits it; the handle still locks exactly the match", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool);
  cacheTokens(cache, [1, 2, 3, 4, 5, 6, 7, 8]);
  const short = cache.match([1, 2, 3, 4, 0, 0]);
  assert.equal(short.tokens, 4);
  assert.equal(short.node.depth, 4);
  cache.lock(short.node);
  assert.equal(cache.protectedBlocks, 2);
  assert.equal(cache.evict(10), 2, "the unlocked tail [5..8] goes, the locked head stays");
  assert.equal(cache.peek([1, 2, 3, 4, 5, 6]), 4);
  cache.unlock(short.node);
  cache.validate();
});

test("radix cache: evict takes least recently used leaves first, only the tail of the last one", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool);
  const A = [1, 1, 1, 1];
  const B = [2, 2, 2, 2];
  const C = [3, 3, 3, 3];
  cacheTokens(cache, A);
  cacheTokens(cache, B);
  cacheTokens(cache, C);
  cache.match(A); // A is now the most recently used
  assert.equal(cache.evict(2), 2);
  assert.equal(cache.peek(B), 0, "B was least recently used");
  assert.equal(cache.peek(A), 4);
  assert.equal(cache.peek(C), 4);
  assert.equal(cache.evict(1), 1);
  assert.equal(cache.peek(C), 2, "only C's last block went");
  assert.equal(cache.peek(A), 4);
  cache.peek(C); // peek does not refresh the clock
  assert.equal(cache.evict(1), 1);
  assert.equal(cache.peek(C), 0);
  assert.equal(cache.evict(0), 0);
  assert.equal(cache.stats.evictedBlocks, 4);
  // a parent becomes a leaf (and a candidate) once its children are gone
  cacheTokens(cache, [5, 5, 6, 6]);
  cacheTokens(cache, [5, 5, 7, 7]);
  cache.match(A);
  assert.equal(cache.evict(3), 3, "[6,6], [7,7] and then their parent [5,5] before A");
  assert.equal(cache.peek(A), 4);
  assert.equal(cache.peek([5, 5]), 0);
  cache.validate();
  pool.validate();
});

test("radix cache: evict counts only blocks that reached the free list", () => {
  const pool = new BlockPool({ numBlocks: 8, blockSize: 2 });
  const cache = new RadixCache(pool);
  const seq = new SequenceBlocks(pool);
  seq.appendTokens([1, 2, 3, 4]);
  cache.insert(seq.tokens, seq.blocks);
  // the request still holds its references (it did not lock: a protocol slip): nothing is freed
  assert.equal(cache.evict(2), 0);
  assert.equal(cache.cachedBlocks, 0);
  assert.equal(pool.used, 2);
  seq.release();
  assert.equal(pool.used, 0);
});

test("radix cache: clear gives everything back, and refuses while locked", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool);
  cacheTokens(cache, [1, 2, 3, 4], "x");
  cacheTokens(cache, [1, 2, 5, 6], "x");
  cacheTokens(cache, [1, 2, 3, 4]);
  const m = cache.match([1, 2, 3, 4], "x");
  cache.lock(m.node);
  assert.throws(() => cache.clear(), /1 lock\(s\) are held under salt "x"/);
  cache.unlock(m.node);
  assert.equal(cache.clear(), 5);
  assert.equal(pool.free, pool.total);
  assert.equal(cache.nodeCount, 0);
  assert.equal(m.node.evicted, true);
  cache.validate();
});

test("radix cache: orderWaiting is longest-prefix-first, stable, FCFS above lpmMaxWaiting", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool, { lpmMaxWaiting: 4 });
  cacheTokens(cache, [1, 2, 3, 4, 5, 6]);
  const reqs = [
    { id: "none", tokens: [9, 9, 9] },
    { id: "two", tokens: [1, 2, 3, 4, 0] },
    { id: "salted", tokens: [1, 2, 3, 4, 5, 6, 7], salt: "s" },
    { id: "three", tokens: [1, 2, 3, 4, 5, 6, 7] },
    { id: "one", tokens: [1, 2, 0] },
  ];
  const statsBefore = cache.stats;
  const order = cache.orderWaiting(reqs.slice(0, 4), (r) => r);
  assert.deepEqual(
    order.map((r) => r.id),
    ["three", "two", "none", "salted"],
  );
  assert.deepEqual(cache.stats, statsBefore, "ordering does not count as lookups");
  // the whole prompt cached: the last token is still computed, so [1..6] alone ranks as 2 blocks
  assert.deepEqual(
    cache
      .orderWaiting([{ tokens: [1, 2, 3, 4] }, { tokens: [1, 2, 3, 4, 5, 6] }], (r) => r)
      .map((r) => r.tokens.length),
    [6, 4],
  );
  assert.deepEqual(
    cache.orderWaiting(reqs, (r) => r).map((r) => r.id),
    reqs.map((r) => r.id),
  );
});

test("radix cache: misuse throws and leaves the tree and pool unchanged", () => {
  const pool = new BlockPool({ numBlocks: 16, blockSize: 2 });
  const cache = new RadixCache(pool);
  cacheTokens(cache, [1, 2, 3, 4]);
  const seq = new SequenceBlocks(pool);
  seq.appendTokens([1, 2, 8, 8, 9, 9]);
  const [b0, b1, b2] = seq.blocks as number[];
  const treeBlock = cache.match([1, 2, 3, 4]).blocks[1]!;
  const freeBlock = range(0, 16).find((b) => pool.isFree(b))!;
  const before = treeSnapshot(cache);
  const cases: [() => unknown, RegExp][] = [
    [() => cache.insert([1, 2, 8, 8, 9, 9], [b0!, b1!]), /6 tokens fill 3 blocks of 2 but only 2 blocks were given/],
    [() => cache.insert([1, 2, 8, 8, 9, 9], [b0!, b1!, freeBlock]), new RegExp(`block ${freeBlock} is free`)],
    [() => cache.insert([1, 2, 8, 8, 9, 9], [b0!, b1!, 99]), /unknown block id 99/],
    [() => cache.insert([1, 2, 8, 8, 9, 9], [b0!, treeBlock, b2!]), /already owned by another node/],
    [() => cache.insert([1, 2, 8, 8, 9, 9], [b0!, b1!, b1!]), /appears twice/],
    [() => cache.insert([1, 2, 8, 8, 9, 9], "x" as never), /blocks must be an array/],
    [() => cache.insert([1, 2.5], [b0!]), /tokens\[1\] must be a non-negative integer token id, got 2.5/],
    [() => cache.insert([1, -2], [b0!]), /tokens\[1\] must be a non-negative integer token id, got -2/],
    [() => cache.insert([1, 2], [b0!], 7 as never), /cacheSalt must be a string, got 7/],
    [() => cache.match(null as never), /tokens must be an array of token ids/],
    [() => cache.match([1, 2], "", { maxTokens: -1 }), /maxTokens must be an integer >= 0/],
    [() => cache.peek([NaN]), /got NaN/],
    [() => cache.evict(-1), /nBlocks must be an integer >= 0, got -1/],
    [() => cache.evict(0.5), /got 0.5/],
    [() => new RadixCache({} as never), /expected a BlockPool/],
  ];
  for (const [f, msg] of cases) {
    assert.throws(f, msg);
    assert.deepEqual(treeSnapshot(cache), before, `changed by a call that threw ${msg}`);
  }
  cache.validate();
  pool.validate();
});
