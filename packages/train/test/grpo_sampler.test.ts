// The sampler is the serve engine in process: after a weight sync it generates what the trainer's
// model generates (greedy), also for a prompt whose KV an earlier weight version put in the prefix cache;
// its sampled tokens' log-probabilities are the ones the trainer recomputes from the padded batch.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "torchts";
import { buildConfig, createModel, initWeights } from "../src/model/build.js";
import { flavorConfig } from "../src/model/flavors.js";
import { loadTokenizer } from "../src/trainer.js";
import { Sampler } from "../src/grpo/rollout.js";
import { tokenLogProbs } from "../src/grpo/core_algos.js";

const cfg = buildConfig(flavorConfig("llama3", "tiny"));

test("after each sync the engine generates the trainer model's greedy tokens (no stale prefix-cache KV)", async () => {
  const tok = await loadTokenizer("");
  const a = createModel(cfg);
  initWeights(a, 1);
  const b = createModel(cfg);
  initWeights(b, 2);
  const sampler = new Sampler(createModel(cfg), tok, { maxNumSeqs: 4, maxModelLen: 64 });
  try {
    const prompt = tok.encode("Q: Tom has 3 apples.\nA: ", { addSpecialTokens: false });
    const outs: string[] = [];
    for (const m of [a, b, a]) {
      sampler.syncWeights(m);
      const r = await sampler.generate([prompt], 2, { temperature: 0, topP: 1, maxTokens: 8, seed: 1 });
      const want = (await m.generate(prompt, { maxNewTokens: 8, doSample: false })).newTokens[0]!;
      for (const x of r) assert.deepEqual(x.tokens, want);
      outs.push(want.join(","));
    }
    assert.notEqual(outs[0], outs[1], "the two weight sets generate differently");
    assert.equal(outs[0], outs[2]);
  } finally {
    await sampler.close();
  }
});

test("sampled tokens' log-probabilities (engine) equal the trainer's recomputation on the left-padded batch", async () => {
  const tok = await loadTokenizer("");
  const m = createModel(cfg);
  initWeights(m, 3);
  const sampler = new Sampler(createModel(cfg), tok, { maxNumSeqs: 4, maxModelLen: 64 });
  sampler.syncWeights(m);
  try {
    const prompts = [tok.encode("Q: a longer question here\nA: ", { addSpecialTokens: false }), tok.encode("Q: hi\nA: ", { addSpecialTokens: false })];
    const P = Math.max(...prompts.map((p) => p.length));
    const R = 6;
    for (const [i, p] of prompts.entries()) {
      const toks: number[] = [];
      const lps: number[] = [];
      for await (const o of sampler.engine.generate(p, { temperature: 1, maxTokens: R, seed: 5 + i, logprobs: 0, ignoreEos: true })) {
        toks.push(...o.tokenIds);
        lps.push(...(o.logprobs ?? []).map((l) => l.logprob));
      }
      const pad = P - p.length;
      const row = [...new Array<number>(pad).fill(1), ...p, ...toks];
      const am = [...new Array<number>(pad).fill(0), ...p.map(() => 1), ...toks.map(() => 1)];
      const logits = m.forward(torch.tensor([row], { dtype: "int64" }), { attentionMask: torch.tensor([am], { dtype: "int64" }) }).logits.narrow(1, P - 1, R);
      const mine = ((await tokenLogProbs(logits, torch.tensor([toks], { dtype: "int64" })).tolist()) as number[][])[0]!;
      mine.forEach((v, t) => assert.ok(Math.abs(v - lps[t]!) < 1e-4, `prompt ${i} (pad ${pad}) token ${t}: ${v} vs engine ${lps[t]}`));
    }
  } finally {
    await sampler.close();
  }
});
