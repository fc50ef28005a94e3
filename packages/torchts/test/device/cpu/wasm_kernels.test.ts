// The wasm SIMD kernels against float64 references: GEMM (strided, padded, batched, threaded),
// vector exp/tanh/sigmoid over wide ranges and special values, softmax and row sums with tails.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import {
  affineTanhF32, arenaF32, cpuInfo, matmulF32, setNumThreads, softmaxRowsF32, sumRowsF32, unaryF32,
} from "../../../src/device/cpu/wasm/index.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";

// These check the wasm GEMM itself (its sums do not depend on threads or on how a batch is cut);
// OpenBLAS, which has neither property, is checked in blas.test.ts.
setCpuBlas("off");

// Every supported runtime has wasm SIMD: these skip only when the plain-JS kernels are forced,
// so a wasm runtime that fails to start fails them instead of skipping them silently.
const on = process.env.TORCHTS_CPU_BACKEND !== "js";

function rnd(n: number, seed: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = ((s / 4294967296) * 2 - 1) * scale;
  }
  return a;
}

function refMatmul(M: number, K: number, N: number, A: Float32Array, ao: number, sam: number, sak: number, B: Float32Array, bo: number, sbk: number, sbn: number) {
  const C = new Float64Array(M * N);
  for (let i = 0; i < M; i++)
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += A[ao + i * sam + k * sak]! * B[bo + k * sbk + j * sbn]!;
      C[i * N + j] = s;
    }
  return C;
}

test("info() describes the wasm backend", () => {
  const info = cpuInfo();
  assert.equal(info.backend, on ? "wasm" : "js");
  if (on) {
    assert.equal(info.simd, true);
    assert.ok(info.threads >= 1);
  }
  assert.deepEqual(Object.keys(torch.backends.cpu.info()).sort(), Object.keys(info).sort());
});

test("gemm matches float64 reference: odd shapes, transposed and offset operands, 1 and 2 threads", { skip: !on }, () => {
  for (const threads of [1, 2]) {
    setNumThreads(threads);
    for (const [M, K, N] of [[1, 1, 1], [5, 3, 7], [6, 8, 8], [13, 17, 29], [64, 300, 40], [130, 257, 70]] as const) {
      for (const transA of [false, true]) {
        const A = rnd(M * K + 3, M + K), B = rnd(K * N + 5, N * 7);
        const [sam, sak] = transA ? [1, M] : [K, 1];
        const C = new Float32Array(M * N + 2).fill(7);
        assert.ok(matmulF32(M, K, N, A, 3, sam, sak, B, 5, 1, K, C, 1)); // B read transposed too
        const R = refMatmul(M, K, N, A, 3, sam, sak, B, 5, 1, K);
        for (let i = 0; i < M * N; i++)
          assert.ok(Math.abs(C[1 + i]! - R[i]!) <= 1e-5 * Math.sqrt(K) + 1e-6, `${M}x${K}x${N} t${threads} [${i}] ${C[1 + i]} vs ${R[i]}`);
        assert.equal(C[0], 7);
        assert.equal(C[M * N + 1], 7);
      }
    }
  }
});

test("gemm with K = 0 writes zeros", { skip: !on }, () => {
  const C = new Float32Array(6).fill(3);
  matmulF32(2, 0, 3, new Float32Array(0), 0, 0, 1, new Float32Array(0), 0, 3, 1, C, 0);
  assert.deepEqual([...C], [0, 0, 0, 0, 0, 0]);
});

test("torch.matmul routes float32 to wasm and matches float64 (batched, broadcast, strided)", async () => {
  torch.manualSeed(1);
  const a = torch.randn(3, 1, 33, 70, { dtype: "float64" }), b = torch.randn(4, 90, 70, { dtype: "float64" });
  const want = await torch.matmul(a, b.transpose(-1, -2)).data();
  const got = await torch.matmul(a.float(), b.float().transpose(-1, -2)).data();
  assert.equal(got.length, want.length);
  for (let i = 0; i < got.length; i++) assert.ok(Math.abs(Number(got[i]) - Number(want[i])) < 1e-4, `[${i}]`);
});

