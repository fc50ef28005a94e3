// GPTQ rounding (src/transformers/gptq.ts and quantize's `calibration` option).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, Int4Linear, Int8Linear, quantize, quantizeWeight, type PreTrainedModel } from "../../src/transformers/index.js";
import { HessianAccumulator, inverseHessianFactor } from "../../src/transformers/gptq.js";
import { GOLDEN, fixtureDir } from "./helpers.js";

/** A deterministic pseudo-random stream (tests must not depend on Math.random). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
}

test("inverseHessianFactor: U is upper triangular and U^T U (H + damp I) = I", () => {
  const n = 12;
  const rnd = lcg(1);
  const x = Array.from({ length: 40 * n }, rnd);
  const acc = new HessianAccumulator(n);
  acc.add(x.slice(0, 15 * n), 15); // two batches weigh as one of 40 rows
  acc.add(x.slice(15 * n), 25);
  const direct = new HessianAccumulator(n);
  direct.add(x, 40);
  for (let i = 0; i < n * n; i++) assert.ok(Math.abs(acc.h[i]! - direct.h[i]!) < 1e-12);
  const damp = 0.01;
  const u = inverseHessianFactor(acc.h, n, damp);
  let mean = 0;
  for (let i = 0; i < n; i++) mean += acc.h[i * n + i]! / n;
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      if (i > j) assert.equal(u[i * n + j], 0);
      // (U^T U H')[i, j]
      let s = 0;
      for (let k = 0; k < n; k++) {
        let hinv = 0;
        for (let m = 0; m < n; m++) hinv += u[m * n + i]! * u[m * n + k]!;
        s += hinv * (acc.h[k * n + j]! + (k === j ? damp * mean : 0));
      }
      assert.ok(Math.abs(s - (i === j ? 1 : 0)) < 1e-9, `(${i}, ${j}): ${s}`);
    }
});

test("GPTQ rounding lowers the layer's output error ||(W - Q) X|| below round-to-nearest on inputs like the calibration set", async () => {
  const [O, I, N] = [24, 64, 512];
  const rnd = lcg(7);
  const w = torch.tensor(Array.from({ length: O * I }, rnd)).reshape(O, I);
  // correlated, unevenly scaled inputs: what makes H far from the identity in real models
  const basis = Array.from({ length: 8 * I }, rnd);
  const xs = new Float64Array(N * I);
  for (let r = 0; r < N; r++) {
    const z = Array.from({ length: 8 }, rnd);
    for (let i = 0; i < I; i++) {
      let v = 0.05 * rnd();
      for (let k = 0; k < 8; k++) v += z[k]! * basis[k * I + i]!;
      xs[r * I + i] = v * (1 + (i % 7));
    }
  }
  const acc = new HessianAccumulator(I);
  acc.add(xs.subarray(0, (N / 2) * I), N / 2); // calibrate on one half, measure on the other
  const held = torch.tensor(Array.from(xs.subarray((N / 2) * I))).reshape(N / 2, I);
  for (const [bits, group] of [[8, undefined], [4, 32]] as const) {
    const err = async (opts: { hessian?: Float64Array }) => {
      const { q, scale } = await quantizeWeight(w, bits, group, opts);
      const deq = bits === 8 ? new Int8Linear(q, scale, null).dequantize() : new Int4Linear(q, scale, null, I, group!).dequantize();
      return torch.noGrad(() => held.matmul(w.sub(deq).t()).pow(2).mean().sqrt()).item();
    };
    const rtn = await err({});
    const gptq = await err({ hessian: acc.h });
    assert.ok(gptq < 0.8 * rtn, `int${bits}: GPTQ output error ${gptq} vs round-to-nearest ${rtn}`);
  }
  await assert.rejects(quantizeWeight(w, 8, undefined, { hessian: new Float64Array(5) }), /Hessian has 5 entries, expected 64x64/);
});

async function heldOutError(fp: PreTrainedModel, q: PreTrainedModel, ids: torch.Tensor): Promise<number> {
  return torch.noGrad(() => fp.forward(ids).logits.sub(q.forward(ids).logits).pow(2).mean().sqrt()).item();
}

test("quantize with calibration (GPTQ) lowers held-out logit error below round-to-nearest on every golden model, int8 and int4", async () => {
  const report: string[] = [];
  for (const name of GOLDEN) {
    const load = () => AutoModelForCausalLM.fromPretrained(fixtureDir(name));
    const fp = await load();
    const vocab = fp.config.vocabSize;
    torch.manualSeed(0);
    const calibration = torch.randint(0, vocab, [32, 64]);
    const held = torch.randint(0, vocab, [4, 32]); // other tokens than the calibration's
    for (const [bits, groupSize] of [[8, undefined], [4, 32]] as const) {
      const rtn = await heldOutError(fp, await quantize(await load(), { bits, groupSize }), held);
      const gptq = await heldOutError(fp, await quantize(await load(), { bits, groupSize, calibration }), held);
      report.push(`${name} int${bits}: rms dlogit ${rtn.toFixed(4)} -> ${gptq.toFixed(4)}`);
      assert.ok(gptq < 0.95 * rtn, `${name} int${bits}: GPTQ ${gptq} vs round-to-nearest ${rtn}`);
    }
  }
  console.log(report.join("\n"));
});

test("quantize rejects calibration that is not [batch, seq] input ids", async () => {
  const m = await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"));
  await assert.rejects(quantize(m, { bits: 8, calibration: torch.tensor([1, 2, 3]) }), /calibration must be input ids \[batch, seq\], got shape \[3\]/);
});
