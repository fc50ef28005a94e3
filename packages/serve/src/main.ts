// `torchts serve`: load a Hugging Face model folder and serve it with the OpenAI-compatible API.
// Reached through src/cli.ts, which makes sure that "torchts" resolves first.
import { parseArgs } from "node:util";
import { AutoModelForCausalLM, AutoTokenizer, quantize, type QuantizeOptions } from "torchts/transformers";
import type { DType } from "torchts";
import { LLMEngine, type LLMEngineOptions } from "./engine.js";
import { createServer } from "./server.js";
import { checkTensorParallel, joinTensorParallel, tensorParallelArgv } from "./tp/cli.js";

export const USAGE = `usage: torchts serve --model DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME] [--api-key KEY]
                     [--max-waiting N] [--max-num-seqs N] [--max-model-len N] [--max-num-batched-tokens N]
                     [--block-size 16] [--num-kv-blocks N | --kv-cache-memory BYTES] [--no-enable-prefix-caching]
                     [--hicache-size BYTES] [--hicache-dir DIR] [--quantization int8|int4|w8a8] [--kv-events]
                     [--kv-transfer [--kv-transfer-host H]]
                     [--device cpu|webgpu] [--dtype D] [--tensor-parallel-size N | -tp N]
  DIR holds config.json, model.safetensors (or sharded *.safetensors + index), tokenizer.json,
  tokenizer_config.json (its chat_template, or chat_template.jinja, is used for /v1/chat/completions).
  --port 0 picks a free port. SIGTERM/SIGINT drain: stop accepting, finish running requests, exit 0.
  --tensor-parallel-size N runs the model across N processes (this one and N-1 workers it spawns; cpu).`;

