// int8 weights with dynamic per-token int8 activations (quantize(..., { activations: "int8" }),
// F.linearW8A8, the cpu composite linearW8A8 and its wasm kernels q8act / q8dot):
// - the wasm integer dot products (both kernels) equal exact integer sums;
// - the composite's decode path equals, bit for bit, a JS reference of its documented float32
//   steps; its activation quantization equals the decomposition's exactly; the JS fallback
//   (TORCHTS_CPU_BACKEND=js) gives the same bits;
// - kernel (decode and prefill rows) and decomposition agree with float64 within float32 rounding;
// - golden models: stated logit-error bounds and greedy continuations (measured below);
// - strict, fused and compiled modes give the same logits.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { AutoModelForCausalLM, Int8Linear, quantize, quantizeWeight } from "../../src/transformers/index.js";
import { dequantizeInt8, linearW8A8, quantizeActivationsInt8 } from "../../src/nn/functional/quantized.js";
import { CPU_COMPOSITES } from "../../src/device/cpu/composites.js";
import { wasmRuntime } from "../../src/device/cpu/wasm/runtime.js";
import { actBytes } from "../../src/device/cpu/wasm/qdot.js";
import { GOLDEN, expected, fixtureDir } from "./helpers.js";

const f32 = Math.fround;

function roundEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The documented quantization of one row: sx = max(max|x| / 127, 2^-126), q = clamp(round(x / sx)). */
function refQuantize(x: ArrayLike<number>): { q: number[]; sx: number } {
  let m = 0;
  for (let k = 0; k < x.length; k++) m = Math.max(m, Math.abs(x[k]!));
  const sx = Math.max(f32(m / 127), 2 ** -126);
  return { q: Array.from(x, (v) => Math.max(-127, Math.min(127, roundEven(f32(v / sx))))), sx };
}

/** out[n] = f32(f32(sum_g f32(dot_g) * s[n, g] (float32 steps)) * sx) + bias[n], dot_g exact. */
function refRow(x: ArrayLike<number>, q: Int8Array, s: Float32Array, K: number, gs: number, bias: Float32Array | null): number[] {
  const { q: xq, sx } = refQuantize(x);
  const N = q.length / K, G = K / gs;
  const out: number[] = [];
  for (let n = 0; n < N; n++) {
    let tot = 0;
    for (let g = 0; g < G; g++) {
      let d = 0;
      for (let k = g * gs; k < (g + 1) * gs; k++) d += xq[k]! * q[n * K + k]!;
      tot = f32(tot + f32(f32(d) * s[n * G + g]!));
    }
    out.push(f32(f32(tot * sx) + (bias ? bias[n]! : 0)));
  }
  return out;
}

function withComposites<T>(on: boolean, f: () => T): T {
  torch.backends.cpu.setCompositeEnabled("all", on);
  try {
    return f();
  } finally {
    torch.backends.cpu.setCompositeEnabled("all", true);
  }
}

