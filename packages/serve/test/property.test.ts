// The acceptance property test of issue 13: the block pool, the radix tree and the block tables
// under a seeded random stream of arrivals, chunked prefills, decodes, n > 1 forks, preemptions,
// finishes and aborts, with a pool small enough that eviction (and preemption) happen all the time.
//
// After every event:
//   - free + used = total, and the pool's free list agrees with the reference counts;
//   - every block's reference count equals its number of owners (tables holding it + the tree), so
//     no block is owned twice unless it is shared, and no table or node holds a block twice;
//   - the simulated KV content of every slot is what its owners expect: each slot holds a hash of
//     (salt, all tokens up to that position), written when the token is appended. A block shared
//     between salts or prefixes, or overwritten while shared, or a wrong match, shows up here;
//   - a write only ever goes to a block that the writer owns alone (never to a cached block);
//   - held locks are on live nodes; the tree's own counters (cached, protected, lock counts) check.
// At the end every request has finished or aborted, no lock is held, only the tree holds blocks,
// and after clear() every reference count is back to zero.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BlockPool, RadixCache, SequenceBlocks, type CacheNode } from "../src/index.js";

/** mulberry32: a small seeded PRNG. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n), // 0..n-1
    chance: (p: number) => next() < p,
    pick: <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!,
  };
}

/** The KV "content" of token t at the end of a prefix whose content was h: a 52-bit hash. */
function extend(h: number, t: number): number {
  let a = Math.imul((h >>> 0) ^ Math.imul(t + 1, 0x9e3779b1), 0x85ebca6b);
  a ^= a >>> 13;
  let b = Math.imul(((h / 4294967296) >>> 0) ^ (t + 0x632be5ab), 0xc2b2ae35);
  b = Math.imul(b ^ (b >>> 16) ^ a, 0x27d4eb2f);
  return (a >>> 0) + ((b >>> 12) & 0xfffff) * 4294967296;
}
function saltSeed(salt: string): number {
  let h = 7;
  for (let i = 0; i < salt.length; i++) h = extend(h, salt.charCodeAt(i) + 1000);
  return h;
}

interface SimConfig {
  seed: number;
  arrivals: number;
  numBlocks: number;
  blockSize: number;
  vocab: number;
  families: number;
  maxPrefix: number;
  maxSuffix: number;
  maxOutput: number;
  maxChunk: number;
  maxRunning: number;
  maxWaiting: number;
}

interface Seq {
  table: SequenceBlocks;
  salt: string;
  hashes: number[]; // hashes[p]: the KV content expected at position p
}

interface Req {
  id: number;
  salt: string;
  prompt: number[];
  maxNew: number;
  n: number;
  phase: "waiting" | "prefill" | "decode";
  node: CacheNode | null;
  seqs: Seq[];
  generated: number;
}

