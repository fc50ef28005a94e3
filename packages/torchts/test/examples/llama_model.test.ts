// The Llama/Qwen example models are Hugging Face compatible: built from the golden config.json
// and loaded from its model.safetensors, they reproduce transformers' logits and hidden states;
// and what savePretrained writes loads back into the same model.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import { CausalLM, fromPretrained, makeConfig, savePretrained } from "../../../../examples/llama/model.js";

const FIX = fileURLToPath(new URL("../fixtures/llama_example/", import.meta.url));

for (const name of ["llama_gqa", "qwen2_tied", "qwen3_qknorm"]) {
  test(`${name}: golden logits and hidden states`, async () => {
    const dir = join(FIX, name);
    const model = await fromPretrained(dir);
    const exp = await torch.safetensors.loadFile(join(dir, "expected_logits.safetensors"));
    const prompts = JSON.parse(readFileSync(join(dir, "expected.json"), "utf8")).prompts as { input_ids: number[] }[];
    for (let i = 0; i < 2; i++) {
      const ids = torch.tensor([prompts[i]!.input_ids], { dtype: "int64" });
      const { hidden, logits } = torch.noGrad(() => model.forwardHidden(ids));
      const d = (await logits.sub(exp[`logits.${i}`]!).abs().max().item()) as number;
      assert.ok(d < 1e-4, `${name} prompt ${i}: max |logits - transformers| = ${d}`);
      if (i === 0) {
        const h0 = (await hidden[1]!.sub(exp["hidden.0.layer0"]!).abs().max().item()) as number;
        assert.ok(h0 < 1e-4, `${name}: layer0 hidden diff ${h0}`);
        assert.equal(await hidden[0]!.sub(exp["hidden.0.embed"]!).abs().max().item(), 0);
      }
    }
  });
}

test("savePretrained writes a Hugging Face folder that loads back", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-hf-"));
  try {
    for (const type of ["llama", "qwen2", "qwen3"] as const) {
      torch.manualSeed(1);
      const cfg = makeConfig(type, { vocabSize: 65, hidden: 32, layers: 2, heads: 4, kvHeads: 2, intermediate: 64, maxPos: 64 });
      const m = new CausalLM(cfg);
      const out = join(dir, type);
      const files = await savePretrained(m, out);
      assert.deepEqual(readdirSync(out).sort(), [...files].sort());
      assert.deepEqual(files, ["config.json", "generation_config.json", "model.safetensors"]);
      const keys = Object.keys(await torch.safetensors.loadFile(join(out, "model.safetensors")));
      assert.ok(keys.includes("model.layers.1.self_attn.q_proj.weight") && keys.includes("model.norm.weight"));
      assert.equal(keys.includes("lm_head.weight"), type !== "qwen2", "tied Qwen2 stores no lm_head.weight");
      assert.equal(keys.includes("model.layers.0.self_attn.q_proj.bias"), type === "qwen2");
      assert.equal(keys.includes("model.layers.0.self_attn.q_norm.weight"), type === "qwen3");
      const cfgBack = JSON.parse(readFileSync(join(out, "config.json"), "utf8"));
      assert.equal(cfgBack.architectures[0], { llama: "LlamaForCausalLM", qwen2: "Qwen2ForCausalLM", qwen3: "Qwen3ForCausalLM" }[type]);
      const back = await fromPretrained(out);
      const ids = torch.tensor([[1, 5, 9, 20]], { dtype: "int64" });
      const a = torch.noGrad(() => m.forward(ids).logits);
      const b = torch.noGrad(() => back.forward(ids).logits);
      assert.equal(await a.sub(b).abs().max().item(), 0, type);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
