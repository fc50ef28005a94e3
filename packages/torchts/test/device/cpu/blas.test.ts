// The native OpenBLAS bridge (src/device/cpu/native/blas.ts, native/blas.c): every row-major
// layout it maps (A and B plain or transposed, row strides wider than a row, 1-wide edges,
// offsets), batched products, operands in the wasm arena and in plain arrays, and what it must
// refuse: aliasing and strides it cannot express fall back to the wasm GEMM with the same sums,
// and a wrong call to the bridge itself throws without writing. Under TORCHTS_CPU_BLAS=openblas
// (CI) the bridge must load; elsewhere these tests check the wasm fallback the same way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import * as torch from "../../../src/index.js";
import { arenaF32, cpuInfo, matmulBatchedF32, matmulF32, setNumThreads, unaryF32 } from "../../../src/device/cpu/wasm/index.js";
import { blasStats, setCpuBlas } from "../../../src/device/cpu/native/blas.js";

const wasm = process.env.TORCHTS_CPU_BACKEND !== "js";
const required = process.env.TORCHTS_CPU_BLAS === "openblas";

function fill(a: Float32Array, seed: number): void {
  let s = seed >>> 0;
  for (let i = 0; i < a.length; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = (s / 4294967296) * 2 - 1;
  }
}

interface Case {
  M: number; K: number; N: number;
  sa: [number, number];
  sb: [number, number];
}

/** Runs one product through matmulF32 into C (offset 2, guards around it) and checks every entry. */
function check(c: Case, arena: boolean, viaBlas: boolean): void {
  const { M, K, N, sa, sb } = c;
  const span = (s: [number, number], r: number, q: number) => (r - 1) * s[0] + (q - 1) * s[1] + 1;
  const held: { release(): void }[] = [];
  const mk = (n: number) => {
    if (!arena) return new Float32Array(n);
    const x = arenaF32(n)!;
    held.push(x);
    return x.data;
  };
  try {
    const A = mk(span(sa, M, K) + 3), B = mk(span(sb, K, N) + 3), C = mk(M * N + 4);
    fill(A, M * 31 + K);
    fill(B, N * 17 + K + 1);
    C.fill(9);
    const before = blasStats.calls;
    assert.ok(matmulF32(M, K, N, A, 3, sa[0], sa[1], B, 1, sb[0], sb[1], C, 2));
    assert.equal(blasStats.calls - before, viaBlas ? 1 : 0, `${JSON.stringify(c)}: ran through OpenBLAS`);
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += A[3 + i * sa[0] + k * sa[1]]! * B[1 + k * sb[0] + j * sb[1]]!;
        const got = C[2 + i * N + j]!;
        assert.ok(Math.abs(got - s) <= 2e-6 * K + 1e-6, `${JSON.stringify(c)} (${i},${j}): ${got} vs ${s}`);
      }
    assert.deepEqual([C[0], C[1], C[M * N + 2], C[M * N + 3]], [9, 9, 9, 9], "C's neighbours untouched");
  } finally {
    held.forEach((x) => x.release());
  }
}

const cases: (Case & { mapped: boolean })[] = [];
// M above the gemv cut (8 rows), where products reach the GEMM
for (const [M, K, N] of [[9, 7, 13], [64, 32, 64], [33, 130, 17], [100, 1, 20], [12, 40, 1]] as const) {
  cases.push({ M, K, N, sa: [K, 1], sb: [N, 1], mapped: true }); // both plain
  cases.push({ M, K, N, sa: [1, M], sb: [N, 1], mapped: true }); // A transposed
  cases.push({ M, K, N, sa: [K, 1], sb: [1, K], mapped: true }); // B transposed (a linear layer's weight)
  cases.push({ M, K, N, sa: [1, M + 3], sb: [1, K + 2], mapped: true }); // both transposed, wider leading dimensions
  cases.push({ M, K, N, sa: [K + 5, 1], sb: [N + 1, 1], mapped: true }); // row strides wider than a row
  cases.push({ M, K, N, sa: [2 * K, 2], sb: [N, 1], mapped: K === 1 }); // no BLAS layout (unless K is 1): the wasm GEMM
}
const loaded = () => cpuInfo().blas !== "";

for (const arena of [true, false]) {
  test(`matmulF32 through the bridge: every layout, ${arena ? "arena" : "plain"} operands, same sums as fp64`, { skip: !wasm }, () => {
    setCpuBlas("auto");
    for (const c of cases) check(c, arena, c.mapped && loaded());
  });
}

test("TORCHTS_CPU_BLAS=openblas (CI): the bridge loaded, info names OpenBLAS and its kernels", { skip: !wasm || !required }, () => {
  setCpuBlas("auto");
  const info = cpuInfo();
  assert.match(info.blas, /^OpenBLAS \d+\.\d+\.\d+ .* core \w+/);
  assert.equal(info.blasReason, "");
});

test("blas off: info says why, and the wasm GEMM gives the same sums", { skip: !wasm }, () => {
  try {
    setCpuBlas("off");
    assert.equal(cpuInfo().blas, "");
    assert.equal(cpuInfo().blasReason, "TORCHTS_CPU_BLAS=off");
    for (const c of cases.slice(0, 6)) check(c, true, false);
  } finally {
    setCpuBlas("auto");
  }
});

