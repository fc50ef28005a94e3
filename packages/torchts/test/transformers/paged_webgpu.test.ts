// The paged KV cache on webgpu: F.pagedAttention's WGSL kernel (reading the cache in place through the
// block table) equals the cpu kernel, Tensor.indexCopy_ writes rows in place (a cpu index), and paged
// greedy decoding of the golden models gives their continuations. Small shapes (llvmpipe is slow).
// Without an adapter these skip with the reason (test/device/webgpu/setup.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { AutoModelForCausalLM, PagedKVCache, pagedBatch } from "../../src/transformers/index.js";
import { skip } from "../device/webgpu/setup.js";
import { expected, fixtureDir, maxAbsDiff } from "./helpers.js";
const F = torch.nn.functional;

test("pagedAttention on webgpu equals cpu, in strict and fused eager", { skip }, async () => {
  torch.manualSeed(5);
  const [T, Hq, Hk, E, NB, bs] = [6, 4, 2, 8, 6, 4];
  const cpu = {
    q: torch.randn([T, Hq, E]), k: torch.randn([T, Hk, E]), v: torch.randn([T, Hk, E]),
    kc: torch.randn([NB, bs, Hk, E]), vc: torch.randn([NB, bs, Hk, E]),
    table: torch.tensor([[5, 1, 0], [2, 0, 0], [3, 4, 0]], { dtype: "int32" }),
    cu: torch.tensor([0, 3, 4, 6], { dtype: "int32" }), lens: torch.tensor([7, 2, 5], { dtype: "int32" }),
  };
  const want = F.pagedAttention(cpu.q, cpu.k, cpu.v, cpu.kc, cpu.vc, cpu.table, cpu.cu, cpu.lens);
  const g = Object.fromEntries(Object.entries(cpu).map(([n, t]) => [n, t.to("webgpu")])) as typeof cpu;
  for (const mode of ["strict", "fused"] as const) {
    const got = torch.withEagerMode(mode, () => F.pagedAttention(g.q, g.k, g.v, g.kc, g.vc, g.table, g.cu, g.lens));
    assert.ok((await maxAbsDiff(await torch.webgpu.toAsync(got, "cpu"), want)) < 1e-5, mode);
  }
  // rows written in place on the device, index on the cpu
  const cache = torch.zeros([4, 3], { device: "webgpu" });
  cache.indexCopy_(0, torch.tensor([2, 0]), torch.tensor([[1, 2, 3], [4, 5, 6]], { dtype: "float32", device: "webgpu" }));
  assert.deepEqual(await (await torch.webgpu.toAsync(cache, "cpu")).tolist(), [[4, 5, 6], [0, 0, 0], [1, 2, 3], [0, 0, 0]]);
});

test("paged greedy decoding on webgpu gives the golden continuation (llama_gqa)", { skip }, async () => {
  const model = await AutoModelForCausalLM.fromPretrained(fixtureDir("llama_gqa"), { deviceMap: "webgpu" });
  const p = expected("llama_gqa").prompts[0]!;
  const { layers, kvHeads, headDim } = model.cacheShape();
  const cache = new PagedKVCache({ layers, kvHeads, headDim, numBlocks: 8, blockSize: 4, device: "webgpu" });
  const blocks = [7, 3, 5, 0, 6, 1, 2, 4].slice(0, Math.ceil((p.input_ids.length + 8) / 4));
  const out: number[] = [];
  let tokens = p.input_ids;
  let cached = 0;
  while (out.length < 8) {
    const logits = torch.noGrad(() => model.forwardPaged(pagedBatch([{ tokens, cached, blocks, wantLogits: true }], 4, "webgpu"), cache));
    const next = (await (await torch.webgpu.toAsync(logits.argmax(-1), "cpu")).tolist()) as number[];
    cached += tokens.length;
    tokens = [next[0]!];
    out.push(next[0]!);
  }
  assert.deepEqual(out, p.greedy_continuation.slice(0, 8));
});
