// The cpu `attention` composite (fused online-softmax kernel) against the decomposition it
// replaces (setCompositeEnabled("attention", false)): causal, masked, unmasked, decode steps
// against 1..300 cached keys, grouped-query heads, odd head dims, strided and KV-cache views,
// gradients, strict/fused/compiled modes and the plain-JS fallback.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";
import { CPU_COMPOSITES } from "../../../src/device/cpu/composites.js";
import { segmentedAttention } from "../../../src/nn/functional/attention.js";
import { close } from "./close.js";

const F = torch.nn.functional;
type Opts = Parameters<typeof F.scaledDotProductAttention>[3];

// Count kernel runs of the composite, so a test fails when the op silently decomposes.
let runs = 0;
const build = CPU_COMPOSITES.attention!;
CPU_COMPOSITES.attention = (n) => {
  const k = build(n);
  return (O, ins, offs, s) => {
    runs++;
    k(O, ins, offs, s);
  };
};

async function withComposite<T>(on: boolean, fn: () => T | Promise<T>): Promise<T> {
  torch.backends.cpu.setCompositeEnabled("attention", on);
  try {
    return await fn();
  } finally {
    torch.backends.cpu.setCompositeEnabled("attention", true);
  }
}

/** Output of the composite and of the decomposition; asserts the composite really ran. */
async function check(what: string, q: Tensor, k: Tensor, v: Tensor, opts: Opts = {}, tol = 1e-5): Promise<Float32Array> {
  const r0 = runs;
  const got = await withComposite(true, () => F.scaledDotProductAttention(q, k, v, opts).data());
  assert.ok(runs > r0, `${what}: the attention composite did not run`);
  const r1 = runs;
  const want = await withComposite(false, () => F.scaledDotProductAttention(q, k, v, opts).data());
  assert.equal(runs, r1, `${what}: the decomposition ran the composite`);
  close(what, got, want, tol, tol);
  return got as Float32Array;
}

const randn = (shape: number[]) => torch.randn(shape);

test("unmasked, causal and causal with L != S match the decomposition", async () => {
  torch.manualSeed(1);
  await check("full", randn([2, 3, 5, 8]), randn([2, 3, 7, 8]), randn([2, 3, 7, 11]));
  await check("causal square", randn([2, 2, 37, 24]), randn([2, 2, 37, 24]), randn([2, 2, 37, 24]), { isCausal: true });
  await check("causal offset (L < S)", randn([1, 3, 5, 16]), randn([1, 3, 40, 16]), randn([1, 3, 40, 16]), { isCausal: true });
  // L > S: the first L - S query rows see no key at all (NaN in both paths)
  const out = await check("causal L > S", randn([1, 2, 9, 8]), randn([1, 2, 4, 8]), randn([1, 2, 4, 8]), { isCausal: true });
  assert.ok(Number.isNaN(out[0]!));
  await check("scale", randn([1, 2, 6, 8]), randn([1, 2, 6, 8]), randn([1, 2, 6, 8]), { scale: 0.37, isCausal: true });
  await check("3-d inputs", randn([3, 6, 8]), randn([3, 10, 8]), randn([3, 10, 4]));
  await check("more rows than a tile", randn([1, 1, 70, 8]), randn([1, 1, 150, 8]), randn([1, 1, 150, 8]));
});

