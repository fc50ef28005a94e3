// Run by test/distributed/dtensor.test.ts under `torchts run` at world sizes 2 and 4: DeviceMesh,
// DTensor construction, redistribution between every pair of placements (1-d mesh; and a 2-d
// [2, 2] mesh at 4 ranks, nested shards included) with even and uneven shapes, and sharding
// propagation: each op on DTensors equals the op on the whole tensors, with the expected placements.
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { assertClose, check, report } from "./checks.js";
const dist = torch.distributed;
const { Shard, Replicate, Partial, distributeTensor, DTensor } = dist.tensor;
type Placement = InstanceType<typeof dist.tensor.Placement>;
type DT = InstanceType<typeof DTensor>;

await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const mesh = dist.initDeviceMesh("cpu", [n]);
const mesh2 = n === 4 ? dist.initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] }) : null;

/** Integer-valued data (sums and the halving/quartering of Partial are exact). */
const ints = (shape: number[], k = 1) => torch.arange(shape.reduce((a, b) => a * b, 1)).reshape(shape).mul(k).sub(7);
const rand = (shape: number[], seed: number) => (torch.manualSeed(seed), torch.randn(shape));

/** A DTensor of `x` with `placements` (Partial ones made from Replicate). */
function dt(x: Tensor, placements: Placement[], m = mesh): DT {
  const d = distributeTensor(x, m, placements.map((p) => (p.isPartial() ? Replicate() : p)));
  return placements.some((p) => p.isPartial()) ? d.redistribute(null, placements) : d;
}

/** This rank's piece of `x` for non-Partial placements, computed locally. */
function expectedLocal(x: Tensor, d: DT): Tensor {
  let t = x;
  const offs = d.localOffsets();
  d.toLocal().shape.forEach((len, k) => (t = t.narrow(k, offs[k]!, len)));
  return t;
}

await check("DeviceMesh: shape, names, groups, coordinates, sub-meshes", () => {
  assert.equal(mesh.size(), n);
  assert.equal(mesh.getLocalRank(), rank);
  assert.equal(mesh.toString(), `DeviceMesh('cpu', [${[...Array(n).keys()].join(", ")}])`);
  if (mesh2) {
    assert.deepEqual(mesh2.getCoordinate(), [Math.floor(rank / 2), rank % 2]);
    assert.deepEqual(dist.getProcessGroupRanks(mesh2.getGroup("tp")), rank < 2 ? [0, 1] : [2, 3]);
    assert.deepEqual(dist.getProcessGroupRanks(mesh2.getGroup("dp")), rank % 2 ? [1, 3] : [0, 2]);
    assert.deepEqual(mesh2.get("tp").ranks, rank < 2 ? [0, 1] : [2, 3]);
    assert.equal(mesh2.toString(), "DeviceMesh('cpu', [[0, 1], [2, 3]], mesh_dim_names=('dp', 'tp'))");
    assert.throws(() => mesh2.getGroup(), /Optional kwarg `mesh_dim` needs to be specified/);
  }
  assert.throws(() => dist.initDeviceMesh("cpu", [n + 1]), /has \d+ ranks but the world size is/);
  assert.throws(() => dist.initDeviceMesh("cpu", [n], { meshDimNames: ["a", "b"] }), /should have same length/);
});

