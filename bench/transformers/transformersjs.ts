// transformers.js (@huggingface/transformers 4.x, onnxruntime-node cpu) on the same ~100M Llama as
// llama.ts, exported by onnx_llama.ts, next to torchts f32 compiled in the same process.
//   node --import tsx bench/transformers/transformersjs.ts [--quick] [--threads N] [--reps N] [--check-only]
// First a correctness check (exit 1 on mismatch): on the golden llama_gqa checkpoint and on the
// bench model, the exported graph's logits (onnxruntime-node directly, and transformers.js's
// forward) must match torchts's within 1e-3 and the 16-token greedy continuations must agree
// (llama_gqa also against Hugging Face transformers' continuation in expected.json).
// Then prefill (prompt 512, quick 128: call to first token) and decode (first to last generated
// token) tokens/s, best of --reps after a warm-up generation, since the machine may be shared.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as ort from "onnxruntime-node";
import { AutoModelForCausalLM as TjsAuto, Tensor as TjsTensor, env } from "@huggingface/transformers";
import * as torch from "../../packages/torchts/src/index.js";
import { AutoModelForCausalLM, type LlamaForCausalLM, type PreTrainedModel } from "../../packages/torchts/src/transformers/index.js";
import { buildModel, config } from "./bench_model.js";
import { QUICK, emit, numberArg } from "../lib.js";
import { saveForTransformersJs } from "./onnx_llama.js";

const THREADS = numberArg("--threads") ?? Math.min(cpus().length, 4);
const REPS = numberArg("--reps") ?? (QUICK ? 2 : 3);
const PROMPT = QUICK ? 128 : 512;
const DECODE = QUICK ? 16 : 32;
const TOL = 1e-3;
const HERE = dirname(fileURLToPath(import.meta.url));
const GOLDEN = join(HERE, "../../packages/torchts/test/fixtures/hf/llama_gqa");


const ids = (prompt: number[]) => BigInt64Array.from(prompt.map(BigInt));
// onnxruntime's defaults otherwise (graph optimizations on, spinning intra-op threads), as a
// transformers.js user gets them; transformers.js passes session_options through to it
const sessionOptions = (threads = THREADS): ort.InferenceSession.SessionOptions => ({ intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: "sequential" });

async function loadTjs(dir: string, threads = THREADS) {
  env.allowRemoteModels = false;
  env.localModelPath = dirname(dir);
  return TjsAuto.from_pretrained(basename(dir), { local_files_only: true, dtype: "fp32", device: "cpu", session_options: sessionOptions(threads) });
}
type TjsModel = Awaited<ReturnType<typeof loadTjs>>;

/** transformers.js greedy generate; returns the new tokens and the time of each streamed token. */
async function tjsGenerate(m: TjsModel, prompt: number[], n: number): Promise<{ tokens: number[]; stamps: number[]; t0: number }> {
  const stamps: number[] = [];
  let calls = 0;
  // generate() puts the prompt first, then each new token
  const streamer = { put: () => void (calls++ > 0 && stamps.push(performance.now())), end: () => {} };
  const t0 = performance.now();
  const out = (await m.generate({
    inputs: new TjsTensor("int64", ids(prompt), [1, prompt.length]),
    attention_mask: new TjsTensor("int64", new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]),
    max_new_tokens: n, min_new_tokens: n, do_sample: false, streamer: streamer as never,
  } as never)) as unknown as { tolist(): bigint[][] };
  return { tokens: out.tolist()[0]!.slice(prompt.length).map(Number), stamps, t0 };
}

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return Number.isNaN(d) ? Infinity : d;
}

