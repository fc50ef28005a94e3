// ~100M-parameter Llama: prefill and decode tokens/s of torchts (cpu; strict, fused, compiled;
// f32, int8, int4 and w8a8 weights) vs llama.cpp (node-llama-cpp 3.21.1) on the GGUF files
// torchts wrote (f32 and q8_0), at the same thread count, in the same run; decode at batch 1 and
// at batch 8 (`--batch`), with the memory-bandwidth use of each decode row (weight bytes read per
// step x steps/s over the copy bandwidth measured at the start).
//   cd bench/transformers && npm install --omit=optional && npm install --no-save @node-llama-cpp/linux-x64@3.21.1
//   node --import tsx bench/transformers/llama.ts [--quick] [--threads N] [--reps N] [--prompt N] [--batch N]
//     [--llama-cpp-only] [--torchts-only] [--w8a8-only]
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
import { arenaF32, unaryF32 } from "../../packages/torchts/src/device/cpu/wasm/index.js";

const THREADS = numberArg("--threads") ?? Math.min(cpus().length, 4);
const REPS = numberArg("--reps") ?? (QUICK ? 2 : 3);
const PROMPT = numberArg("--prompt") ?? (QUICK ? 32 : 512);
const DECODE = QUICK ? 16 : 32;
const BATCH = numberArg("--batch") ?? 8;
/** llama.cpp's context per sequence: the prompt, the generated tokens and some slack. */
const CONTEXT = Math.ceil((PROMPT + DECODE + 32) / 256) * 256;

/** A full V8 collection, and a turn of the event loop for the buffer releases it triggers. */
async function collectGarbage(): Promise<void> {
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
  await new Promise((r) => setTimeout(r, 50));
}


/** Copy bandwidth (bytes read + written) of wasm SIMD on all threads, as bench/suites/probe.ts measures it. */
async function copyBandwidth(): Promise<number> {
  const n = 32 << 20; // 128 MiB each way: far past the caches
  const a = arenaF32(n), b = arenaF32(n);
  if (!a || !b) return NaN;
  try {
    a.data.fill(1);
    b.data.fill(0);
    unaryF32("identity", a.data, 0, n, b.data);
    await new Promise((r) => setTimeout(r, 500)); // let the workers start
    let best = Infinity;
    for (let r = 0; r < 6; r++) {
      const t0 = performance.now();
      unaryF32("identity", a.data, 0, n, b.data);
      best = Math.min(best, performance.now() - t0);
    }
    return (8 * n) / best / 1e6; // GB/s
  } finally {
    a.release();
    b.release();
  }
}

/** Bytes of weights a decode step reads per kind: every matrix once (the embedding row is noise). */
function weightBytes(kind: string): number {
  const { hiddenSize: C, intermediateSize: F, numHiddenLayers: L, vocabSize: V, numAttentionHeads: H, numKeyValueHeads: KV } = config;
  const hd = C / H;
  const mats = L * (2 * C * C + 2 * C * KV * hd + 3 * C * F) + V * C; // attention, MLP, lm_head
  const rows = L * (2 * C + 2 * KV * hd + 2 * F + C) + V; // output rows (one scale each, int8)
  if (kind === "f32") return 4 * mats;
  if (kind === "q8_0") return (34 / 32) * mats; // 32 int8 + one f16 scale per block
  if (kind === "int8" || kind === "w8a8") return mats + 4 * rows;
  if (kind === "int4") return mats / 2 + (4 * mats) / 32; // nibbles + an f32 scale per 32
  return NaN;
}

/** tokens/s per variant, for the summary */
const results = new Map<string, { prefill: number; decode: number }>();
let bandwidth = NaN;

function record(variant: string, prefillMs: number, decodeMs: number, batch = 1): void {
  const prefill = (batch * PROMPT * 1000) / prefillMs;
  const steps = (DECODE * 1000) / decodeMs;
  const decode = batch * steps;
  results.set(variant, { prefill, decode });
  const kind = variant.split(" ")[1]!;
  const bw = (weightBytes(kind) * steps) / 1e9;
  const util = Number.isFinite(bw) ? `, weights ${bw.toFixed(1)} GB/s = ${((100 * bw) / bandwidth).toFixed(0)}% of bandwidth` : "";
  const arena = variant.startsWith("torchts") ? `, wasm arena ${(torch.backends.cpu.info().arenaBytes / 2 ** 20).toFixed(0)} MiB` : "";
  console.log(`${variant.padEnd(38)} prefill ${prefill.toFixed(1).padStart(7)} tok/s   decode ${decode.toFixed(1).padStart(6)} tok/s (${(decodeMs / DECODE).toFixed(1)} ms/step${util})${arena}`);
  const suite = variant.startsWith("llama.cpp") ? "llama.cpp" : "torchts";
  const b = batch > 1 ? ` x${batch}` : "";
  emit({ suite, workload: `prefill ${PROMPT}${b}`, variant, ms: prefillMs, note: `${prefill.toFixed(2)} tok/s` });
  emit({ suite, workload: `decode ${DECODE}${b}`, variant, ms: decodeMs, gbs: Number.isFinite(bw) ? Number(bw.toFixed(2)) : undefined, note: `${decode.toFixed(2)} tok/s` });
}

