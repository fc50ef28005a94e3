// Activation checkpointing (torch.utils.checkpoint, implemented here): gradients are the same bits as
// without it, for both families, under autocast, with the RNG replayed for random ops, and the
// activations of wrapped layers are not kept after forward.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "torchts";
import { applyActivationCheckpointing, checkpoint } from "../src/model/activation_checkpoint.js";
import { buildConfig, createModel, initWeights, type CausalLM } from "../src/model/build.js";
import { flavorConfig } from "../src/model/flavors.js";

const F = torch.nn.functional;

function tinyModel(name: "llama3" | "qwen3", layers = 2): CausalLM {
  const m = createModel(buildConfig({ ...flavorConfig(name, "tiny"), num_hidden_layers: layers }));
  initWeights(m, 11);
  return m;
}

const batch = () => [torch.randint(0, 2048, [2, 16], { generator: new torch.Generator().manualSeed(1) }), torch.randint(0, 2048, [2, 16], { generator: new torch.Generator().manualSeed(2) })] as const;

async function gradsOf(m: CausalLM, amp: "bfloat16" | null): Promise<Map<string, number[]>> {
  const [x, y] = batch();
  const run = () => F.crossEntropy(m.forward(x).logits.view(-1, 2048).float(), y.view(-1));
  const loss = amp ? torch.autocast("cpu", run, { dtype: amp }) : run();
  loss.backward();
  const g = new Map<string, number[]>();
  for (const [n, p] of m.namedParameters()) g.set(n, (await p.grad!.flatten().tolist()) as number[]);
  return g;
}

test("checkpointed layers give bit-identical gradients (llama3, qwen3; every layer and every 2nd)", async () => {
  for (const name of ["llama3", "qwen3"] as const) {
    const plain = await gradsOf(tinyModel(name, 4), null);
    for (const every of [1, 2]) {
      const m = tinyModel(name, 4);
      assert.equal(applyActivationCheckpointing(m, every), every === 1 ? 4 : 2);
      const ac = await gradsOf(m, null);
      for (const [k, v] of plain) assert.deepEqual(ac.get(k), v, `${name} every ${every}: ${k}`);
    }
  }
});

test("the recompute runs in the forward's autocast region (bf16 gradients equal without checkpointing)", async () => {
  const plain = await gradsOf(tinyModel("llama3"), "bfloat16");
  const m = tinyModel("llama3");
  applyActivationCheckpointing(m, 1);
  const ac = await gradsOf(m, "bfloat16");
  for (const [k, v] of plain) assert.deepEqual(ac.get(k), v, k);
  // and the bf16 gradients do differ from float32 ones (the region mattered)
  const f32 = await gradsOf(tinyModel("llama3"), null);
  assert.notDeepEqual(f32.get("model.layers.0.mlp.up_proj.weight"), plain.get("model.layers.0.mlp.up_proj.weight"));
});

test("random ops are recomputed with the forward's RNG state (dropout masks match)", async () => {
  const w = torch.randn([8, 8], { generator: new torch.Generator().manualSeed(5) }).requiresGrad_(true);
  const x = torch.randn([4, 8], { generator: new torch.Generator().manualSeed(6) }).requiresGrad_(true);
  const fn = (h: torch.Tensor) => F.dropout(h.matmul(w), 0.5, true).tanh();
  torch.manualSeed(9);
  fn(x).sum().backward();
  const [gw, gx] = [await w.grad!.tolist(), await x.grad!.tolist()];
  w.grad = null;
  x.grad = null;
  torch.manualSeed(9);
  const out = checkpoint(fn, [x]);
  torch.randn([100]); // moves the RNG between forward and backward
  out.sum().backward();
  assert.deepEqual(await w.grad!.tolist(), gw);
  assert.deepEqual(await x.grad!.tolist(), gx);
});

async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 4; i++) {
    gc?.();
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("after forward, checkpointed layers hold no activations (bytes held by the graph drop)", async () => {
  assert.ok((globalThis as { gc?: () => void }).gc, "run with node --expose-gc (npm test does) to measure held bytes");
  const held: number[] = [];
  for (const ac of [false, true]) {
    const m = tinyModel("llama3", 4);
    if (ac) applyActivationCheckpointing(m, 1);
    const x = torch.randint(0, 2048, [4, 64], { generator: new torch.Generator().manualSeed(3) });
    await settle();
    const before = torch.memory.stats().liveBytes;
    const h = m.forward(x).logits.sum();
    await settle();
    held.push(torch.memory.stats().liveBytes - before);
    h.backward(); // the graph is consumed
  }
  // without: every layer's saved activations; with: the layer inputs only (plus the logits either way)
  assert.ok(held[1]! < held[0]! * 0.6, `held after forward: ${held[0]} bytes without checkpointing, ${held[1]} with`);
});