test("torch.backends.cpu.setBlas validates its argument and keeps the previous choice", { skip: !wasm }, () => {
  setCpuBlas("auto");
  const before = cpuInfo().blas;
  assert.throws(() => torch.backends.cpu.setBlas("mkl" as "off"), /setCpuBlas: expected auto, openblas or off, got mkl/);
  assert.equal(cpuInfo().blas, before);
  if (loaded()) {
    torch.backends.cpu.setBlas("openblas"); // required and there: no error
    assert.equal(cpuInfo().blas, before);
  } else {
    // required where it cannot load: fails, and the previous choice stays
    assert.throws(() => torch.backends.cpu.setBlas("openblas"), /TORCHTS_CPU_BLAS=openblas: /);
    assert.equal(cpuInfo().blas, before);
  }
  setCpuBlas("auto");
});

test("matmulBatchedF32 through the bridge: per-head products land at their batch offsets", { skip: !wasm }, () => {
  setCpuBlas("auto");
  const nb = 3, M = 16, K = 8, N = 12;
  const A = arenaF32(nb * M * K)!, B = arenaF32(nb * K * N)!, C = arenaF32(nb * M * N)!;
  try {
    fill(A.data, 5);
    fill(B.data, 6);
    const aOffs = [0, M * K, 2 * M * K], bOffs = [2 * K * N, 0, K * N];
    const before = blasStats.calls;
    assert.ok(matmulBatchedF32(M, K, N, A.data, aOffs, K, 1, B.data, bOffs, N, 1, C.data, 0));
    for (let b = 0; b < nb; b++)
      for (let i = 0; i < M; i++)
        for (let j = 0; j < N; j++) {
          let s = 0;
          for (let k = 0; k < K; k++) s += A.data[aOffs[b]! + i * K + k]! * B.data[bOffs[b]! + k * N + j]!;
          assert.ok(Math.abs(C.data[b * M * N + i * N + j]! - s) < 1e-5, `batch ${b} (${i},${j})`);
        }
    assert.equal(blasStats.calls - before, loaded() ? nb : 0);
  } finally {
    [A, B, C].forEach((x) => x.release());
  }
});

test("an output that aliases an operand is not handed to BLAS: same result as a fresh output", { skip: !wasm }, () => {
  setCpuBlas("auto");
  const M = 16, K = 16, N = 16;
  const X = arenaF32(M * K + K * N + M * N)!;
  try {
    fill(X.data, 9);
    const ref = new Float32Array(M * N);
    const copy = X.data.slice();
    assert.ok(matmulF32(M, K, N, copy, 0, K, 1, copy, M * K, N, 1, ref, 0));
    // C overlaps B's last rows in the same array
    const before = blasStats.calls;
    assert.ok(matmulF32(M, K, N, X.data, 0, K, 1, X.data, M * K, N, 1, X.data, M * K + 8));
    assert.equal(blasStats.calls, before, "the aliasing product ran on the wasm GEMM");
    const got = X.data.subarray(M * K + 8, M * K + 8 + M * N);
    for (let i = 0; i < M * N; i++) assert.ok(Math.abs(got[i]! - ref[i]!) < 1e-5, `entry ${i}`);
  } finally {
    X.release();
  }
});

