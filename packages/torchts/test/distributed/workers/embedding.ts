// Run by test/distributed/embedding.test.ts under `torchts run` at world sizes 2 and 4.
// The reference is computed on every rank from the same seeds: the unsharded EmbeddingBagCollection
// (nn.EmbeddingBag per table) on the global batch (every rank's samples, in rank order), and the
// DLRM example trained in one process on the whole batch.
import assert from "node:assert/strict";
import { join } from "node:path";
import * as torch from "../../../src/index.js";
import { mulberry32 } from "../../../src/utils/prng.js";
import { DLRM } from "../../../../../examples/dlrm/model.js";
import { makeClicks } from "../../../../../examples/dlrm/data.js";
import { ShardedDLRM } from "../../../../../examples/dlrm/sharded.js";
import { assertClose, check, report } from "./checks.js";
const dist = torch.distributed;
const { EmbeddingBagCollection, ShardedEmbeddingBagCollection, KeyedJaggedTensor, KeyedTensor, shardModules } = dist.embedding;
type EBC = InstanceType<typeof EmbeddingBagCollection>;
type SEBC = InstanceType<typeof ShardedEmbeddingBagCollection>;

const dir = process.argv[2]!; // a scratch folder shared by the ranks
await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();

// uneven rows: at 4 ranks t0 splits 2/2/2/1 and t1 1/1/1/0 (an empty shard); t2 is a mean table of two features
const TABLES = [
  { name: "t0", numEmbeddings: 7, embeddingDim: 4, featureNames: ["a"] },
  { name: "t1", numEmbeddings: 3, embeddingDim: 3, featureNames: ["b"], pooling: "sum" as const },
  { name: "t2", numEmbeddings: 10, embeddingDim: 5, featureNames: ["c", "d"], pooling: "mean" as const },
];
const ROWS: Record<string, number> = { a: 7, b: 3, c: 10, d: 10 };
// the input's keys in another order than the tables', plus one no table reads
const KEYS = ["d", "a", "extra", "c", "b"];
// local batch sizes per rank (uneven; at 4 ranks rank 1 has no samples at all)
const BATCH = n === 2 ? [3, 2] : [3, 0, 4, 2];

interface Batch {
  lengths: number[][]; // per key: B lengths
  ids: number[][]; // per key: the ids
}
function makeBatch(seed: number, B: number): Batch {
  const r = mulberry32(seed);
  const lengths = KEYS.map(() => Array.from({ length: B }, () => Math.floor(r() * 4))); // 0..3: empty bags too
  const ids = KEYS.map((k, i) => lengths[i]!.flatMap((l) => Array.from({ length: l }, () => Math.floor(r() * (ROWS[k] ?? 50)))));
  return { lengths, ids };
}
const kjt = (b: Batch, dtype: "int64" | "int32" = "int64") =>
  KeyedJaggedTensor.fromLengthsSync(KEYS, torch.tensor(b.ids.flat(), { dtype }), torch.tensor(b.lengths.flat(), { dtype }));
const batches = BATCH.map((B, r) => makeBatch(100 + r, B));
const global: Batch = { lengths: KEYS.map((_, i) => batches.flatMap((b) => b.lengths[i]!)), ids: KEYS.map((_, i) => batches.flatMap((b) => b.ids[i]!)) };
const before = BATCH.slice(0, rank).reduce((p, q) => p + q, 0);
const mine = BATCH[rank]!;

function ebc(seed: number): EBC {
  torch.manualSeed(seed);
  return new EmbeddingBagCollection(TABLES);
}
const weightOf = (m: EBC | SEBC, t: string) => (m.embedding_bags.get(t) as unknown as { weight: InstanceType<typeof torch.nn.Parameter> }).weight;
const shardOf = (m: SEBC, t: string) => (m.embedding_bags.get(t) as unknown as { weight: InstanceType<typeof dist.tensor.DTensorParameter> }).weight;

// the reference: forward on the global batch, loss = sum(out * G), gradients of every table
const ref = ebc(5);
const refOut = ref.forward(kjt(global));
const Dtot = 4 + 3 + 5 + 5;
torch.manualSeed(9);
const G = torch.randn([refOut.values().shape[0]!, Dtot]);
refOut.values().mul(G).sum().backward();
const myG = G.narrow(0, before, mine);