await check("distributeTensor, fromLocal, toLocal, fullTensor; uneven shards are torch.chunk's", async () => {
  const x = ints([7, 3]);
  const d = distributeTensor(x, mesh, [Shard(0)]);
  assert.deepEqual(d.shape, [7, 3]);
  const c = Math.ceil(7 / n);
  const rows = Math.max(0, Math.min(7, (rank + 1) * c) - Math.min(7, rank * c));
  assert.deepEqual(d.toLocal().shape, [rows, 3]);
  assert.deepEqual(await d.toLocal().tolist(), await x.narrow(0, Math.min(7, rank * c), rows).tolist());
  assert.deepEqual(await d.fullTensor().tolist(), await x.tolist());
  assert.equal(String(d.placements[0]), "Shard(dim=0)");
  const f = DTensor.fromLocal(torch.full([2, 3], rank), mesh, [Shard(0)]);
  assert.deepEqual(f.shape, [2 * n, 3]);
  assert.deepEqual((await f.fullTensor().tolist()) as number[][], [...Array(n).keys()].flatMap((r) => [[r, r, r], [r, r, r]]));
  const p = DTensor.fromLocal(torch.full([2], rank + 1), mesh, [Partial()]);
  assert.deepEqual(await p.fullTensor().tolist(), [(n * (n + 1)) / 2, (n * (n + 1)) / 2]);
  assert.deepEqual(await p.tolist(), [(n * (n + 1)) / 2, (n * (n + 1)) / 2], "host reads read the whole tensor");
  // srcDataRank: the values of that rank count
  const s = distributeTensor(torch.full([4], rank), mesh, [Replicate()], { srcDataRank: n - 1 });
  assert.deepEqual(await s.toLocal().tolist(), [n - 1, n - 1, n - 1, n - 1]);
  assert.throws(() => d.toLocal().add(d), /got mixed Tensor and DTensor/);
  assert.throws(() => d._contiguousHost(), /reads a DTensor's global storage/);
});

const single = (): Placement[] => [Shard(0), Shard(1), Replicate(), Partial()];
async function roundTrips(m: typeof mesh, shapes: number[][], placementSets: Placement[][]): Promise<number> {
  let count = 0;
  for (const shape of shapes) {
    const x = ints(shape);
    const built = placementSets.map((a) => dt(x, a, m));
    for (const [ia, a] of placementSets.entries())
      for (const b of placementSets) {
        const what = `[${shape}] ${a.map(String)} -> ${b.map(String)}`;
        const da = built[ia]!;
        const e = da.redistribute(null, b);
        assert.deepEqual(e.placements.map(String), b.map(String), what);
        if (b.some((p) => p.isPartial())) assert.deepEqual(await e.fullTensor().tolist(), await x.tolist(), `${what}: values`);
        else assert.deepEqual(await e.toLocal().tolist(), await expectedLocal(x, e).tolist(), `${what}: this rank's piece`);
        const back = e.redistribute(null, a);
        assert.deepEqual(await back.toLocal().tolist(), await da.toLocal().tolist(), `${what} and back`);
        count++;
      }
  }
  return count;
}

await check("redistribute: every pair of placements on a 1-d mesh, and back, exactly (even, uneven, empty shards)", async () => {
  const k = await roundTrips(mesh, [[8, 4], [7, 5], [3, 1]], single().map((p) => [p]));
  assert.equal(k, 48);
});

await check("redistribute: every pair of placements on a 2-d mesh (nested shards included), and back, exactly", async () => {
  if (!mesh2) return;
  const sets = single().flatMap((a) => single().map((b) => [a, b]));
  assert.equal(await roundTrips(mesh2, [[7, 5]], sets), 256);
});

// ---- propagation: op(DTensors).fullTensor() equals op(tensors), with the placements it should have
async function prop(what: string, f: (...xs: Tensor[]) => Tensor, xs: Tensor[], pls: Placement[][], want: string, m = mesh, tol = 1e-5): Promise<void> {
  const ds = xs.map((x, i) => (pls[i] ? dt(x, pls[i]!, m) : x));
  const out = f(...ds) as DT;
  assert.ok(out instanceof DTensor, `${what}: a DTensor result`);
  assert.equal(out.placements.map(String).join(", "), want, `${what}: placements`);
  await assertClose(out.fullTensor(), f(...xs), what, tol, tol);
}

await check("pointwise ops: shards carry over, broadcasting, Partial through linear ops, in place", async () => {
  const a = rand([7, 5], 1);
  const b = rand([7, 5], 2);
  const v = rand([5], 3);
  await prop("add S0 S0", (x, y) => x.add(y), [a, b], [[Shard(0)], [Shard(0)]], "Shard(dim=0)");
  await prop("add S0 R", (x, y) => x.add(y), [a, b], [[Shard(0)], [Replicate()]], "Shard(dim=0)");
  await prop("mul S1 S0", (x, y) => x.mul(y), [a, b], [[Shard(1)], [Shard(0)]], "Shard(dim=1)");
  await prop("add [7,5] S0 + [5] R (broadcast)", (x, y) => x.add(y), [a, v], [[Shard(0)], [Replicate()]], "Shard(dim=0)");
  await prop("add [7,5] R + [5] S0 (broadcast)", (x, y) => x.add(y), [a, v], [[Replicate()], [Shard(0)]], "Shard(dim=1)");
  await prop("mul(Partial, 3)", (x) => x.mul(3), [a], [[Partial()]], "Partial(sum)");
  await prop("Partial + Partial", (x, y) => x.add(y, { alpha: 2 }), [a, b], [[Partial()], [Partial()]], "Partial(sum)");
  await prop("exp(Partial) reduces first", (x) => x.exp(), [a], [[Partial()]], "Replicate()");
  await prop("gelu, tanh, where", (x, y) => torch.where(x.gt(0), torch.nn.functional.gelu(x), y.tanh()), [a, b], [[Shard(1)], [Shard(1)]], "Shard(dim=1)");
  await prop("zerosLike, clone, detach, to(float64)", (x) => torch.zerosLike(x).add(x.clone().detach().to("float64").float()), [a], [[Shard(0)]], "Shard(dim=0)");
  const d = dt(a, [Shard(0)]);
  const r = d.add_(dt(b, [Replicate()]));
  assert.equal(r, d, "add_ returns its target");
  assert.equal(String(d.placements[0]), "Shard(dim=0)");
  await assertClose(d.fullTensor(), a.add(b), "add_ in place");
  assert.equal(d.numel(), 35);
  assert.deepEqual(d.size(), [7, 5]);
});

await check("matmul / mm / bmm / linear: row, column and contraction shards", async () => {
  const A = rand([7, 6], 4);
  const Bm = rand([6, 5], 5);
  await prop("mm S0 x R", (x, y) => x.mm(y), [A, Bm], [[Shard(0)], [Replicate()]], "Shard(dim=0)");
  await prop("mm R x S1", (x, y) => x.mm(y), [A, Bm], [[Replicate()], [Shard(1)]], "Shard(dim=1)");
  await prop("mm S1 x S0 (contraction)", (x, y) => x.mm(y), [A, Bm], [[Shard(1)], [Shard(0)]], "Partial(sum)");
  await prop("mm S1 x R (the right side is chunked locally)", (x, y) => x.mm(y), [A, Bm], [[Shard(1)], [Replicate()]], "Partial(sum)");
  await prop("mm S0 x S1 (the right side is gathered)", (x, y) => x.mm(y), [A, Bm], [[Shard(0)], [Shard(1)]], "Shard(dim=0)");
  await prop("mm Partial x R", (x, y) => x.mm(y), [A, Bm], [[Partial()], [Replicate()]], "Partial(sum)");
  const X = rand([3, 4, 6], 6);
  const Y = rand([3, 6, 5], 7);
  await prop("bmm S0 x S0 (batch)", (x, y) => torch.bmm(x, y), [X, Y], [[Shard(0)], [Shard(0)]], "Shard(dim=0)");
  await prop("matmul [3,4,6] S1 x [6,5] R", (x, y) => x.matmul(y), [X, Bm], [[Shard(1)], [Replicate()]], "Shard(dim=1)");
  await prop("matmul [3,4,6] S0 x [6,5] R (batch broadcast)", (x, y) => x.matmul(y), [X, Bm], [[Shard(0)], [Replicate()]], "Shard(dim=0)");
  const x = rand([4, 6], 8);
  const W = rand([5, 6], 9);
  const bias = rand([5], 10);
  const F = torch.nn.functional;
  await prop("linear colwise: x R, W S0, b S0", (a, w, b) => F.linear(a, w, b), [x, W, bias], [[Replicate()], [Shard(0)], [Shard(0)]], "Shard(dim=1)");
  await prop("linear rowwise: x S1, W S1, b R (all-reduced, then the bias)", (a, w, b) => F.linear(a, w, b), [x, W, bias], [[Shard(1)], [Shard(1)], [Replicate()]], "Replicate()");
  await prop("linear rowwise without bias: Partial", (a, w) => F.linear(a, w), [x, W], [[Shard(1)], [Shard(1)]], "Partial(sum)");
  if (mesh2) {
    await prop("2-d mesh: mm [S0, R] x [R, S1]", (a, b) => a.mm(b), [A, Bm], [[Shard(0), Replicate()], [Replicate(), Shard(1)]], "Shard(dim=0), Shard(dim=1)", mesh2);
    await prop("2-d mesh: mm [S0, S1] x [R, S0]", (a, b) => a.mm(b), [A, Bm], [[Shard(0), Shard(1)], [Replicate(), Shard(0)]], "Shard(dim=0), Partial(sum)", mesh2);
  }
});

await check("embedding: sharded indices, column- and row-sharded tables", async () => {
  const W = rand([11, 6], 11);
  const idx = torch.tensor([[0, 3, 10, 5], [7, 2, 2, 9], [1, 4, 6, 8]], { dtype: "int64" });
  const F = torch.nn.functional;
  await prop("indices S0, table R", (i, w) => F.embedding(i, w), [idx, W], [[Shard(0)], [Replicate()]], "Shard(dim=0)");
  await prop("table S1 (colwise)", (i, w) => F.embedding(i, w), [idx, W], [[Replicate()], [Shard(1)]], "Shard(dim=2)");
  await prop("table S0 (rowwise): Partial", (i, w) => F.embedding(i, w), [idx, W], [[Replicate()], [Shard(0)]], "Partial(sum)");
});

await check("reductions: over a sharded dim Partial (mean right for uneven shards), over others the shard moves", async () => {
  const a = rand([7, 5], 12);
  await prop("sum(0) of S0", (x) => x.sum(0), [a], [[Shard(0)]], "Partial(sum)");
  await prop("sum() of S1", (x) => x.sum(), [a], [[Shard(1)]], "Partial(sum)");
  await prop("mean(0) of S0 (7 rows)", (x) => x.mean(0), [a], [[Shard(0)]], "Partial(sum)");
  await prop("mean(0, keepdim) of S0", (x) => x.mean(0, true), [a], [[Shard(0)]], "Partial(sum)");
  await prop("amax(0) of S0", (x) => x.amax(0), [a], [[Shard(0)]], "Partial(max)");
  await prop("amin(1) of S1", (x) => x.amin(1), [a], [[Shard(1)]], "Partial(min)");
  await prop("sum(0) of S1", (x) => x.sum(0), [a], [[Shard(1)]], "Shard(dim=0)");
  await prop("mean(1) of S0", (x) => x.mean(1), [a], [[Shard(0)]], "Shard(dim=0)");
  await prop("sum(1) of Partial", (x) => x.sum(1), [a], [[Partial()]], "Partial(sum)");
});

await check("softmax, logSoftmax, layerNorm, rmsNorm: the normalized dims are gathered, other shards stay", async () => {
  const a = rand([6, 8], 13);
  const F = torch.nn.functional;
  await prop("softmax(1) of S0", (x) => F.softmax(x, 1), [a], [[Shard(0)]], "Shard(dim=0)");
  await prop("softmax(1) of S1", (x) => F.softmax(x, 1), [a], [[Shard(1)]], "Replicate()");
  await prop("logSoftmax(-1) of S0", (x) => F.logSoftmax(x, -1), [a], [[Shard(0)]], "Shard(dim=0)");
  const w = rand([8], 14);
  const b = rand([8], 15);
  await prop("layerNorm of S0", (x, ww, bb) => F.layerNorm(x, [8], ww, bb), [a, w, b], [[Shard(0)], [Replicate()], [Replicate()]], "Shard(dim=0)");
  await prop("layerNorm of S1", (x, ww, bb) => F.layerNorm(x, [8], ww, bb), [a, w, b], [[Shard(1)], [Replicate()], [Shard(0)]], "Replicate()");
  await prop("rmsNorm of S0", (x, ww) => F.rmsNorm(x, [8], ww, 1e-6), [a, w], [[Shard(0)], [Replicate()]], "Shard(dim=0)");
});

await check("view / reshape / flatten / transpose / permute / t / unsqueeze / squeeze", async () => {
  const a = rand([8, 6], 16);
  await prop("transpose S0", (x) => x.transpose(0, 1), [a], [[Shard(0)]], "Shard(dim=1)");
  await prop("t S1", (x) => x.t(), [a], [[Shard(1)]], "Shard(dim=0)");
  await prop("permute S1", (x) => x.unsqueeze(0).permute(2, 0, 1), [a], [[Shard(1)]], "Shard(dim=0)");
  await prop("unsqueeze(0) S0", (x) => x.unsqueeze(0), [a], [[Shard(0)]], "Shard(dim=1)");
  await prop("squeeze S1", (x) => x.unsqueeze(1).squeeze(1), [a], [[Shard(1)]], "Shard(dim=1)");
  await prop("view [8,6] S0 -> [8,2,3]", (x) => x.view(8, 2, 3), [a], [[Shard(0)]], "Shard(dim=0)");
  await prop("reshape [8,6] S1 -> [8,2,3] (a split: the outer dim)", (x) => x.reshape(8, 2, 3), [a], [[Shard(1)]], n === 2 ? "Shard(dim=1)" : "Replicate()");
  await prop("reshape [8,6] S0 -> [48] (a merge, even)", (x) => x.reshape(-1), [a], [[Shard(0)]], "Shard(dim=0)");
  await prop("flatten [7,6] S0 (uneven: gathered)", (x) => x.flatten(), [rand([7, 6], 17)], [[Shard(0)]], "Replicate()");
  await prop("view [2,4,6] S2 -> [8,6]", (x) => x.view(8, 6), [rand([2, 4, 6], 18)], [[Shard(2)]], "Shard(dim=1)");
});

await check("ops without a sharding rule raise, naming the op", () => {
  const d = dt(rand([4, 4], 19), [Shard(0)]);
  assert.throws(() => d.cumsum(0), /cumsum: no sharding rule for DTensor arguments/);
});

report(rank);
await dist.destroyProcessGroup();
