// Memory of an eager forward: each decoder layer's intermediates are freed when the layer returns
// (modeling_utils.ts runLayers), and fused generate frees each materialized value after its last
// reader, so the peak of a prefill grows with one layer's activations, not with the number of
// layers; and that freeing never reaches what autograd saved or what the caller gets back.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { GPT2LMHeadModel, LlamaForCausalLM, parseConfig, type PreTrainedModel } from "../../src/transformers/index.js";

function llama(layers: number): PreTrainedModel {
  return new LlamaForCausalLM(
    parseConfig({
      model_type: "llama", architectures: ["LlamaForCausalLM"], vocab_size: 256, hidden_size: 64, intermediate_size: 256, num_hidden_layers: layers,
      num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 512, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false,
      bos_token_id: 1, eos_token_id: 2,
    }),
  );
}

function gpt2(layers: number): PreTrainedModel {
  return new GPT2LMHeadModel(
    parseConfig({
      model_type: "gpt2", architectures: ["GPT2LMHeadModel"], vocab_size: 256, n_positions: 512, n_embd: 64, n_layer: layers, n_head: 4, n_inner: null,
      activation_function: "gelu_new", layer_norm_epsilon: 1e-5, bos_token_id: 255, eos_token_id: 255, tie_word_embeddings: true,
    }),
  );
}

function randomize(m: PreTrainedModel): PreTrainedModel {
  torch.manualSeed(0);
  torch.noGrad(() => {
    for (const p of m.parameters()) p.copy_(torch.randn(p.shape).mul(0.2));
  });
  return m;
}

const PROMPT = Array.from({ length: 192 }, (_, i) => (i * 37 + 5) % 256);
const NEW = 2;

/** Bytes of the KV cache generate() allocates for PROMPT + NEW tokens (block size 32, plus the tail block). */
function kvBytes(m: PreTrainedModel): number {
  const { layers, kvHeads, headDim } = m.cacheShape();
  const positions = Math.ceil((PROMPT.length + NEW) / 32) * 32 + 32;
  return 2 * layers * kvHeads * positions * headDim * 4;
}

/** Peak storage bytes of an eager generate beyond what was live before it and its KV cache. */
async function generatePeak(make: (layers: number) => PreTrainedModel, layers: number, mode: "strict" | "fused"): Promise<number> {
  const m = randomize(make(layers));
  return torch.withEagerMode(mode, async () => {
    await m.generate(PROMPT, { maxNewTokens: NEW, stopTokenIds: [] }); // warm-up: kernels, lazily built constants
    const before = torch.memory.stats().liveBytes;
    torch.memory.resetPeakStats();
    await m.generate(PROMPT, { maxNewTokens: NEW, stopTokenIds: [] });
    return torch.memory.stats().peakBytes - before - kvBytes(m);
  });
}

for (const [name, make] of [["Llama", llama], ["GPT-2", gpt2]] as const)
  for (const mode of ["strict", "fused"] as const)
    test(`${name} generate (${mode}): the prefill's peak holds about one layer's activations, not every layer's`, async () => {
      const two = await generatePeak(make, 2, mode);
      const twelve = await generatePeak(make, 12, mode);
      assert.ok(two > 0, `a prefill allocates activations (${two} bytes)`);
      // holding every layer's activations to the end of the step makes this about 6x
      assert.ok(twelve < 2 * two, `12 layers peak ${(twelve / 2 ** 20).toFixed(2)} MiB over weights + KV, 2 layers ${(two / 2 ** 20).toFixed(2)} MiB`);
    });

test("forward: layer outputs and hidden states survive the layers' scopes; with and without grad mode alike", async () => {
  for (const make of [llama, gpt2]) {
    const m = randomize(make(3));
    const ids = torch.tensor([PROMPT.slice(0, 24)], { dtype: "int64" });
    const ref = torch.noGrad(() => m.forward(ids, { outputHiddenStates: true }));
    // grad mode on, nothing requires grad: the layers are scoped too
    const out = m.forward(ids, { outputHiddenStates: true });
    assert.equal(out.hiddenStates!.length, 5);
    for (let i = 0; i < 5; i++) assert.deepEqual(await out.hiddenStates![i]!.data(), await ref.hiddenStates![i]!.data(), `hidden state ${i}`);
    assert.deepEqual(await out.logits.data(), await ref.logits.data());
    const plain = torch.noGrad(() => m.forward(ids));
    assert.deepEqual(await plain.logits.data(), await ref.logits.data());
  }
});

for (const mode of ["strict", "fused"] as const)
  test(`training through the layers (${mode}): nothing autograd saved is freed; grads match finite differences`, async () => {
    await torch.withEagerMode(mode, async () => {
      const m = randomize(llama(2));
      for (const p of m.parameters()) p.requiresGrad_(true);
      const ids = torch.tensor([PROMPT.slice(0, 16)], { dtype: "int64" });
      const lossOf = () => m.forward(ids).logits.pow(2).sum();
      lossOf().backward(); // a saved tensor freed by a layer's scope would throw here
      for (const [n, p] of m.namedParameters()) {
        assert.ok(p.grad, `${n} has a grad`);
        const g = (await p.grad.data()) as Float32Array;
        assert.ok(g.every(Number.isFinite) && g.some((v) => v !== 0), `${n}: finite, nonzero grad`);
      }
      // d loss / d w for a few weights of the first layer (no-grad forwards: scoped layers)
      const w = m.getParameter("model.layers.0.mlp.down_proj.weight");
      const g = (await w.grad!.data()) as Float32Array;
      const flat = w.detach().view(-1);
      for (const i of [0, 77, 1000]) {
        const eps = 1e-2;
        const at = async (d: number) => {
          torch.noGrad(() => flat.select(0, i).add_(d));
          const l = await torch.noGrad(() => lossOf()).item();
          torch.noGrad(() => flat.select(0, i).sub_(d));
          return l;
        };
        const fd = ((await at(eps)) - (await at(-eps))) / (2 * eps);
        assert.ok(Math.abs(fd - g[i]!) <= 0.03 * Math.abs(g[i]!) + 1e-3, `weight ${i}: autograd ${g[i]}, finite difference ${fd}`);
      }
    });
  });
