// The engine on webgpu (paged attention in WGSL, the cache write by buffer copies): a batch of greedy
// requests gives the cpu engine's tokens. Small (llvmpipe is slow). Without an adapter this skips with the
// reason, unless TORCHTS_REQUIRE_WEBGPU=1 (CI), where a missing adapter fails (torchts's setup file).
import { test } from "node:test";
import assert from "node:assert/strict";
import { AutoModelForCausalLM, AutoTokenizer } from "torchts/transformers";
import { skip } from "../../torchts/test/device/webgpu/setup.js";
import { LLMEngine } from "../src/engine.js";
import { modelDir } from "./helpers.js";

test("batched greedy serving on webgpu equals cpu", { skip }, async () => {
  const dir = modelDir();
  const tokenizer = await AutoTokenizer.fromPretrained(dir);
  const outputs: number[][][] = [];
  for (const device of ["cpu", "webgpu"]) {
    const model = await AutoModelForCausalLM.fromPretrained(dir, { deviceMap: device });
    const engine = new LLMEngine({ model, tokenizer, maxNumSeqs: 4, blockSize: 4 });
    outputs.push(
      await Promise.all(
        ["Hello", "The quick brown", "abc"].map(async (p) => {
          const toks: number[] = [];
          for await (const o of engine.generate(tokenizer.encode(p), { temperature: 0, maxTokens: 8, ignoreEos: true })) toks.push(...o.tokenIds);
          return toks;
        }),
      ),
    );
    assert.equal(engine.lastError, null);
    await engine.close();
  }
  assert.deepEqual(outputs[1], outputs[0]);
  assert.ok(outputs[0]!.every((t) => t.length === 8));
});