test("boolean and additive masks, broadcast from smaller shapes", async () => {
  torch.manualSeed(2);
  const [B, H, L, S, E] = [2, 3, 6, 13, 16];
  const q = randn([B, H, L, E]), k = randn([B, H, S, E]), v = randn([B, H, S, E]);
  await check("bool [L, S]", q, k, v, { attnMask: randn([L, S]).gt(-0.5) });
  await check("bool [B, 1, L, S]", q, k, v, { attnMask: randn([B, 1, L, S]).gt(-0.5) });
  await check("float [B, H, L, S]", q, k, v, { attnMask: randn([B, H, L, S]) });
  await check("float [S]", q, k, v, { attnMask: randn([S]) });
  // Hugging Face style: finfo.min instead of -inf, padding on the left of row 0
  const hf = torch.zeros([B, 1, L, S]);
  hf.slice(0, 0, 1).slice(3, 0, 4).fill_(-3.4028234663852886e38);
  await check("finfo.min padding mask", q, k, v, { attnMask: hf });
  // a fully masked row is NaN in both paths
  const none = torch.ones([L, S], { dtype: "bool" });
  none.slice(0, 2, 3).fill_(false);
  const out = await check("fully masked row", q, k, v, { attnMask: none });
  assert.ok(Number.isNaN(out[2 * E]!));
});

test("decode: one query against 1..300 cached keys", async () => {
  torch.manualSeed(3);
  for (const S of [1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 127, 128, 129, 200, 300]) {
    const q = randn([1, 4, 1, 64]), k = randn([1, 4, S, 64]), v = randn([1, 4, S, 64]);
    await check(`S=${S}`, q, k, v);
    await check(`S=${S} causal`, q, k, v, { isCausal: true });
  }
});

test("grouped-query attention (enableGqa) and a broadcast kv head", async () => {
  torch.manualSeed(4);
  const k = randn([2, 2, 77, 32]), v = randn([2, 2, 77, 32]);
  await check("gqa decode", randn([2, 6, 1, 32]), k, v, { enableGqa: true });
  await check("gqa prefill causal", randn([2, 6, 77, 32]), k, v, { enableGqa: true, isCausal: true });
  await check("gqa mask", randn([2, 6, 5, 32]), k, v, { enableGqa: true, attnMask: randn([2, 1, 5, 77]) });
  await check("gqa odd rows", randn([1, 8, 3, 32]), randn([1, 2, 9, 32]), randn([1, 2, 9, 32]), { enableGqa: true, isCausal: true });
  await check("one kv head broadcast", randn([2, 4, 3, 8]), randn([2, 1, 9, 8]), randn([2, 1, 9, 8]));
  await check("kv batch broadcast", randn([3, 2, 3, 8]), randn([1, 2, 9, 8]), randn([1, 2, 9, 8]));
});

test("odd head dims: 5, 24, 64, 80 and a different value width", async () => {
  torch.manualSeed(5);
  for (const [E, Ev] of [[5, 5], [24, 24], [64, 64], [80, 80], [12, 7], [3, 33]]) {
    await check(`E=${E} Ev=${Ev}`, randn([2, 2, 9, E!]), randn([2, 2, 21, E!]), randn([2, 2, 21, Ev!]), { isCausal: true });
    await check(`E=${E} Ev=${Ev} decode`, randn([1, 3, 1, E!]), randn([1, 3, 21, E!]), randn([1, 3, 21, Ev!]));
  }
});

test("strided inputs: split heads, KV-cache slices, transposed keys", async () => {
  torch.manualSeed(6);
  const [B, T, H, E] = [2, 19, 3, 16];
  // minGPT: q, k, v are head views of one [B, T, 3C] projection
  const qkv = randn([B, T, 3 * H * E]);
  const [q, k, v] = qkv.split(H * E, 2).map((t) => t.view(B, T, H, E).transpose(1, 2)) as [Tensor, Tensor, Tensor];
  await check("split heads", q, k, v, { isCausal: true });
  // a preallocated cache [B, H, Smax, E] read up to the current length
  const ck = randn([B, H, 64, E]), cv = randn([B, H, 64, E]);
  for (const S of [1, 20, 64]) await check(`cache S=${S}`, randn([B, H, 1, E]), ck.slice(2, 0, S), cv.slice(2, 0, S));
  // keys stored transposed: the last dim is strided (staged by the kernel)
  const kt = randn([B, H, E, 11]).transpose(2, 3);
  await check("transposed keys", randn([B, H, 4, E]), kt, randn([B, H, 11, E]));
  // a mask whose key dim is broadcast (stride 0)
  await check("mask broadcast over keys", randn([B, H, 4, E]), randn([B, H, 11, E]), randn([B, H, 11, E]), { attnMask: randn([B, 1, 4, 1]) });
});