const OPTIONS = {
  model: { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  "served-model-name": { type: "string" },
  "api-key": { type: "string" },
  "max-waiting": { type: "string" },
  "max-num-seqs": { type: "string" },
  "max-model-len": { type: "string" },
  "max-num-batched-tokens": { type: "string" },
  "block-size": { type: "string" },
  "num-kv-blocks": { type: "string" },
  "kv-cache-memory": { type: "string" },
  "enable-prefix-caching": { type: "boolean" },
  "no-enable-prefix-caching": { type: "boolean" },
  "hicache-size": { type: "string" },
  "hicache-dir": { type: "string" },
  quantization: { type: "string" },
  "kv-events": { type: "boolean" },
  "kv-transfer": { type: "boolean" },
  "kv-transfer-host": { type: "string" },
  device: { type: "string" },
  dtype: { type: "string" },
  "tensor-parallel-size": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

function int(v: string | undefined, flag: string, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${flag}: expected an integer >= ${min}, got '${v}'`);
  return n;
}

/** Runs the server until SIGTERM/SIGINT; resolves with the exit code once it has drained. */
export async function main(argv: string[]): Promise<number> {
  let v: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };
  try {
    v = parseArgs({ args: tensorParallelArgv(argv), options: OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (e) {
    process.stderr.write(`torchts serve: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (v.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let port: number, maxWaiting: number | undefined, maxNumSeqs: number | undefined, maxModelLen: number | undefined;
  let engineOpts: Partial<LLMEngineOptions>;
  let quant: QuantizeOptions | null = null;
  let tpSize: number;
  try {
    if (!v.model) throw new Error("--model DIR is required");
    port = int(v.port, "port", 0) ?? 8000;
    maxWaiting = int(v["max-waiting"], "max-waiting", 0);
    maxNumSeqs = int(v["max-num-seqs"], "max-num-seqs", 1);
    maxModelLen = int(v["max-model-len"], "max-model-len", 2);
    if (v["num-kv-blocks"] !== undefined && v["kv-cache-memory"] !== undefined) throw new Error("--num-kv-blocks and --kv-cache-memory are exclusive");
    if (v["enable-prefix-caching"] && v["no-enable-prefix-caching"]) throw new Error("--enable-prefix-caching and --no-enable-prefix-caching are exclusive");
    engineOpts = {
      maxNumBatchedTokens: int(v["max-num-batched-tokens"], "max-num-batched-tokens", 1),
      blockSize: int(v["block-size"], "block-size", 1),
      numKvBlocks: int(v["num-kv-blocks"], "num-kv-blocks", 1),
      kvCacheMemory: int(v["kv-cache-memory"], "kv-cache-memory", 1),
      enablePrefixCaching: !v["no-enable-prefix-caching"],
      hicacheSize: int(v["hicache-size"], "hicache-size", 0),
      hicacheDir: v["hicache-dir"],
      kvEvents: v["kv-events"] ?? false,
    };
    const q = v.quantization;
    if (q !== undefined) {
      const table: Record<string, QuantizeOptions> = { int8: { bits: 8 }, int4: { bits: 4 }, w8a8: { bits: 8, activations: "int8" } };
      if (!(q in table)) throw new Error(`--quantization: expected int8, int4 or w8a8, got '${q}'`);
      quant = table[q]!;
    }
    tpSize = int(v["tensor-parallel-size"], "tensor-parallel-size", 1) ?? 1;
  } catch (e) {
    process.stderr.write(`torchts serve: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const device = v.device ?? "cpu";
  if (tpSize > 1) {
    const code = await checkTensorParallel(tpSize, v.model, { device, quantization: v.quantization, hicacheSize: engineOpts.hicacheSize, kvTransfer: v["kv-transfer"] });
    if (code !== null) return code;
  }
  const model = await AutoModelForCausalLM.fromPretrained(v.model, { deviceMap: device, dtype: v.dtype as DType | undefined });
  const tokenizer = await AutoTokenizer.fromPretrained(v.model);
  if (quant) await quantize(model, quant);
  const group = tpSize > 1 ? await joinTensorParallel(model, tpSize, v.model, v.dtype) : null;
  if (group === false) return 1;
  let engine: LLMEngine;
  try {
    engine = new LLMEngine({ model, tokenizer, maxNumSeqs, maxModelLen: maxModelLen ?? Math.min(model.config.maxPositionEmbeddings, 1 << 20), maxWaiting, device: model.device, ...engineOpts,
      ...(group ? { tensorParallel: group } : {}) });
    group?.initCache(engine.kvCache.opts);
  } catch (e) {
    process.stderr.write(`torchts serve: ${(e as Error).message}\n`);
    await group?.shutdown();
    return 2;
  }
  const name = v["served-model-name"] ?? v.model;
  const server = await createServer({ engine, modelName: name, aliases: [v.model], apiKey: v["api-key"] ?? process.env.TORCHTS_API_KEY, kvEvents: v["kv-events"] ?? false,
    kvTransfer: v["kv-transfer"] ?? false, kvTransferHost: v["kv-transfer-host"] });
  const address = await server.app.listen({ host: v.host ?? "127.0.0.1", port });
  process.stdout.write(`torchts serve: '${name}' listening on ${address}\n`);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (sig: string, code = 0) => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`torchts serve: ${sig}: draining (${engine.stats.running} running, ${engine.stats.waiting} waiting)\n`);
      const drained = server.drain();
      // a broken tensor parallel group cannot finish them
      if (code !== 0) void engine.close({ abortAll: true });
      drained.then(
        async () => {
          await group?.shutdown();
          process.stdout.write("torchts serve: stopped\n");
          resolve(code);
        },
        async (e: Error) => {
          await group?.shutdown();
          process.stderr.write(`torchts serve: ${e.message}\n`);
          resolve(1);
        },
      );
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    group?.onFailure((e) => {
      process.stderr.write(`torchts serve: ${e.message}; the model cannot run without it: shutting down\n`);
      stop("tensor parallel failure", 1);
    });
  });
}
