// The measurements of bench/serve (started through serve.ts, which sets up the module resolution):
//  1. the tiny test model's server (forked, prefix caching off) at max-concurrency 1 and 16;
//  2. the ~100M Llama through `torchts serve` at 1, 4, 16 against llama.cpp with 1, 4, 16 sequences
//     on the same weights (GGUF f32), the same token-id prompts and output length, greedy;
//  3. one request's E2E latency through the HTTP server against in-process model.generate();
//  4. prefix-cache TTFT (1,500-token prompts, each sent twice) and HiCache (evicted to the host tier, loaded back).
// Progress goes to stderr; the tables and ROW lines (bench/run.ts) to stdout; bench/serve/RESULTS.md,
// bench/serve/throughput.png and a section of bench/RESULTS.md are written unless --no-write.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import * as torch from "torchts";
import { AutoModelForCausalLM, AutoTokenizer, saveGGUF, type PreTrainedModel, type PreTrainedTokenizer } from "torchts/transformers";
import { LLMEngine } from "../../packages/serve/src/engine.js";
import { benchServe } from "../../packages/serve/src/bench/bench_serve.js";
import { randomRequests } from "../../packages/serve/src/bench/dataset.js";
import { sendRequest } from "../../packages/serve/src/bench/request.js";
import { SeededRandom } from "../../packages/serve/src/bench/rng.js";
import { modelDir } from "../../packages/serve/test/helpers.js";
import { QUICK, numberArg } from "../lib.js";
import { buildModel } from "../transformers/bench_model.js";
import { saveHfFolder } from "./hf_folder.js";
import { cliServer, forkServer, runLlamaCpp, type TorchtsServer } from "./peers.js";
import type { LlamaRun } from "./llama_cpp_child.js";
import { writeReports, type Results, type ServeRun } from "./report.js";

const THREADS = numberArg("--threads") ?? 2;
const WRITE = !process.argv.includes("--no-write");
const INPUT = 128;
const OUTPUT = 64;
const LONG = 1500; // the prefix-cache prompt
const CACHE_REPS = QUICK ? 3 : 5; // prompts (each sent twice) for the prefix cache, A/B/A cycles for HiCache
const REPS = QUICK ? 3 : 5; // server-overhead repetitions (median)
/** throughput runs per level, interleaved (c1, c16, c1, c16; torchts then llama.cpp at each level): the best counts, as the cores are shared */
const ROUNDS = QUICK ? 1 : 2;
/** prompts per concurrency level: enough for about two rounds at each (one in --quick) */
const TINY_PROMPTS: Record<number, number> = QUICK ? { 1: 16, 16: 32 } : { 1: 32, 16: 64 };
const BIG_PROMPTS: Record<number, number> = QUICK ? { 1: 2, 4: 4, 16: 16 } : { 1: 4, 4: 8, 16: 32 };
const GREEDY = { temperature: 0 };

const log = (s: string) => process.stderr.write(`serve bench: ${s}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

torch.backends.cpu.setNumThreads(THREADS);
const started = new Date();
const loadStart = loadavg();
const tmp = mkdtempSync(join(tmpdir(), "torchts-bench-serve-"));
const tmpDirs = [tmp];
// the 1-minute load average every 5 s: other sessions share the two cores, and the report says how much
const loads: number[] = [];
const sampler = setInterval(() => loads.push(loadavg()[0]!), 5000).unref();

/** benchServe at one concurrency level: the random dataset of seed 0 (every level's prompts are the first n of one list). */
async function serveRun(server: TorchtsServer, model: string, tokenizer: PreTrainedTokenizer, label: string, concurrency: number, numPrompts: number): Promise<ServeRun> {
  const r = await benchServe({
    baseUrl: server.url, model, tokenizer, numPrompts, inputLen: INPUT, outputLen: OUTPUT, maxConcurrency: concurrency,
    requestRate: Infinity, ignoreEos: true, extraBody: GREEDY, seed: 0, metricPercentiles: [99],
  });
  if (r.failed || r.total_output_tokens !== numPrompts * OUTPUT) throw new Error(`${label} c${concurrency}: ${r.failed} failed, ${r.total_output_tokens} tokens (${r.errors.find(Boolean)})`);
  log(`${label} c${concurrency}: ${r.output_throughput.toFixed(1)} output tok/s (${numPrompts} prompts, ${r.duration.toFixed(2)} s)`);
  return { label, concurrency, result: r, rounds: [r.output_throughput] };
}

/** Keeps the faster of two runs of one level (and both throughputs). */
function faster(a: ServeRun | undefined, b: ServeRun): ServeRun {
  if (!a) return b;
  const best = b.result.output_throughput > a.result.output_throughput ? b : a;
  return { ...best, rounds: [...a.rounds, ...b.rounds] };
}

/** A few short requests first: the first forwards of a fresh server compile and cache kernels. */
async function warmUp(server: TorchtsServer, model: string, tokenizer: PreTrainedTokenizer): Promise<void> {
  await benchServe({ baseUrl: server.url, model, tokenizer, numPrompts: 4, inputLen: INPUT, outputLen: 8, maxConcurrency: 4, ignoreEos: true, extraBody: GREEDY, seed: 1 });
}

/** One non-streamed completion (prompt ids, greedy, ignore_eos): E2E ms from send to the whole body, and its text. */
async function e2eOnce(url: string, model: string, prompt: number[]): Promise<{ ms: number; text: string }> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: OUTPUT, ignore_eos: true, temperature: 0 }),
    signal: AbortSignal.timeout(120_000),
  });
  const body = (await res.json()) as { choices?: { text: string }[]; usage?: { completion_tokens: number } };
  const ms = performance.now() - t0;
  if (res.status !== 200 || body.usage?.completion_tokens !== OUTPUT) throw new Error(`E2E request: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
  return { ms, text: body.choices![0]!.text };
}

