// The four golden checkpoints (logits and greedy continuations from real transformers): logits of
// both prompts and of the full generated sequences, the residual stream after every layer, the
// RoPE table and the 16-token greedy continuations (through generate, with the KV cache), in the
// strict and fused eager modes on cpu.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, type PreTrainedModel } from "../../src/transformers/index.js";
import { GOLDEN, expected, fixtureDir, maxAbsDiff, referenceTensors } from "./helpers.js";

const TOL = 1e-4;

for (const mode of ["strict", "fused", "compiled"] as const)
  for (const name of GOLDEN)
    test(`${name}: logits, hidden states and greedy continuations match transformers (${mode}, cpu)`, async () => {
      // compiled: forward under torch.compile, and generate's prefill/decode as two compiled steps
      await torch.withEagerMode(mode === "compiled" ? "strict" : mode, async () => {
        const model: PreTrainedModel = await AutoModelForCausalLM.fromPretrained(fixtureDir(name));
        const fwd = (x: torch.Tensor, hidden: boolean) => torch.noGrad(() => model.forward(x, { outputHiddenStates: hidden }));
        const forward = mode === "compiled" ? torch.compile(fwd, { modules: [model], name }) : fwd;
        const exp = expected(name);
        const ref = await referenceTensors(name);
        for (const [i, p] of exp.prompts.entries()) {
          const { logits, hiddenStates } = forward(torch.tensor([p.input_ids]), i === 0);
          const d = await maxAbsDiff(logits, ref[`logits.${i}`]!);
          assert.ok(d < TOL, `prompt ${i}: logits differ by ${d}`);
          if (i === 0) {
            const n = model.config.numHiddenLayers;
            const keys = ["embed", ...Array.from({ length: n }, (_, k) => `layer${k}`), "final_norm"];
            assert.equal(hiddenStates!.length, keys.length);
            for (const [k, key] of keys.entries()) {
              const dh = await maxAbsDiff(hiddenStates![k]!, ref[`hidden.0.${key}`]!);
              assert.ok(dh < TOL, `hidden state ${key} differs by ${dh}`);
            }
          }
          const full = forward(torch.tensor([p.full_sequence.slice(0, -1)]), false).logits;
          const df = await maxAbsDiff(full, ref[`full_logits.${i}`]!);
          assert.ok(df < TOL, `prompt ${i}: full-sequence logits differ by ${df}`);
          torch.compiler.resetStats();
          const out = await model.generate(p.input_ids, { maxNewTokens: 16, stopTokenIds: [], compile: mode === "compiled" });
          if (mode === "compiled") {
            const st = torch.compiler.stats();
            const entries = st.compiles + st.loads;
            if (i === 0) {
              // two guarded entries (prefill, decode), each compiled or loaded from the kernel cache once
              assert.deepEqual([entries, st.hits, st.recompiles], [2, 14, 0], "one prefill and one decode graph, reused");
            } else {
              // the model kept the first generation's compiled steps: decode is all hits; prefill
              // gets a new entry only when the prompt length changed
              const again = p.input_ids.length === exp.prompts[0]!.input_ids.length;
              assert.deepEqual([entries, st.hits, st.recompiles], again ? [0, 16, 0] : [1, 15, 1], JSON.stringify(st.recompileReasons));
              assert.ok(st.recompileReasons.every((r) => r.includes(".prefill:")), JSON.stringify(st.recompileReasons));
            }
          }
          assert.deepEqual(out.newTokens[0], p.greedy_continuation, `prompt ${i}: greedy continuation`);
          assert.deepEqual(out.sequences[0], p.full_sequence);
        }
        if (ref["rope.inv_freq"]) {
          const m = model as unknown as { invFreq: torch.Tensor };
          assert.ok((await maxAbsDiff(m.invFreq, ref["rope.inv_freq"])) < 1e-7, "rope inv_freq");
        }
      });
    });
