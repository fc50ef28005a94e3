// The native AVX-512 attention forwards (src/device/cpu/native/attention.ts,
// native/attention_avx512.c for long queries, attention_decode_avx512.c for decode): which calls
// take them (while the AVX-512 GEMM is in use) and which stay on the wasm flash kernel, the same
// outputs as the wasm kernel and as the decomposition over causal / offset / grouped-query /
// odd-width / strided / masked / NaN / two-segment (KV cache) cases, equal outputs in every mode,
// and parameter blocks the bridge refuses without writing. Skipped where the CPU has no AVX-512
// (blas.test.ts checks, under CI, that it is there when the CPU lists it).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { setCpuBlas } from "../../../src/device/cpu/native/blas.js";
import { NATIVE_ATTN, NATIVE_ATTN_DEC, nativeAttnDecStats, nativeAttnStats } from "../../../src/device/cpu/native/attention.js";
import { segmentedAttention } from "../../../src/nn/functional/attention.js";
import { close } from "../../nn/functional/close.js";
import { addon, hasKernel } from "./addon.js";

const F = torch.nn.functional;
type Opts = Parameters<typeof F.scaledDotProductAttention>[3];
type SegOpts = NonNullable<Parameters<typeof segmentedAttention>[3]>;
const avx512 = hasKernel("avx512");

/**
 * `run()` on the native kernel `stats` counts (asserting it ran once, and none of `others`), on the
 * wasm kernel (TORCHTS_CPU_BLAS=openblas) and `decomposed()` with the composite off; the native output.
 */
async function compare(what: string, run: () => Tensor, decomposed: () => Tensor, stats: { calls: number }, others: { calls: number }[] = []): Promise<Float32Array> {
  setCpuBlas("avx512");
  const c0 = stats.calls, o0 = others.map((o) => o.calls);
  const got = (await run().data()) as Float32Array;
  assert.equal(stats.calls - c0, 1, `${what}: the native kernel ran`);
  others.forEach((o, i) => assert.equal(o.calls, o0[i], `${what}: not another native kernel`));
  setCpuBlas("openblas");
  const c1 = stats.calls;
  const wasm = await run().data();
  assert.equal(stats.calls, c1, `${what}: openblas: the wasm kernel ran`);
  setCpuBlas("avx512");
  torch.backends.cpu.setCompositeEnabled("attention", false);
  try {
    close(`${what} vs the decomposition`, got, await decomposed().data(), 2e-5, 2e-5);
  } finally {
    torch.backends.cpu.setCompositeEnabled("attention", true);
    setCpuBlas("auto");
  }
  close(`${what} vs the wasm kernel`, got, wasm, 2e-5, 2e-5);
  return got;
}

/** The composite's output on the long-query native kernel, checked by `compare`. */
function check(what: string, q: Tensor, k: Tensor, v: Tensor, opts: Opts = {}): Promise<Float32Array> {
  const run = () => F.scaledDotProductAttention(q, k, v, opts);
  return compare(what, run, run, nativeAttnStats);
}