async function forwardAndGradients(sharded: SEBC, divided: boolean, dtype: "int64" | "int32" = "int64"): Promise<void> {
  const out = sharded.forward(kjt(batches[rank]!, dtype));
  assert.ok(out instanceof KeyedTensor);
  assert.deepEqual(out.keys(), ["a", "b", "c", "d"]);
  assert.deepEqual(out.lengthPerKey(), [4, 3, 5, 5]);
  await assertClose(out.values(), refOut.values().narrow(0, before, mine), `rank ${rank}'s pooled embeddings`, 1e-5, 1e-6);
  const refDict = refOut.toDict();
  for (const [k, v] of Object.entries(out.toDict())) await assertClose(v, refDict[k]!.narrow(0, before, mine), `toDict()["${k}"]`, 1e-5, 1e-6);
  out.values().mul(myG).sum().backward();
  for (const t of TABLES) {
    const { start, rows } = sharded.shardRange(t.name);
    const w = shardOf(sharded, t.name);
    assert.equal(w.toLocal().shape[0], rows);
    assert.ok(w.grad, `table ${t.name}: its shard has a gradient`);
    const want = weightOf(ref, t.name).grad!.narrow(0, start, rows);
    await assertClose(w.grad.toLocal(), divided ? want.div(n) : want, `table ${t.name}: gradient of rows [${start}, ${start + rows})`, 1e-5, 1e-6);
  }
}

await check("ROW_WISE shards: each rank holds its contiguous rows of every table (uneven and empty shards), whole tables gather back", async () => {
  const sharded = new ShardedEmbeddingBagCollection(ebc(5));
  for (const t of TABLES) {
    const c = Math.ceil(t.numEmbeddings / n);
    const start = Math.min(rank * c, t.numEmbeddings);
    assert.deepEqual(sharded.shardRange(t.name), { start, rows: Math.min(t.numEmbeddings, start + c) - start });
    await assertClose(shardOf(sharded, t.name).fullTensor(), weightOf(ref, t.name).detach(), `table ${t.name} gathered`, 0, 0);
  }
  const sd = sharded.stateDict();
  assert.deepEqual([...sd.keys()], ["embedding_bags.t0.weight", "embedding_bags.t1.weight", "embedding_bags.t2.weight"]);
  for (const v of sd.values()) assert.ok(v instanceof dist.tensor.DTensor, "the state dict holds the shards as DTensors");
});

await check("forward and gradients equal the unsharded collection (uneven batches and rows, empty bags and batches, mean pooling, gradient division off)", () =>
  forwardAndGradients(new ShardedEmbeddingBagCollection(ebc(5), { gradientDivision: false }), false),
);

await check("with gradient division (TorchRec's default) the shards' gradients are divided by the world size; int32 ids work", () =>
  forwardAndGradients(new ShardedEmbeddingBagCollection(ebc(5)), true, "int32"),
);

await check("the same in fused eager mode", () =>
  torch.withEagerMode("fused", () => forwardAndGradients(new ShardedEmbeddingBagCollection(ebc(5), { gradientDivision: false }), false)),
);

await check("a distributed checkpoint of the shards loads into other shards and, resharded, into the unsharded collection", async () => {
  const checkpointId = join(dir, "ebc");
  await dist.checkpoint.save(new ShardedEmbeddingBagCollection(ebc(5)).stateDict(), { checkpointId });
  const other = new ShardedEmbeddingBagCollection(ebc(6));
  await dist.checkpoint.load(other.stateDict(), { checkpointId }); // filled in place
  const plain = ebc(6);
  await dist.checkpoint.load(plain.stateDict(), { checkpointId });
  for (const t of TABLES) {
    await assertClose(shardOf(other, t.name).fullTensor(), weightOf(ref, t.name).detach(), `table ${t.name} loaded into shards`, 0, 0);
    await assertClose(weightOf(plain, t.name).detach(), weightOf(ref, t.name).detach(), `table ${t.name} loaded whole`, 0, 0);
  }
});

