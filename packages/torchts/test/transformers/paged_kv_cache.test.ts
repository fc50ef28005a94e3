// forwardPaged over a PagedKVCache: a step that mixes chunked prefills and decodes of several sequences,
// with block tables in scattered blocks, gives the logits of the ordinary full-sequence forward, for
// every golden model (GQA, qk-norm, tied, GPT-2), in strict and fused eager; and the golden greedy
// continuations come out of paged decoding. PagedKVCache checks its options and its block copies.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, PagedKVCache, pagedBatch, type PagedSequence, type PreTrainedModel } from "../../src/transformers/index.js";
import { GOLDEN, expected, fixtureDir, maxAbsDiff } from "./helpers.js";

const BS = 4;

function cacheFor(model: PreTrainedModel, numBlocks: number): PagedKVCache {
  const { layers, kvHeads, headDim } = model.cacheShape();
  return new PagedKVCache({ layers, kvHeads, headDim, numBlocks, blockSize: BS });
}

for (const name of GOLDEN) {
  test(`${name}: forwardPaged of mixed prefill chunks and decodes equals the full forward`, async () => {
    const model = await AutoModelForCausalLM.fromPretrained(fixtureDir(name), { deviceMap: "cpu" });
    const V = model.config.vocabSize;
    const seqA = Array.from({ length: 11 }, (_, i) => (i * 37 + 5) % V);
    const seqB = Array.from({ length: 6 }, (_, i) => (i * 91 + 17) % V);
    for (const mode of ["strict", "fused"] as const)
      await torch.withEagerMode(mode, async () => {
        const cache = cacheFor(model, 16);
        // scattered blocks, not in order
        const blocksA = [9, 2, 14], blocksB = [5, 0];
        const run = (seqs: PagedSequence[]) =>
          torch.noGrad(() => {
            const b = pagedBatch(seqs, BS);
            return model.forwardPaged(b, cache);
          });
        // step 1: A prefills 5 tokens, B prefills 4
        run([
          { tokens: seqA.slice(0, 5), cached: 0, blocks: blocksA, wantLogits: false },
          { tokens: seqB.slice(0, 4), cached: 0, blocks: blocksB, wantLogits: true },
        ]);
        // step 2: A's next chunk of 5 (crossing blocks), B decodes one
        run([
          { tokens: seqA.slice(5, 10), cached: 5, blocks: blocksA, wantLogits: true },
          { tokens: seqB.slice(4, 5), cached: 4, blocks: blocksB, wantLogits: true },
        ]);
        // step 3: both decode one
        const last = run([
          { tokens: seqB.slice(5, 6), cached: 5, blocks: blocksB, wantLogits: true },
          { tokens: seqA.slice(10, 11), cached: 10, blocks: blocksA, wantLogits: true },
        ]);
        const full = (ids: number[]) => torch.noGrad(() => model.forward(torch.tensor([ids], { dtype: "int64" })).logits.select(0, 0).select(0, -1));
        assert.deepEqual(last.shape, [2, V]);
        assert.ok((await maxAbsDiff(last.select(0, 0), full(seqB))) < 2e-4, `${mode}: B`);
        assert.ok((await maxAbsDiff(last.select(0, 1), full(seqA))) < 2e-4, `${mode}: A`);
        cache.dispose();
      });
  });

  test(`${name}: greedy decoding through the paged cache gives the golden continuation`, async () => {
    const model = await AutoModelForCausalLM.fromPretrained(fixtureDir(name), { deviceMap: "cpu" });
    const p = expected(name).prompts[0]!;
    const cache = cacheFor(model, 32);
    const need = p.input_ids.length + p.greedy_continuation.length;
    const blocks = Array.from({ length: Math.ceil(need / BS) }, (_, i) => 31 - i);
    const out: number[] = [];
    let tokens = p.input_ids;
    let cached = 0;
    while (out.length < p.greedy_continuation.length) {
      const logits = torch.noGrad(() => model.forwardPaged(pagedBatch([{ tokens, cached, blocks, wantLogits: true }], BS), cache));
      const next = (await logits.argmax(-1).tolist()) as number[];
      cached += tokens.length;
      tokens = [next[0]!];
      out.push(next[0]!);
    }
    assert.deepEqual(out, p.greedy_continuation);
  });
}

test("PagedKVCache checks its options; copyBlocks and readBlocks/writeBlocks move whole blocks", async () => {
  assert.throws(() => new PagedKVCache({ layers: 1, kvHeads: 1, headDim: 2, numBlocks: 0 }), /numBlocks must be an integer >= 1, got 0/);
  assert.throws(() => new PagedKVCache({ layers: 1, kvHeads: 1, headDim: 2, numBlocks: 2, blockSize: 1.5 }), /blockSize must be an integer >= 1/);
  const c = new PagedKVCache({ layers: 2, kvHeads: 1, headDim: 2, numBlocks: 3, blockSize: 2 });
  assert.equal(PagedKVCache.bytesPerBlock({ layers: 2, kvHeads: 1, headDim: 2, blockSize: 2 }), 2 * 2 * 2 * 1 * 2 * 4);
  c.write(1, torch.tensor([[[1, 2]], [[3, 4]]], { dtype: "float32" }), torch.tensor([[[5, 6]], [[7, 8]]], { dtype: "float32" }), torch.tensor([2, 3]));
  c.copyBlocks([1], [2]);
  assert.deepEqual(await c.keys[1]!.select(0, 2).tolist(), [[[1, 2]], [[3, 4]]]);
  assert.deepEqual(await c.values[1]!.select(0, 2).tolist(), [[[5, 6]], [[7, 8]]]);
  const saved = c.readBlocks([2]);
  assert.deepEqual(saved.shape, [2, 2, 1, 2, 1, 2]);
  c.writeBlocks([0], saved);
  assert.deepEqual(await c.keys[1]!.select(0, 0).tolist(), [[[1, 2]], [[3, 4]]]);
  assert.throws(() => pagedBatch([{ tokens: [1, 2, 3], cached: 0, blocks: [0], wantLogits: true }], 2), /has 1 blocks of 2 for 3 positions/);
  c.dispose();
});