async function grads(q0: Tensor, k0: Tensor, v0: Tensor, opts: Opts, on: boolean): Promise<Float32Array[]> {
  return withComposite(on, async () => {
    const [q, k, v] = [q0, k0, v0].map((t) => t.detach().requiresGrad_(true)) as [Tensor, Tensor, Tensor];
    const out = F.scaledDotProductAttention(q, k, v, opts);
    const w = torch.linspace(-1, 1, out.numel()).view(out.shape);
    out.mul(w).sum().backward();
    return Promise.all([out, q.grad!, k.grad!, v.grad!].map(async (t) => (await t.data()) as Float32Array));
  });
}

test("gradients match the decomposition's", async () => {
  torch.manualSeed(7);
  const cases: [string, Tensor, Tensor, Tensor, Opts][] = [
    ["plain", randn([2, 2, 5, 8]), randn([2, 2, 7, 8]), randn([2, 2, 7, 6]), {}],
    ["causal", randn([1, 3, 9, 16]), randn([1, 3, 9, 16]), randn([1, 3, 9, 16]), { isCausal: true }],
    ["mask", randn([2, 2, 4, 8]), randn([2, 2, 6, 8]), randn([2, 2, 6, 8]), { attnMask: randn([4, 6]).gt(-0.7) }],
    ["gqa", randn([1, 4, 3, 8]), randn([1, 2, 10, 8]), randn([1, 2, 10, 8]), { enableGqa: true, isCausal: true }],
    ["3-d", randn([2, 3, 8]), randn([2, 5, 8]), randn([2, 5, 8]), { scale: 0.5 }],
    ["decode, 33 keys", randn([1, 2, 1, 16]), randn([1, 2, 33, 16]), randn([1, 2, 33, 16]), {}],
    ["long causal", randn([1, 1, 70, 8]), randn([1, 1, 70, 8]), randn([1, 1, 70, 8]), { isCausal: true }],
    ["causal L < S", randn([1, 2, 3, 12]), randn([1, 2, 10, 12]), randn([1, 2, 10, 12]), { isCausal: true }],
  ];
  for (const [name, q, k, v, opts] of cases) {
    const r0 = runs;
    const got = await grads(q, k, v, opts, true);
    // forward, then the probabilities for the backward
    assert.equal(runs - r0, 2, `${name}: the composite did not run twice`);
    const want = await grads(q, k, v, opts, false);
    ["out", "dq", "dk", "dv"].forEach((w, i) => close(`${name} ${w}`, got[i]!, want[i]!, 1e-4, 1e-5));
  }
  // second order: the backward records ops (the kernel's probabilities carry no gradient)
  const [q, k, v] = [randn([1, 2, 4, 8]), randn([1, 2, 6, 8]), randn([1, 2, 6, 8])];
  const second = (on: boolean) =>
    withComposite(on, async () => {
      const [a, b, c] = [q, k, v].map((t) => t.detach().requiresGrad_(true)) as [Tensor, Tensor, Tensor];
      const out = F.scaledDotProductAttention(a, b, c, { isCausal: true });
      const [ga] = torch.autograd.grad(out.mul(out).sum(), [a], { createGraph: true });
      ga!.mul(torch.linspace(0, 1, ga!.numel()).view(ga!.shape)).sum().backward();
      return Promise.all([b.grad!, c.grad!].map(async (t) => (await t.data()) as Float32Array));
    });
  const g2 = await second(true), w2 = await second(false);
  close("second order dk", g2[0]!, w2[0]!, 1e-4, 1e-5);
  close("second order dv", g2[1]!, w2[1]!, 1e-4, 1e-5);
  // the backward node carries PyTorch's name
  const q1 = randn([1, 1, 2, 4]).requiresGrad_(true);
  assert.equal(F.scaledDotProductAttention(q1, randn([1, 1, 3, 4]), randn([1, 1, 3, 4])).gradFn?.name, "ScaledDotProductAttentionBackward0");
});

