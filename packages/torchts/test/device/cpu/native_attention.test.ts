// The native AVX-512 attention forward (src/device/cpu/native/attention.ts,
// native/attention_avx512.c): which calls take it (long queries while the AVX-512 GEMM is in
// use) and which stay on the wasm flash kernel, the same outputs as the wasm kernel and as the
// decomposition over causal / offset / grouped-query / odd-width / strided / masked / NaN cases, equal
// outputs in every mode, and a parameter block the bridge refuses without writing. Skipped where
// the CPU has no AVX-512 (blas.test.ts checks, under CI, that it is there when the CPU lists it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { NATIVE_ATTN, nativeAttnStats } from "../../../src/device/cpu/native/attention.js";
import { close } from "../../nn/functional/close.js";

const F = torch.nn.functional;
type Opts = Parameters<typeof F.scaledDotProductAttention>[3];
type Addon = { kernels(): string; attnFwd(...a: unknown[]): void };
const addon = ((): Addon | null => {
  try {
    return createRequire(import.meta.url)("../../../build/native/torchts_blas.node") as Addon;
  } catch {
    return null;
  }
})();
const avx512 = process.env.TORCHTS_CPU_BACKEND !== "js" && !!addon?.kernels().split(",").includes("avx512");

/** The composite's output on the native kernel (asserting it ran), on the wasm kernel, and decomposed. */
async function check(what: string, q: Tensor, k: Tensor, v: Tensor, opts: Opts = {}): Promise<Float32Array> {
  setCpuBlas("avx512");
  const c0 = nativeAttnStats.calls;
  const got = (await F.scaledDotProductAttention(q, k, v, opts).data()) as Float32Array;
  assert.equal(nativeAttnStats.calls - c0, 1, `${what}: the native kernel ran`);
  setCpuBlas("openblas");
  const c1 = nativeAttnStats.calls;
  const wasm = await F.scaledDotProductAttention(q, k, v, opts).data();
  assert.equal(nativeAttnStats.calls, c1, `${what}: openblas: the wasm kernel ran`);
  setCpuBlas("avx512");
  torch.backends.cpu.setCompositeEnabled("attention", false);
  try {
    const want = await F.scaledDotProductAttention(q, k, v, opts).data();
    close(`${what} vs the decomposition`, got, want, 2e-5, 2e-5);
  } finally {
    torch.backends.cpu.setCompositeEnabled("attention", true);
    setCpuBlas("auto");
  }
  close(`${what} vs the wasm kernel`, got, wasm, 2e-5, 2e-5);
  return got;
}

const r = (shape: number[]) => torch.randn(shape);

test("native attention: causal, offset, grouped-query, odd widths and strided views match", { skip: !avx512 }, async () => {
  torch.manualSeed(3);
  await check("causal 64 x 64, E 64", r([1, 4, 64, 64]), r([1, 4, 64, 64]), r([1, 4, 64, 64]), { isCausal: true });
  await check("non-causal, S not a multiple of 12", r([2, 2, 40, 32]), r([2, 2, 29, 32]), r([2, 2, 29, 32]));
  await check("fewer keys than a tile", r([1, 2, 20, 16]), r([1, 2, 5, 16]), r([1, 2, 5, 16]));
  await check("causal offset (L < S)", r([1, 3, 17, 16]), r([1, 3, 90, 16]), r([1, 3, 90, 16]), { isCausal: true });
  // L > S: the first L - S rows see no key (NaN in every path)
  const nan = await check("causal L > S", r([1, 1, 30, 8]), r([1, 1, 10, 8]), r([1, 1, 10, 8]), { isCausal: true });
  assert.ok(Number.isNaN(nan[0]!) && !Number.isNaN(nan[29 * 8]!));
  await check("odd head dims (E 6, Ev 80)", r([1, 2, 33, 6]), r([1, 2, 50, 6]), r([1, 2, 50, 80]), { isCausal: true });
  await check("scale", r([1, 1, 48, 24]), r([1, 1, 48, 24]), r([1, 1, 48, 24]), { scale: 0.37 });
  await check("grouped-query (8 heads on 2)", r([2, 8, 35, 16]), r([2, 2, 35, 16]), r([2, 2, 35, 16]), { isCausal: true, enableGqa: true });
  // heads split out of [B, L, H, E] projections: strided rows read in place
  const qs = r([2, 70, 3, 16]).transpose(1, 2), ks = r([2, 70, 3, 16]).transpose(1, 2), vs = r([2, 70, 3, 16]).transpose(1, 2);
  await check("transposed [B, L, H, E] views", qs, ks, vs, { isCausal: true });
  await check("long causal (300 rows, past several blocks)", r([1, 2, 300, 64]), r([1, 2, 300, 64]), r([1, 2, 300, 64]), { isCausal: true });
});

