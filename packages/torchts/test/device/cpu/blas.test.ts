// The native GEMM bridge (src/device/cpu/native/blas.ts, native/blas.c, native/gemm_avx512.c, gemm_avx2.c),
// on each kernel this machine runs (torchts' AVX-512 and AVX2 ones, OpenBLAS): every row-major layout it
// maps (A and B plain or transposed, row strides wider than a row, 1-wide edges, offsets),
// batched products, operands in the wasm arena and in plain arrays, and what it must refuse:
// aliasing and strides it cannot express fall back to the wasm GEMM with the same sums, and a
// wrong call to the bridge itself throws without writing. Under TORCHTS_REQUIRE_BLAS=1 (CI) the
// bridge must be built, OpenBLAS must load, and the AVX-512 and AVX2 kernels must be there exactly
// when the CPU lists AVX-512 / AVX2 and FMA; elsewhere these tests check the wasm fallback the same way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import * as torch from "../../../src/index.js";
import { arenaF32, cpuInfo, matmulBatchedF32, matmulF32, setNumThreads, unaryF32 } from "../../../src/device/cpu/wasm/index.js";
import { AVX2_NAME, AVX512_NAME, blasShares, blasStats, KERNEL_CODE, setCpuBlas, type BlasKernel } from "../../../src/device/cpu/native/blas.js";
import { nativeSgemvStats } from "../../../src/device/cpu/native/sgemv.js";

const wasm = process.env.TORCHTS_CPU_BACKEND !== "js";
const required = process.env.TORCHTS_REQUIRE_BLAS === "1";

type Addon = {
  sgemm(...a: unknown[]): void;
  gemmSlab(...a: unknown[]): void;
  kernels(): string;
  fmaProbe(mem: Float32Array | null, lo: number, hi: number, kernel?: number): number;
};
function addon(): Addon | null {
  try {
    return createRequire(import.meta.url)("../../../build/native/torchts_blas.node") as Addon;
  } catch {
    return null;
  }
}
/** The kernels the built bridge runs on this machine. */
const kernels: BlasKernel[] = wasm ? ((addon()?.kernels().split(",").filter(Boolean) ?? []) as BlasKernel[]) : [];

function withKernel<T>(k: BlasKernel, f: () => T): T {
  setCpuBlas(k);
  try {
    return f();
  } finally {
    setCpuBlas("auto");
  }
}

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
    // the bridge's GEMM, or its few-row kernel (x @ W^T of up to 16 rows on the AVX-512 kernel, arena operands; native_sgemv.test.ts)
    const bridgeCalls = () => blasStats.calls + nativeSgemvStats.calls;
    const before = bridgeCalls();
    assert.ok(matmulF32(M, K, N, A, 3, sa[0], sa[1], B, 1, sb[0], sb[1], C, 2));
    assert.equal(bridgeCalls() - before, viaBlas ? 1 : 0, `${JSON.stringify(c)}: ran through the bridge`);
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
// M above the wasm gemv cut (8 rows), where products reach the bridge (x @ W^T of 9-16 rows with
// arena operands its AVX-512 few-row kernel, the rest its GEMM); 300 > one 256-deep K block and
// 70 / 130 columns cut the AVX-512 kernel's 32-column tiles and 12-row M edge
for (const [M, K, N] of [[9, 7, 13], [64, 32, 64], [33, 130, 17], [100, 1, 20], [12, 40, 1], [37, 300, 70], [130, 20, 130]] as const) {
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
    for (const k of kernels) withKernel(k, () => cases.forEach((c) => check(c, arena, c.mapped)));
  });
}

test("TORCHTS_REQUIRE_BLAS=1 (CI): the bridge is built, OpenBLAS loads, AVX-512 and AVX2 run where the CPU has them", { skip: !wasm || !required }, () => {
  const flags = /^flags\s*:(.*)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.split(/\s+/) ?? [];
  const avx512 = ["avx512f", "avx512dq", "avx512bw", "avx512vl", "fma"].every((f) => flags.includes(f));
  const avx2 = ["avx2", "fma"].every((f) => flags.includes(f));
  assert.deepEqual(kernels, [...(avx512 ? ["avx512"] : []), ...(avx2 ? ["avx2"] : []), "openblas"]);
  setCpuBlas("auto");
  const info = cpuInfo();
  assert.equal(info.blasKernel, avx512 ? "avx512" : "avx2", "auto takes the AVX-512 kernel where there is one, else the AVX2 one");
  assert.equal(info.blas, avx512 ? AVX512_NAME : AVX2_NAME);
  assert.equal(info.blasReason, "");
  withKernel("openblas", () => assert.match(cpuInfo().blas, /^OpenBLAS \d+\.\d+\.\d+ .* core \w+/));
});

