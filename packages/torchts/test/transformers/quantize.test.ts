// Weight-only quantization on the golden models (random weights chosen so that greedy margins are
// small: 0.05-0.17 logits, out of logits of magnitude ~10-30).
// Measured (cpu): int8 per-channel changes logits by at most 0.19-0.28 on llama_gqa, qwen3_qknorm
// and gpt2, whose greedy continuations all stay identical; on qwen2_tied (tied embeddings with a
// 5x final-norm gain) by 0.57, more than its margins, so its continuation diverges at step 3
// (int8 with groups of 64 does not fix it). int4 (groups of 32, llama.cpp's q4_0 rounding):
// perplexity on each model's own golden sequence rises by 7-133% (worst: qwen2_tied 96 -> 224);
// the stated bound tested below is a ratio of at most 2.5. GPTQ rounding (quantize's `calibration`,
// test/transformers/gptq.test.ts) lowers the held-out logit error 14-54% but does not widen the
// margins enough: with 128x64 random calibration tokens qwen2_tied keeps 1 of its 2 continuations.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, Int4Linear, Int8Linear, quantize, quantizeWeight, type PreTrainedModel } from "../../src/transformers/index.js";
import { GOLDEN, expected, fixtureDir } from "./helpers.js";

async function perplexity(m: PreTrainedModel, seq: number[]): Promise<number> {
  const logits = torch.noGrad(() => m.forward(torch.tensor([seq.slice(0, -1)])).logits).select(0, 0);
  const loss = torch.nn.functional.crossEntropy(logits, torch.tensor(seq.slice(1)));
  return Math.exp(await loss.item());
}

test("quantizeWeight: int8 round trip within half a step, int4 (q4_0 rounding) within one step", async () => {
  torch.manualSeed(0);
  const w = torch.randn(6, 64);
  for (const bits of [8, 4] as const) {
    const { q, scale } = await quantizeWeight(w, bits, bits === 8 ? undefined : 32);
    const layer = bits === 8 ? new Int8Linear(q, scale, null) : new Int4Linear(q, scale, null, 64, 32);
    assert.equal(q.dtype, bits === 8 ? "int8" : "uint8");
    assert.deepEqual(q.shape, bits === 8 ? [6, 64] : [6, 32]);
    const err = w.sub(layer.dequantize()).abs();
    const step = (bits === 8 ? scale : scale.repeatInterleave(32, 1)).abs();
    // q4_0 maps the largest magnitude to -8, so the opposite extreme may clamp at +7: up to one step
    assert.ok((await err.sub(step.mul((bits === 8 ? 0.5 : 1) + 1e-6)).max().item()) <= 0, `int${bits} error too large`);
  }
});

const INT8_EXACT = ["llama_gqa", "qwen3_qknorm", "gpt2"] as const;

test("int8 per-channel quantization keeps the golden greedy continuations (llama_gqa, qwen3_qknorm, gpt2)", async () => {
  for (const name of INT8_EXACT) {
    const q8 = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir(name)), { bits: 8 });
    assert.ok([...q8.modules()].some((m) => m instanceof Int8Linear));
    for (const p of expected(name).prompts) {
      const out = await q8.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [] });
      assert.deepEqual(out.newTokens[0], p.greedy_continuation, `${name}: int8 greedy continuation`);
    }
  }
});

test("int8 logit error is bounded on every golden model; int4 (group 32) perplexity ratio is at most 2.5", async () => {
  const report: string[] = [];
  for (const name of GOLDEN) {
    const fp = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
    const q8 = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir(name)), { bits: 8 });
    const q4 = await quantize(await AutoModelForCausalLM.fromPretrained(fixtureDir(name)), { bits: 4, groupSize: 32 });
    assert.ok([...q4.modules()].some((m) => m instanceof Int4Linear));
    for (const p of expected(name).prompts) {
      const ids = torch.tensor([p.full_sequence.slice(0, -1)]);
      const d8 = await torch.noGrad(() => fp.forward(ids).logits.sub(q8.forward(ids).logits).abs().max()).item();
      assert.ok(d8 < 0.6, `${name}: int8 logits differ by ${d8}`);
      const a = await perplexity(fp, p.full_sequence);
      const b = await perplexity(q4, p.full_sequence);
      report.push(`${name}: int8 max |dlogit| ${d8.toFixed(3)}; ppl ${a.toFixed(2)} -> int4 ${b.toFixed(2)}`);
      assert.ok(b / a < 2.5 && a / b < 2.5, `${name}: int4 perplexity ${a} -> ${b}`);
    }
  }
  console.log(report.join("\n"));
});