test("vector exp/tanh/sigmoid are float32-accurate over wide ranges and keep NaN/inf semantics", { skip: !on }, () => {
  const n = 50000;
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) x[i] = -110 + (220 * i) / n;
  const special = [NaN, Infinity, -Infinity, 0, -0, 1e-30, -1e-8, 88.7, 88.8, -87.5, -104, 3e-4, 5e-4, 7.9, 9, -9];
  x.set(special, 0);
  const refs: Record<string, (v: number) => number> = {
    exp: Math.exp, tanh: Math.tanh, sigmoid: (v) => 1 / (1 + Math.exp(-v)),
  };
  for (const [op, f] of Object.entries(refs)) {
    const out = new Float32Array(n);
    assert.ok(unaryF32(op as "exp", x, 0, n, out));
    for (let i = 0; i < n; i++) {
      const want = Math.fround(f(x[i]!));
      const got = out[i]!;
      if (Number.isNaN(want)) assert.ok(Number.isNaN(got), `${op}(${x[i]}) = ${got}`);
      else if (!Number.isFinite(want)) assert.equal(got, want, `${op}(${x[i]})`);
      else assert.ok(Math.abs(got - want) <= 4e-7 * Math.abs(want) + 1e-37, `${op}(${x[i]}) = ${got}, want ${want}`);
    }
  }
});

test("fused tanh(x*a+b), softmax rows and row sums with tails and offsets", { skip: !on }, () => {
  const x = rnd(10000, 3, 6);
  const y = new Float32Array(4097);
  affineTanhF32(x, 2, 4097, 0.5, -0.25, y);
  for (let i = 0; i < 4097; i++) assert.ok(Math.abs(y[i]! - Math.tanh(x[i + 2]! * 0.5 - 0.25)) < 3e-7);
  for (const cols of [1, 3, 4, 7, 1023]) {
    const rows = 9;
    const out = new Float32Array(rows * cols), sums = new Float32Array(rows);
    softmaxRowsF32(x, 1, rows, cols, out);
    sumRowsF32(x, 1, rows, cols, sums);
    for (let r = 0; r < rows; r++) {
      const row = Array.from(x.subarray(1 + r * cols, 1 + (r + 1) * cols));
      const m = Math.max(...row);
      const z = row.reduce((s, v) => s + Math.exp(v - m), 0);
      row.forEach((v, j) => assert.ok(Math.abs(out[r * cols + j]! - Math.exp(v - m) / z) < 1e-6, `softmax ${cols} [${r},${j}]`));
      const s = row.reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sums[r]! - s) < 1e-5 * cols, `sum ${cols} [${r}]`);
    }
  }
});

test("kernels read and write arena operands in place", { skip: !on }, () => {
  const a = arenaF32(1001)!, b = arenaF32(1001)!;
  a.data.set(rnd(1001, 9));
  unaryF32("neg", a.data, 0, 1001, b.data);
  for (let i = 0; i < 1001; i++) assert.equal(b.data[i], -a.data[i]!);
  a.release();
  b.release();
});

test("jobs split across started workers give the same results as one thread", { skip: !on }, async () => {
  setNumThreads(2);
  unaryF32("exp", new Float32Array(1 << 17), 0, 1 << 17, new Float32Array(1 << 17)); // starts the workers
  for (let i = 0; i < 100 && cpuInfo().workersReady < 1; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(cpuInfo().workersReady >= 1, "a worker thread started");
  const [M, K, N] = [200, 300, 260];
  const A = rnd(M * K, 11), B = rnd(K * N, 12);
  const one = new Float32Array(M * N), two = new Float32Array(M * N);
  setNumThreads(1);
  matmulF32(M, K, N, A, 0, K, 1, B, 0, N, 1, one, 0);
  setNumThreads(2);
  for (let rep = 0; rep < 20; rep++) {
    two.fill(0);
    matmulF32(M, K, N, A, 0, K, 1, B, 0, N, 1, two, 0);
    assert.deepEqual(two, one); // same panels, same order of k: bitwise equal
  }
  const x = rnd(1 << 18, 13, 5), y1 = new Float32Array(1 << 18), y2 = new Float32Array(1 << 18);
  setNumThreads(1);
  unaryF32("tanh", x, 0, 1 << 18, y1);
  setNumThreads(2);
  for (let rep = 0; rep < 20; rep++) {
    unaryF32("tanh", x, 0, 1 << 18, y2);
    assert.deepEqual(y2, y1);
  }
});