test("fused mode is bit-identical to strict, compiled matches", async () => {
  torch.manualSeed(8);
  const q = randn([2, 3, 17, 24]), k = randn([2, 3, 17, 24]), v = randn([2, 3, 17, 24]);
  const fn = (a: Tensor, b: Tensor, c: Tensor) => F.scaledDotProductAttention(a.mul(1.5), b, c, { isCausal: true }).add(1);
  const strict = (await fn(q, k, v).data()) as Float32Array;
  const r0 = runs;
  const fused = (await torch.withEagerMode("fused", () => fn(q, k, v)).data()) as Float32Array;
  assert.ok(runs > r0);
  assert.deepEqual(Array.from(fused), Array.from(strict));
  const compiled = torch.compile(fn, { name: "sdpa" });
  for (let call = 0; call < 3; call++) close(`compiled call ${call}`, (await compiled(q, k, v).data()) as Float32Array, strict, 0, 0);
  const want = await withComposite(false, () => fn(q, k, v).data());
  close("strict vs decomposition", strict, want);
});

test("gradients in fused mode and under compile match strict", async () => {
  torch.manualSeed(12);
  const [q0, k0, v0] = [randn([2, 4, 9, 16]), randn([2, 2, 9, 16]), randn([2, 2, 9, 16])];
  const step = (q: Tensor, k: Tensor, v: Tensor) => {
    const out = F.scaledDotProductAttention(q, k, v, { isCausal: true, enableGqa: true });
    out.mul(out).sum().backward();
    return out.detach();
  };
  const run = async (f: typeof step) => {
    const [q, k, v] = [q0, k0, v0].map((t) => t.detach().requiresGrad_(true)) as [Tensor, Tensor, Tensor];
    const out = f(q, k, v);
    return Promise.all([out, q.grad!, k.grad!, v.grad!].map(async (t) => Array.from((await t.data()) as Float32Array)));
  };
  const strict = await run(step);
  const fused = await torch.withEagerMode("fused", () => run(step));
  fused.forEach((a, i) => assert.deepEqual(a, strict[i]));
  const compiled = torch.compile(step, { name: "sdpa_step" });
  for (let call = 0; call < 3; call++) (await run(compiled)).forEach((a, i) => close(`compiled step ${call} [${i}]`, a, strict[i]!));
});

test("dropout and float64 inputs keep the decomposition", async () => {
  torch.manualSeed(9);
  const r0 = runs;
  F.scaledDotProductAttention(randn([1, 1, 3, 4]), randn([1, 1, 3, 4]), randn([1, 1, 3, 4]), { dropoutP: 0.5 });
  const d = torch.randn([1, 1, 3, 4], { dtype: "float64" });
  F.scaledDotProductAttention(d, d, d);
  assert.equal(runs, r0);
});

test("the plain-JS fallback computes the same", async () => {
  torch.manualSeed(10);
  const q = randn([2, 4, 6, 12]), k = randn([2, 2, 9, 12]), v = randn([2, 2, 9, 5]);
  const mask = randn([6, 9]).gt(-0.5);
  const wasm = [
    await F.scaledDotProductAttention(q, k, v, { enableGqa: true, isCausal: true }).data(),
    await F.scaledDotProductAttention(q, k, v, { enableGqa: true, attnMask: mask }).data(),
  ];
  torch.backends.cpu.setBackend("js");
  try {
    const r0 = runs;
    const js = [
      await F.scaledDotProductAttention(q, k, v, { enableGqa: true, isCausal: true }).data(),
      await F.scaledDotProductAttention(q, k, v, { enableGqa: true, attnMask: mask }).data(),
    ];
    assert.ok(runs > r0);
    js.forEach((a, i) => close(`js ${i}`, a, wasm[i]!));
  } finally {
    torch.backends.cpu.setBackend("auto");
  }
});

