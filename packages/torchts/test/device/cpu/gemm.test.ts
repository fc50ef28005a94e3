// The wasm GEMM on operands inside the shared memory (read in place, C written in place):
// edge tiles (M % 4, N % 8), several K blocks, splits over rows and over columns (B panels
// packed ahead or inside the column loop), contiguous, transposed and broadcast (zero-stride)
// operands, the neighbours of C left untouched, and batched torch.matmul folded into one product.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { arenaF32, cpuInfo, matmulF32, setNumThreads, unaryF32 } from "../../../src/device/cpu/wasm/index.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { matmulFoldStats } from "../../../src/device/cpu/kernels.js";

// These check the wasm GEMM itself (its sums do not depend on threads or on how a batch is cut);
// OpenBLAS, which has neither property, is checked in blas.test.ts.
setCpuBlas("off");

const on = process.env.TORCHTS_CPU_BACKEND !== "js";

/** Jobs only split once a worker has started: start one first so "2 threads" really runs two. */
async function startWorkers(): Promise<void> {
  setNumThreads(2);
  unaryF32("exp", new Float32Array(1 << 17), 0, 1 << 17, new Float32Array(1 << 17));
  for (let i = 0; i < 100 && cpuInfo().workersReady < 1; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(cpuInfo().workersReady >= 1, "a worker thread started");
}

function fill(a: Float32Array, seed: number): void {
  let s = seed;
  for (let i = 0; i < a.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = (s / 4294967296) * 2 - 1;
  }
}

interface Case {
  M: number; K: number; N: number;
  sa: [number, number]; // A strides (rows, k)
  sb: [number, number]; // B strides (k, cols)
}

function check(c: Case, threads: number): void {
  const { M, K, N, sa, sb } = c;
  const span = (s: [number, number], r: number, q: number) => (r - 1) * s[0] + (q - 1) * s[1] + 1;
  const A = arenaF32(span(sa, M, K) + 2)!, B = arenaF32(span(sb, K, N) + 2)!, C = arenaF32(M * N + 4)!;
  try {
    fill(A.data, M * 31 + K);
    fill(B.data, N * 17 + K);
    C.data.fill(9);
    setNumThreads(threads);
    assert.ok(matmulF32(M, K, N, A.data, 1, sa[0], sa[1], B.data, 2, sb[0], sb[1], C.data, 2));
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += A.data[1 + i * sa[0] + k * sa[1]]! * B.data[2 + k * sb[0] + j * sb[1]]!;
        const got = C.data[2 + i * N + j]!;
        assert.ok(Math.abs(got - s) <= 2e-6 * K + 1e-6, `${M}x${K}x${N} t${threads} (${i},${j}): ${got} vs ${s}`);
      }
    assert.deepEqual([C.data[0], C.data[1], C.data[M * N + 2], C.data[M * N + 3]], [9, 9, 9, 9]);
  } finally {
    setNumThreads(2);
    [A, B, C].forEach((x) => x.release());
  }
}

test("arena GEMM: edge tiles, K blocks, row and column splits, strided operands", { skip: !on }, async () => {
  await startWorkers();
  const cases: Case[] = [];
  for (const [M, K, N] of [[9, 5, 3], [12, 16, 16], [13, 600, 21], [64, 257, 200], [203, 33, 9], [40, 520, 1001], [140, 1000, 150]] as const) {
    cases.push({ M, K, N, sa: [K, 1], sb: [N, 1] }); // row-major both (contiguous B panels)
    cases.push({ M, K, N, sa: [1, M], sb: [1, K] }); // both transposed
    cases.push({ M, K, N, sa: [K + 3, 1], sb: [N + 5, 1] }); // padded rows
  }
  cases.push({ M: 17, K: 300, N: 24, sa: [300, 1], sb: [0, 1] }); // every k reads the same B row
  cases.push({ M: 17, K: 40, N: 24, sa: [0, 1], sb: [24, 1] }); // every row of A the same
  for (const threads of [1, 2]) for (const c of cases) check(c, threads);
});

test("arena GEMM results do not depend on the thread count", { skip: !on }, async () => {
  await startWorkers();
  const [M, K, N] = [70, 530, 90];
  const A = arenaF32(M * K)!, B = arenaF32(K * N)!, C1 = arenaF32(M * N)!, C2 = arenaF32(M * N)!;
  try {
    fill(A.data, 5);
    fill(B.data, 6);
    setNumThreads(1);
    matmulF32(M, K, N, A.data, 0, K, 1, B.data, 0, N, 1, C1.data, 0);
    setNumThreads(2);
    matmulF32(M, K, N, A.data, 0, K, 1, B.data, 0, N, 1, C2.data, 0);
    assert.deepEqual(C1.data, C2.data);
  } finally {
    setNumThreads(2);
    [A, B, C1, C2].forEach((x) => x.release());
  }
});

test("torch.matmul folds a batch over one shared matrix into one product with the same sums", async () => {
  torch.manualSeed(3);
  const a = torch.randn([3, 5, 37, 20]), w = torch.randn([20, 30]);
  const y = await torch.matmul(a, w).data();
  const aT = torch.randn([3, 20, 37]).transpose(1, 2); // rows not evenly strided across batches: not folded
  const yT = await torch.matmul(aT, w).data();
  for (let i = 0; i < 3; i++) {
    for (let j = 0; j < 5; j++) {
      const one = await torch.matmul(torch.select(torch.select(a, 0, i), 0, j), w).data();
      assert.deepEqual(y.slice((i * 5 + j) * 37 * 30, (i * 5 + j + 1) * 37 * 30), one);
    }
    const oneT = await torch.matmul(torch.select(aT, 0, i), w).data();
    assert.deepEqual(yT.slice(i * 37 * 30, (i + 1) * 37 * 30), oneT);
  }
});