/** Best-of-REPS prefill ms (prompt to first token) and decode ms (first to last token). */
/** `batch` prompts of the benchmark's length: the first is `prompt`, the others other tokens. */
function prompts(prompt: number[], batch: number): number[][] {
  return Array.from({ length: batch }, (_, b) => prompt.map((t, i) => (b === 0 ? t : (t + 131 * b + i) % config.vocabSize)));
}

async function benchTorchts(m: LlamaForCausalLM, prompt: number[], label: string, modes: ("strict" | "fused" | "compiled")[], batch = 1): Promise<void> {
  const input = batch === 1 ? prompt : prompts(prompt, batch);
  const reps = batch === 1 ? REPS : Math.min(REPS, 2);
  for (const mode of modes) {
    await torch.withEagerMode(mode === "compiled" ? "strict" : mode, async () => {
      const compile = mode === "compiled";
      // warm-up: fills the kernel caches and (compiled) records the steps the model then keeps
      await m.generate(input, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile });
      let prefillMs = Infinity;
      let decodeMs = Infinity;
      for (let r = 0; r < reps; r++) {
        const stamps: number[] = [];
        const t0 = performance.now();
        // the streamer sees every row's token of a step: time steps, not events
        await m.generate(input, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile, streamer: (e) => e.step !== stamps.length - 1 && stamps.push(performance.now()) });
        prefillMs = Math.min(prefillMs, stamps[0]! - t0);
        decodeMs = Math.min(decodeMs, stamps[DECODE]! - stamps[0]!);
      }
      record(`torchts ${label} ${mode} (${torch.backends.cpu.getNumThreads()}t${batch > 1 ? `, batch ${batch}` : ""})`, prefillMs, decodeMs, batch);
    });
  }
}

async function benchLlamaCpp(file: string, kind: string, prompt: number[], threads: number, batch = 1): Promise<void> {
  const { getLlama } = await import("node-llama-cpp");
  const llama = await getLlama({ gpu: false, build: "never" });
  const model = await llama.loadModel({ modelPath: file });
  // sequences evaluated at the same time share one batch (node-llama-cpp batches them)
  // contextSize is per sequence
  const ctx = await model.createContext({ contextSize: CONTEXT, sequences: batch, threads, batchSize: Math.max(512, PROMPT) });
  try {
    const seqs = Array.from({ length: batch }, () => ctx.getSequence());
    type Tokens = Parameters<(typeof seqs)[0]["evaluateWithoutGeneratingNewTokens"]>[0];
    const inputs = prompts(prompt, batch) as unknown as Tokens[];
    await seqs[0]!.evaluateWithoutGeneratingNewTokens(inputs[0]!.slice(0, 8)); // warm-up
    let prefillMs = Infinity;
    let decodeMs = Infinity;
    for (let r = 0; r < (batch === 1 ? REPS : Math.min(REPS, 2)); r++) {
      await Promise.all(seqs.map((s) => s.clearHistory()));
      const t0 = performance.now();
      await Promise.all(seqs.map((s, b) => s.evaluateWithoutGeneratingNewTokens(inputs[b]!)));
      prefillMs = Math.min(prefillMs, performance.now() - t0);
      // the first evaluated token re-reads the last prompt token: start the clock after it, like torchts
      const starts: number[] = [];
      const ends = await Promise.all(
        seqs.map(async (s, b) => {
          let n = 0;
          for await (const _t of s.evaluate([inputs[b]![PROMPT - 1]!], { temperature: 0 })) {
            if (n === 0) starts.push(performance.now());
            if (++n > DECODE) break;
          }
          return performance.now();
        }),
      );
      decodeMs = Math.min(decodeMs, Math.max(...ends) - Math.min(...starts));
    }
    record(`llama.cpp ${kind} (${threads}t${batch > 1 ? `, batch ${batch}` : ""})`, prefillMs, decodeMs, batch);
  } finally {
    await ctx.dispose();
    await model.dispose();
  }
}

