// Run by test/distributed/collectives.test.ts under `torchts run` at world sizes 2 and 4. Every
// rank runs the same checks in the same order (each check's collectives stay in step even when
// an assertion fails) and prints one RESULT line: [{ name, ok, detail }]. References are computed
// on each rank from every rank's input (inputs are a function of the rank), so a result is
// compared with what one process computes on the whole data. Integer-valued inputs are exact in
// every dtype, so those comparisons are exact; random float32 data is compared with a tolerance
// (the ring sums in its own order).
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
const dist = torch.distributed;

await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const store = dist.getDefaultStore();
const results: { name: string; ok: boolean; detail?: string }[] = [];

async function check(name: string, fn: () => unknown): Promise<void> {
  try {
    await fn();
    results.push({ name, ok: true });
  } catch (e) {
    results.push({ name, ok: false, detail: (e as Error).stack ?? String(e) });
  }
}

type DT = "float32" | "float16" | "bfloat16" | "int64";
const DTYPES: DT[] = ["float32", "float16", "bfloat16", "int64"];
const SMALL = [5, 3];
const LARGE = [70000]; // 280 KB and more: the ring (and chain) algorithms
const NR = [...Array(n).keys()];

/** Rank j's integer-valued input, in [lo, hi], as host numbers. */
function values(j: number, numel: number, lo = -8, hi = 8): number[] {
  const span = hi - lo + 1;
  return Array.from({ length: numel }, (_, i) => ((i * 5 + j * 7 + 3) % span) + lo);
}
const numelOf = (s: number[]) => s.reduce((a, b) => a * b, 1);
function input(j: number, shape: number[], dtype: DT, lo?: number, hi?: number): Tensor {
  return torch.tensor(values(j, numelOf(shape), lo, hi), { dtype }).reshape(shape);
}
async function flat(t: Tensor): Promise<number[]> {
  return Array.from(await t.data());
}
function fold(parts: number[][], f: (a: number, b: number) => number): number[] {
  return parts[0]!.map((_, i) => parts.slice(1).reduce((acc, p) => f(acc, p[i]!), parts[0]![i]!));
}
const OPS = {
  SUM: (a: number, b: number) => a + b,
  PRODUCT: (a: number, b: number) => a * b,
  MAX: Math.max,
  MIN: Math.min,
} as const;

// ---- allReduce: every op and dtype, direct (small) and ring (large) ----
for (const shape of [SMALL, LARGE])
  for (const dtype of DTYPES)
    for (const op of ["SUM", "AVG", "MAX", "MIN", "PRODUCT"] as const) {
      if (op === "AVG" && dtype === "int64") continue;
      if (shape === LARGE && (op === "MIN" || op === "PRODUCT")) continue; // same code path as MAX/SUM
      const [lo, hi] = op === "PRODUCT" ? [-2, 2] : [-8, 8];
      await check(`allReduce ${op} ${dtype} [${shape}]`, async () => {
        const t = input(rank, shape, dtype, lo, hi);
        dist.allReduce(t, { op: dist.ReduceOp[op] });
        const parts = NR.map((j) => values(j, numelOf(shape), lo, hi));
        const want = op === "AVG" ? fold(parts, OPS.SUM).map((x) => x / n) : fold(parts, OPS[op]);
        assert.deepEqual(await flat(t), want);
        assert.deepEqual(t.shape, shape);
        assert.equal(t.dtype, dtype);
      });
    }

await check("allReduce SUM of random float32 data (ring order) matches within 1e-5", async () => {
  const numel = 100_000;
  const xs = NR.map((j) => {
    torch.manualSeed(100 + j);
    return torch.randn([numel]);
  });
  const t = xs[rank]!.clone();
  dist.allReduce(t);
  const got = await flat(t);
  const parts = await Promise.all(xs.map(flat));
  const want = fold(parts, OPS.SUM);
  for (let i = 0; i < numel; i++) assert.ok(Math.abs(got[i]! - want[i]!) <= 1e-5 * (1 + Math.abs(want[i]!)), `element ${i}: ${got[i]} vs ${want[i]}`);
  // every rank holds the same bits
  const mine = torch.tensor(got);
  const lst = NR.map(() => torch.zeros([numel]));
  dist.allGather(lst, mine);
  for (const o of lst) assert.deepEqual(await flat(o), got);
});

// ---- broadcast, reduce ----
for (const shape of [SMALL, LARGE])
  for (const dtype of DTYPES) {
    await check(`broadcast ${dtype} [${shape}] from the last rank`, async () => {
      const t = input(rank, shape, dtype);
      dist.broadcast(t, n - 1);
      assert.deepEqual(await flat(t), values(n - 1, numelOf(shape)));
    });
    await check(`reduce SUM ${dtype} [${shape}] to rank 1`, async () => {
      const t = input(rank, shape, dtype);
      dist.reduce(t, 1);
      const want = rank === 1 ? fold(NR.map((j) => values(j, numelOf(shape))), OPS.SUM) : values(rank, numelOf(shape));
      assert.deepEqual(await flat(t), want);
    });
  }

