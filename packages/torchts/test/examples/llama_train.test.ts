// The Llama example in a reduced config: validation loss on Tiny Shakespeare must fall, and the
// saved Hugging Face folder must load back into a model with the same weights.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import { fromPretrained } from "../../../../examples/llama/model.js";
import { runExample, tempDir } from "./example_runner.js";

test("Llama on Tiny Shakespeare: val loss falls by > 0.5 nats in 20 steps; saves a loadable HF folder", async () => {
  const dir = tempDir("llama-");
  try {
    const out = join(dir, "hf");
    const { last } = runExample("examples/llama/train.ts", [
      "--arch", "llama", "--steps", "20", "--batch-size", "8", "--block-size", "32", "--hidden", "48", "--heads", "4", "--kv-heads", "2",
      "--out", out, "--checkpoint", join(dir, "l.pt"),
    ]);
    assert.ok(last.initialValLoss > 4.0, `initial loss ${last.initialValLoss} should be near ln(65)=4.17`);
    assert.ok(last.finalValLoss < last.initialValLoss - 0.5, `val loss ${last.initialValLoss} -> ${last.finalValLoss}`);
    assert.deepEqual(readdirSync(out).sort(), ["config.json", "generation_config.json", "model.safetensors", "vocab_chars.json"]);
    const cfg = JSON.parse(readFileSync(join(out, "config.json"), "utf8"));
    assert.equal(cfg.model_type, "llama");
    assert.equal(cfg.num_key_value_heads, 2);
    const chars = JSON.parse(readFileSync(join(out, "vocab_chars.json"), "utf8")) as string[];
    assert.equal(chars.length, cfg.vocab_size);
    const model = await fromPretrained(out);
    const sd = await torch.safetensors.loadFile(join(out, "model.safetensors"));
    assert.equal(await model.model.embed_tokens.weight.sub(sd["model.embed_tokens.weight"]!).abs().max().item(), 0);
    // the trained model prefers a lowercase letter after "th" (it learned English-like statistics)
    const ids = torch.tensor([[chars.indexOf("t"), chars.indexOf("h")]], { dtype: "int64" });
    const next = (await torch.noGrad(() => model.forward(ids).logits).select(1, -1).argmax(-1).item()) as number;
    assert.match(chars[next]!, /[a-z ]/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