test("q8dot / q8dotp / q8dotp4: the wasm int8 x int8 dot products equal exact integer sums (extremes, groups, tails)", () => {
  const rt = wasmRuntime();
  assert.ok(rt, "the wasm runtime is available here");
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) / 2 ** 24;
  for (const [K, gs, N] of [[16, 16, 5], [50, 50, 3], [70, 35, 4], [96, 32, 6], [768, 768, 33], [768, 32, 9], [2048, 2048, 17], [4096, 4096, 2], [4096, 4096, 8]] as const) {
    const G = K / gs;
    const bytes = actBytes(K);
    const xp = rt.arena.alloc(4 * K), xa = rt.arena.alloc(bytes + 16), wq = rt.arena.alloc(N * K), sp = rt.arena.alloc(N * G * 4), op = rt.arena.alloc(N * 4);
    try {
      // integer activations with max |x| = 127 quantize to themselves (sx = 1). K = 4096: all at
      // +-127 and weight row 0 matching their signs (the largest sum, 4096 * 127^2)
      const x = rt.view(Float32Array, xp, K), w = rt.view(Int8Array, wq, N * K);
      for (let k = 0; k < K; k++) x[k] = K === 4096 ? (k % 3 === 0 ? -127 : 127) : k === 0 ? 127 : Math.round(rnd() * 254) - 127;
      for (let i = 0; i < N * K; i++) w[i] = i < K ? (x[i]! < 0 ? -127 : 127) : Math.round(rnd() * 254) - 127;
      rt.view(Float32Array, sp, N * G).fill(1);
      rt.exports.q8act!(xp, K, xa, xa + bytes);
      assert.equal(rt.view(Float32Array, xa + bytes, 1)[0], 1);
      const expect: number[] = [];
      for (let n = 0; n < N; n++) {
        let e = 0;
        for (let g = 0; g < G; g++) {
          let d = 0;
          for (let k = g * gs; k < (g + 1) * gs; k++) d += x[k]! * w[n * K + k]!;
          e = f32(e + f32(d));
        }
        expect.push(e);
      }
      if (K === 4096) assert.equal(expect[0], 4096 * 127 * 127);
      const fns = ["q8dot", ...(gs % 16 === 0 || gs === K ? ["q8dotp"] : []), ...(gs === K && K % 16 === 0 ? ["q8dotp4"] : [])];
      for (const fn of fns) {
        rt.exports[fn]!(0, N, xa, xa + bytes, wq, sp, op, K, gs, 0);
        const out: Float32Array = rt.view(Float32Array, op, N);
        for (let n = 0; n < N; n++) assert.equal(out[n], expect[n], `${fn} K=${K} gs=${gs} row ${n}`);
      }
    } finally {
      for (const p of [xp, xa, wq, sp, op]) rt.arena.release(p);
    }
  }
});

const CASES: { K: number; gs: number | undefined; N: number }[] = [
  { K: 96, gs: undefined, N: 37 },
  { K: 70, gs: undefined, N: 9 }, // K not a multiple of 16
  { K: 768, gs: undefined, N: 64 },
  { K: 96, gs: 32, N: 16 },
  { K: 120, gs: 40, N: 12 }, // groups with a tail of 8
];

/** Rows: random, zeros, then 0.5 with one outlier (40), then random. */
async function inputs(M: number, K: number): Promise<Tensor> {
  const d = (await torch.randn(M, K).data()) as Float32Array;
  if (M > 1) d.fill(0, K, 2 * K);
  if (M > 2) d.fill(0.5, 2 * K, 3 * K)[2 * K + 3] = 40;
  return torch.tensor(d).reshape(M, K);
}

test("linearW8A8 decode rows: bit-identical to the JS reference of the kernel's float32 steps; quantization equals the decomposition's", async () => {
  torch.manualSeed(21);
  for (const { K, gs, N } of CASES) {
    const { q, scale } = await quantizeWeight(torch.randn(N, K), 8, gs);
    const G = scale.shape[1]!;
    const qh = (await q.data()) as Int8Array, sh = (await scale.data()) as Float32Array;
    for (const M of [1, 3]) {
      for (const bias of [null, torch.randn(N)]) {
        const x = await inputs(M, K);
        const y = (await linearW8A8(x, q, scale, bias).data()) as Float32Array;
        const xh = (await x.data()) as Float32Array;
        const bh = bias ? ((await bias.data()) as Float32Array) : null;
        for (let i = 0; i < M; i++) {
          const r = refRow(xh.subarray(i * K, (i + 1) * K), qh, sh, K, K / G, bh);
          for (let n = 0; n < N; n++) assert.equal(y[i * N + n], r[n], `K=${K} gs=${gs ?? "row"} M=${M} [${i}, ${n}]`);
        }
        // the decomposition's quantized activations and scales are the same numbers
        const a = quantizeActivationsInt8(x);
        const [qa, sa] = [(await a.q.data()) as Float32Array, (await a.scale.data()) as Float32Array];
        for (let i = 0; i < M; i++) {
          const r = refQuantize(xh.subarray(i * K, (i + 1) * K));
          assert.equal(sa[i], r.sx, `scale of row ${i}`);
          for (let k = 0; k < K; k++) assert.equal(qa[i * K + k], r.q[k], `q[${i}, ${k}]`);
        }
      }
    }
  }
});