await check("shardModules replaces an EmbeddingBagCollection inside a module", async () => {
  const holder = new torch.nn.Module() as InstanceType<typeof torch.nn.Module> & { sparse: unknown };
  holder.sparse = ebc(5);
  const same = shardModules(holder, { gradientDivision: false });
  assert.equal(same, holder);
  assert.ok(holder.sparse instanceof ShardedEmbeddingBagCollection);
  await forwardAndGradients(holder.sparse as SEBC, false);
});

await check("an id out of range raises on its rank naming the table, the feature and the id; every other rank raises naming that rank; the next forward works", async () => {
  const sharded = new ShardedEmbeddingBagCollection(ebc(5));
  const bad = n - 1;
  const b = batches[rank]!;
  const ids = b.ids.map((x) => [...x]);
  if (rank === bad) ids[1] = [...ids[1]!, 7]; // key "a" (table t0, 7 rows)
  const lengths = b.lengths.map((x) => [...x]);
  if (rank === bad) lengths[1]![0]! += 1;
  const input = KeyedJaggedTensor.fromLengthsSync(KEYS, torch.tensor(ids.flat(), { dtype: "int64" }), torch.tensor(lengths.flat(), { dtype: "int64" }));
  if (rank === bad) assert.throws(() => sharded.forward(input), /id 7 of feature 'a' is out of range for table 't0' \(7 rows: ids must be in \[0, 7\)\)/);
  else assert.throws(() => sharded.forward(input), new RegExp(`the input of rank\\(s\\) ${bad} is invalid`));
  const out = sharded.forward(kjt(b));
  await assertClose(out.values(), refOut.values().narrow(0, before, mine), "the forward after the error", 1e-5, 1e-6);
});