test("torch.matmul folds one-row heads over a broadcast matrix (a decode step's rotary product)", { skip: !on }, async () => {
  torch.manualSeed(5);
  // q [1, 12, 1, 64] as the heads of a [1, 1, 12, 64] projection (batch dims of size 1 keep
  // their strides), times a rotary matrix [1, 1, 64, 64] broadcast over the heads
  const q = torch.randn([1, 1, 12, 64]).transpose(1, 2), rot = torch.randn([1, 1, 64, 64]);
  const c0 = matmulFoldStats.calls;
  const y = await torch.matmul(q, rot).data();
  assert.equal(matmulFoldStats.calls - c0, 1, "one folded product");
  for (let h = 0; h < 12; h++) {
    const one = await torch.matmul(q.select(1, h).reshape([1, 64]), rot.reshape([64, 64])).data();
    assert.deepEqual(y.slice(h * 64, (h + 1) * 64), one, `head ${h}`);
  }
  // every other head of 24: rows 128 floats apart, folded at that row stride
  const q2 = torch.randn([1, 24, 1, 64]).view([1, 12, 2, 64]).narrow(2, 0, 1);
  const c1 = matmulFoldStats.calls;
  const y2 = await torch.matmul(q2, rot).data();
  assert.equal(matmulFoldStats.calls - c1, 1, "strided heads fold");
  assert.deepEqual(y2, await torch.matmul(q2.contiguous(), rot).data());
  // batch dims whose strides do not line up ([2, 3] heads from a [3, 2] layout): one product per head
  const q3 = torch.randn([3, 2, 1, 64]).transpose(0, 1);
  const c2 = matmulFoldStats.calls;
  const y3 = await torch.matmul(q3, rot.view([1, 64, 64])).data();
  assert.equal(matmulFoldStats.calls, c2, "not folded");
  assert.deepEqual(y3, await torch.matmul(q3.contiguous(), rot.view([1, 64, 64])).data());
  // one row broadcast over the batch (stride 0): folded, every row the same product
  const a0 = torch.randn([1, 1, 64]);
  const y4 = await torch.matmul(a0.expand([12, 1, 64]), rot.view([64, 64])).data();
  const one4 = await torch.matmul(a0.view([1, 64]), rot.view([64, 64])).data();
  for (let h = 0; h < 12; h++) assert.deepEqual(y4.slice(h * 64, (h + 1) * 64), one4, `broadcast row ${h}`);
});

test("arena GEMM into the same block as its operands (C after A and B in one buffer)", { skip: !on }, () => {
  const [M, K, N] = [13, 70, 21];
  const X = arenaF32(M * K + K * N + M * N)!;
  try {
    fill(X.data, 9);
    const want = new Float64Array(M * N);
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) for (let k = 0; k < K; k++) want[i * N + j]! += X.data[i * K + k]! * X.data[M * K + k * N + j]!;
    assert.ok(matmulF32(M, K, N, X.data, 0, K, 1, X.data, M * K, N, 1, X.data, M * K + K * N));
    for (let q = 0; q < M * N; q++) assert.ok(Math.abs(X.data[M * K + K * N + q]! - want[q]!) <= 1e-4, `[${q}]`);
  } finally {
    X.release();
  }
});

test("small batched products run as one job over the batch with each product's own sums", { skip: !on }, async () => {
  await startWorkers();
  torch.manualSeed(4);
  // per-head shapes as attention has them (transposed and strided views), edges in M and N, K blocks
  const cases: [torch.Tensor, torch.Tensor][] = [
    [torch.randn([2, 37, 3, 20]).transpose(1, 2), torch.randn([2, 45, 3, 20]).permute(0, 2, 3, 1)],
    [torch.randn([3, 2, 13, 70]), torch.randn([3, 2, 9, 70]).transpose(2, 3)],
    [torch.randn([5, 40, 33]).transpose(1, 2), torch.randn([5, 40, 21])],
    [torch.randn([4, 9, 600]), torch.randn([4, 600, 12])],
  ];
  for (const threads of [1, 2]) {
    setNumThreads(threads);
    for (const [a, b] of cases) {
      const y = torch.matmul(a, b);
      const flat = (t: torch.Tensor) => t.reshape(-1, t.shape.at(-2)!, t.shape.at(-1)!);
      const [fa, fb, fy] = [flat(a), flat(b), await flat(y).data()];
      const per = fa.shape[0]! === 0 ? 0 : fy.length / fa.shape[0]!;
      for (let i = 0; i < fa.shape[0]!; i++) {
        const one = await torch.matmul(torch.select(fa, 0, i), torch.select(fb, 0, i)).data();
        assert.deepEqual(fy.slice(i * per, (i + 1) * per), one, `${a.shape} @ ${b.shape}, product ${i}, ${threads} threads`);
      }
      const want = await torch.matmul(a.to("float64"), b.to("float64")).data();
      const got = await y.data();
      for (let q = 0; q < got.length; q++) assert.ok(Math.abs(got[q]! - want[q]!) <= 1e-4, `[${q}]`);
    }
  }
  setNumThreads(2);
});