test("loading the bridge leaves the environment as it was: the OpenBLAS settings it loads with do not reach the processes torchts starts", { skip: addon() === null }, () => {
  // the variables the bridge sets while OpenBLAS loads (native/blas.c load_blas); a child process
  // loads the bridge with them unset, then with the user's own values, and prints what it sees
  const names = ["OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_CORETYPE"];
  const script = `require(${JSON.stringify(createRequire(import.meta.url).resolve("../../../build/native/torchts_blas.node"))}).kernels();` +
    `console.log(JSON.stringify(${JSON.stringify(names)}.map((n) => process.env[n] ?? null)))`;
  const run = (env: Record<string, string>) => {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !names.includes(k))) as Record<string, string>;
    return JSON.parse(execFileSync(process.execPath, ["-e", script], { env: { ...base, ...env }, encoding: "utf8" })) as (string | null)[];
  };
  assert.deepEqual(run({}), [null, null], "set for the load only");
  assert.deepEqual(run({ OPENBLAS_THREAD_TIMEOUT: "7", OPENBLAS_CORETYPE: "Haswell" }), ["7", "Haswell"], "the user's values stand");
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
  assert.throws(() => torch.backends.cpu.setBlas("mkl" as "off"), /setCpuBlas: expected auto, avx512, avx2, openblas or off, got mkl/);
  assert.equal(cpuInfo().blas, before);
  for (const k of ["avx512", "avx2", "openblas"] as const) {
    if (kernels.includes(k)) {
      torch.backends.cpu.setBlas(k); // required and there: no error
      assert.equal(cpuInfo().blasKernel, k);
    } else {
      // required where it cannot run: fails, and the previous choice stays
      setCpuBlas("auto");
      assert.throws(() => torch.backends.cpu.setBlas(k), new RegExp(`TORCHTS_CPU_BLAS=${k}: `));
      assert.equal(cpuInfo().blas, before);
    }
  }
  setCpuBlas("auto");
});

