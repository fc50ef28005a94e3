// F.pagedAttention: the cpu kernel (wasm, reading the caches in place through the block table) and the
// decomposition (other devices) against scaled_dot_product_attention run per sequence on the gathered
// keys, in every eager mode; value checks of the table; the cache write through Tensor.indexCopy_.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
const F = torch.nn.functional;

interface Case {
  Hq: number; Hk: number; E: number; bs: number;
  /** [cached, new] per sequence */
  seqs: [number, number][];
}

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

function make(c: Case, seed: number) {
  const r = rng(seed);
  const NB = 48;
  const T = c.seqs.reduce((a, s) => a + s[1], 0);
  torch.manualSeed(seed);
  const kc = torch.randn([NB, c.bs, c.Hk, c.E]), vc = torch.randn([NB, c.bs, c.Hk, c.E]);
  const q = torch.randn([T, c.Hq, c.E]), k = torch.randn([T, c.Hk, c.E]), v = torch.randn([T, c.Hk, c.E]);
  const MB = Math.max(1, ...c.seqs.map(([n]) => Math.ceil(n / c.bs)));
  const free = [...Array(NB).keys()];
  for (let i = free.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [free[i], free[j]] = [free[j]!, free[i]!];
  }
  const table = c.seqs.map(([n]) => Array.from({ length: MB }, (_, j) => (j < Math.ceil(n / c.bs) ? free.pop()! : 0)));
  const cu = [0];
  for (const [, l] of c.seqs) cu.push(cu.at(-1)! + l);
  return {
    q, k, v, kc, vc, tableIds: table, cuIds: cu,
    table: torch.tensor(table, { dtype: "int32" }),
    cu: torch.tensor(cu, { dtype: "int32" }),
    lens: torch.tensor(c.seqs.map((s) => s[0]), { dtype: "int32" }),
  };
}

/** sdpa per sequence over [its cached keys gathered through the table, its new keys], causal. */
function reference(c: Case, m: ReturnType<typeof make>): Tensor {
  const outs = c.seqs.map(([n, l], b) => {
    const rows = (cache: Tensor) => Array.from({ length: n }, (_, j) => cache.select(0, m.tableIds[b]![Math.floor(j / c.bs)]!).select(0, j % c.bs));
    const kk = torch.cat([...(n ? [torch.stack(rows(m.kc))] : []), m.k.narrow(0, m.cuIds[b]!, l)], 0);
    const vv = torch.cat([...(n ? [torch.stack(rows(m.vc))] : []), m.v.narrow(0, m.cuIds[b]!, l)], 0);
    const qq = m.q.narrow(0, m.cuIds[b]!, l).transpose(0, 1).unsqueeze(0);
    const o = F.scaledDotProductAttention(qq, kk.transpose(0, 1).unsqueeze(0), vv.transpose(0, 1).unsqueeze(0), { isCausal: true, enableGqa: true });
    return o.squeeze(0).transpose(0, 1);
  });
  return torch.cat(outs, 0);
}

const CASES: Case[] = [
  { Hq: 4, Hk: 2, E: 16, bs: 16, seqs: [[0, 5], [17, 1], [40, 3], [3, 1]] }, // prefill + decodes, GQA
  { Hq: 2, Hk: 2, E: 8, bs: 4, seqs: [[9, 2], [0, 1]] },
  { Hq: 8, Hk: 2, E: 64, bs: 16, seqs: [[100, 1], [33, 1], [15, 20], [0, 40]] }, // chunked prefill after a prefix, long new runs
  { Hq: 3, Hk: 1, E: 12, bs: 8, seqs: [[70, 30]] },
  { Hq: 2, Hk: 1, E: 6, bs: 3, seqs: [[5, 2], [1, 1]] }, // head dim not a multiple of 4: the JS loop
];

async function maxDiff(a: Tensor, b: Tensor): Promise<number> {
  return (await a.sub(b).abs().max().item()) as number;
}

for (const [i, c] of CASES.entries()) {
  test(`pagedAttention matches per-sequence sdpa: case ${i} (Hq ${c.Hq}, Hk ${c.Hk}, E ${c.E}, block ${c.bs})`, async () => {
    const m = make(c, 11 + i);
    const ref = reference(c, m);
    for (const mode of ["strict", "fused", "debug"] as const) {
      const out = torch.withEagerMode(mode, () => F.pagedAttention(m.q, m.k, m.v, m.kc, m.vc, m.table, m.cu, m.lens));
      assert.deepEqual(out.shape, [m.q.shape[0], c.Hq, c.E]);
      assert.ok((await maxDiff(out, ref)) < 2e-5, `${mode}: kernel`);
    }
    // the decomposition (what a device without the kernel runs), options form for scale
    torch.backends.cpu.setCompositeEnabled("pagedAttention", false);
    try {
      const dec = F.pagedAttention(m.q, m.k, m.v, m.kc, m.vc, m.table, m.cu, m.lens, { scale: c.E ** -0.5 });
      assert.ok((await maxDiff(dec, ref)) < 2e-5, "decomposition");
    } finally {
      torch.backends.cpu.setCompositeEnabled("pagedAttention", true);
    }
  });
}