test("native attention: boolean, additive and causal-as-a-mask masks, rows a mask hides entirely", { skip: !avx512 }, async () => {
  torch.manualSeed(7);
  const [B, H, L, S, E] = [2, 3, 40, 70, 16];
  const q = r([B, H, L, E]), k = r([B, H, S, E]), v = r([B, H, S, E]);
  await check("bool [L, S]", q, k, v, { attnMask: r([L, S]).gt(-0.5) });
  await check("float [B, H, L, S]", q, k, v, { attnMask: r([B, H, L, S]) });
  await check("float [B, 1, L, S] broadcast over heads", q, k, v, { attnMask: r([B, 1, L, S]) });
  // transformers' prefill: a causal mask as an additive -inf / 0 tensor, key blocks it hides skipped
  const causal = torch.zeros([L, S]).maskedFill(torch.ones([L, S], { dtype: "bool" }).triu(S - L + 1), -Infinity);
  await check("causal as an additive mask", q, k, v, { attnMask: causal });
  const long = torch.zeros([200, 200]).maskedFill(torch.ones([200, 200], { dtype: "bool" }).triu(1), -Infinity);
  await check("200-row causal mask, grouped-query", r([1, 4, 200, 32]), r([1, 2, 200, 32]), r([1, 2, 200, 32]), { attnMask: long, enableGqa: true });
  // a row the mask hides from every key: NaN, as softmax over only -inf gives
  const rowOff = torch.zeros([L, S]).maskedFill(torch.arange(L).eq(5).unsqueeze(1).expand([L, S]), -Infinity);
  const out = await check("a fully masked row", q, k, v, { attnMask: rowOff });
  assert.ok(Number.isNaN(out[5 * E]!) && !Number.isNaN(out[4 * E]!));
});

test("native attention: a NaN in q reaches its row only", { skip: !avx512 }, async () => {
  torch.manualSeed(4);
  const qd = r([1, 1, 20, 8]).contiguous();
  const qa = (await qd.data()) as Float32Array;
  qa[3 * 8 + 2] = NaN;
  const q = torch.tensor(Array.from(qa)).reshape([1, 1, 20, 8]);
  const out = await check("NaN query", q, r([1, 1, 20, 8]), r([1, 1, 20, 8]), { isCausal: true });
  for (let i = 0; i < 20; i++) assert.equal(Number.isNaN(out[i * 8]!), i === 3, `row ${i}`);
});

test("native attention: short, backward and non-avx512 calls stay on the wasm kernel", { skip: !avx512 }, async () => {
  torch.manualSeed(5);
  const q = r([1, 2, 32, 16]), k = r([1, 2, 32, 16]), v = r([1, 2, 32, 16]);
  const none = async (what: string, f: () => Promise<unknown>) => {
    const c = nativeAttnStats.calls;
    await f();
    assert.equal(nativeAttnStats.calls, c, what);
  };
  setCpuBlas("auto");
  await none("decode-length queries", () => F.scaledDotProductAttention(r([1, 2, 4, 16]), k, v).data());
  for (const m of ["off", "openblas"] as const) {
    setCpuBlas(m);
    await none(`blas ${m}`, () => F.scaledDotProductAttention(q, k, v, { isCausal: true }).data());
  }
  setCpuBlas("auto");
  // the backward asks for probabilities: wasm; the forward ran natively
  const qg = q.detach().requiresGrad_(true);
  const c0 = nativeAttnStats.calls;
  const out = F.scaledDotProductAttention(qg, k, v, { isCausal: true });
  await out.sum().backward();
  assert.equal(nativeAttnStats.calls - c0, 1, "forward native, backward not");
  assert.ok(qg.grad);
});