const batched = (): void => {
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
};
test("matmulBatchedF32 through the bridge: per-head products land at their batch offsets", { skip: !wasm }, () => {
  setCpuBlas("auto");
  batched();
  for (const k of kernels) withKernel(k, batched);
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

test("the bridge itself refuses a wrong call without writing (types, shapes, offsets, leading dimensions, kernel)", { skip: !required }, () => {
  const b = addon()!;
  const codes: number[] = kernels.map((k) => KERNEL_CODE[k]);
  // a kernel this machine does not run is refused like any other wrong argument
  const absent = [0, 1, 2].filter((c) => !codes.includes(c));
  for (const kern of codes) {
    const A = new Float32Array(6).fill(1), B = new Float32Array(6).fill(2), C = new Float32Array(4).fill(7);
    const ok = [0, 0, 2, 2, 3, A, 0, 3, B, 0, 2, 0, C, 0, 2, kern];
    b.sgemm(...ok);
    assert.deepEqual([...C], [6, 6, 6, 6], `kernel ${kern}`);
    C.fill(7);
    const bad: [number, unknown, RegExp][] = [
      [5, new Float64Array(6), /expected a Float32Array/],
      [2, "2", /expected a number/],
      [0, 2, /out of range/], // transpose flag
      [6, 1, /out of range/], // A's last row runs past its end
      [9, 1, /out of range/],
      [13, 1, /out of range/],
      [7, 2, /out of range/], // lda below K
      [14, 1, /out of range/], // ldc below N
      [2, -1, /out of range/],
      [15, 3, /sgemm: kernel must be 0 \(OpenBLAS\), 1 \(AVX-512\) or 2 \(AVX2\)/],
      [15, "1", /expected a number/],
      ...absent.map((c): [number, unknown, RegExp] => [15, c, c === 1 ? /sgemm: this CPU has no AVX-512 kernel/ : c === 2 ? /sgemm: this CPU has no AVX2 kernel/ : /sgemm: /]),
    ];
    for (const [i, v, re] of bad) {
      const args: unknown[] = ok.slice();
      args[i] = v;
      assert.throws(() => b.sgemm(...args), re, `kernel ${kern}: argument ${i} = ${String(v)}`);
      assert.deepEqual([...C], [7, 7, 7, 7], `kernel ${kern}: argument ${i}: nothing written`);
    }
    assert.throws(() => b.sgemm(0, 0), /expected 16 arguments/);

    // gemmSlab reads its parameter block from the memory it writes: every field is checked
    const mem = new Float32Array(256);
    const P = new Int32Array(mem.buffer);
    const block = (over: Record<number, number> = {}) => {
      mem.fill(1, 64);
      // 2x3 @ 3x2, rows split in shares of 1, A at 64, B at 80, C at 96
      P.set([0, 0, 2, 2, 3, 3, 2, 2, 0, 1, 1, 96, 4, kern, 64, 80]);
      for (const [k, v] of Object.entries(over)) P[Number(k)] = v;
    };
    block();
    b.gemmSlab(mem, 0, 2, 0);
    assert.deepEqual([...mem.subarray(96, 100)], [3, 3, 3, 3]);
    const badBlocks: [Record<number, number>, number, number, RegExp?][] = [
      [{ 2: 0 }, 0, 1], // M 0
      [{ 0: 3 }, 0, 1], // transpose flag
      [{ 5: 2 }, 0, 1], // lda below K
      [{ 8: 2 }, 0, 1], // split flag
      [{ 9: 0 }, 0, 1], // share 0
      [{ 11: 255 }, 0, 1], // C past the end
      [{ 15: 254 }, 0, 1], // B past the end
      [{ 14: -1 }, 0, 1], // negative offset
      [{ 10: 1000 }, 0, 1], // offsets past the end
      [{ 13: 9 }, 0, 1, /gemmSlab: kernel must be/],
      ...absent.map((c): [Record<number, number>, number, number, RegExp] => [{ 13: c }, 0, 1, /gemmSlab: /]),
      [{}, 0, 3], // more shares than the product has
      [{}, 1, 1], // empty share range
    ];
    for (const [over, lo, hi, re] of badBlocks) {
      block(over);
      assert.throws(() => b.gemmSlab(mem, lo, hi, 0), re ?? /gemmSlab: parameter block or share out of range/, JSON.stringify(over));
      assert.deepEqual([...mem.subarray(96, 100)], [1, 1, 1, 1], `${JSON.stringify(over)}: nothing written`);
    }
    assert.throws(() => b.gemmSlab(mem, 0, 1, 2), /out of range/, "an unaligned block");
    assert.throws(() => b.gemmSlab(new Int32Array(4), 0, 1, 0), /expected a Float32Array/);
    // the FMA probe names its units: any other kernel code is refused, not taken for AVX-512
    assert.throws(() => b.fmaProbe(null, 0, 1, 7), /fmaProbe: kernel must be 1 \(AVX-512\) or 2 \(AVX2\)/);
    assert.throws(() => b.fmaProbe(null, 0, 1, 0), /fmaProbe: kernel must be 1/);
    for (const c of [1, 2].filter((c) => !codes.includes(c)))
      assert.throws(() => b.fmaProbe(null, 0, 1, c), c === 1 ? /fmaProbe: this CPU has no AVX-512 kernel/ : /fmaProbe: this CPU has no AVX2 kernel/);
  }
});

test("the bridge's sums do not depend on the thread count or on where the operands live", { skip: !wasm }, async () => {
  // jobs only split once a worker has started: start one so "2 threads" really runs two
  setNumThreads(2);
  unaryF32("exp", new Float32Array(1 << 17), 0, 1 << 17, new Float32Array(1 << 17));
  for (let i = 0; i < 100 && cpuInfo().workersReady < 1; i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(cpuInfo().workersReady >= 1, "a worker thread started");
  const [M, K, N] = [200, 300, 260];
  const A = arenaF32(M * K)!, B = arenaF32(K * N)!, C1 = arenaF32(M * N)!, C2 = arenaF32(M * N)!;
  const run = (k: BlasKernel | "auto"): void => {
    setCpuBlas(k);
    setNumThreads(1);
    assert.ok(matmulF32(M, K, N, A.data, 0, K, 1, B.data, 0, N, 1, C1.data, 0));
    setNumThreads(2);
    for (let rep = 0; rep < 10; rep++) {
      C2.data.fill(0);
      assert.ok(matmulF32(M, K, N, A.data, 0, K, 1, B.data, 0, N, 1, C2.data, 0));
      assert.deepEqual(C2.data, C1.data, `${k}: 2 threads, rep ${rep}`);
    }
    const plain = new Float32Array(M * N);
    assert.ok(matmulF32(M, K, N, A.data.slice(), 0, K, 1, B.data.slice(), 0, N, 1, plain, 0));
    assert.deepEqual(plain, C1.data, `${k}: plain arrays, the same shares, the same sums`);
  };
  try {
    fill(A.data, 11);
    fill(B.data, 12);
    run("auto");
    for (const k of kernels) run(k);
  } finally {
    setCpuBlas("auto");
    setNumThreads(2);
    [A, B, C1, C2].forEach((x) => x.release());
  }
});

for (const kern of ["avx512", "avx2"] as const)
  test(`${kern}: a product cut into shares sums exactly as one call, in every layout`, { skip: !kernels.includes(kern) }, () => {
    const b = addon()!;
    // shapes whose shares cut columns or rows, with M and N edges and K over one block
    for (const [M, K, N] of [[200, 300, 260], [131, 257, 40], [64, 513, 97], [50, 70, 20]] as const) {
      const { shares } = blasShares(M, N, kern);
      assert.ok(shares > 1, `${M}x${K}x${N} is cut`);
      for (const [ta, tb] of [[0, 0], [1, 0], [0, 1], [1, 1]] as const) {
        const A = new Float32Array(M * K), B = new Float32Array(K * N);
        fill(A, M + K + ta);
        fill(B, N + K + tb);
        const lda = ta ? M : K, ldb = tb ? K : N;
        const whole = new Float32Array(M * N);
        b.sgemm(ta, tb, M, N, K, A, 0, lda, B, 0, ldb, 0, whole, 0, N, KERNEL_CODE[kern]);
        const cut = new Float32Array(M * N);
        withKernel(kern, () => assert.ok(matmulF32(M, K, N, A, 0, ta ? 1 : K, ta ? M : 1, B, 0, tb ? 1 : N, tb ? K : 1, cut, 0)));
        assert.deepEqual(cut, whole, `${M}x${K}x${N} ta ${ta} tb ${tb}`);
        // and the same sums one element at a time: fused multiply-adds in k order within 256-deep blocks
        for (let i = 0; i < M; i += 7)
          for (let j = 0; j < N; j += 5) {
            let c = 0;
            for (let p = 0; p < K; p += 256) {
              let acc = 0;
              for (let k = p; k < Math.min(K, p + 256); k++) acc = fmaf(ta ? A[k * M + i]! : A[i * K + k]!, tb ? B[j * K + k]! : B[k * N + j]!, acc);
              c = p > 0 ? Math.fround(c + acc) : acc;
            }
            assert.equal(whole[i * N + j], c, `${M}x${K}x${N} ta ${ta} tb ${tb} (${i},${j}): the k-ordered sum`);
          }
      }
    }
  });

/**
 * float32 fused multiply-add: a*b is exact in float64 (two 24-bit significands), the add is rounded to
 * float64 and then to float32; that double rounding differs from one rounding only in rare halfway
 * cases, which these fixed inputs do not hit (a hit fails the comparison, never hides a wrong sum).
 */
function fmaf(a: number, b: number, c: number): number {
  return Math.fround(a * b + c);
}

test("torch.matmul and nn.functional.linear agree with the wasm GEMM (strict, fused, compiled)", { skip: !wasm }, async () => {
  const x = torch.randn([4, 24, 40], { generator: new torch.Generator(1) });
  const w = torch.randn([56, 40], { generator: new torch.Generator(2) });
  const f = (a: torch.Tensor) => torch.matmul(torch.nn.functional.linear(a, w).relu(), w);
  const run = async (blas: BlasKernel | "auto" | "off") => {
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
  const mid = blasStats.calls;
  const viaWasm = await run("off");
  assert.equal(blasStats.calls, mid, "blas off: none did");
  for (const k of ["auto", ...kernels] as const) {
    const before = blasStats.calls;
    const viaBlas = await run(k);
    if (k !== "auto" || loaded()) assert.ok(blasStats.calls - before >= 6, `${k}: the products ran through the bridge`);
    for (let m = 0; m < 3; m++) {
      assert.deepEqual(viaBlas[m], viaBlas[0], `${k}: mode ${m} equals strict through the same GEMM`);
      for (let i = 0; i < viaWasm[m]!.length; i++)
        assert.ok(Math.abs(viaBlas[m]![i]! - viaWasm[m]![i]!) <= 1e-4 * (1 + Math.abs(viaWasm[m]![i]!)), `${k}: mode ${m} entry ${i}`);
    }
  }
});
