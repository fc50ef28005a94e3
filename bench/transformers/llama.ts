// ~100M-parameter Llama: prefill and decode tokens/s of torchts (cpu; strict, fused, compiled;
// f32 and int8 weights) vs llama.cpp (node-llama-cpp 3.21.1) on the GGUF files torchts wrote
// (f32 and q8_0), at the same thread count, in the same run.
//   cd bench/transformers && npm install --omit=optional && npm install --no-save @node-llama-cpp/linux-x64@3.21.1
//   node --import tsx bench/transformers/llama.ts [--quick] [--threads N] [--reps N] [--llama-cpp-only] [--torchts-only]
// Random weights (N(0, 0.02)); the GGUF uses tokenizer.ggml.model "none", tokens are fed as ids.
// Decode tokens/s is timed from the first generated token to the last (prefill excluded), best
// of `--reps` runs after a warm-up generation, since the machine may be shared.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, cpus, loadavg } from "node:os";
import { join } from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import * as torch from "../../packages/torchts/src/index.js";
import { quantize, saveGGUF, type LlamaForCausalLM } from "../../packages/torchts/src/transformers/index.js";
import { buildModel, config } from "./bench_model.js";
import { QUICK, emit, numberArg } from "../lib.js";

const THREADS = numberArg("--threads") ?? Math.min(cpus().length, 4);
const REPS = numberArg("--reps") ?? (QUICK ? 2 : 3);
const PROMPT = QUICK ? 32 : 128;
const DECODE = QUICK ? 16 : 32;

/** A full V8 collection, and a turn of the event loop for the buffer releases it triggers. */
async function collectGarbage(): Promise<void> {
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
  await new Promise((r) => setTimeout(r, 50));
}


/** tokens/s per variant, for the summary */
const results = new Map<string, { prefill: number; decode: number }>();

function record(variant: string, prefillMs: number, decodeMs: number): void {
  const prefill = (PROMPT * 1000) / prefillMs;
  const decode = (DECODE * 1000) / decodeMs;
  results.set(variant, { prefill, decode });
  const arena = variant.startsWith("torchts") ? `, wasm arena ${(torch.backends.cpu.info().arenaBytes / 2 ** 20).toFixed(0)} MiB` : "";
  console.log(`${variant.padEnd(34)} prefill ${prefill.toFixed(1).padStart(7)} tok/s   decode ${decode.toFixed(1).padStart(6)} tok/s (${(decodeMs / DECODE).toFixed(1)} ms/token)${arena}`);
  const suite = variant.startsWith("llama.cpp") ? "llama.cpp" : "torchts";
  emit({ suite, workload: `prefill ${PROMPT}`, variant, ms: prefillMs, note: `${prefill.toFixed(2)} tok/s` });
  emit({ suite, workload: `decode ${DECODE}`, variant, ms: decodeMs, note: `${decode.toFixed(2)} tok/s` });
}

/** Best-of-REPS prefill ms (prompt to first token) and decode ms (first to last token). */
async function benchTorchts(m: LlamaForCausalLM, prompt: number[], label: string, modes: ("strict" | "fused" | "compiled")[]): Promise<void> {
  for (const mode of modes) {
    await torch.withEagerMode(mode === "compiled" ? "strict" : mode, async () => {
      const compile = mode === "compiled";
      // warm-up: fills the kernel caches and (compiled) records the steps the model then keeps
      await m.generate(prompt, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile });
      let prefillMs = Infinity;
      let decodeMs = Infinity;
      for (let r = 0; r < REPS; r++) {
        const stamps: number[] = [];
        const t0 = performance.now();
        await m.generate(prompt, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile, streamer: () => stamps.push(performance.now()) });
        prefillMs = Math.min(prefillMs, stamps[0]! - t0);
        decodeMs = Math.min(decodeMs, stamps[DECODE]! - stamps[0]!);
      }
      record(`torchts ${label} ${mode} (${torch.backends.cpu.getNumThreads()}t)`, prefillMs, decodeMs);
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
    let prefillMs = Infinity;
    let decodeMs = Infinity;
    for (let r = 0; r < REPS; r++) {
      await seq.clearHistory();
      let t0 = performance.now();
      await seq.evaluateWithoutGeneratingNewTokens(tokens);
      prefillMs = Math.min(prefillMs, performance.now() - t0);
      // the first evaluated token re-reads the last prompt token: start the clock after it, like torchts
      let n = 0;
      for await (const _t of seq.evaluate([tokens[tokens.length - 1]!], { temperature: 0 })) {
        if (n === 0) t0 = performance.now();
        if (++n > DECODE) break;
      }
      decodeMs = Math.min(decodeMs, performance.now() - t0);
    }
    record(`llama.cpp ${kind} (${threads}t)`, prefillMs, decodeMs);
  } finally {
    await ctx.dispose();
    await model.dispose();
  }
}

