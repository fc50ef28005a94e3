// llama.cpp's side of the serving comparison (run by serve.ts in its own process): node-llama-cpp
// 3.21.1 (bench/transformers' install) on a GGUF file, one context with N sequences, which
// node-llama-cpp evaluates in one batch per step (its continuous batching). N workers take the same
// token-id prompts as benchServe in order, each on its own sequence, so at most N requests are in
// flight as with --max-concurrency N; greedy, exactly outputLen tokens each (an end-of-generation
// token does not stop a request, as ignore_eos). Timed as benchServe times a run: output tokens over
// the time from the first request's start to the last token; TTFT, TPOT and ITL per request.
//   argv: GGUF JOB.json  (JOB: { prompts: number[][], outputLen, threads, concurrency: number[], batchSize })
// Prints one line "RESULT {json}" per concurrency.
import { readFileSync } from "node:fs";
import { join } from "node:path";

interface Job {
  prompts: number[][];
  /** prompts per concurrency level: the first count[i] of `prompts` run at concurrency[i] */
  counts: number[];
  concurrency: number[];
  outputLen: number;
  threads: number;
  batchSize: number;
}

export interface LlamaRun {
  concurrency: number;
  numPrompts: number;
  duration: number;
  outputTokens: number;
  outputThroughput: number;
  /** ms, one per request */
  ttfts: number[];
  tpots: number[];
  itls: number[];
  /** the first request's generated token ids (to compare with torchts's greedy output) */
  firstTokens: number[];
  /** each round's output throughput, when the caller ran several (it keeps the fastest) */
  rounds?: number[];
}

const [gguf, jobFile] = process.argv.slice(2);
if (!gguf || !jobFile) throw new Error("usage: llama_cpp_child.ts GGUF JOB.json");
const job = JSON.parse(readFileSync(jobFile, "utf8")) as Job;
// node-llama-cpp lives in bench/transformers/node_modules (its own install, not a workspace dependency)
const entry = join(new URL("../transformers/node_modules/node-llama-cpp/", import.meta.url).pathname, "dist/index.js");
const { getLlama } = (await import(entry)) as typeof import("../transformers/node_modules/node-llama-cpp/dist/index.js");
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath: gguf });
const maxPrompt = Math.max(...job.prompts.map((p) => p.length));
const contextSize = Math.ceil((maxPrompt + job.outputLen + 16) / 256) * 256; // per sequence

for (const [level, conc] of job.concurrency.entries()) {
  const prompts = job.prompts.slice(0, job.counts[level]);
  const ctx = await model.createContext({ contextSize, sequences: conc, threads: job.threads, batchSize: job.batchSize });
  try {
    const seqs = Array.from({ length: conc }, () => ctx.getSequence());
    type Tokens = Parameters<(typeof seqs)[0]["evaluateWithoutGeneratingNewTokens"]>[0];
    // warm-up: one short evaluation per sequence
    await Promise.all(seqs.map((s) => s.evaluateWithoutGeneratingNewTokens(prompts[0]!.slice(0, 8) as unknown as Tokens)));
    await Promise.all(seqs.map((s) => s.clearHistory()));
    const ttfts: number[] = [], tpots: number[] = [], itls: number[] = [];
    let firstTokens: number[] = [];
    let outputTokens = 0;
    let nextPrompt = 0;
    let lastToken = 0;
    const t0 = performance.now();
    await Promise.all(
      seqs.map(async (seq) => {
        for (;;) {
          const i = nextPrompt++;
          if (i >= prompts.length) return;
          await seq.clearHistory();
          const st = performance.now();
          const stamps: number[] = [];
          const toks: number[] = [];
          for await (const t of seq.evaluate(prompts[i]! as unknown as Tokens, { temperature: 0, yieldEogToken: true })) {
            stamps.push(performance.now());
            toks.push(t as unknown as number);
            if (toks.length >= job.outputLen) break;
          }
          if (toks.length < job.outputLen) throw new Error(`request ${i} ended after ${toks.length} of ${job.outputLen} tokens`);
          outputTokens += toks.length;
          lastToken = Math.max(lastToken, stamps[stamps.length - 1]!);
          ttfts.push(stamps[0]! - st);
          if (stamps.length > 1) tpots.push((stamps[stamps.length - 1]! - stamps[0]!) / (stamps.length - 1));
          for (let k = 1; k < stamps.length; k++) itls.push(stamps[k]! - stamps[k - 1]!);
          if (i === 0) firstTokens = toks;
        }
      }),
    );
    const duration = (lastToken - t0) / 1000;
    const run: LlamaRun = { concurrency: conc, numPrompts: prompts.length, duration, outputTokens, outputThroughput: outputTokens / duration, ttfts, tpots, itls, firstTokens };
    console.log(`RESULT ${JSON.stringify(run)}`);
    process.stderr.write(`  llama.cpp c${conc}: ${run.outputThroughput.toFixed(1)} tok/s (${prompts.length} prompts, ${duration.toFixed(2)} s)\n`);
  } finally {
    await ctx.dispose();
  }
}
await model.dispose();
await llama.dispose();
