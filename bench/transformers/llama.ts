// ~100M-parameter Llama: prefill and decode tokens/s of torchts (cpu; strict, fused, compiled
// decode) vs llama.cpp (node-llama-cpp 3.21.1) on the GGUF file torchts wrote (f32 and q8_0).
//   cd bench/transformers && npm install --omit=optional && npm install --no-save @node-llama-cpp/linux-x64@3.21.1
//   node --import tsx bench/transformers/llama.ts [--quick] [--threads N] [--llama-cpp-only]
// Random weights (N(0, 0.02)); the GGUF uses tokenizer.ggml.model "none", tokens are fed as ids.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus } from "node:os";
import { join } from "node:path";
import * as torch from "../../packages/torchts/src/index.js";
import { LlamaForCausalLM, parseConfig, saveGGUF } from "../../packages/torchts/src/transformers/index.js";
import { emit } from "../lib.js";

const QUICK = process.argv.includes("--quick");
const ti = process.argv.indexOf("--threads");
const THREADS = ti > 0 ? Number(process.argv[ti + 1]) : Math.min(cpus().length, 4);
const PROMPT = QUICK ? 32 : 128;
const DECODE = QUICK ? 8 : 32;

const config = parseConfig({
  model_type: "llama", architectures: ["LlamaForCausalLM"], vocab_size: 16000, hidden_size: 768, intermediate_size: 2048,
  num_hidden_layers: 12, num_attention_heads: 12, num_key_value_heads: 4, max_position_embeddings: 1024,
  rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: false, bos_token_id: 1, eos_token_id: 2,
});

function buildModel(): LlamaForCausalLM {
  torch.manualSeed(0);
  const m = new LlamaForCausalLM(config);
  torch.noGrad(() => {
    for (const [name, p] of m.namedParameters()) {
      if (name.endsWith("norm.weight")) p.fill_(1);
      else p.copy_(torch.randn(p.shape).mul(0.02));
    }
  });
  return m.eval();
}

function row(workload: string, variant: string, tokens: number, ms: number, note?: string): void {
  const tps = (tokens * 1000) / ms;
  console.log(`${workload.padEnd(28)} ${variant.padEnd(26)} ${tps.toFixed(1).padStart(8)} tok/s`);
  emit({ suite: variant.startsWith("llama.cpp") ? "llama.cpp" : "torchts", workload, variant, ms, note: note ?? `${tps.toFixed(2)} tok/s` });
}

async function benchTorchts(m: LlamaForCausalLM, prompt: number[]): Promise<void> {
  const nParams = [...m.parameters()].reduce((a, p) => a + p.numel(), 0);
  console.log(`torchts: Llama ${(nParams / 1e6).toFixed(1)}M params, prompt ${PROMPT}, decode ${DECODE}`);
  for (const mode of ["strict", "fused", "compiled"] as const) {
    await torch.withEagerMode(mode === "compiled" ? "strict" : mode, async () => {
      const compile = mode === "compiled";
      await m.generate(prompt.slice(0, 8), { maxNewTokens: 2, stopTokenIds: [], compile }); // warm the kernel cache
      // prefill: one forward over the prompt (what generate does before its first token)
      let t0 = performance.now();
      await m.generate(prompt, { maxNewTokens: 1, stopTokenIds: [], compile });
      const prefillMs = performance.now() - t0;
      t0 = performance.now();
      await m.generate(prompt, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile });
      const decodeMs = performance.now() - t0 - prefillMs;
      row(`prefill ${PROMPT}`, `torchts ${mode}`, PROMPT, prefillMs);
      row(`decode ${DECODE}`, `torchts ${mode}`, DECODE, decodeMs);
    });
  }
}

async function benchLlamaCpp(file: string, kind: string, prompt: number[], threads: number): Promise<void> {
  const { getLlama } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never" });
  const model = await llama.loadModel({ modelPath: file });
  const ctx = await model.createContext({ contextSize: 512, threads, batchSize: 512 });
  try {
    const seq = ctx.getSequence();
    const tokens = prompt as unknown as Parameters<typeof seq.evaluateWithoutGeneratingNewTokens>[0];
    await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, 8)); // warm-up
    await seq.clearHistory();
    let t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(tokens);
    const prefillMs = performance.now() - t0;
    t0 = performance.now();
    let n = 0;
    for await (const _t of seq.evaluate([tokens[tokens.length - 1]!], { temperature: 0 })) if (++n >= DECODE) break;
    const decodeMs = performance.now() - t0;
    row(`prefill ${PROMPT}`, `llama.cpp ${kind} (${threads}t)`, PROMPT, prefillMs);
    row(`decode ${DECODE}`, `llama.cpp ${kind} (${threads}t)`, DECODE, decodeMs);
  } finally {
    await ctx.dispose();
    await model.dispose();
  }
}

const dir = mkdtempSync(join(tmpdir(), "torchts-bench-gguf-"));
try {
  const m = buildModel();
  const prompt = Array.from({ length: PROMPT }, (_, i) => (i * 7919 + 13) % config.vocabSize);
  for (const type of ["f32", "q8_0"] as const) {
    const file = join(dir, `llama100m.${type}.gguf`);
    await saveGGUF(m, file, { type });
    try {
      // one thread too: llama.cpp's spinning thread barriers suffer badly on an oversubscribed machine
      for (const t of [...new Set([1, THREADS])]) await benchLlamaCpp(file, type, prompt, t);
    } catch (e) {
      console.log(`llama.cpp ${type}: ${(e as Error).message}`);
      emit({ suite: "llama.cpp", workload: "decode", variant: type, error: (e as Error).message });
    }
  }
  if (!process.argv.includes("--llama-cpp-only")) await benchTorchts(m, prompt);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