test("linearW8A8 kernel and decomposition agree with float64 (decode and prefill rows, groups, bias, 3-d and strided inputs)", async () => {
  torch.manualSeed(22);
  let builds = 0;
  const orig = CPU_COMPOSITES.linearW8A8!;
  CPU_COMPOSITES.linearW8A8 = (n) => (builds++, orig(n));
  try {
    for (const { K, gs, N } of CASES) {
      const { q, scale } = await quantizeWeight(torch.randn(N, K), 8, gs);
      const wd = (await dequantizeInt8(q, scale).data()) as Float32Array;
      for (const [lead, strided] of [[[1], false], [[3], true], [[2, 3], false], [[20], false], [[2, 20], true]] as const) {
        const bias = lead.length === 2 ? torch.randn(N) : null;
        // strided: a transposed view (column stride != 1)
        const x = strided ? torch.randn(K, ...lead).movedim(0, -1) : torch.randn(...lead, K);
        const f = () => linearW8A8(x, q, scale, bias);
        const fast = (await f().data()) as Float32Array;
        const ref = (await withComposites(false, f).data()) as Float32Array;
        assert.deepEqual(f().shape, [...lead, N]);
        const { q: xq, scale: sx } = quantizeActivationsInt8(x.reshape(-1, K));
        const [xqh, sxh] = [(await xq.data()) as Float32Array, (await sx.data()) as Float32Array];
        const bh = bias ? ((await bias.data()) as Float32Array) : null;
        const M = sxh.length;
        for (let i = 0; i < M; i++)
          for (let n = 0; n < N; n++) {
            let s = 0, abs = 0;
            for (let k = 0; k < K; k++) {
              const t = xqh[i * K + k]! * wd[n * K + k]! * sxh[i]!;
              s += t;
              abs += Math.abs(t);
            }
            const r = s + (bh ? bh[n]! : 0);
            const tol = 2e-7 * Math.sqrt(K) * abs + 1e-6 * Math.abs(r) + 1e-30;
            const what = `K=${K} gs=${gs ?? "row"} x=[${lead}] [${i}, ${n}]`;
            assert.ok(Math.abs(fast[i * N + n]! - r) <= tol, `${what}: kernel ${fast[i * N + n]} vs ${r}`);
            assert.ok(Math.abs(ref[i * N + n]! - r) <= tol, `${what}: decomposition ${ref[i * N + n]} vs ${r}`);
          }
      }
    }
  } finally {
    CPU_COMPOSITES.linearW8A8 = orig;
  }
  assert.ok(builds > 0, "the linearW8A8 kernel was not used");
});

test("linearW8A8: the JS fallback (TORCHTS_CPU_BACKEND=js) gives the wasm kernel's bits", async () => {
  const script = (s: string) => `
    import * as torch from "./src/index.ts";
    import { quantizeWeight } from "./src/transformers/index.ts";
    import { linearW8A8 } from "./src/nn/functional/quantized.ts";
    torch.manualSeed(5);
    const { q, scale } = await quantizeWeight(torch.randn(24, 70), 8, ${s});
    const y = linearW8A8(torch.randn(2, 70), q, scale, torch.randn(24));
    console.log(JSON.stringify([...new Uint32Array((await y.data()).buffer)]));`;
  const root = fileURLToPath(new URL("../..", import.meta.url));
  for (const gs of ["undefined", "35"]) {
    const run = (env: NodeJS.ProcessEnv) => {
      const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script(gs)], { cwd: root, env, encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim().split("\n").pop()!;
    };
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.NODE_TEST_CONTEXT;
    assert.equal(run({ ...env, TORCHTS_CPU_BACKEND: "js" }), run(env), `groups ${gs}`);
  }
});

