// fromPretrained: config parsing as transformers reads it, sharded checkpoints, GPT-2's hub layout,
// dtype handling and clear errors for unknown architectures and missing/unexpected/mis-shaped weights.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, parseConfig } from "../../src/transformers/index.js";
import { expected, fixtureDir, maxAbsDiff, referenceTensors } from "./helpers.js";

async function withCopy(name: string, edit: (dir: string, weights: Record<string, torch.Tensor>) => Promise<void>): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), `torchts-hf-${name}-`));
  cpSync(fixtureDir(name), dir, { recursive: true });
  const weights = await torch.safetensors.loadFile(join(dir, "model.safetensors"));
  await edit(dir, weights);
  return dir;
}

async function logitsOf(dir: string, ids: number[], opts = {}): Promise<torch.Tensor> {
  const m = await AutoModelForCausalLM.fromPretrained(dir, opts);
  return torch.noGrad(() => m.forward(torch.tensor([ids])).logits);
}

test("config.json is read as transformers reads it: defaults, aliases, head_dim, rope, sliding window", () => {
  const llama = parseConfig({ model_type: "llama", hidden_size: 64, num_attention_heads: 4, num_hidden_layers: 2, intermediate_size: 128 });
  assert.equal(llama.numKeyValueHeads, 4); // defaults to num_attention_heads
  assert.equal(llama.headDim, 16); // hidden / heads
  assert.equal(llama.normEps, 1e-6);
  assert.equal(llama.tieWordEmbeddings, false);
  assert.equal(llama.vocabSize, 32000);
  assert.deepEqual(llama.rope, { ropeType: "default", ropeTheta: 10000 });
  assert.equal(llama.slidingWindow, null);
  const v5 = parseConfig({ model_type: "qwen3", rope_parameters: { rope_type: "default", rope_theta: 1e6 }, num_hidden_layers: 2 });
  assert.equal(v5.rope!.ropeTheta, 1e6);
  assert.equal(v5.headDim, 128); // Qwen3's explicit default
  const l3 = parseConfig({ model_type: "llama", rope_theta: 5e5, rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 } });
  assert.equal(l3.rope!.ropeType, "llama3");
  assert.equal(l3.rope!.ropeTheta, 5e5);
  assert.throws(() => parseConfig({ model_type: "llama", rope_scaling: { rope_type: "yarn", factor: 4 } }), /rope type 'yarn' is not supported/);
  // Qwen2: sliding_window ignored unless use_sliding_window; then only layers >= max_window_layers slide
  const off = parseConfig({ model_type: "qwen2", num_hidden_layers: 4, sliding_window: 16, max_window_layers: 2 });
  assert.equal(off.slidingWindow, null);
  assert.deepEqual(off.layerTypes, ["full_attention", "full_attention", "full_attention", "full_attention"]);
  const on = parseConfig({ model_type: "qwen2", num_hidden_layers: 4, use_sliding_window: true, sliding_window: 16, max_window_layers: 2 });
  assert.equal(on.slidingWindow, 16);
  assert.deepEqual(on.layerTypes, ["full_attention", "full_attention", "sliding_attention", "sliding_attention"]);
  const mistral = parseConfig({ model_type: "mistral", num_hidden_layers: 2 });
  assert.equal(mistral.slidingWindow, 4096);
  assert.equal(mistral.numKeyValueHeads, 8);
  const gpt2 = parseConfig(JSON.parse(readFileSync(join(fixtureDir("gpt2"), "config.json"), "utf8")));
  assert.equal(gpt2.hiddenSize, 64);
  assert.equal(gpt2.intermediateSize, 256); // n_inner null -> 4 * n_embd
  assert.equal(gpt2.tieWordEmbeddings, true);
  assert.throws(() => parseConfig({ model_type: "bert" }), /Unrecognized model_type 'bert'.*llama, mistral, qwen2, qwen3, gpt2/);
});