test("native attention: strict, fused and compiled give equal outputs", { skip: !avx512 }, async () => {
  torch.manualSeed(6);
  setCpuBlas("auto");
  const q = r([2, 4, 40, 32]), k = r([2, 4, 40, 32]), v = r([2, 4, 40, 32]);
  const f = (a: Tensor, b: Tensor, c: Tensor) => F.scaledDotProductAttention(a.mul(1.5), b, c, { isCausal: true }).add(1);
  const outs: Float32Array[] = [];
  for (const mode of ["strict", "fused"] as const) outs.push((await torch.withEagerMode(mode, () => f(q, k, v)).data()) as Float32Array);
  const c0 = nativeAttnStats.calls;
  outs.push((await torch.compile(f)(q, k, v).data()) as Float32Array);
  assert.ok(nativeAttnStats.calls > c0, "compiled ran the native kernel");
  assert.deepEqual(outs[1], outs[0]);
  assert.deepEqual(outs[2], outs[0]);
});

test("native attention: the bridge refuses a wrong parameter block without writing", { skip: !avx512 }, () => {
  const b = addon!;
  const mem = new Float32Array(4096);
  const P = new Int32Array(mem.buffer);
  // q, k, v [1, 1, 8, 4] at 64, 96, 128; out at 256 (rows of 4)
  const N = NATIVE_ATTN;
  const block = (over: Record<number, number> = {}) => {
    mem.fill(0.5, 64, 160);
    mem.fill(0, 160, 256);
    mem.fill(7, 256, 300);
    const w: number[] = [];
    w[N.q] = 64; w[N.k] = 96; w[N.v] = 128; w[N.out] = 256; w[N.B] = 1; w[N.Hk] = 1; w[N.nrep] = 1; w[N.L] = 8; w[N.S] = 8;
    w[N.E] = 4; w[N.Ev] = 4; w[N.qsb] = 32; w[N.qsh] = 32; w[N.qsl] = 4; w[N.ksb] = 32; w[N.ksh] = 32; w[N.kss] = 4;
    w[N.vsb] = 32; w[N.vsh] = 32; w[N.vss] = 4; w[N.outRow] = 4; w[N.causal] = 1;
    w[N.hasMask] = 1; w[N.mask] = 160; w[N.msb] = 64; w[N.msh] = 64; w[N.msl] = 8; // a zero mask [8, 8] at 160
    P.set(w, 0);
    mem[N.scale] = 0.5;
    for (const [i, v] of Object.entries(over)) P[Number(i)] = v;
  };
  block();
  b.attnFwd(mem, 0, 1, 0);
  // every value row is 0.5 everywhere (and the mask 0), so every output is 0.5
  assert.deepEqual([...mem.subarray(256, 288)], new Array(32).fill(0.5));
  const bad: [Record<number, number>, number, number][] = [
    [{ [N.L]: 0 }, 0, 1],
    [{ [N.E]: 1025 }, 0, 1],
    [{ [N.causal]: 2 }, 0, 1],
    [{ [N.outRow]: 3 }, 0, 1], // narrower than a value row
    [{ [N.qsl]: -4 }, 0, 1],
    [{ [N.q]: 4090 }, 0, 1], // q's rows past the end
    [{ [N.kss]: 1000 }, 0, 1], // k's rows past the end
    [{ [N.out]: 4094 }, 0, 1],
    [{ [N.nrep]: 3000 }, 0, 1], // query heads past the end
    [{ [N.hasMask]: 2 }, 0, 1],
    [{ [N.mask]: 4050 }, 0, 1], // the mask's rows past the end
    [{ [N.msl]: 1 << 26 }, 0, 1], // a row stride the gathers cannot index
    [{}, 0, 2], // more units than the call has
    [{}, 1, 1],
  ];
  for (const [over, lo, hi] of bad) {
    block(over);
    assert.throws(() => b.attnFwd(mem, lo, hi, 0), /attnFwd: parameter block or units out of range/, JSON.stringify(over));
    assert.deepEqual([...mem.subarray(256, 300)], new Array(44).fill(7), `${JSON.stringify(over)}: nothing written`);
  }
  assert.throws(() => b.attnFwd(mem, 0, 1, 2), /out of range/, "an unaligned block");
  assert.throws(() => b.attnFwd(mem, 0, 1, 4096 * 4), /out of range/, "a block past the end");
  assert.throws(() => b.attnFwd(new Int32Array(8), 0, 1, 0), /expected a Float32Array/);
});