/** f's outputs in strict, fused and compiled (asserting the compiled call ran the kernel `stats` counts) are equal. */
async function modesAgree(f: (...a: Tensor[]) => Tensor, args: Tensor[], stats: { calls: number }): Promise<void> {
  setCpuBlas("auto");
  const outs: Float32Array[] = [];
  for (const mode of ["strict", "fused"] as const) outs.push((await torch.withEagerMode(mode, () => f(...args)).data()) as Float32Array);
  const c0 = stats.calls;
  outs.push((await torch.compile(f)(...args).data()) as Float32Array);
  assert.ok(stats.calls > c0, "compiled ran the native kernel");
  assert.deepEqual(outs[1], outs[0]);
  assert.deepEqual(outs[2], outs[0]);
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
  const f = (a: Tensor, b: Tensor, c: Tensor) => F.scaledDotProductAttention(a.mul(1.5), b, c, { isCausal: true }).add(1);
  await modesAgree(f, [r([2, 4, 40, 32]), r([2, 4, 40, 32]), r([2, 4, 40, 32])], nativeAttnStats);
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

/** The short-query composite on the native decode kernel, checked by `compare`; `seg` adds a second key/value segment. */
function checkDecode(what: string, q: Tensor, k: Tensor, v: Tensor, opts: SegOpts = {}, seg?: [Tensor, Tensor]): Promise<Float32Array> {
  const run = () => torch.noGrad(() => (seg ? segmentedAttention(q, [k, seg[0]], [v, seg[1]], opts) : F.scaledDotProductAttention(q, k, v, opts)));
  const decomposed = () => F.scaledDotProductAttention(q, seg ? torch.cat([k, seg[0]], 2) : k, seg ? torch.cat([v, seg[1]], 2) : v, opts);
  return compare(what, run, decomposed, nativeAttnDecStats, [nativeAttnStats]);
}

test("native decode attention: grouped-query decode steps, KV-cache segments, masks, causal, odd widths", { skip: !avx512 }, async () => {
  torch.manualSeed(8);
  // the bench Llama's step: 12 query heads on 4 kv heads, 512 cached keys and a 32-key tail, a mask row
  const mask = (L: number, S: number) => r([1, 1, L, S]);
  await checkDecode("decode, 12 on 4 heads, two segments", r([1, 12, 1, 64]), r([1, 4, 512, 64]), r([1, 4, 512, 64]), { attnMask: mask(1, 544), enableGqa: true }, [r([1, 4, 32, 64]), r([1, 4, 32, 64])]);
  await checkDecode("one segment, no mask", r([2, 8, 1, 32]), r([2, 2, 300, 32]), r([2, 2, 300, 32]), { enableGqa: true });
  await checkDecode("a few query rows, causal (bottom-right)", r([2, 4, 3, 16]), r([2, 4, 70, 16]), r([2, 4, 70, 16]), { isCausal: true });
  await checkDecode("16 rows per kv head (8 x 2)", r([1, 8, 2, 16]), r([1, 1, 40, 16]), r([1, 1, 40, 16]), { isCausal: true, enableGqa: true });
  await checkDecode("odd head dims (E 6, Ev 80), segments", r([1, 2, 1, 6]), r([1, 2, 12, 6]), r([1, 2, 12, 80]), { attnMask: mask(1, 17) }, [r([1, 2, 5, 6]), r([1, 2, 5, 80])]);
  await checkDecode("one key", r([1, 3, 1, 8]), r([1, 3, 1, 8]), r([1, 3, 1, 8]));
  await checkDecode("keys past one softmax step (600)", r([1, 2, 2, 40]), r([1, 2, 600, 40]), r([1, 2, 600, 40]), { scale: 0.3 });
  // heads split out of a [B, S, H, E] cache layout: strided key rows read in place
  const ks = r([1, 90, 2, 16]).transpose(1, 2), vs = r([1, 90, 2, 16]).transpose(1, 2);
  await checkDecode("transposed [B, S, H, E] keys", r([1, 6, 1, 16]), ks, vs, { enableGqa: true });
  // a bool mask hiding some keys of each row, and one row hidden entirely: NaN there only
  const bm = r([1, 4, 2, 50]).gt(-0.3);
  await checkDecode("bool mask", r([1, 4, 2, 16]), r([1, 4, 50, 16]), r([1, 4, 50, 16]), { attnMask: bm });
  const off = torch.zeros([1, 4, 2, 50]).maskedFill(torch.arange(2).eq(1).view([1, 1, 2, 1]).expand([1, 4, 2, 50]), -Infinity);
  const out = await checkDecode("a fully masked row", r([1, 4, 2, 16]), r([1, 4, 50, 16]), r([1, 4, 50, 16]), { attnMask: off });
  for (let h = 0; h < 4; h++) assert.ok(!Number.isNaN(out[h * 32]!) && Number.isNaN(out[h * 32 + 16]!), `head ${h}`);
  // causal with more query rows than keys: the first rows see no key (NaN in every path)
  const nan = await checkDecode("causal L > S", r([1, 1, 4, 8]), r([1, 1, 2, 8]), r([1, 1, 2, 8]), { isCausal: true });
  assert.ok(Number.isNaN(nan[0]!) && !Number.isNaN(nan[3 * 8]!));
});

test("native decode attention: a NaN key reaches every row, a NaN query its own row only", { skip: !avx512 }, async () => {
  torch.manualSeed(9);
  const withNaN = async (shape: number[], at: number) => {
    const a = (await r(shape).contiguous().data()) as Float32Array;
    a[at] = NaN;
    return torch.tensor(Array.from(a)).reshape(shape);
  };
  const q = await withNaN([1, 6, 1, 8], 2 * 8 + 1); // query head 2 (kv head 1 of 3)
  const out = await checkDecode("NaN query", q, r([1, 3, 20, 8]), r([1, 3, 20, 8]), { enableGqa: true });
  for (let h = 0; h < 6; h++) assert.equal(Number.isNaN(out[h * 8]!), h === 2, `head ${h}`);
  const k = await withNaN([1, 1, 20, 8], 5 * 8);
  const outK = await checkDecode("NaN key", r([1, 2, 1, 8]), k, r([1, 1, 20, 8]), { enableGqa: true });
  assert.ok(outK.every((x) => Number.isNaN(x)));
});

test("native decode attention: long, backward and many-row calls are not its", { skip: !avx512 }, async () => {
  torch.manualSeed(10);
  setCpuBlas("auto");
  const none = async (what: string, f: () => Promise<unknown>) => {
    const c = nativeAttnDecStats.calls;
    await f();
    assert.equal(nativeAttnDecStats.calls, c, what);
  };
  // 17 rows per kv head: the wasm kernel (or, from 16 query rows on, the long-query kernel)
  await none("17 rows per kv head", () => F.scaledDotProductAttention(r([1, 1, 17, 16]), r([1, 1, 40, 16]), r([1, 1, 40, 16])).data());
  await none("long queries", () => F.scaledDotProductAttention(r([1, 2, 64, 16]), r([1, 2, 64, 16]), r([1, 2, 64, 16]), { isCausal: true }).data());
  const qg = r([1, 2, 1, 16]).requiresGrad_(true);
  const c0 = nativeAttnDecStats.calls;
  const y = F.scaledDotProductAttention(qg, r([1, 2, 30, 16]), r([1, 2, 30, 16]));
  await y.sum().backward();
  assert.ok(qg.grad && nativeAttnDecStats.calls - c0 <= 1, "the backward's probabilities are the wasm kernel's");
  for (const m of ["off", "openblas", "avx2"] as const) {
    try {
      setCpuBlas(m);
    } catch {
      continue; // a kernel this machine lacks
    }
    await none(`blas ${m}`, () => F.scaledDotProductAttention(r([1, 2, 1, 16]), r([1, 2, 30, 16]), r([1, 2, 30, 16])).data());
  }
  setCpuBlas("auto");
});

test("native decode attention: strict, fused and compiled decode steps give equal outputs", { skip: !avx512 }, async () => {
  torch.manualSeed(11);
  const k = r([1, 2, 64, 32]), v = r([1, 2, 64, 32]), k2 = r([1, 2, 8, 32]), v2 = r([1, 2, 8, 32]), m = r([1, 1, 1, 72]);
  const f = (a: Tensor) => torch.noGrad(() => segmentedAttention(a.mul(1.5), [k, k2], [v, v2], { attnMask: m, enableGqa: true }).add(1));
  await modesAgree(f, [r([1, 8, 1, 32])], nativeAttnDecStats);
});

test("native decode attention: the bridge refuses a wrong parameter block without writing", { skip: !avx512 }, () => {
  const b = addon!;
  const mem = new Float32Array(4096);
  const P = new Int32Array(mem.buffer);
  // q [1, 2, 1, 4] at 64 (two query heads on one kv head); keys/values [1, 1, 6, 4] at 96 / 128,
  // a second segment [1, 1, 2, 4] at 160 / 176; out at 256 (rows of 4); a zero mask row of 8 at 200
  const N = NATIVE_ATTN_DEC;
  const block = (over: Record<number, number> = {}) => {
    mem.fill(0.5, 64, 192);
    mem.fill(0, 200, 208);
    mem.fill(7, 256, 300);
    const w: number[] = [];
    w[N.q] = 64; w[N.k] = 96; w[N.v] = 128; w[N.k2] = 160; w[N.v2] = 176; w[N.out] = 256; w[N.B] = 1; w[N.Hk] = 1; w[N.nrep] = 2;
    w[N.L] = 1; w[N.S] = 8; w[N.split] = 6; w[N.E] = 4; w[N.Ev] = 4; w[N.qsb] = 8; w[N.qsh] = 4; w[N.qsl] = 4;
    w[N.ksb] = 24; w[N.ksh] = 24; w[N.kss] = 4; w[N.vsb] = 24; w[N.vsh] = 24; w[N.vss] = 4;
    w[N.ksb2] = 8; w[N.ksh2] = 8; w[N.kss2] = 4; w[N.vsb2] = 8; w[N.vsh2] = 8; w[N.vss2] = 4;
    w[N.outRow] = 4; w[N.causal] = 0; w[N.hasMask] = 1; w[N.mask] = 200; w[N.msb] = 0; w[N.msh] = 0; w[N.msl] = 0;
    P.set(w, 0);
    mem[N.scale] = 0.5;
    for (const [i, v] of Object.entries(over)) P[Number(i)] = v;
  };
  block();
  b.attnDecode(mem, 0, 1, 0);
  // every value row is 0.5 everywhere (and the mask 0), so both output rows are 0.5
  assert.deepEqual([...mem.subarray(256, 264)], new Array(8).fill(0.5));
  const bad: [Record<number, number>, number, number][] = [
    [{ [N.L]: 0 }, 0, 1],
    [{ [N.nrep]: 17 }, 0, 1], // more query rows than a unit holds
    [{ [N.L]: 9 }, 0, 1], // 2 x 9 rows
    [{ [N.E]: 1025 }, 0, 1],
    [{ [N.split]: 9 }, 0, 1], // past S
    [{ [N.causal]: 2 }, 0, 1],
    [{ [N.outRow]: 3 }, 0, 1],
    [{ [N.qsh]: -4 }, 0, 1],
    [{ [N.q]: 4090 }, 0, 1],
    [{ [N.kss]: 1000 }, 0, 1], // the first segment's rows past the end
    [{ [N.kss2]: 4000 }, 0, 1], // the second segment's
    [{ [N.v2]: 4093 }, 0, 1],
    [{ [N.out]: 4094 }, 0, 1],
    [{ [N.hasMask]: 2 }, 0, 1],
    [{ [N.mask]: 4090 }, 0, 1],
    [{}, 0, 2], // more units than the call has
    [{}, 1, 1],
  ];
  for (const [over, lo, hi] of bad) {
    block(over);
    assert.throws(() => b.attnDecode(mem, lo, hi, 0), /attnDecode: parameter block or units out of range/, JSON.stringify(over));
    assert.deepEqual([...mem.subarray(256, 300)], new Array(44).fill(7), `${JSON.stringify(over)}: nothing written`);
  }
  // split 0 or S: one segment, the other's pointers unread
  block({ [N.split]: 8, [N.k2]: 4095, [N.v2]: 4095 });
  b.attnDecode(mem, 0, 1, 0);
  assert.deepEqual([...mem.subarray(256, 264)], new Array(8).fill(0.5), "split S: the first segment only");
  block({ [N.split]: 8, [N.kss]: 600 }); // 6 rows of 600 fit the memory, 8 do not
  assert.throws(() => b.attnDecode(mem, 0, 1, 0), /out of range/, "split S: the first segment's 8 rows checked");
  block({ [N.split]: 0, [N.k]: 4095, [N.v]: 4095, [N.S]: 2 });
  b.attnDecode(mem, 0, 1, 0);
  assert.deepEqual([...mem.subarray(256, 264)], new Array(8).fill(0.5), "split 0: the second segment only");
  assert.throws(() => b.attnDecode(mem, 0, 1, 2), /out of range/, "an unaligned block");
  assert.throws(() => b.attnDecode(new Int32Array(8), 0, 1, 0), /expected a Float32Array/);
});