await check("a missing feature raises naming it and its table; the unsharded collection validates the same way", () => {
  const sharded = new ShardedEmbeddingBagCollection(ebc(5));
  const noC = KeyedJaggedTensor.fromLengthsSync(["a", "b", "d"], torch.tensor([1, 2], { dtype: "int64" }), torch.tensor([1, 0, 1], { dtype: "int64" }));
  assert.throws(() => sharded.forward(noC), /the input has no feature 'c' \(table 't2'/);
  assert.throws(() => ref.forward(noC), /the input has no feature 'c' \(table 't2'/);
  const neg = KeyedJaggedTensor.fromLengthsSync(["a", "b", "c", "d"], torch.tensor([-1], { dtype: "int64" }), torch.tensor([0, 1, 0, 0], { dtype: "int64" }));
  assert.throws(() => ref.forward(neg), /id -1 of feature 'b' is out of range for table 't1'/);
});

await check("KeyedJaggedTensor, KeyedTensor and the configs validate their arguments", () => {
  const v = torch.tensor([1, 2, 3, 4], { dtype: "int64" });
  assert.throws(() => KeyedJaggedTensor.fromLengthsSync(["a", "b"], v, torch.tensor([1, 2, 1, 2], { dtype: "int64" })), /the lengths sum to 6 but there are 4 values/);
  assert.throws(() => KeyedJaggedTensor.fromLengthsSync(["a", "b"], v, torch.tensor([1, 2, 1], { dtype: "int64" })), /3 lengths do not divide among 2 keys/);
  assert.throws(() => KeyedJaggedTensor.fromLengthsSync(["a", "b"], v, torch.tensor([1, -1, 3, 1], { dtype: "int64" })), /lengths must be non-negative, got lengths\[1\] = -1/);
  assert.throws(() => KeyedJaggedTensor.fromLengthsSync(["a", "a"], v, torch.tensor([2, 2], { dtype: "int64" })), /key 'a' appears twice/);
  assert.throws(() => KeyedJaggedTensor.fromLengthsSync(["a"], torch.tensor([1.5]), torch.tensor([1], { dtype: "int64" })), /'values' must be int64 or int32, got float32/);
  assert.throws(() => KeyedJaggedTensor.fromOffsetsSync(["a"], v, torch.tensor([0, 3, 2, 4], { dtype: "int64" })), /'offsets' must be non-decreasing/);
  const k = KeyedJaggedTensor.fromOffsetsSync(["a", "b"], v, torch.tensor([0, 1, 1, 3, 4], { dtype: "int64" }));
  assert.equal(k.stride(), 2);
  assert.deepEqual(k.lengthPerKey(), [1, 3]);
  assert.throws(() => k.get("z"), /no key 'z'/);
  assert.throws(() => new KeyedTensor(["a", "b"], [2, 2], torch.zeros([3, 5])), /'values' has 5 entries along dim 1, but lengthPerKey sums to 4/);
  assert.throws(() => new EmbeddingBagCollection([{ ...TABLES[0]!, pooling: "max" as "sum" }]), /pooling must be PoolingType.SUM or PoolingType.MEAN/);
  assert.throws(() => new EmbeddingBagCollection([TABLES[0]!, { ...TABLES[1]!, featureNames: ["a"] }]), /feature 'a' is listed by tables 't0' and 't1'/);
  assert.throws(() => new EmbeddingBagCollection([{ ...TABLES[0]!, numEmbeddings: 0 }]), /'numEmbeddings' must be an integer >= 1/);
  assert.throws(() => new ShardedEmbeddingBagCollection(ebc(5), { shardingType: "table_wise" }), /sharding type 'table_wise' is not supported/);
});

// DLRM: sharded tables + DDP dense part vs one process on the whole batch
await check("DLRM: 6 Adam steps with row-wise sharded tables and DDP dense MLPs equal single-process training on the whole batch", async () => {
  const cfg = { nDense: 4, tableSizes: [13, 7, 21], embDim: 4, bottom: [8], top: [8] };
  const GB = 8; // global batch, split evenly
  const STEPS = 6;
  const bag = 2;
  const data = makeClicks(GB * STEPS, cfg.nDense, cfg.tableSizes, bag, 3);
  const dense = torch.tensor(data.dense).reshape(GB * STEPS, cfg.nDense);
  const sparse = data.sparse.map((ids) => torch.tensor(ids, { dtype: "int64" }).reshape(GB * STEPS, bag));
  const labels = torch.tensor(data.labels);
  const model = (seed: number) => {
    torch.manualSeed(seed);
    return new DLRM(cfg);
  };
  const bce = torch.nn.functional.binaryCrossEntropyWithLogits;

  const single = model(11);
  const refOpt = new torch.optim.Adam(single.parameters(), { lr: 0.02 });
  const refLosses: number[] = [];
  for (let s = 0; s < STEPS; s++) {
    const loss = bce(single.forward(dense.narrow(0, s * GB, GB), sparse.map((x) => x.narrow(0, s * GB, GB))), labels.narrow(0, s * GB, GB));
    refOpt.zeroGrad();
    loss.backward();
    refOpt.step();
    refLosses.push(await loss.item());
  }

  const sharded = new ShardedDLRM(model(11));
  const opt = new torch.optim.Adam(sharded.parameters(), { lr: 0.02 });
  const m = GB / n;
  for (let s = 0; s < STEPS; s++) {
    const at = s * GB + rank * m;
    const loss = bce(sharded.forward(dense.narrow(0, at, m), sparse.map((x) => x.narrow(0, at, m))), labels.narrow(0, at, m));
    opt.zeroGrad();
    loss.backward();
    opt.step();
    const g = loss.detach().clone();
    dist.allReduce(g, { op: dist.ReduceOp.AVG });
    const l = await g.item();
    assert.ok(Math.abs(l - refLosses[s]!) <= 1e-5 * Math.abs(refLosses[s]!), `step ${s + 1}: loss ${l} vs single-process ${refLosses[s]}`);
  }
  const refParams = new Map(single.namedParameters());
  for (const [name, p] of sharded.dense.module.namedParameters()) await assertClose(p, refParams.get(name)!, name, 1e-5, 1e-6);
  for (let t = 0; t < cfg.tableSizes.length; t++) await assertClose(sharded.fullTable(t), refParams.get(`emb_l.${t}.weight`)!, `table ${t} (gathered)`, 1e-5, 1e-6);
});

report(rank);
await dist.destroyProcessGroup();