test("operands outside the wasm memory are staged", async () => {
  torch.backends.cpu.setBackend("js");
  let q: Tensor, k: Tensor, v: Tensor, m: Tensor;
  try {
    torch.manualSeed(11);
    [q, k, v] = [randn([2, 3, 5, 8]), randn([2, 3, 9, 8]), randn([2, 3, 9, 8])];
    m = randn([5, 9]);
  } finally {
    torch.backends.cpu.setBackend("auto");
  }
  await check("plain arrays", q, k, v, { attnMask: m });
  await check("plain arrays, causal, strided", q, k.transpose(2, 3).transpose(2, 3), v, { isCausal: true });
});

test("two key segments (a KV cache's blocks and tail) match attention over their concatenation, in place", async () => {
  torch.manualSeed(12);
  // split lengths that are multiples of 64, 32, 8 and 4 (the kernel's key blocks shrink to fit);
  // decode (L = 1) and several queries (tiles re-read keys); GQA; slices of a bigger cache
  for (const [S1, S2, L, Hq, Hk] of [[64, 32, 1, 12, 4], [96, 32, 1, 4, 4], [40, 8, 3, 6, 2], [4, 9, 2, 2, 1], [128, 64, 17, 4, 2]] as const) {
    const big = randn([1, Hk, 256, 16]), tail = randn([1, Hk, S2, 16]);
    const vbig = randn([1, Hk, 256, 16]), vtail = randn([1, Hk, S2, 16]);
    const k1 = big.narrow(2, 0, S1), v1 = vbig.narrow(2, 0, S1);
    const q = randn([1, Hq, L, 16]);
    const mask = randn([1, 1, L, S1 + S2]).gt(-1).logicalNot().float().mul(-1e9); // some keys hidden
    const opts = { attnMask: mask, enableGqa: true, scale: 0.3 };
    const want = await F.scaledDotProductAttention(q, torch.cat([k1, tail], 2), torch.cat([v1, vtail], 2), opts).data();
    for (const mode of ["strict", "fused"] as const) {
      const r0 = runs;
      const got = await torch.withEagerMode(mode, () => torch.noGrad(() => segmentedAttention(q, [k1, tail], [v1, vtail], opts)).data());
      assert.ok(runs > r0, `S1 ${S1}: the composite did not run`);
      close(`S1 ${S1} S2 ${S2} L ${L} ${mode}`, got, want);
    }
    torch.backends.cpu.setBackend("js");
    try {
      close(`S1 ${S1} js`, await torch.noGrad(() => segmentedAttention(q, [k1, tail], [v1, vtail], opts)).data(), want);
    } finally {
      torch.backends.cpu.setBackend("auto");
    }
  }
  // a first segment that is not a multiple of 4, or a gradient, takes the concatenation
  const [q, k1, k2, v1, v2] = [randn([1, 2, 1, 8]), randn([1, 2, 6, 8]), randn([1, 2, 3, 8]), randn([1, 2, 6, 8]), randn([1, 2, 3, 8])];
  const want = await F.scaledDotProductAttention(q, torch.cat([k1, k2], 2), torch.cat([v1, v2], 2)).data();
  close("split 6", await segmentedAttention(q, [k1, k2], [v1, v2]).data(), want);
  const qg = q.clone().requiresGrad_();
  const y = segmentedAttention(qg, [k1, k2], [v1, v2]);
  y.sum().backward();
  assert.ok(qg.grad, "a query that requires grad gets one");
  assert.throws(() => segmentedAttention(q, [k1, randn([1, 2, 3, 7])], [v1, v2]), /Sizes of tensors must match|same embedding dim/);
});
