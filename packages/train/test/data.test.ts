// Data: documents to a <bos> .. <eos> token stream (txt and JSONL), packed windows, the seeded order,
// data-parallel sharding (any dp x accumulation split of a global batch sees the same sequences) and
// resuming from a loader state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PackedLoader, type LoaderOptions } from "../src/data/loader.js";
import { DatasetError, datasetFile, readDocuments, tokenizeDocuments, loadTokenStream, BUILTIN_DATASETS } from "../src/data/dataset.js";
import { loadTokenizer } from "../src/trainer.js";
import { tmp } from "./helpers.js";

const stream = Uint32Array.from({ length: 1000 }, (_, i) => i); // token i at position i: windows are easy to read

async function rows(l: PackedLoader): Promise<number[][][]> {
  const b = await l.next();
  return Promise.all(b.inputs.map(async (x) => (await x.tolist()) as number[][]));
}

const base: LoaderOptions = { seqLen: 9, localBatchSize: 4, accumulation: 1, dpRank: 0, dpDegree: 1, seed: 3 };

test("windows of seq_len + 1 tokens: inputs and labels shifted by one, no overlap", async () => {
  const l = new PackedLoader(stream, base);
  assert.equal(l.windows, 100);
  assert.equal(l.stepsPerEpoch, 25);
  const b = await l.next();
  const x = (await b.inputs[0]!.tolist()) as number[][];
  const y = (await b.labels[0]!.tolist()) as number[][];
  assert.equal(b.tokens, 36);
  for (let r = 0; r < 4; r++) {
    const start = x[r]![0]!;
    assert.equal(start % 10, 0, "window starts on a multiple of seq_len + 1");
    assert.deepEqual(x[r], Array.from({ length: 9 }, (_, t) => start + t));
    assert.deepEqual(y[r], Array.from({ length: 9 }, (_, t) => start + t + 1));
  }
  assert.throws(() => new PackedLoader(stream.subarray(0, 30), base), /fewer than one global batch of 4/);
});

test("the order is a seeded permutation: the same seed repeats it, another seed differs, each epoch reshuffles", async () => {
  const a = new PackedLoader(stream, base);
  const b = new PackedLoader(stream, base);
  const c = new PackedLoader(stream, { ...base, seed: 4 });
  const seen = new Set<number>();
  const firstEpoch: number[] = [];
  for (let s = 0; s < 25; s++) {
    const ra = await rows(a);
    assert.deepEqual(ra, await rows(b));
    for (const r of ra[0]!) {
      seen.add(r[0]!);
      firstEpoch.push(r[0]!);
    }
    if (s === 0) assert.notDeepEqual(ra, await rows(c));
  }
  assert.equal(seen.size, 100, "one epoch visits every window once");
  const next = (await rows(a))[0]!.map((r) => r[0]!);
  assert.equal(a.state.epoch, 1);
  assert.notDeepEqual(next, firstEpoch.slice(0, 4), "epoch 1 has its own order");
});

test("data-parallel shards and gradient accumulation split the same global batch", async () => {
  const one = new PackedLoader(stream, { ...base, localBatchSize: 8 });
  const ranks = [0, 1].map((r) => new PackedLoader(stream, { ...base, localBatchSize: 4, dpDegree: 2, dpRank: r }));
  const accum = new PackedLoader(stream, { ...base, localBatchSize: 2, accumulation: 2, dpDegree: 2, dpRank: 1 });
  for (let s = 0; s < 3; s++) {
    const g = (await rows(one))[0]!;
    const [r0, r1] = [(await rows(ranks[0]!))[0]!, (await rows(ranks[1]!))[0]!];
    assert.deepEqual([...r0, ...r1], g);
    // rank 1 of dp 2 with 2 micro-batches of 2: micro-batch m reads slice (m * 2 + 1) * 2
    const [m0, m1] = await rows(accum);
    assert.deepEqual(m0, g.slice(2, 4));
    assert.deepEqual(m1, g.slice(6, 8));
  }
  assert.throws(() => new PackedLoader(stream, { ...base, dpDegree: 2, dpRank: 2 }), /dpRank 2 is outside \[0, 2\)/);
});

test("a loader resumed from a saved state continues the same sequence, across an epoch boundary", async () => {
  const a = new PackedLoader(stream, base);
  for (let s = 0; s < 23; s++) await a.next();
  const saved = { ...a.state };
  const rest: number[][][][] = [];
  for (let s = 0; s < 5; s++) rest.push(await rows(a));
  const b = new PackedLoader(stream, base);
  b.loadState(saved);
  for (let s = 0; s < 5; s++) assert.deepEqual(await rows(b), rest[s]);
  assert.throws(() => b.loadState({ epoch: -1, cursor: 0 }), /invalid state/);
});

test("documents: a .txt file is one, a .jsonl file one per line; each is <bos> tokens <eos>", async () => {
  const dir = tmp("data");
  const jsonl = join(dir, "d.jsonl");
  writeFileSync(jsonl, `${JSON.stringify({ text: "Hello there" })}\n\n${JSON.stringify({ text: "General Kenobi", id: 2 })}\n`);
  assert.deepEqual(readDocuments(jsonl), ["Hello there", "General Kenobi"]);
  writeFileSync(join(dir, "bad.jsonl"), `${JSON.stringify({ text: "ok" })}\n{"body": 1}\n`);
  assert.throws(() => readDocuments(join(dir, "bad.jsonl")), (e: Error) => e instanceof DatasetError && /bad\.jsonl:2: field 'text' is not a string/.test(e.message));
  writeFileSync(join(dir, "broken.jsonl"), "{oops\n");
  assert.throws(() => readDocuments(join(dir, "broken.jsonl")), /broken\.jsonl:1: not JSON/);
  assert.throws(() => datasetFile("c4", ""), /neither a built-in dataset \(tinyshakespeare\) nor a \.txt \/ \.jsonl file/);
  assert.equal(datasetFile("tinyshakespeare", ""), BUILTIN_DATASETS.tinyshakespeare);

  const tok = await loadTokenizer("");
  const ids = tokenizeDocuments(["Hello there", "General Kenobi"], tok);
  const a = tok.encode("Hello there", { addSpecialTokens: false });
  const b = tok.encode("General Kenobi", { addSpecialTokens: false });
  assert.deepEqual([...ids], [tok.bosTokenId, ...a, tok.eosTokenId, tok.bosTokenId, ...b, tok.eosTokenId]);
  // the cached stream equals a fresh tokenization
  const env = process.env.TORCHTS_CACHE_DIR;
  process.env.TORCHTS_CACHE_DIR = dir;
  try {
    assert.deepEqual([...loadTokenStream(jsonl, tok)], [...ids]);
    assert.deepEqual([...loadTokenStream(jsonl, tok)], [...ids]); // second read: from the cache
  } finally {
    if (env === undefined) delete process.env.TORCHTS_CACHE_DIR;
    else process.env.TORCHTS_CACHE_DIR = env;
  }
});

test("the built-in debug tokenizer round-trips Tiny Shakespeare", async () => {
  const tok = await loadTokenizer("");
  assert.equal(tok.vocabSize, 2048);
  const text = readDocuments(BUILTIN_DATASETS.tinyshakespeare!)[0]!.slice(0, 20000);
  const ids = tok.encode(text, { addSpecialTokens: false });
  assert.ok(ids.length < text.length / 2.5, `BPE compresses: ${ids.length} tokens for ${text.length} characters`);
  assert.equal(tok.decode(ids), text);
});