// ---- gathers and scatters ----
for (const dtype of DTYPES) {
  await check(`allGather ${dtype}`, async () => {
    const outs = NR.map(() => torch.zeros(SMALL, { dtype }));
    dist.allGather(outs, input(rank, SMALL, dtype));
    for (const j of NR) assert.deepEqual(await flat(outs[j]!), values(j, 15));
  });
  await check(`allGatherIntoTensor ${dtype} (and in place: the input a chunk of the output)`, async () => {
    const out = torch.zeros([n * 5, 3], { dtype });
    dist.allGatherIntoTensor(out, input(rank, SMALL, dtype));
    assert.deepEqual(await flat(out), NR.flatMap((j) => values(j, 15)));
    const flatBuf = torch.zeros([n * 4], { dtype });
    const mine = flatBuf.narrow(0, rank * 4, 4);
    mine.copy_(input(rank, [4], dtype));
    dist.allGatherIntoTensor(flatBuf, mine);
    assert.deepEqual(await flat(flatBuf), NR.flatMap((j) => values(j, 4)));
  });
  for (const shape of [[n * 6], [n * 40000]])
    await check(`reduceScatterTensor SUM ${dtype} [${shape}]`, async () => {
      const m = shape[0]! / n;
      const out = torch.zeros([m], { dtype });
      dist.reduceScatterTensor(out, input(rank, shape, dtype));
      const whole = fold(NR.map((j) => values(j, shape[0]!)), OPS.SUM);
      assert.deepEqual(await flat(out), whole.slice(rank * m, (rank + 1) * m));
    });
  await check(`reduceScatter MAX ${dtype} (tensor list)`, async () => {
    const out = torch.zeros([3], { dtype });
    const ins = NR.map((j) => input(rank * n + j, [3], dtype));
    dist.reduceScatter(out, ins, dist.ReduceOp.MAX);
    assert.deepEqual(await flat(out), fold(NR.map((j) => values(j * n + rank, 3)), OPS.MAX));
  });
}

await check("allToAllSingle with equal splits", async () => {
  const t = input(rank, [n * 2, 3], "float32");
  const out = torch.zeros([n * 2, 3]);
  dist.allToAllSingle(out, t);
  const want = NR.flatMap((j) => values(j, n * 6).slice(rank * 6, rank * 6 + 6));
  assert.deepEqual(await flat(out), want);
});
await check("allToAllSingle with uneven splits (rank j sends j + 1 rows to each rank)", async () => {
  const rowsIn = NR.map(() => rank + 1);
  const rowsOut = NR.map((j) => j + 1);
  const t = input(rank, [n * (rank + 1), 2], "int64");
  const out = torch.zeros([rowsOut.reduce((a, b) => a + b, 0), 2], { dtype: "int64" });
  dist.allToAllSingle(out, t, { outputSplitSizes: rowsOut, inputSplitSizes: rowsIn });
  const want = NR.flatMap((j) => values(j, n * (j + 1) * 2).slice(rank * (j + 1) * 2, (rank + 1) * (j + 1) * 2));
  assert.deepEqual(await flat(out), want);
});
await check("allToAll with tensor lists", async () => {
  const outs = NR.map(() => torch.zeros([2]));
  dist.allToAll(outs, NR.map((j) => torch.tensor([rank * 10 + j, -rank], { dtype: "float32" })));
  for (const j of NR) assert.deepEqual(await flat(outs[j]!), [j * 10 + rank, -j]);
});
await check("gather to rank 0 and scatter from rank 0", async () => {
  const list = rank === 0 ? NR.map(() => torch.zeros([3])) : null;
  dist.gather(torch.tensor([rank, rank + 1, rank + 2], { dtype: "float32" }), { gatherList: list, dst: 0 });
  if (rank === 0) for (const j of NR) assert.deepEqual(await flat(list![j]!), [j, j + 1, j + 2]);
  const got = torch.zeros([2]);
  dist.scatter(got, rank === 0 ? NR.map((j) => torch.tensor([j * 2, j * 2 + 1], { dtype: "float32" })) : null, 0);
  assert.deepEqual(await flat(got), [rank * 2, rank * 2 + 1]);
});