test("unknown architectures and missing / unexpected / mis-shaped weights give errors naming the key", async () => {
  const dirs: string[] = [];
  try {
    const arch = await withCopy("llama_gqa", async (dir) => {
      const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
      cfg.architectures = ["LlamaForSequenceClassification"];
      writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
    });
    dirs.push(arch);
    await assert.rejects(AutoModelForCausalLM.fromPretrained(arch), /Unsupported architecture 'LlamaForSequenceClassification'/);
    const bad = await withCopy("llama_gqa", async (dir, w) => {
      delete w["model.layers.1.mlp.up_proj.weight"];
      w["model.layers.0.self_attn.rotary_emb.extra"] = torch.zeros(3);
      w["model.layers.2.self_attn.k_proj.weight"] = torch.zeros(64, 64);
      await torch.safetensors.saveFile(w, join(dir, "model.safetensors"));
    });
    dirs.push(bad);
    await assert.rejects(AutoModelForCausalLM.fromPretrained(bad), (e: Error) => {
      assert.match(e.message, /missing weights: 'model\.layers\.1\.mlp\.up_proj\.weight'/);
      assert.match(e.message, /unexpected weights: 'model\.layers\.0\.self_attn\.rotary_emb\.extra'/);
      assert.match(e.message, /'model\.layers\.2\.self_attn\.k_proj\.weight': checkpoint has shape \[64, 64\], the model expects \[32, 64\]/);
      return true;
    });
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
});

test("sharded checkpoints (model.safetensors.index.json) load like the single file", async () => {
  const ids = expected("qwen3_qknorm").prompts[0]!.input_ids;
  const dir = await withCopy("qwen3_qknorm", async (d, w) => {
    const keys = Object.keys(w).sort();
    const shards = [keys.slice(0, 10), keys.slice(10)];
    const weightMap: Record<string, string> = {};
    for (const [i, ks] of shards.entries()) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      await torch.safetensors.saveFile(Object.fromEntries(ks.map((k) => [k, w[k]!])), join(d, file));
      for (const k of ks) weightMap[k] = file;
    }
    rmSync(join(d, "model.safetensors"));
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: weightMap }));
  });
  try {
    const ref = await referenceTensors("qwen3_qknorm");
    assert.ok((await maxAbsDiff(await logitsOf(dir, ids), ref["logits.0"]!)) < 1e-4);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("GPT-2 also loads the hub layout (no transformer. prefix, attn.bias / attn.masked_bias buffers)", async () => {
  const ids = expected("gpt2").prompts[1]!.input_ids;
  const dir = await withCopy("gpt2", async (d, w) => {
    const hub: Record<string, torch.Tensor> = {};
    for (const [k, v] of Object.entries(w)) hub[k.replace(/^transformer\./, "")] = v;
    for (let i = 0; i < 3; i++) {
      hub[`h.${i}.attn.bias`] = torch.ones(64, 64).tril().reshape(1, 1, 64, 64);
      hub[`h.${i}.attn.masked_bias`] = torch.tensor(-1e4);
    }
    await torch.safetensors.saveFile(hub, join(d, "model.safetensors"));
  });
  try {
    const ref = await referenceTensors("gpt2");
    assert.ok((await maxAbsDiff(await logitsOf(dir, ids), ref["logits.1"]!)) < 1e-4);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("bf16/f16 weights keep their dtype unless a dtype is asked for", async () => {
  const ids = expected("llama_gqa").prompts[0]!.input_ids;
  const dir = await withCopy("llama_gqa", async (d, w) => {
    const half: Record<string, torch.Tensor> = {};
    for (const [k, v] of Object.entries(w)) half[k] = v.to("bfloat16");
    await torch.safetensors.saveFile(half, join(d, "model.safetensors"));
  });
  try {
    const m = await AutoModelForCausalLM.fromPretrained(dir);
    for (const p of m.parameters()) assert.equal(p.dtype, "bfloat16");
    const logits = torch.noGrad(() => m.forward(torch.tensor([ids])).logits);
    assert.equal(logits.dtype, "bfloat16");
    const f32 = await AutoModelForCausalLM.fromPretrained(dir, { dtype: "float32" });
    for (const p of f32.parameters()) assert.equal(p.dtype, "float32");
    const ref = await referenceTensors("llama_gqa");
    // bf16 weights and activations: close to the float32 reference, not equal
    const d = await maxAbsDiff(logits.float(), ref["logits.0"]!);
    assert.ok(d < 0.5, `bf16 logits differ by ${d}`);
    const d32 = await maxAbsDiff(torch.noGrad(() => f32.forward(torch.tensor([ids])).logits), ref["logits.0"]!);
    assert.ok(d32 < 0.2, `bf16-rounded weights in f32 differ by ${d32}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a sliding window limits attention: with window w the last logits depend only on the last layers*(w-1)+1 tokens", async () => {
  const w = 3;
  const dir = await withCopy("qwen2_tied", async (d) => {
    const cfg = JSON.parse(readFileSync(join(d, "config.json"), "utf8"));
    Object.assign(cfg, { use_sliding_window: true, sliding_window: w, max_window_layers: 0 });
    writeFileSync(join(d, "config.json"), JSON.stringify(cfg));
  });
  try {
    const m = await AutoModelForCausalLM.fromPretrained(dir);
    assert.deepEqual(m.config.layerTypes, ["sliding_attention", "sliding_attention", "sliding_attention"]);
    const ids = expected("qwen2_tied").prompts[1]!.full_sequence.slice(0, 20);
    const field = m.config.numHiddenLayers * (w - 1) + 1;
    const full = torch.noGrad(() => m.forward(torch.tensor([ids])).logits.select(1, -1));
    const tail = torch.noGrad(() => m.forward(torch.tensor([ids.slice(-field)])).logits.select(1, -1));
    const tooShort = torch.noGrad(() => m.forward(torch.tensor([ids.slice(-field + 1)])).logits.select(1, -1));
    // RoPE scores depend on relative positions only, so the windowed result is shift-invariant
    assert.ok((await maxAbsDiff(full, tail)) < 1e-4);
    assert.ok((await maxAbsDiff(full, tooShort)) > 1e-3);
    // and the window changes the result compared with full attention
    const plain = await AutoModelForCausalLM.fromPretrained(fixtureDir("qwen2_tied"));
    const unwindowed = torch.noGrad(() => plain.forward(torch.tensor([ids])).logits.select(1, -1));
    assert.ok((await maxAbsDiff(full, unwindowed)) > 1e-3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