// Measured (cpu kernel, per-token scales) against float weights; weight-only int8 in brackets:
//   llama_gqa max |dlogit| 0.33 (0.22), qwen2_tied 1.46 (0.57), qwen3_qknorm 0.31 (0.21), gpt2 0.44 (0.28).
// Greedy 16-token continuations stay identical for qwen3_qknorm (both prompts) and for prompt 0 of
// llama_gqa and gpt2; the others diverge after 3-8 tokens (these models' greedy margins are
// 0.05-0.17 logits). Blocks of 32 activations (q8_0's granularity) were measured too (the
// decomposition with per-block scales): rms |dlogit| 6-24% lower, max |dlogit| similar (0.26-1.19),
// but fewer identical continuations (3 of 8 prompts vs 5 of 8), so the cheaper per-token scale
// (one int32 sum per output, torchao's scheme) is kept.
const W8A8_BOUND: Record<(typeof GOLDEN)[number], number> = { llama_gqa: 0.5, qwen2_tied: 2, qwen3_qknorm: 0.5, gpt2: 0.6 };
const W8A8_GREEDY: [string, number][] = [["qwen3_qknorm", 0], ["qwen3_qknorm", 1], ["llama_gqa", 0], ["gpt2", 0]];

test("w8a8 on the golden models: stated logit-error bounds and greedy continuations", async () => {
  const report: string[] = [];
  for (const name of GOLDEN) {
    const fp = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
    const m = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir(name)), { bits: 8, activations: "int8" });
    assert.ok([...m.modules()].some((l) => l instanceof Int8Linear && l.activations === "int8"));
    const prompts = expected(name).prompts;
    for (const [i, p] of prompts.entries()) {
      const ids = torch.tensor([p.full_sequence.slice(0, -1)]);
      const d = await torch.noGrad(() => fp.forward(ids).logits.sub(m.forward(ids).logits).abs().max()).item();
      report.push(`${name}[${i}]: w8a8 max |dlogit| ${d.toFixed(3)}`);
      assert.ok(d < W8A8_BOUND[name], `${name}: w8a8 logits differ by ${d}`);
      if (W8A8_GREEDY.some(([n, j]) => n === name && j === i)) {
        const out = await m.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [] });
        assert.deepEqual(out.newTokens[0], p.greedy_continuation, `${name}[${i}]: w8a8 greedy continuation`);
      }
    }
  }
  console.log(report.join("\n"));
});

test("w8a8: strict, fused and compiled modes give the same logits and continuation", async () => {
  const m = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa")), { bits: 8, activations: "int8" });
  const p = expected("llama_gqa").prompts[0]!;
  const ids = torch.tensor([p.full_sequence.slice(0, 12)]);
  const run = (mode: "strict" | "fused") => torch.withEagerMode(mode, () => torch.noGrad(() => m.forward(ids).logits.contiguous()).data());
  const strict = (await run("strict")) as Float32Array;
  const fused = (await run("fused")) as Float32Array;
  const compiledFwd = torch.compile((t: Tensor) => m.forward(t).logits);
  const compiled = (await torch.noGrad(() => compiledFwd(ids)).data()) as Float32Array;
  assert.deepEqual(fused, strict, "fused vs strict");
  let d = 0;
  for (let i = 0; i < strict.length; i++) d = Math.max(d, Math.abs(compiled[i]! - strict[i]!));
  assert.ok(d <= 1e-4, `compiled vs strict: ${d}`);
  const a = await m.generate(p.input_ids, { maxNewTokens: 8, stopTokenIds: [] });
  const b = await m.generate(p.input_ids, { maxNewTokens: 8, stopTokenIds: [], compile: true });
  assert.deepEqual(b.newTokens, a.newTokens);
});

test("quantize checks the activations option", async () => {
  const m = new torch.nn.Sequential(new torch.nn.Linear(32, 8));
  await assert.rejects(quantize(m, { bits: 4, activations: "int8" }), /quantize: int8 activations need 8-bit weights/);
  await assert.rejects(quantize(m, { bits: 8, activations: "int4" as "int8" }), /quantize: activations must be "float" or "int8"/);
  const { q, scale } = await quantizeWeight(torch.randn(4, 32), 8);
  assert.throws(() => linearW8A8(torch.randn(2, 31), q, scale), /linearW8A8: mat1 and mat2 shapes cannot be multiplied \(2x31 and 32x4\)/);
});