test("the bridge itself refuses a wrong call without writing (types, shapes, offsets, leading dimensions)", { skip: !required }, () => {
  const addon = createRequire(import.meta.url)("../../../build/native/torchts_blas.node") as {
    sgemm(...a: unknown[]): void;
    gemmSlab(...a: unknown[]): void;
  };
  const A = new Float32Array(6).fill(1), B = new Float32Array(6).fill(2), C = new Float32Array(4).fill(7);
  const ok = [0, 0, 2, 2, 3, A, 0, 3, B, 0, 2, 0, C, 0, 2];
  addon.sgemm(...ok);
  assert.deepEqual([...C], [6, 6, 6, 6]);
  C.fill(7);
  const bad: [number, unknown, RegExp][] = [
    [5, new Float64Array(6), /expected a Float32Array/],
    [2, "2", /expected a number/],
    [6, 1, /out of range/], // A's last row runs past its end
    [9, 1, /out of range/],
    [13, 1, /out of range/],
    [7, 2, /out of range/], // lda below K
    [14, 1, /out of range/], // ldc below N
    [2, -1, /out of range/],
  ];
  for (const [i, v, re] of bad) {
    const args: unknown[] = ok.slice();
    args[i] = v;
    assert.throws(() => addon.sgemm(...args), re, `argument ${i} = ${String(v)}`);
    assert.deepEqual([...C], [7, 7, 7, 7], `argument ${i}: nothing written`);
  }
  assert.throws(() => addon.sgemm(0, 0), /expected 15 arguments/);

  // gemmSlab reads its parameter block from the memory it writes: every field is checked
  const mem = new Float32Array(256);
  const P = new Int32Array(mem.buffer);
  const block = (over: Record<number, number> = {}) => {
    mem.fill(1, 64);
    // 2x3 @ 3x2, rows split in shares of 1, A at 64, B at 80, C at 96
    P.set([0, 0, 2, 2, 3, 3, 2, 2, 0, 1, 1, 96, 4, 64, 80]);
    for (const [k, v] of Object.entries(over)) P[Number(k)] = v;
  };
  block();
  addon.gemmSlab(mem, 0, 2, 0);
  assert.deepEqual([...mem.subarray(96, 100)], [3, 3, 3, 3]);
  const badBlocks: [Record<number, number>, number, number][] = [
    [{ 2: 0 }, 0, 1], // M 0
    [{ 5: 2 }, 0, 1], // lda below K
    [{ 8: 2 }, 0, 1], // split flag
    [{ 9: 0 }, 0, 1], // share 0
    [{ 11: 255 }, 0, 1], // C past the end
    [{ 14: 254 }, 0, 1], // B past the end
    [{ 13: -1 }, 0, 1], // negative offset
    [{ 10: 1000 }, 0, 1], // offsets past the end
    [{}, 0, 3], // more shares than the product has
    [{}, 1, 1], // empty share range
  ];
  for (const [over, lo, hi] of badBlocks) {
    block(over);
    assert.throws(() => addon.gemmSlab(mem, lo, hi, 0), /gemmSlab: parameter block or share out of range/, JSON.stringify(over));
    assert.deepEqual([...mem.subarray(96, 100)], [1, 1, 1, 1], `${JSON.stringify(over)}: nothing written`);
  }
  assert.throws(() => addon.gemmSlab(mem, 0, 1, 2), /out of range/, "an unaligned block");
  assert.throws(() => addon.gemmSlab(new Int32Array(4), 0, 1, 0), /expected a Float32Array/);
});

test("OpenBLAS sums do not depend on the thread count or on where the operands live", { skip: !wasm }, async () => {
  setCpuBlas("auto");
  // jobs only split once a worker has started: start one so "2 threads" really runs two
  setNumThreads(2);
  unaryF32("exp", new Float32Array(1 << 17), 0, 1 << 17, new Float32Array(1 << 17));
  for (let i = 0; i < 100 && cpuInfo().workersReady < 1; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(cpuInfo().workersReady >= 1, "a worker thread started");
  const [M, K, N] = [200, 300, 260];
  const A = arenaF32(M * K)!, B = arenaF32(K * N)!, C1 = arenaF32(M * N)!, C2 = arenaF32(M * N)!;
  try {
    fill(A.data, 11);
    fill(B.data, 12);
    setNumThreads(1);
    assert.ok(matmulF32(M, K, N, A.data, 0, K, 1, B.data, 0, N, 1, C1.data, 0));
    setNumThreads(2);
    for (let rep = 0; rep < 10; rep++) {
      C2.data.fill(0);
      assert.ok(matmulF32(M, K, N, A.data, 0, K, 1, B.data, 0, N, 1, C2.data, 0));
      assert.deepEqual(C2.data, C1.data, `2 threads, rep ${rep}`);
    }
    const plain = new Float32Array(M * N);
    assert.ok(matmulF32(M, K, N, A.data.slice(), 0, K, 1, B.data.slice(), 0, N, 1, plain, 0));
    assert.deepEqual(plain, C1.data, "plain arrays: the same shares, the same sums");
  } finally {
    setNumThreads(2);
    [A, B, C1, C2].forEach((x) => x.release());
  }
});

test("torch.matmul and nn.functional.linear agree with the wasm GEMM (strict, fused, compiled)", { skip: !wasm }, async () => {
  const x = torch.randn([4, 24, 40], { generator: new torch.Generator(1) });
  const w = torch.randn([56, 40], { generator: new torch.Generator(2) });
  const f = (a: torch.Tensor) => torch.matmul(torch.nn.functional.linear(a, w).relu(), w);
  const run = async (blas: "auto" | "off") => {
    setCpuBlas(blas);
    try {
      const out: Float32Array[] = [];
      for (const mode of ["strict", "fused"] as const) out.push((await torch.withEagerMode(mode, () => f(x)).data()) as Float32Array);
      out.push((await torch.compile(f)(x).data()) as Float32Array);
      return out;
    } finally {
      setCpuBlas("auto");
    }
  };
  const before = blasStats.calls;
  const viaBlas = await run("auto");
  if (loaded()) assert.ok(blasStats.calls - before >= 6, "the products ran through OpenBLAS");
  const mid = blasStats.calls;
  const viaWasm = await run("off");
  assert.equal(blasStats.calls, mid, "blas off: none did");
  for (let m = 0; m < 3; m++) {
    assert.deepEqual(viaBlas[m], viaBlas[0], `mode ${m} equals strict through the same GEMM`);
    for (let i = 0; i < viaWasm[m]!.length; i++)
      assert.ok(Math.abs(viaBlas[m]![i]! - viaWasm[m]![i]!) <= 1e-4 * (1 + Math.abs(viaWasm[m]![i]!)), `mode ${m} entry ${i}`);
  }
});