test("pagedAttention refuses bad shapes, dtypes and table values, and keeps working after", async () => {
  const c: Case = { Hq: 2, Hk: 1, E: 4, bs: 4, seqs: [[5, 1], [0, 2]] };
  const m = make(c, 3);
  const call = (o: Partial<Record<"q" | "k" | "v" | "kc" | "vc" | "table" | "cu" | "lens", Tensor>>) =>
    F.pagedAttention(o.q ?? m.q, o.k ?? m.k, o.v ?? m.v, o.kc ?? m.kc, o.vc ?? m.vc, o.table ?? m.table, o.cu ?? m.cu, o.lens ?? m.lens);
  assert.throws(() => call({ q: m.q.unsqueeze(0) }), /pagedAttention\(\): expected query, key and value of 3 dims/);
  assert.throws(() => call({ k: m.k.double() }), /pagedAttention\(\): expected key to have the dtype of query/);
  assert.throws(() => call({ table: m.table.float() }), /pagedAttention\(\): expected blockTable to have an integer dtype/);
  assert.throws(() => call({ kc: m.kc.narrow(3, 0, 2) }), /pagedAttention\(\): expected keyCache/);
  assert.throws(() => call({ cu: torch.tensor([0, 1], { dtype: "int32" }) }), /cuSeqlensQ \[B \+ 1\]/);
  assert.throws(() => F.pagedAttention(torch.randn([3, 3, 4]), torch.randn([3, 2, 4]), torch.randn([3, 2, 4]), torch.randn([4, 4, 2, 4]), torch.randn([4, 4, 2, 4]), m.table, m.cu, m.lens), /multiple of the number of key\/value heads/);
  // values are checked where the kernel runs (strict: at the call)
  assert.throws(() => call({ table: torch.tensor([[99, 0], [0, 0]], { dtype: "int32" }) }), /blockTable\[0\]\[0\] = 99 is not a block of the cache/);
  assert.throws(() => call({ lens: torch.tensor([99, 0], { dtype: "int32" }) }), /cacheSeqlens\[0\] = 99 is outside/);
  assert.throws(() => call({ cu: torch.tensor([0, 3, 2], { dtype: "int32" }) }), /cuSeqlensQ must start at 0 and be non-decreasing/);
  const ok = await maxDiff(call({}), reference(c, m));
  assert.ok(ok < 2e-5);
});

test("Tensor.indexCopy_ writes rows of a dense tensor in place (the cache write), general path otherwise", async () => {
  for (const mode of ["strict", "fused"] as const)
    await torch.withEagerMode(mode, async () => {
      const cache = torch.zeros([6, 2, 3]);
      const flat = cache.view(12, 3);
      const before = cache.add(1); // pending in fused mode: must see the old contents
      const buf = cache._storage.buf;
      const v0 = cache._version;
      flat.view(6, 2, 3).indexCopy_(0, torch.tensor([4, 1]), torch.arange(12).float().view(2, 2, 3));
      const got = (await cache.data()) as Float32Array;
      const want = new Float32Array(36);
      for (let i = 0; i < 6; i++) want[4 * 6 + i] = i, want[1 * 6 + i] = 6 + i;
      assert.deepEqual([...got], [...want], mode);
      assert.deepEqual([...((await before.data()) as Float32Array)], new Array(36).fill(1), `${mode}: a pending reader saw the old value`);
      assert.equal(cache._version, v0 + 1);
      if (mode === "strict") assert.equal(cache._storage.buf, buf, "written in place, not a new buffer");
    });
  // a view that does not cover its storage, and dim 1: the general path gives the same values as indexCopy
  const x = torch.randn([5, 4]);
  const want = x.narrow(0, 1, 3).indexCopy(1, torch.tensor([3, 0]), torch.ones([3, 2]));
  const view = x.narrow(0, 1, 3);
  view.indexCopy_(1, torch.tensor([3, 0]), torch.ones([3, 2]));
  assert.deepEqual(await view.tolist(), await want.tolist());
  // autograd: a non-leaf that requires grad takes the tracked path
  const w = torch.randn([3, 2], { requiresGrad: true });
  const y = w.mul(2);
  const src = torch.ones([1, 2], { requiresGrad: true });
  y.indexCopy_(0, torch.tensor([1]), src);
  y.sum().backward();
  assert.deepEqual(await w.grad!.tolist(), [[2, 2], [0, 0], [2, 2]]);
  assert.deepEqual(await src.grad!.tolist(), [[1, 1]]);
  assert.throws(() => w.indexCopy_(0, torch.tensor([0]), torch.ones([1, 2])), /leaf Variable that requires grad/);
});
