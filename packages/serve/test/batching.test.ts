// Continuous batching over the paged KV cache: greedy outputs do not depend on what else runs (alone or
// 32 at once, prefix caching on or off, a pool a quarter of what they need, which forces preemption);
// the prefix cache reports what it reused, isolates cache salts, and a HiCache host tier serves a
// prompt whose blocks the device pool had to evict. Pool and tree invariants hold after each scenario.
import { before, test } from "node:test";
import assert from "node:assert/strict";
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { LLMEngine, type RequestOutput, type SamplingParams } from "../src/engine.js";
import { load, modelDir } from "./helpers.js";

let model: PreTrainedModel;
let tokenizer: PreTrainedTokenizer;
before(async () => {
  ({ model, tokenizer } = await load(modelDir({ maxPositionEmbeddings: 2048 })));
});

async function run(engine: LLMEngine, ids: number[], p: SamplingParams): Promise<{ tokens: number[]; last: RequestOutput }> {
  const tokens: number[] = [];
  let last: RequestOutput | undefined;
  for await (const o of engine.generate(ids, p)) {
    tokens.push(...o.tokenIds);
    last = o;
  }
  return { tokens, last: last! };
}

function prompts(n: number, seed: number): number[][] {
  let s = seed;
  const r = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  // some share a long prefix (the prefix cache has something to reuse), lengths 5..80
  const shared = Array.from({ length: 40 }, () => 3 + Math.floor(r() * 250));
  return Array.from({ length: n }, (_, i) => {
    const own = Array.from({ length: 5 + Math.floor(r() * 40) }, () => 3 + Math.floor(r() * 250));
    return i % 3 === 0 ? [...shared, ...own] : own;
  });
}

function checkBlocks(engine: LLMEngine): void {
  const { pool, radix } = engine.blockManager;
  pool.validate();
  radix.validate();
  // nothing runs: every used block belongs to the prefix cache, and none is locked
  assert.equal(pool.used, radix.cachedBlocks);
  assert.equal(radix.protectedBlocks, 0);
  assert.equal(engine.stats.kvCacheUsage, 0);
}

test("32 prompts: greedy outputs alone = all at once, with prefix caching on or off, and with a pool a quarter of their need (preempting)", async () => {
  const ps = prompts(32, 7);
  const params: SamplingParams = { temperature: 0, maxTokens: 24, ignoreEos: true };
  const solo = new LLMEngine({ model, tokenizer, maxNumSeqs: 32, maxModelLen: 2048, enablePrefixCaching: false });
  const alone: number[][] = [];
  for (const p of ps) alone.push((await run(solo, p, params)).tokens);
  const needBlocks = ps.reduce((a, p) => a + Math.ceil((p.length + 24) / 16), 0);
  for (const cfg of [
    { enablePrefixCaching: true },
    { enablePrefixCaching: false },
    { enablePrefixCaching: true, numKvBlocks: Math.ceil(needBlocks / 4), maxNumBatchedTokens: 64 },
    { enablePrefixCaching: false, numKvBlocks: Math.ceil(needBlocks / 4) },
  ]) {
    const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 32, maxModelLen: 2048, ...cfg });
    const together = await Promise.all(ps.map((p) => run(engine, p, params)));
    assert.deepEqual(together.map((t) => t.tokens), alone, JSON.stringify(cfg));
    if (cfg.numKvBlocks) assert.ok(engine.stats.preemptions > 0, `${JSON.stringify(cfg)}: preempted ${engine.stats.preemptions}`);
    else assert.equal(engine.stats.preemptions, 0);
    if (cfg.enablePrefixCaching) checkBlocks(engine);
    assert.equal(engine.blockManager.pool.used, engine.blockManager.radix.cachedBlocks);
    await engine.close();
  }
});

test("prefix cache: a 1,500-token prompt sent twice reuses all but its last block; another cache_salt reuses nothing", async () => {
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 4, maxModelLen: 2048 });
  const long = prompts(1, 3)[0]!.concat(Array.from({ length: 1500 }, (_, i) => 3 + ((i * 31) % 250))).slice(0, 1500);
  const p: SamplingParams = { temperature: 0, maxTokens: 4, ignoreEos: true };
  const first = await run(engine, long, p);
  assert.equal(first.last.cachedTokens, 0);
  const second = await run(engine, long, p);
  assert.ok(second.last.cachedTokens >= 1500 - 16, `cached ${second.last.cachedTokens}`);
  assert.deepEqual(second.tokens, first.tokens);
  const other = await run(engine, long, { ...p, cacheSalt: "tenant-b" });
  assert.equal(other.last.cachedTokens, 0);
  assert.deepEqual(other.tokens, first.tokens);
  const again = await run(engine, long, { ...p, cacheSalt: "tenant-b" });
  assert.ok(again.last.cachedTokens >= 1500 - 16);
  assert.ok(engine.stats.prefixCacheHits >= 2 * (1500 - 16));
  assert.ok(engine.stats.prefixCacheQueries >= 4 * 1500);
  checkBlocks(engine);
});

test("HiCache: a prompt evicted from a small device pool comes back from the host tier instead of being recomputed", async () => {
  const blocksPerPrompt = Math.ceil(1504 / 16);
  const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 2, maxModelLen: 2048, numKvBlocks: blocksPerPrompt + 8, hicacheSize: 64 << 20 });
  const a = Array.from({ length: 1500 }, (_, i) => 3 + ((i * 17) % 250));
  const b = Array.from({ length: 1500 }, (_, i) => 3 + ((i * 29 + 5) % 250));
  const p: SamplingParams = { temperature: 0, maxTokens: 4, ignoreEos: true };
  const first = await run(engine, a, p);
  await run(engine, b, p); // needs the pool: a's cached blocks are evicted to the host tier
  assert.ok(engine.stats.hicacheSavedBlocks >= 80, `saved ${engine.stats.hicacheSavedBlocks}`);
  const loadedBefore = engine.stats.hicacheLoadedBlocks;
  const again = await run(engine, a, p);
  assert.ok(engine.stats.hicacheLoadedBlocks - loadedBefore >= 80, `loaded ${engine.stats.hicacheLoadedBlocks - loadedBefore}`);
  assert.ok(again.last.cachedTokens >= 1500 - 16 * 8, `cached ${again.last.cachedTokens}`);
  assert.deepEqual(again.tokens, first.tokens);
  checkBlocks(engine);
});