console.log(`Llama 100M (d 768, 12 layers, 12/4 heads, MLP 2048, vocab 16000), prompt ${PROMPT}, decode ${DECODE}, best of ${REPS}; threads ${THREADS}; load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
torch.backends.cpu.setNumThreads(THREADS);
const dir = mkdtempSync(join(tmpdir(), "torchts-bench-gguf-"));
try {
  const m = buildModel();
  const prompt = Array.from({ length: PROMPT }, (_, i) => (i * 7919 + 13) % config.vocabSize);
  if (!process.argv.includes("--torchts-only"))
    for (const type of ["f32", "q8_0"] as const) {
      const file = join(dir, `llama100m.${type}.gguf`);
      await saveGGUF(m, file, { type });
      try {
        // one thread too: llama.cpp's spinning thread barriers suffer badly on an oversubscribed machine
        for (const t of [...new Set([THREADS, 1])]) await benchLlamaCpp(file, type, prompt, t);
      } catch (e) {
        console.log(`llama.cpp ${type}: ${(e as Error).message}`);
        emit({ suite: "llama.cpp", workload: "decode", variant: type, error: (e as Error).message });
      }
    }
  if (!process.argv.includes("--llama-cpp-only")) {
    const single = async (model: LlamaForCausalLM, label: string) => {
      // the same thread count as the 1-thread llama.cpp rows
      if (THREADS === 1) return;
      torch.backends.cpu.setNumThreads(1);
      await benchTorchts(model, prompt, label, ["compiled"]);
      torch.backends.cpu.setNumThreads(THREADS);
    };
    // q8_0 quantizes every matrix, the output layer included: so do these int8 models
    if (!process.argv.includes("--w8a8-only")) {
      await benchTorchts(m, prompt, "f32", QUICK ? ["strict", "compiled"] : ["strict", "fused", "compiled"]);
      await single(m, "f32");
      await quantize(m, { bits: 8, includeLmHead: true });
      await benchTorchts(m, prompt, "int8", ["strict", "compiled"]);
      await single(m, "int8");
    }
    // int8 weights and int8 activations (per token, on the fly): q8_0's scheme of products
    // the earlier models' weights, caches and replaced float weights would otherwise still fill the
    // wasm arena (until V8 collects them) and push the new weights out of it (slower, staged kernels)
    for (const t of [...m.parameters(), ...m.buffers()]) t.dispose();
    await collectGarbage();
    const w8a8 = await quantize(buildModel(), { bits: 8, includeLmHead: true, activations: "int8" });
    await benchTorchts(w8a8, prompt, "w8a8", ["strict", "compiled"]);
    await single(w8a8, "w8a8");
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// decode ratio of the best torchts mode to llama.cpp at the same thread count
const best = (prefix: string, t: number) =>
  Math.max(0, ...[...results].filter(([k]) => k.startsWith(prefix) && k.endsWith(`(${t}t)`)).map(([, v]) => v.decode));
for (const t of [...new Set([THREADS, 1])])
  for (const [ours, theirs] of [
    ["torchts f32", `llama.cpp f32 (${t}t)`], ["torchts int8", `llama.cpp q8_0 (${t}t)`], ["torchts w8a8", `llama.cpp q8_0 (${t}t)`],
  ] as const) {
    const a = best(ours, t);
    const b = results.get(theirs)?.decode;
    if (a && b) console.log(`decode ${ours} (best mode, ${t}t) / ${theirs}: ${(a / b).toFixed(2)}x (${a.toFixed(1)} vs ${b.toFixed(1)} tok/s)`);
  }
console.log(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