/** Median E2E of REPS requests after one warm-up. */
async function serverE2E(url: string, model: string, prompt: number[]): Promise<{ ms: number[]; text: string }> {
  const { text } = await e2eOnce(url, model, prompt);
  const ms: number[] = [];
  for (let i = 0; i < REPS; i++) ms.push((await e2eOnce(url, model, prompt)).ms);
  return { ms, text };
}

/** The same request as model.generate() in this process (greedy, no stop token), REPS times after a warm-up. */
async function generateE2E(model: PreTrainedModel, tokenizer: PreTrainedTokenizer, prompt: number[], compile: boolean): Promise<{ ms: number[]; text: string }> {
  const run = () => model.generate(prompt, { maxNewTokens: OUTPUT, stopTokenIds: [], compile });
  const first = await run();
  const ms: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const t0 = performance.now();
    await run();
    ms.push(performance.now() - t0);
  }
  return { ms, text: tokenizer.decode(first.newTokens[0]!, { skipSpecialTokens: true }) };
}

/** The engine alone (in this process, no HTTP): output tok/s of `prompts` with at most `concurrency` in flight, timed like benchServe. */
async function engineRun(model: PreTrainedModel, tokenizer: PreTrainedTokenizer, prompts: number[][], concurrency: number): Promise<number> {
  const engine = new LLMEngine({ model, tokenizer, enablePrefixCaching: false, maxModelLen: 2048 });
  let next = 0, tokens = 0, last = 0;
  const t0 = performance.now();
  const worker = async () => {
    for (let i = next++; i < prompts.length; i = next++)
      for await (const o of engine.generate(prompts[i]!, { maxTokens: OUTPUT, ignoreEos: true, temperature: 0 })) {
        tokens += o.tokenIds.length;
        last = performance.now();
      }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await engine.close();
  return (tokens * 1000) / (last - t0);
}

/** TTFT (ms) of one streamed request for `prompt` (max_tokens 1), as benchServe times it. */
async function ttft(url: string, prompt: number[]): Promise<number> {
  const client = new OpenAI({ baseURL: url, apiKey: "EMPTY", maxRetries: 0, timeout: 120_000 });
  const o = await sendRequest(client, { endpoint: "/v1/completions", model: "bench", ignoreEos: true, extraBody: GREEDY }, { prompt, promptLen: prompt.length, outputLen: 1 }, performance.now());
  if (!o.success) throw new Error(`TTFT request failed: ${o.error}`);
  return o.ttft * 1000;
}

/** `n` seeded random token ids of a vocabulary of `vocab` (a prompt no earlier request shares). */
function longPrompt(seed: number, n: number, vocab: number): number[] {
  const rng = new SeededRandom(seed, 2);
  return Array.from({ length: n }, () => rng.int(0, vocab - 1));
}

const results: Results = {
  threads: THREADS, quick: QUICK, inputLen: INPUT, outputLen: OUTPUT, longPrompt: LONG, reps: REPS,
  tiny: [], tinyEngine: [], big: [], llama: [], overhead: [], prefix: null, hicache: null, greedyMatch: null,
  started, loadStart, loadEnd: [], loadRange: [0, 0], cpu: `${cpus()[0]?.model ?? "?"}, ${cpus().length} cores`, cores: cpus().length,
};

try {
  // ---- 1 and 3 (tiny): batching at 1 and 16, and one request against generate() ----
  log(`threads ${THREADS}; load average ${loadStart.map((x) => x.toFixed(2)).join(" ")}`);
  const tinyDir = modelDir({ maxPositionEmbeddings: 2048 });
  tmpDirs.push(tinyDir);
  const tinyTok = await AutoTokenizer.fromPretrained(tinyDir);
  const tinyPrompt = randomRequests(tinyTok, { numPrompts: 1, inputLen: INPUT, outputLen: OUTPUT, prefixLen: 0, text: false }, new SeededRandom(0, 0))[0]!.prompt as number[];
  {
    log("tiny model: forked server (prefix caching off: the random dataset's prompts of a 256-token vocabulary repeat)");
    const server = await forkServer(tinyDir, { enablePrefixCaching: false, maxModelLen: 2048 }, THREADS);
    try {
      await warmUp(server, "bench", tinyTok);
      const best = new Map<number, ServeRun>();
      for (let round = 0; round < ROUNDS; round++)
        for (const c of [1, 16]) best.set(c, faster(best.get(c), await serveRun(server, "bench", tinyTok, "torchts tiny", c, TINY_PROMPTS[c]!)));
      results.tiny.push(...best.values());
      const viaServer = await serverE2E(server.url, "bench", tinyPrompt);
      results.overhead.push({ model: "tiny", serverMs: viaServer.ms, serverText: viaServer.text, generateMs: [], generateText: "", compiledMs: [], compiledText: "" });
    } finally {
      await server.close();
    }
    const model = await AutoModelForCausalLM.fromPretrained(tinyDir, { deviceMap: "cpu" });
    const o = results.overhead[0]!;
    ({ ms: o.generateMs, text: o.generateText } = await generateE2E(model, tinyTok, tinyPrompt, false));
    ({ ms: o.compiledMs, text: o.compiledText } = await generateE2E(model, tinyTok, tinyPrompt, true));
    // the same batching without the server: tells the engine's scaling from the HTTP path's
    const prompts = randomRequests(tinyTok, { numPrompts: TINY_PROMPTS[16]!, inputLen: INPUT, outputLen: OUTPUT, prefixLen: 0, text: false }, new SeededRandom(0, 0)).map((r) => r.prompt as number[]);
    await engineRun(model, tinyTok, prompts.slice(0, 16), 16); // warm-up
    for (let round = 0; round < ROUNDS; round++)
      for (const c of [1, 16]) {
        const tokS = await engineRun(model, tinyTok, prompts.slice(0, TINY_PROMPTS[c]!), c);
        const e = results.tinyEngine.find((x) => x.concurrency === c);
        if (e) e.rounds.push(tokS);
        else results.tinyEngine.push({ concurrency: c, rounds: [tokS] });
      }
    log(`tiny engine alone: ${results.tinyEngine.map((e) => `c${e.concurrency} ${Math.max(...e.rounds).toFixed(0)} tok/s`).join(", ")}`);
    log(`tiny E2E: server ${median(o.serverMs).toFixed(1)} ms, generate() ${median(o.generateMs).toFixed(1)} ms, compiled ${median(o.compiledMs).toFixed(1)} ms`);
  }

  // ---- 4: prefix cache, then HiCache (tiny) ----
  {
    log(`prefix cache: ${CACHE_REPS} ${LONG}-token prompts, each twice`);
    const server = await forkServer(tinyDir, { maxModelLen: 2048 }, THREADS);
    try {
      await ttft(server.url, longPrompt(100, LONG, 256)); // warm-up: a prompt the measured ones do not share
      const before = await server.stats();
      const first: number[] = [], second: number[] = [];
      for (let i = 0; i < CACHE_REPS; i++) {
        const p = longPrompt(101 + i, LONG, 256);
        first.push(await ttft(server.url, p));
        second.push(await ttft(server.url, p));
      }
      const after = await server.stats();
      results.prefix = { firstMs: first, secondMs: second, hitTokens: after.prefixCacheHits - before.prefixCacheHits, queryTokens: after.prefixCacheQueries - before.prefixCacheQueries };
      log(`prefix cache TTFT (median): ${median(first).toFixed(1)} -> ${median(second).toFixed(1)} ms`);
    } finally {
      await server.close();
    }
    const blocks = Math.ceil((LONG + 1) / 16) + 6; // one long request and a few spare: a second long prompt evicts the first
    log(`HiCache: --num-kv-blocks ${blocks}, 64 MiB host tier; ${CACHE_REPS} times prompts A, B (evicts A), A`);
    const hic = await forkServer(tinyDir, { maxModelLen: 2048, numKvBlocks: blocks, hicacheSize: 64 << 20 }, THREADS);
    try {
      await ttft(hic.url, longPrompt(200, LONG, 256)); // warm-up
      const h: NonNullable<Results["hicache"]> = { numKvBlocks: blocks, aMissMs: [], bMissMs: [], aHitMs: [], savedBlocks: 0, loadedBlocks: [], deviceHitTokens: [] };
      const s0 = await hic.stats();
      for (let i = 0; i < CACHE_REPS; i++) {
        const a = longPrompt(201 + 2 * i, LONG, 256), b = longPrompt(202 + 2 * i, LONG, 256);
        h.aMissMs.push(await ttft(hic.url, a));
        h.bMissMs.push(await ttft(hic.url, b));
        const s1 = await hic.stats();
        h.aHitMs.push(await ttft(hic.url, a));
        const s2 = await hic.stats();
        h.loadedBlocks.push(s2.hicacheLoadedBlocks - s1.hicacheLoadedBlocks);
        h.deviceHitTokens.push(s2.prefixCacheHits - s1.prefixCacheHits);
        h.savedBlocks = s2.hicacheSavedBlocks - s0.hicacheSavedBlocks;
      }
      results.hicache = h;
      log(`HiCache TTFT (median): recompute ${median([...h.aMissMs, ...h.bMissMs]).toFixed(1)} ms, host-tier hit ${median(h.aHitMs).toFixed(1)} ms (${h.loadedBlocks.join(", ")} blocks loaded)`);
    } finally {
      await hic.close();
    }
  }

  // ---- 2 and 3 (~100M Llama): torchts serve vs llama.cpp, and one request against generate() ----
  {
    log("~100M Llama: building the weights, the HF folder and the GGUF; llama.cpp is node-llama-cpp 3.21.1 on the GGUF f32, N sequences of one context");
    const m = buildModel();
    const dir = join(tmp, "llama100m");
    mkdirSync(dir);
    await saveHfFolder(m, dir);
    const gguf = join(tmp, "llama100m.f32.gguf");
    await saveGGUF(m, gguf, { type: "f32" });
    const tok = await AutoTokenizer.fromPretrained(dir);
    const levels = [1, 4, 16];
    const maxPrompts = Math.max(...levels.map((c) => BIG_PROMPTS[c]!));
    const prompts = randomRequests(tok, { numPrompts: maxPrompts, inputLen: INPUT, outputLen: OUTPUT, prefixLen: 0, text: false }, new SeededRandom(0, 0)).map((r) => r.prompt as number[]);
    log("torchts serve --model DIR --no-enable-prefix-caching (benchServe's levels reuse one prompt list); llama.cpp runs between its levels");
    const server = await cliServer(dir, ["--served-model-name", "llama100m", "--no-enable-prefix-caching"], THREADS);
    let viaServer: { ms: number[]; text: string };
    try {
      await warmUp(server, "llama100m", tok);
      for (const c of levels) {
        let ours: ServeRun | undefined;
        let theirs: LlamaRun | undefined;
        for (let round = 0; round < ROUNDS; round++) {
          ours = faster(ours, await serveRun(server, "llama100m", tok, "torchts 100M", c, BIG_PROMPTS[c]!));
          // the server idles meanwhile (its engine loop has stopped: nothing runs or waits)
          const [l] = await runLlamaCpp(gguf, { prompts, counts: [BIG_PROMPTS[c]!], concurrency: [c], outputLen: OUTPUT, threads: THREADS, batchSize: 512 }, tmp);
          theirs = !theirs ? { ...l!, rounds: [l!.outputThroughput] } : { ...(l!.outputThroughput > theirs.outputThroughput ? l! : theirs), rounds: [...theirs.rounds!, l!.outputThroughput] };
        }
        results.big.push(ours!);
        results.llama.push(theirs!);
      }
      viaServer = await serverE2E(server.url, "llama100m", prompts[0]!);
    } finally {
      await server.close();
    }
    const gen = await generateE2E(m, tok, prompts[0]!, false);
    const comp = await generateE2E(m, tok, prompts[0]!, true);
    results.overhead.push({ model: "100M", serverMs: viaServer.ms, serverText: viaServer.text, generateMs: gen.ms, generateText: gen.text, compiledMs: comp.ms, compiledText: comp.text });
    log(`100M E2E: server ${median(viaServer.ms).toFixed(1)} ms, generate() ${median(gen.ms).toFixed(1)} ms, compiled ${median(comp.ms).toFixed(1)} ms`);
    const ours = results.big[0]!.result.generated_texts[0]!;
    const theirs = tok.decode(results.llama[0]!.firstTokens, { skipSpecialTokens: true });
    let same = 0;
    while (same < Math.min(ours.length, theirs.length) && ours[same] === theirs[same]) same++;
    results.greedyMatch = { equal: ours === theirs, sameChars: same, chars: ours.length };
  }
} finally {
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
}
clearInterval(sampler);
results.loadEnd = loadavg();
results.loadRange = [Math.min(...loads, loadStart[0]!), Math.max(...loads, loadStart[0]!)];
await writeReports(results, WRITE);