let failures = 0;
function check(what: string, ok: boolean, detail: string): void {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}: ${detail}`);
  if (!ok) failures++;
}

/** Exported graph vs torchts on `prompt`: full-prompt logits (ORT and transformers.js) and greedy tokens. */
async function checkModel(label: string, m: PreTrainedModel, dir: string, prompt: number[], expected?: number[]): Promise<TjsModel> {
  const c = m.config;
  const ref = torch.noGrad(() => m.forward(torch.tensor([prompt], { dtype: "int64" })).logits);
  const refLogits = (await ref.data()) as Float32Array;
  const refTokens = (await m.generate(prompt, { maxNewTokens: 16, stopTokenIds: [] })).newTokens[0]!;

  const sess = await ort.InferenceSession.create(join(dir, "onnx/model.onnx"), sessionOptions());
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor("int64", ids(prompt), [1, prompt.length]),
    attention_mask: new ort.Tensor("int64", new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]),
    position_ids: new ort.Tensor("int64", ids(prompt.map((_, i) => i)), [1, prompt.length]),
    num_logits_to_keep: new ort.Tensor("int64", BigInt64Array.of(0n), []),
  };
  for (let i = 0; i < c.numHiddenLayers; i++)
    for (const kv of ["key", "value"])
      feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [1, c.numKeyValueHeads, 0, c.headDim]);
  const out = await sess.run(feeds);
  const d1 = maxDiff(out.logits!.data as Float32Array, refLogits);
  check(`${label}: onnxruntime-node logits [${out.logits!.dims}] vs torchts`, d1 <= TOL, `max abs diff ${d1.toExponential(2)}`);
  await sess.release();

  const tjs = await loadTjs(dir);
  const fwd = (await tjs({
    input_ids: new TjsTensor("int64", ids(prompt), [1, prompt.length]),
    attention_mask: new TjsTensor("int64", new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]),
  } as never)) as { logits: { data: Float32Array; dims: number[] } };
  const d2 = maxDiff(fwd.logits.data, refLogits);
  check(`${label}: transformers.js logits [${fwd.logits.dims}] vs torchts`, d2 <= TOL, `max abs diff ${d2.toExponential(2)}`);
  const { tokens } = await tjsGenerate(tjs, prompt, 16);
  const same = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  check(`${label}: transformers.js greedy 16 == torchts`, same(tokens, refTokens), `${tokens.join(" ")}${same(tokens, refTokens) ? "" : ` vs torchts ${refTokens.join(" ")}`}`);
  if (expected) check(`${label}: torchts greedy 16 == HF transformers (expected.json)`, same(refTokens, expected), refTokens.join(" "));
  return tjs;
}

/**
 * Left padding: both prompts in one batch (the shorter padded with attention_mask 0) must give
 * each prompt's own logits at its real positions (onnxruntime-node) and its own greedy tokens
 * (transformers.js generate), which exercises the padding mask and the position ids.
 */
async function checkPadded(label: string, m: PreTrainedModel, dir: string, prompts: number[][]): Promise<void> {
  const c = m.config;
  const n = Math.max(...prompts.map((p) => p.length));
  const padded = prompts.flatMap((p) => [...new Array<number>(n - p.length).fill(0), ...p]);
  const mask = prompts.flatMap((p) => [...new Array<number>(n - p.length).fill(0), ...new Array<number>(p.length).fill(1)]);
  const pos = prompts.flatMap((p) => [...new Array<number>(n - p.length).fill(1), ...p.map((_, i) => i)]);
  const B = prompts.length;
  const sess = await ort.InferenceSession.create(join(dir, "onnx/model.onnx"), sessionOptions());
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor("int64", ids(padded), [B, n]),
    attention_mask: new ort.Tensor("int64", ids(mask), [B, n]),
    position_ids: new ort.Tensor("int64", ids(pos), [B, n]),
    num_logits_to_keep: new ort.Tensor("int64", BigInt64Array.of(0n), []),
  };
  for (let i = 0; i < c.numHiddenLayers; i++)
    for (const kv of ["key", "value"])
      feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [B, c.numKeyValueHeads, 0, c.headDim]);
  const logits = (await sess.run(feeds)).logits!.data as Float32Array;
  await sess.release();
  const V = c.vocabSize;
  let d = 0;
  const refTokens: number[][] = [];
  for (const [b, p] of prompts.entries()) {
    const ref = (await torch.noGrad(() => m.forward(torch.tensor([p], { dtype: "int64" })).logits).data()) as Float32Array;
    d = Math.max(d, maxDiff(logits.subarray((b * n + n - p.length) * V, (b + 1) * n * V), ref));
    refTokens.push((await m.generate(p, { maxNewTokens: 16, stopTokenIds: [] })).newTokens[0]!);
  }
  check(`${label}: onnxruntime-node batch ${B} left-padded logits vs torchts per prompt`, d <= TOL, `max abs diff ${d.toExponential(2)}`);
  const tjs = await loadTjs(dir);
  const out = (await tjs.generate({
    inputs: new TjsTensor("int64", ids(padded), [B, n]),
    attention_mask: new TjsTensor("int64", ids(mask), [B, n]),
    max_new_tokens: 16, min_new_tokens: 16, do_sample: false,
  } as never)) as unknown as { tolist(): bigint[][] };
  const rows = out.tolist().map((r) => r.slice(n).map(Number));
  const ok = rows.every((r, b) => r.join() === refTokens[b]!.join());
  check(`${label}: transformers.js batch ${B} left-padded greedy 16 == torchts per prompt`, ok, ok ? "" : `${rows.map((r) => r.join(" ")).join(" | ")} vs ${refTokens.map((r) => r.join(" ")).join(" | ")}`);
  await tjs.dispose();
}

/** tokens/s per variant */
const results = new Map<string, { prefill: number; decode: number }>();
function record(variant: string, prefillMs: number, decodeMs: number): void {
  const prefill = (PROMPT * 1000) / prefillMs;
  const decode = (DECODE * 1000) / decodeMs;
  results.set(variant, { prefill, decode });
  console.log(`${variant.padEnd(34)} prefill ${prefill.toFixed(1).padStart(7)} tok/s   decode ${decode.toFixed(1).padStart(6)} tok/s (${(decodeMs / DECODE).toFixed(1)} ms/token)`);
  const suite = variant.split(" ")[0]!;
  emit({ suite, workload: `prefill ${PROMPT}`, variant, ms: prefillMs, note: `${prefill.toFixed(2)} tok/s` });
  emit({ suite, workload: `decode ${DECODE}`, variant, ms: decodeMs, note: `${decode.toFixed(2)} tok/s` });
}

function argmax(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** Best-of-REPS prefill ms (call to first token) and decode ms (first to last of DECODE + 1 tokens). */
async function bestOf(run: () => Promise<{ stamps: number[]; t0: number }>): Promise<[number, number]> {
  await run(); // warm-up
  let prefillMs = Infinity;
  let decodeMs = Infinity;
  for (let r = 0; r < REPS; r++) {
    const { stamps, t0 } = await run();
    prefillMs = Math.min(prefillMs, stamps[0]! - t0);
    decodeMs = Math.min(decodeMs, stamps[DECODE]! - stamps[0]!);
  }
  return [prefillMs, decodeMs];
}

async function benchTjs(tjs: TjsModel, prompt: number[], threads: number): Promise<void> {
  const [p, d] = await bestOf(() => tjsGenerate(tjs, prompt, DECODE + 1));
  record(`transformers.js f32 (${threads}t)`, p, d);
}

/**
 * The same graph through onnxruntime-node without transformers.js (a plain greedy loop feeding
 * present.* back as past_key_values.*): what transformers.js's generate() itself costs.
 */
async function benchOrt(dir: string, prompt: number[], threads: number, c = config): Promise<void> {
  const sess = await ort.InferenceSession.create(join(dir, "onnx/model.onnx"), sessionOptions(threads));
  const keep = new ort.Tensor("int64", BigInt64Array.of(1n), []);
  const run = async () => {
    const stamps: number[] = [];
    const t0 = performance.now();
    const feeds: Record<string, ort.Tensor> = { num_logits_to_keep: keep };
    for (let i = 0; i < c.numHiddenLayers; i++)
      for (const kv of ["key", "value"]) feeds[`past_key_values.${i}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [1, c.numKeyValueHeads, 0, c.headDim]);
    let input = prompt;
    let total = 0;
    for (let t = 0; t <= DECODE; t++) {
      feeds.input_ids = new ort.Tensor("int64", ids(input), [1, input.length]);
      feeds.position_ids = new ort.Tensor("int64", ids(input.map((_, i) => total + i)), [1, input.length]);
      total += input.length;
      feeds.attention_mask = new ort.Tensor("int64", new BigInt64Array(total).fill(1n), [1, total]);
      const out = await sess.run(feeds);
      input = [argmax(out.logits!.data as Float32Array)];
      stamps.push(performance.now());
      for (let i = 0; i < c.numHiddenLayers; i++)
        for (const kv of ["key", "value"]) feeds[`past_key_values.${i}.${kv}`] = out[`present.${i}.${kv}`]!;
    }
    return { stamps, t0 };
  };
  const [p, d] = await bestOf(run);
  record(`onnxruntime-node loop f32 (${threads}t)`, p, d);
  await sess.release();
}