// ---- point to point ----
await check("send/recv around the ring, isend/irecv with tags and Work.wait", async () => {
  const right = (rank + 1) % n;
  const left = (rank + n - 1) % n;
  if (rank % 2 === 0) {
    dist.send(torch.tensor([rank, 100], { dtype: "float32" }), right);
    const r = torch.zeros([2]);
    assert.equal(dist.recv(r, left), left);
    assert.deepEqual(await flat(r), [left, 100]);
  } else {
    const r = torch.zeros([2]);
    dist.recv(r, left);
    dist.send(torch.tensor([rank, 100], { dtype: "float32" }), right);
    assert.deepEqual(await flat(r), [left, 100]);
  }
  // tags keep two messages between the same ranks apart, whatever the order they are received in
  const a = torch.zeros([1]);
  const b = torch.zeros([1]);
  const reqs = [dist.isend(torch.tensor([rank + 0.5]), right, { tag: 7 }), dist.isend(torch.tensor([rank + 0.25]), right, { tag: 3 })];
  const rb = dist.irecv(b, left, { tag: 3 });
  const ra = dist.irecv(a, left, { tag: 7 });
  for (const w of [...reqs, ra, rb]) assert.equal(await w!.wait(), true);
  assert.deepEqual([...(await flat(a)), ...(await flat(b))], [left + 0.5, left + 0.25]);
});

// ---- async Work, and outputs pending on the transfer ----
await check("asyncOp returns a Work: wait, isCompleted, getFuture", async () => {
  const t = torch.full([8], rank + 1);
  const w = dist.allReduce(t, { asyncOp: true })!;
  assert.ok(w instanceof dist.Work);
  const [res] = await w.getFuture();
  assert.equal(res, t);
  assert.ok(w.isCompleted() && w.isSuccess() && w.exception() === null);
  assert.deepEqual(await flat(t), Array(8).fill((n * (n + 1)) / 2));
  assert.equal(dist.allReduce(torch.ones([1])), undefined); // no Work without asyncOp
});

await check("compute on the main thread runs while a collective is in flight", async () => {
  // rank 0 starts an all-reduce, then computes; the other ranks join the all-reduce only after
  // rank 0 says its compute is done, so the collective cannot have finished before that: if the
  // call had blocked this thread, the compute could not have run
  const t = torch.full([1000], rank + 1);
  let w: InstanceType<typeof dist.Work>;
  if (rank === 0) {
    w = dist.allReduce(t, { asyncOp: true })!;
    let x = torch.randn([64, 64]);
    for (let i = 0; i < 20; i++) x = torch.tanh(x.matmul(x).mul(0.01));
    const computed = await x.sum().item();
    assert.ok(Number.isFinite(computed));
    assert.equal(w.isCompleted(), false, "the all-reduce finished before the other ranks joined it");
    await store.set("overlap/computed", "1");
  } else {
    await store.get("overlap/computed");
    w = dist.allReduce(t, { asyncOp: true })!;
  }
  await w.wait();
  assert.deepEqual((await flat(t)).slice(0, 3), Array(3).fill((n * (n + 1)) / 2));
});