function simulate(cfg: SimConfig) {
  const r = rng(cfg.seed);
  const pool = new BlockPool({ numBlocks: cfg.numBlocks, blockSize: cfg.blockSize });
  const cache = new RadixCache(pool);
  const bs = cfg.blockSize;
  const kv = new Float64Array(cfg.numBlocks * bs).fill(NaN);
  const salts = ["", "", "", "tenant-a", "tenant-b"];
  const families = Array.from({ length: cfg.families }, () =>
    Array.from({ length: r.int(cfg.maxPrefix + 1) }, () => r.int(cfg.vocab)),
  );
  const recent: { prompt: number[]; salt: string }[] = [];
  const waiting: Req[] = [];
  const running: Req[] = [];
  const n = {
    events: 0,
    arrivals: 0,
    admissions: 0,
    prefillChunks: 0,
    decodeSteps: 0,
    finished: 0,
    aborted: 0,
    abortedWaiting: 0,
    abortedPrefill: 0,
    abortedDecode: 0,
    admissionsDeferred: 0,
    preemptions: 0,
    forks: 0,
    copies: 0,
    sharedDuplicates: 0,
  };
  let nextId = 0;

  const write = (seq: Seq, tokens: number[]) => {
    const res = seq.table.appendTokens(tokens);
    assert.ok(res, "appendTokens after a successful reservation");
    for (const c of res.copies) {
      assert.equal(pool.refCount(c.dst), 1);
      kv.copyWithin(c.dst * bs, c.src * bs, c.src * bs + c.slots);
      n.copies++;
    }
    for (let i = 0; i < tokens.length; i++) {
      const p = res.start + i;
      const h = extend(p === 0 ? saltSeed(seq.salt) : seq.hashes[p - 1]!, tokens[i]!);
      seq.hashes.push(h);
      const { block, offset } = seq.table.slot(p);
      assert.equal(pool.refCount(block), 1, `a write into block ${block}, which is shared`);
      assert.ok(!cache.owns(block), `a write into block ${block}, which the tree owns`);
      kv[block * bs + offset] = h;
    }
  };

  const releaseReq = (req: Req, cacheIt: boolean) => {
    if (cacheIt)
      for (const s of req.seqs) {
        const ins = cache.insert(s.table.tokens, s.table.blocks as number[], req.salt);
        assert.equal(ins.cachedTokens % bs, 0);
      }
    for (const s of req.seqs) s.table.release();
    if (req.node !== null) cache.unlock(req.node);
    req.node = null;
    req.seqs = [];
    req.generated = 0;
  };

  const preempt = (req: Req) => {
    releaseReq(req, r.chance(0.5));
    running.splice(running.indexOf(req), 1);
    req.phase = "waiting";
    waiting.unshift(req);
    n.preemptions++;
  };

  /** Makes `need` blocks free: evict, then preempt the latest-admitted other request. False if `req` itself went. */
  const reserve = (req: Req, need: number): boolean => {
    while (pool.free < need) {
      cache.evict(need - pool.free);
      if (pool.free >= need) break;
      const victim = [...running].reverse().find((x) => x !== req);
      if (victim === undefined) {
        preempt(req);
        return false;
      }
      preempt(victim);
    }
    return true;
  };

  const arrive = () => {
    let prompt: number[];
    let salt: string;
    if (recent.length > 0 && r.chance(0.15)) ({ prompt, salt } = r.pick(recent));
    else {
      prompt = r.pick(families).concat(Array.from({ length: 1 + r.int(cfg.maxSuffix) }, () => r.int(cfg.vocab)));
      salt = r.pick(salts);
      recent.push({ prompt, salt });
      if (recent.length > 20) recent.shift();
    }
    const req: Req = {
      id: nextId++,
      salt,
      prompt,
      maxNew: 1 + r.int(cfg.maxOutput),
      n: r.pick([1, 1, 1, 2, 3]),
      phase: "waiting",
      node: null,
      seqs: [],
      generated: 0,
    };
    waiting.push(req);
    n.arrivals++;
  };

  const admit = () => {
    const order = cache.orderWaiting(waiting, (q) => ({ tokens: q.prompt, salt: q.salt }));
    const req = r.chance(0.8) ? order[0]! : r.pick(order);
    const L = req.prompt.length;
    const expect = cache.peek(req.prompt, req.salt, L - 1);
    // admit only when the prompt's uncached blocks fit in free + evictable blocks (mostly: sometimes
    // over-admit, so that preemption still happens)
    if (pool.free + cache.evictableBlocks < pool.blocksFor(L) - expect / bs && r.chance(0.9)) {
      n.admissionsDeferred++;
      return;
    }
    const m = cache.match(req.prompt, req.salt, { maxTokens: L - 1 });
    assert.equal(m.tokens, expect);
    assert.ok(m.tokens % bs === 0 && m.tokens <= L - 1);
    assert.equal(m.node.depth, m.tokens);
    assert.equal(m.node.salt, req.salt);
    cache.lock(m.node);
    req.node = m.node;
    const seq: Seq = { table: new SequenceBlocks(pool), salt: req.salt, hashes: [] };
    seq.table.adoptPrefix(req.prompt.slice(0, m.tokens), m.blocks);
    let h = saltSeed(req.salt);
    for (let p = 0; p < m.tokens; p++) seq.hashes.push((h = extend(h, req.prompt[p]!)));
    req.seqs = [seq];
    req.phase = "prefill";
    waiting.splice(waiting.indexOf(req), 1);
    running.push(req);
    n.admissions++;
  };

  const relock = (req: Req, node: CacheNode) => {
    cache.lock(node);
    cache.unlock(req.node!);
    req.node = node;
  };

  const prefill = (req: Req) => {
    const seq = req.seqs[0]!;
    const done = seq.table.numTokens;
    const chunk = Math.min(req.prompt.length - done, 1 + r.int(cfg.maxChunk));
    if (!reserve(req, seq.table.blocksNeeded(chunk))) return;
    write(seq, req.prompt.slice(done, done + chunk));
    n.prefillChunks++;
    if (seq.table.numTokens === req.prompt.length) {
      // prompt computed: cache it, switch the lock to the new node, fork the n - 1 other samples
      const ins = cache.insert(seq.table.tokens, seq.table.blocks as number[], req.salt);
      if (r.chance(0.5)) n.sharedDuplicates += seq.table.sharePrefix(ins.blocks);
      relock(req, ins.node);
      for (let i = 1; i < req.n; i++) {
        req.seqs.push({ table: seq.table.fork(), salt: req.salt, hashes: seq.hashes.slice() });
        n.forks++;
      }
      req.phase = "decode";
    } else if (r.chance(0.2)) {
      // chunked-prefill progress cached as it goes (SGLang's cache_unfinished_req)
      const ins = cache.insert(seq.table.tokens, seq.table.blocks as number[], req.salt);
      n.sharedDuplicates += seq.table.sharePrefix(ins.blocks);
      relock(req, ins.node);
    }
  };

  const decode = (req: Req) => {
    const need = req.seqs.reduce((a, s) => a + s.table.blocksNeeded(1), 0);
    if (!reserve(req, need)) return;
    for (const s of req.seqs) write(s, [r.int(cfg.vocab)]);
    n.decodeSteps++;
    if (++req.generated >= req.maxNew) {
      releaseReq(req, r.chance(0.7));
      running.splice(running.indexOf(req), 1);
      n.finished++;
    }
  };

  const abort = () => {
    const all = [...waiting, ...running];
    const req = r.pick(all);
    if (req.phase === "waiting") n.abortedWaiting++;
    else if (req.phase === "prefill") n.abortedPrefill++;
    else n.abortedDecode++;
    if (req.phase === "waiting") waiting.splice(waiting.indexOf(req), 1);
    else {
      releaseReq(req, r.chance(0.3));
      running.splice(running.indexOf(req), 1);
    }
    n.aborted++;
  };

  const holders = new Int32Array(cfg.numBlocks);
  const check = () => {
    pool.validate();
    cache.validate();
    assert.equal(pool.free + pool.used, pool.total);
    holders.fill(0);
    for (const req of running) {
      assert.ok(req.node !== null && !req.node.evicted && req.node.lockCount > 0, `request ${req.id}'s lock`);
      assert.ok(req.node.depth <= req.seqs[0]!.table.numTokens);
      for (const s of req.seqs) {
        const t = s.table;
        assert.equal(t.blocks.length, pool.blocksFor(t.numTokens));
        assert.equal(new Set(t.blocks).size, t.blocks.length, "a table holds a block twice");
        for (const b of t.blocks) holders[b]!++;
        for (let p = 0; p < t.numTokens; p++) {
          const b = t.blocks[Math.floor(p / bs)]!;
          if (kv[b * bs + (p % bs)] !== s.hashes[p])
            assert.fail(`request ${req.id}: the KV at position ${p} (block ${b}) is not its own`);
        }
      }
    }
    for (const node of cache.nodes()) {
      let h = saltSeed(node.salt);
      const start = node.path.length - node.blocks.length * bs;
      for (let p = 0; p < node.path.length; p++) {
        h = extend(h, node.path[p]!);
        if (p >= start) {
          const b = node.blocks[Math.floor((p - start) / bs)]!;
          if (kv[b * bs + (p % bs)] !== h) assert.fail(`the cached KV at position ${p} (block ${b}) is wrong`);
        }
      }
      for (const b of node.blocks) holders[b]!++;
    }
    for (let b = 0; b < cfg.numBlocks; b++)
      if (holders[b] !== pool.refCount(b))
        assert.fail(`block ${b}: ${holders[b]} owners but reference count ${pool.refCount(b)}`);
    const st = cache.stats;
    assert.ok(st.hits <= st.queries && st.hits % bs === 0);
  };

  // the run: random events until `arrivals` requests have arrived, then drain
  while (n.arrivals < cfg.arrivals || waiting.length + running.length > 0) {
    const open = n.arrivals < cfg.arrivals;
    const x = r.next();
    if (open && x < 0.22 && waiting.length < cfg.maxWaiting) arrive();
    else if (x < 0.4 && waiting.length > 0 && running.length < cfg.maxRunning) admit();
    else if (x < 0.97 && running.length > 0) {
      const req = r.pick(running);
      if (req.phase === "prefill") prefill(req);
      else decode(req);
    } else if (x >= 0.985 && open && waiting.length + running.length > 0) abort();
    else continue;
    n.events++;
    check();
  }

  assert.equal(n.finished + n.aborted, n.arrivals, "every request finished or aborted");
  assert.equal(cache.protectedBlocks, 0, "no lock is held");
  for (let b = 0; b < cfg.numBlocks; b++)
    assert.equal(pool.refCount(b), cache.owns(b) ? 1 : 0, `block ${b} is held by a finished request`);
  assert.equal(pool.used, cache.cachedBlocks);
  const stats = cache.stats;
  const cleared = cache.clear();
  assert.equal(cleared, stats.insertedBlocks - stats.evictedBlocks);
  for (let b = 0; b < cfg.numBlocks; b++) assert.equal(pool.refCount(b), 0, `block ${b}'s reference count`);
  assert.equal(pool.free, pool.total);
  assert.equal(pool.used, 0);
  pool.validate();
  cache.validate();
  return { ...n, evictedBlocks: stats.evictedBlocks, queries: stats.queries, hits: stats.hits };
}