/** as llama.ts's benchTorchts, compiled mode */
async function benchTorchts(m: LlamaForCausalLM, prompt: number[]): Promise<void> {
  await torch.withEagerMode("strict", async () => {
    await m.generate(prompt, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile: true });
    let prefillMs = Infinity;
    let decodeMs = Infinity;
    for (let r = 0; r < REPS; r++) {
      const stamps: number[] = [];
      const t0 = performance.now();
      await m.generate(prompt, { maxNewTokens: DECODE + 1, stopTokenIds: [], compile: true, streamer: () => stamps.push(performance.now()) });
      prefillMs = Math.min(prefillMs, stamps[0]! - t0);
      decodeMs = Math.min(decodeMs, stamps[DECODE]! - stamps[0]!);
    }
    record(`torchts f32 compiled (${torch.backends.cpu.getNumThreads()}t)`, prefillMs, decodeMs);
  });
}

console.log(`transformers.js ${env.version} (onnxruntime-node ${ort.env.versions?.common ?? "?"}); Llama 100M, prompt ${PROMPT}, decode ${DECODE}, best of ${REPS}; threads ${THREADS}; load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
torch.backends.cpu.setNumThreads(THREADS);
const tmp = mkdtempSync(join(tmpdir(), "torchts-tjs-"));
try {
  // golden checkpoint: torchts == HF transformers there, so this ties the export to transformers too
  const golden = await AutoModelForCausalLM.fromPretrained(GOLDEN);
  await saveForTransformersJs(golden, join(tmp, "llama_gqa"));
  const exp = JSON.parse(readFileSync(join(GOLDEN, "expected.json"), "utf8")) as { prompts: { input_ids: number[]; greedy_continuation: number[] }[] };
  for (const [i, p] of exp.prompts.entries())
    await (await checkModel(`llama_gqa prompt ${i}`, golden, join(tmp, "llama_gqa"), p.input_ids, p.greedy_continuation)).dispose();
  await checkPadded("llama_gqa", golden, join(tmp, "llama_gqa"), exp.prompts.map((p) => p.input_ids));

  const m = buildModel();
  const prompt = Array.from({ length: PROMPT }, (_, i) => (i * 7919 + 13) % config.vocabSize);
  let t = performance.now();
  const bytes = await saveForTransformersJs(m, join(tmp, "llama100m"));
  console.log(`exported llama100m: ${(bytes / 2 ** 20).toFixed(0)} MiB in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  t = performance.now();
  const tjs = await checkModel("llama100m", m, join(tmp, "llama100m"), prompt);
  console.log(`check of llama100m: ${((performance.now() - t) / 1000).toFixed(1)} s`);
  if (failures) throw new Error(`${failures} correctness check(s) failed`);
  if (!process.argv.includes("--check-only")) {
    // like llama.ts: --threads and 1 thread (spinning thread pools suffer on a shared machine)
    const threadCounts = [...new Set([THREADS, 1])];
    for (const th of threadCounts) {
      const model = th === THREADS ? tjs : await loadTjs(join(tmp, "llama100m"), th);
      await benchTjs(model, prompt, th);
      await model.dispose();
      await benchOrt(join(tmp, "llama100m"), prompt, th);
      torch.backends.cpu.setNumThreads(th);
      await benchTorchts(m, prompt);
    }
    console.log(`\n| f32, prompt ${PROMPT}, decode ${DECODE} | prefill tok/s | decode tok/s | torchts decode / this |\n|---|---:|---:|---:|`);
    for (const th of threadCounts) {
      const ours = results.get(`torchts f32 compiled (${th}t)`)!;
      for (const [name, key] of [[`transformers.js ${env.version}`, "transformers.js f32"], ["onnxruntime-node loop", "onnxruntime-node loop f32"], ["torchts compiled", "torchts f32 compiled"]]) {
        const r = results.get(`${key} (${th}t)`)!;
        console.log(`| ${name} (${th}t) | ${r.prefill.toFixed(1)} | ${r.decode.toFixed(1)} | ${(ours.decode / r.decode).toFixed(2)}x |`);
      }
    }
  }
} catch (e) {
  console.error((e as Error).stack ?? e);
  process.exitCode = 1;
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
console.log(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