for (const mode of ["strict", "fused"] as const)
  await check(`${mode} mode: ops on a pending output wait for it; in-place writes after it; views of one buffer`, async () => {
    await torch.withEagerMode(mode, async () => {
      const t = torch.full([6], rank + 1);
      const before = t._version;
      dist.allReduce(t);
      assert.ok(t._version > before, "an all-reduce is an in-place write");
      const y = t.mul(2); // a kernel reading the pending value lands it first
      t.add_(1); // an in-place write after the collective
      const sum = (n * (n + 1)) / 2;
      assert.deepEqual(await flat(y), Array(6).fill(2 * sum));
      assert.deepEqual(await flat(t), Array(6).fill(sum + 1));
      // two collectives in a row on one tensor, and one on a view that leaves the rest of the buffer alone
      const u = torch.ones([4]);
      dist.allReduce(u);
      dist.allReduce(u);
      assert.deepEqual(await flat(u), Array(4).fill(n * n));
      const buf = torch.arange(0, 10, { dtype: "float32" });
      const view = buf.narrow(0, 2, 3);
      const pending = buf.add(0); // fused: a pending reader of the old contents
      dist.allReduce(view);
      assert.deepEqual(await flat(buf), [0, 1, 2 * n, 3 * n, 4 * n, 5, 6, 7, 8, 9]);
      assert.deepEqual(await flat(pending), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });
  });

await check("a large all-reduce (the ring) on a view works in place in the arena and leaves the rest of the buffer alone", async () => {
  const m = 300_000; // 1.2 MB: past the direct algorithms' limit, several ring segments
  const buf = torch.full([m + 7], -1, { dtype: "float32" });
  const view = buf.narrow(0, 3, m);
  view.copy_(torch.arange(0, m, { dtype: "float32" }).add(rank));
  dist.allReduce(view, { op: dist.ReduceOp.AVG });
  const got = await flat(buf);
  const shift = (n - 1) / 2; // the mean of 0..n-1
  assert.deepEqual(got.slice(0, 3), [-1, -1, -1]);
  assert.deepEqual(got.slice(m + 3), [-1, -1, -1, -1]);
  for (const i of [0, 1, 777, m - 1]) assert.equal(got[3 + i], i + shift, `element ${i}`);
});

// ---- groups ----
await check("newGroup: a subgroup of the first and last rank; non-members do nothing", async () => {
  const g = dist.newGroup([n - 1, 0]);
  assert.deepEqual(dist.getProcessGroupRanks(g), [0, n - 1]);
  const member = rank === 0 || rank === n - 1;
  assert.equal(dist.getRank(g), member ? (rank === 0 ? 0 : 1) : -1);
  assert.equal(dist.getWorldSize(g), member ? 2 : -1);
  const t = torch.full([3], rank + 1);
  assert.equal(dist.allReduce(t, { group: g, asyncOp: true }) === undefined, !member);
  assert.deepEqual(await flat(t), Array(3).fill(member ? n + 1 : rank + 1));
  const b = torch.full([2], rank);
  dist.broadcast(b, n - 1, { group: g });
  assert.deepEqual(await flat(b), Array(2).fill(member ? n - 1 : rank));
});

await check("barrier", () => {
  dist.barrier();
  dist.barrier({ group: dist.group.WORLD });
});

await check("argument errors are PyTorch's", () => {
  const t = torch.zeros([2, 3]);
  assert.throws(() => dist.allReduce(t.transpose(0, 1)), /Tensors must be contiguous/);
  assert.throws(() => dist.allReduce(torch.zeros([2], { dtype: "int64" }), { op: dist.ReduceOp.AVG }), /ReduceOp.AVG needs a floating-point tensor/);
  assert.throws(() => dist.allReduce(t, { asyncop: true } as never), /unexpected keyword argument 'asyncop' \(did you mean 'asyncOp'\?\)/);
  assert.throws(() => dist.broadcast(t, n), /The global rank \d+ is not part of the group/);
  assert.throws(() => dist.allGather([t], t), /one tensor per rank/);
});

// ---- mpmd safety (each on its own group: a failure breaks the group it happens on) ----
await check("a mismatched collective raises on every rank, naming the ranks and both ops", async () => {
  const g = dist.newGroup();
  const t = torch.ones([4]);
  if (rank === 0) dist.allReduce(t, { group: g });
  else dist.broadcast(t, 0, { group: g });
  await assert.rejects(t.tolist(), (e: Error) => {
    assert.match(e.message, /Detected mismatch between collectives on ranks\. Rank \d+ is running .* but Rank \d+ is running/);
    assert.match(e.message, /allReduce\(float32\[4\], op=SUM\)/);
    assert.match(e.message, /broadcast\(float32\[4\], src=0\)/);
    // every mismatched pair has rank 0 (the only one running allReduce) in it
    assert.match(e.message, /Rank 0 is running allReduce\(float32\[4\], op=SUM\)/);
    return true;
  });
  // the group stays broken: the next call raises at once
  assert.throws(() => dist.allReduce(torch.ones([1]), { group: g }), /Detected mismatch/);
});

await check("a collective a rank never joins times out naming the pending op and the rank", async () => {
  const g = dist.newGroup({ timeout: 1500 });
  if (rank === 0) {
    const t = torch.ones([2]);
    dist.allReduce(t, { group: g });
    await assert.rejects(t.tolist(), /\[Rank 0\] Timed out after 1500 ms: allReduce\(float32\[2\], op=SUM\) \(sequence number 0 of group \d+\) is still waiting for ranks? [\d, ]+/);
  }
});

await check("monitoredBarrier names the rank that did not arrive", () => {
  dist.monitoredBarrier({ timeout: 20_000 }); // everyone comes
  const g = dist.newGroup();
  if (rank !== n - 1) assert.throws(() => dist.monitoredBarrier({ group: g, timeout: 1500 }), new RegExp(`\\[Rank 0\\]: Rank ${n - 1} failed to pass monitoredBarrier in 1500 ms`));
  if (n > 2) {
    const g2 = dist.newGroup();
    if (rank < n - 2)
      assert.throws(() => dist.monitoredBarrier({ group: g2, timeout: 1500, waitAllRanks: true }), new RegExp(`Ranks ${n - 2}, ${n - 1} failed to pass monitoredBarrier in 1500 ms`));
  }
});

await check("the world group still works after failures on subgroups", async () => {
  const t = torch.ones([2]);
  dist.allReduce(t);
  assert.deepEqual(await flat(t), [n, n]);
});

console.log(`RESULT ${rank} ${JSON.stringify(results)}`);
await dist.destroyProcessGroup();