const base: SimConfig = {
  seed: 13,
  arrivals: 10_000,
  numBlocks: 48,
  blockSize: 4,
  vocab: 40,
  families: 6,
  maxPrefix: 40,
  maxSuffix: 24,
  maxOutput: 10,
  maxChunk: 16,
  maxRunning: 8,
  maxWaiting: 16,
};

function report(name: string, s: ReturnType<typeof simulate>) {
  console.log(
    `${name}: ${s.events} events (${s.arrivals} arrivals, ${s.finished} finished, ${s.aborted} aborted, ` +
      `(${s.abortedWaiting} waiting, ${s.abortedPrefill} in prefill, ${s.abortedDecode} in decode), ` +
      `${s.admissions} admissions, ${s.prefillChunks} prefill chunks, ${s.decodeSteps} decode steps, ` +
      `${s.forks} forks, ${s.copies} copy-on-write copies, ${s.preemptions} preemptions), ` +
      `${s.evictedBlocks} blocks evicted, prefix cache hits ${s.hits} / ${s.queries} tokens`,
  );
}

test("property: 10,000 random arrivals, finishes and aborts keep the pool and the tree consistent", () => {
  const s = simulate(base);
  report("block size 4, 48 blocks", s);
  assert.equal(s.arrivals, 10_000);
  assert.ok(s.aborted > 100 && s.finished > 5000, "both finishes and aborts happen");
  assert.ok(s.evictedBlocks > 1000, "the pool is small enough that eviction happens");
  assert.ok(s.preemptions > 0 && s.forks > 0 && s.copies > 0, "preemptions, forks and copy-on-write happen");
  assert.ok(s.hits > 0.1 * s.queries, "prefixes are shared");
});

test("property: the default block size (16) and a block size of 1 (a per-token radix tree)", () => {
  report(
    "block size 16, 24 blocks",
    simulate({ ...base, seed: 7, arrivals: 2000, blockSize: 16, numBlocks: 24, maxPrefix: 120, maxSuffix: 60 }),
  );
  report("block size 1, 160 blocks", simulate({ ...base, seed: 99, arrivals: 2000, blockSize: 1, numBlocks: 160 }));
});