torch.backends.cpu.setNumThreads(THREADS);
torch.zeros(1); // starts the wasm runtime
bandwidth = await copyBandwidth();
console.log(
  `Llama 100M (d 768, 12 layers, 12/4 heads, MLP 2048, vocab 16000), prompt ${PROMPT}, decode ${DECODE}, batch 1 and ${BATCH}, best of ${REPS} ` +
    `(batch ${BATCH}: ${Math.min(REPS, 2)}); threads ${THREADS}; copy bandwidth ${bandwidth.toFixed(1)} GB/s; load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`,
);
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
        if (BATCH > 1) for (const t of [...new Set([THREADS, 1])]) await benchLlamaCpp(file, type, prompt, t, BATCH);
      } catch (e) {
        console.log(`llama.cpp ${type}: ${(e as Error).message}`);
        emit({ suite: "llama.cpp", workload: "decode", variant: type, error: (e as Error).message });
      }
    }
  if (!process.argv.includes("--llama-cpp-only")) {
    const single = async (model: LlamaForCausalLM, label: string) => {
      // the same thread count as the 1-thread llama.cpp rows
      if (THREADS > 1) {
        torch.backends.cpu.setNumThreads(1);
        await benchTorchts(model, prompt, label, ["compiled"]);
        torch.backends.cpu.setNumThreads(THREADS);
      }
      if (BATCH > 1) await benchTorchts(model, prompt, label, ["compiled"], BATCH);
    };
    /** Frees a model's weights, caches and replaced float weights now: they would otherwise fill the
     * wasm arena (until V8 collects them) and push the next model's weights out of it (slower, staged kernels). */
    const release = async (model: LlamaForCausalLM) => {
      for (const t of [...model.parameters(), ...model.buffers()]) t.dispose();
      await collectGarbage();
    };
    // q8_0 quantizes every matrix, the output layer included: so do these int8 models
    if (!process.argv.includes("--w8a8-only")) {
      await benchTorchts(m, prompt, "f32", QUICK ? ["strict", "compiled"] : ["strict", "fused", "compiled"]);
      await single(m, "f32");
      await quantize(m, { bits: 8, includeLmHead: true });
      await benchTorchts(m, prompt, "int8", ["strict", "compiled"]);
      await single(m, "int8");
    }
    await release(m);
    // int8 weights and int8 activations (per token, on the fly): q8_0's scheme of products
    const w8a8 = await quantize(buildModel(), { bits: 8, includeLmHead: true, activations: "int8" });
    await benchTorchts(w8a8, prompt, "w8a8", ["strict", "compiled"]);
    await single(w8a8, "w8a8");
    if (!process.argv.includes("--w8a8-only")) {
      await release(w8a8);
      // int4, groups of 32 (q4_0's layout), every matrix
      const int4 = await quantize(buildModel(), { bits: 4, groupSize: 32, includeLmHead: true });
      await benchTorchts(int4, prompt, "int4", ["compiled"]);
      await single(int4, "int4");
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// prefill and decode ratios of the best torchts mode to llama.cpp at the same thread count
const best = (prefix: string, t: string, what: "prefill" | "decode") =>
  Math.max(0, ...[...results].filter(([k]) => k.startsWith(prefix) && k.endsWith(`(${t})`)).map(([, v]) => v[what]));
for (const what of ["prefill", "decode"] as const)
  for (const t of [...new Set([THREADS, 1])].flatMap((n) => [`${n}t`, ...(BATCH > 1 ? [`${n}t, batch ${BATCH}`] : [])]))
    for (const [ours, theirs] of [
      ["torchts f32", `llama.cpp f32 (${t})`], ["torchts int8", `llama.cpp q8_0 (${t})`], ["torchts w8a8", `llama.cpp q8_0 (${t})`],
    ] as const) {
      const a = best(ours, t, what);
      const b = results.get(theirs)?.[what];
      if (!a || !b) continue;
      console.log(`${what} ${ours} (best mode, ${t}) / ${theirs}: ${(a / b).toFixed(2)}x (${a.toFixed(1)} vs ${b.toFixed(1)} tok/s)`);
      emit({ suite: "ratio", workload: `${what}${t.includes("batch") ? ` x${BATCH}` : ""}`, variant: `${ours} / ${theirs}`, ratio: +(a / b).toFixed(3), note: `${(a / b).toFixed(2)}x (${a.toFixed(1)} vs ${b.toFixed(1)} tok/s)` });
    }
console.log(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
