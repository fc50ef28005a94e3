// The OpenAI-compatible HTTP server of `torchts serve`, on fastify (JSON-schema validation of every
// body) and prom-client (/metrics with vLLM's metric names). It drives an LLMEngine.
import { randomUUID, timingSafeEqual } from "node:crypto";
import { setMaxListeners } from "node:events";
import { STATUS_CODES, type ServerResponse } from "node:http";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import client from "prom-client";
import type { ChatMessage } from "torchts/transformers";
import { EngineClosedError, EngineInputError, EngineQueueFullError, type KvCacheEvent, type LLMEngine, type RequestOutput, type SamplingParams, type TokenLogprob } from "./engine.js";
import { exportBlocks, prefillResponse, pullBlocks, type KvTransferParams } from "./kv_transfer.js";
import { makeConstraint, parseToolCall, structuredSpec, StructuredRequestError, ToolCallReader, toolCallId, type StructuredSpec } from "./structured/openai.js";

/** Used when the model folder has no chat template: one line `<|role|>` then the content, per message. */
export const FALLBACK_CHAT_TEMPLATE =
  "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

export interface ServerOptions {
  engine: LLMEngine;
  /** The name clients pass as `model` (GET /v1/models lists it). */
  modelName: string;
  /** Other names accepted as `model` (e.g. the model folder path). */
  aliases?: string[];
  /** When set, /v1/* needs `Authorization: Bearer KEY`. */
  apiKey?: string;
  /** Largest request body in bytes (default 4 MiB; larger gets 413). */
  bodyLimit?: number;
  /** Most choices per request (n times the number of prompts; default 16). */
  maxChoices?: number;
  /** Seconds a 429 or 503 asks the client to wait (Retry-After, default 1). */
  retryAfter?: number;
  logger?: boolean;
  /** Serve GET /v1/kv_events (the engine must have been made with kvEvents: true). */
  kvEvents?: boolean;
  /**
   * Take part in prefill/decode disaggregation (kv_transfer_params, POST /v1/kv_blocks). Off by default, as
   * vLLM without a KV connector: a request could otherwise make the server fetch from any host, and read its cache.
   */
  kvTransfer?: boolean;
  /** The host a decode replica should pull this replica's KV blocks from (default: the address the request came in on). */
  kvTransferHost?: string;
}

export interface Server {
  app: FastifyInstance;
  registry: client.Registry;
  /** Stop accepting requests (503), let the accepted ones finish, close the listener. */
  drain(): Promise<void>;
}

type ErrorType = "invalid_request_error" | "authentication_error" | "not_found_error" | "rate_limit_error" | "service_unavailable_error" | "internal_error";

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ErrorType = "invalid_request_error",
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

function errorBody(status: number, message: string, type: ErrorType, param: string | null) {
  return { error: { message, type, param, code: status } };
}

// ---- request schemas (fastify compiles them with ajv; no type coercion, extra fields allowed) ----
const nullable = (s: Record<string, unknown>) => ({ anyOf: [s, { type: "null" }] });
const num = (minimum: number, maximum: number) => nullable({ type: "number", minimum, maximum });
const int = (minimum: number, maximum?: number) => nullable(maximum === undefined ? { type: "integer", minimum } : { type: "integer", minimum, maximum });
const tokenIds = { type: "array", minItems: 1, items: { type: "integer", minimum: 0, maximum: 2 ** 31 } };
const SAMPLING = {
  model: { type: "string", maxLength: 1024 },
  temperature: num(0, 100),
  top_p: nullable({ type: "number", exclusiveMinimum: 0, maximum: 1 }),
  top_k: int(-1, 2 ** 31),
  min_p: num(0, 1),
  n: int(1, 128),
  max_tokens: int(1),
  min_tokens: int(0),
  stop: nullable({ anyOf: [{ type: "string", minLength: 1 }, { type: "array", maxItems: 16, items: { type: "string", minLength: 1 } }] }),
  stop_token_ids: nullable({ type: "array", maxItems: 256, items: { type: "integer", minimum: 0, maximum: 2 ** 31 } }),
  seed: nullable({ type: "integer" }),
  presence_penalty: num(-2, 2),
  frequency_penalty: num(-2, 2),
  repetition_penalty: nullable({ type: "number", exclusiveMinimum: 0, maximum: 100 }),
  logit_bias: nullable({ type: "object", maxProperties: 1024, additionalProperties: { type: "number", minimum: -100, maximum: 100 } }),
  ignore_eos: nullable({ type: "boolean" }),
  skip_special_tokens: nullable({ type: "boolean" }),
  stream: nullable({ type: "boolean" }),
  stream_options: nullable({ type: "object", properties: { include_usage: nullable({ type: "boolean" }) } }),
  user: nullable({ type: "string" }),
  // vLLM's extra fields: the prefix-cache tenant and the scheduling priority (lower first)
  cache_salt: nullable({ type: "string", minLength: 1, maxLength: 1024 }),
  // prefill/decode disaggregation (vLLM's connector protocol; src/kv_transfer.ts)
  kv_transfer_params: nullable({
    type: "object",
    properties: {
      do_remote_decode: nullable({ type: "boolean" }), do_remote_prefill: nullable({ type: "boolean" }),
      remote_host: nullable({ type: "string", maxLength: 256 }), remote_port: nullable({ type: "integer", minimum: 1, maximum: 65535 }),
      remote_engine_id: nullable({ type: "string", maxLength: 256 }),
      remote_block_hashes: nullable({ type: "array", maxItems: 1 << 16, items: { type: "string", maxLength: 128 } }),
      cache_salt: nullable({ type: "string", maxLength: 1024 }),
    },
  }),
  priority: nullable({ type: "integer", minimum: -(2 ** 31), maximum: 2 ** 31 - 1 }),
  logprobs: {},
  top_logprobs: int(0, 20),
};
const MESSAGE = {
  type: "object",
  required: ["role"],
  properties: {
    role: { type: "string", minLength: 1, maxLength: 64 },
    content: nullable({ anyOf: [{ type: "string" }, { type: "array", items: { type: "object", required: ["type"], properties: { type: { type: "string" }, text: { type: "string" } } } }] }),
    name: { type: "string" },
  },
};
const CHAT_SCHEMA = {
  type: "object",
  required: ["messages"],
  properties: {
    ...SAMPLING,
    messages: { type: "array", minItems: 1, maxItems: 10000, items: MESSAGE },
    max_completion_tokens: int(1),
    logprobs: nullable({ type: "boolean" }),
    response_format: nullable({ type: "object", required: ["type"], properties: { type: { type: "string" } } }),
    tools: nullable({ type: "array" }),
    tool_choice: {},
    add_generation_prompt: nullable({ type: "boolean" }),
  },
};
const COMPLETION_SCHEMA = {
  type: "object",
  required: ["prompt"],
  properties: {
    ...SAMPLING,
    prompt: {
      anyOf: [
        { type: "string" },
        { type: "array", minItems: 1, items: { type: "string" } },
        tokenIds,
        { type: "array", minItems: 1, items: tokenIds },
      ],
    },
    echo: nullable({ type: "boolean" }),
    logprobs: int(0, 20),
    suffix: nullable({ type: "string" }),
    best_of: int(1, 1),
  },
};
const TOKENIZE_SCHEMA = {
  type: "object",
  properties: {
    model: { type: "string" },
    prompt: { type: "string" },
    messages: { type: "array", minItems: 1, items: MESSAGE },
    add_special_tokens: { type: "boolean" },
    add_generation_prompt: { type: "boolean" },
  },
};
const DETOKENIZE_SCHEMA = {
  type: "object",
  required: ["tokens"],
  properties: { model: { type: "string" }, tokens: { type: "array", items: { type: "integer", minimum: 0, maximum: 2 ** 31 } } },
};

type Body = Record<string, unknown>;

function sampling(b: Body, maxTokens: number | undefined): SamplingParams {
  const stop = b.stop === undefined || b.stop === null ? undefined : typeof b.stop === "string" ? [b.stop] : (b.stop as string[]);
  const logitBias = b.logit_bias ? (b.logit_bias as Record<number, number>) : undefined;
  const opt = <T>(v: unknown): T | undefined => (v === null || v === undefined ? undefined : (v as T));
  // seeds may be any integer (OpenAI: int64); the engine's RNG takes 32 bits
  const seed = opt<number>(b.seed);
  return {
    maxTokens,
    minTokens: opt(b.min_tokens),
    temperature: opt(b.temperature),
    topP: opt(b.top_p),
    topK: opt(b.top_k),
    minP: opt(b.min_p),
    seed: seed === undefined ? undefined : ((seed % 2 ** 32) + 2 ** 32) % 2 ** 32,
    stop,
    stopTokenIds: opt(b.stop_token_ids),
    ignoreEos: opt(b.ignore_eos),
    presencePenalty: opt(b.presence_penalty),
    frequencyPenalty: opt(b.frequency_penalty),
    repetitionPenalty: opt(b.repetition_penalty),
    logitBias,
    skipSpecialTokens: opt(b.skip_special_tokens),
    cacheSalt: opt(b.cache_salt),
    priority: opt(b.priority),
    // chat: logprobs true (+ top_logprobs); completions: logprobs = the number of alternatives
    logprobs: "messages" in b ? (b.logprobs === true ? ((b.top_logprobs as number | null | undefined) ?? 0) : undefined) : opt(b.logprobs),
  };
}

function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content.map((p: { type?: string; text?: string }) => {
      if (p.type !== "text") throw new HttpError(400, `content part type '${p.type}' is not supported (text only)`, "invalid_request_error", "messages");
      return p.text ?? "";
    }).join("");
  return "";
}

/** Merge several async iterators; yields [index, value] as values arrive. */
async function* merge<T>(its: AsyncIterator<T>[]): AsyncGenerator<[number, T]> {
  const pending = new Map<number, Promise<[number, IteratorResult<T>]>>();
  const next = (i: number) => pending.set(i, its[i]!.next().then((r) => [i, r] as [number, IteratorResult<T>]));
  its.forEach((_, i) => next(i));
  try {
    while (pending.size) {
      const [i, r] = await Promise.race(pending.values());
      if (r.done) pending.delete(i);
      else {
        next(i);
        yield [i, r.value];
      }
    }
  } finally {
    for (const it of its) await it.return?.();
  }
}

function buildMetrics(engine: LLMEngine, modelName: string): client.Registry {
  const registry = new client.Registry();
  const labels = { model_name: modelName };
  registry.setDefaultLabels(labels);
  new client.Gauge({ name: "vllm:num_requests_running", help: "Requests running in the engine.", registers: [registry], collect() { this.set(engine.stats.running); } });
  new client.Gauge({ name: "vllm:num_requests_waiting", help: "Requests waiting to run.", registers: [registry], collect() { this.set(engine.stats.waiting); } });
  new client.Gauge({
    name: "vllm:kv_cache_usage_perc",
    help: "Fraction of the KV block pool held by requests (1 = full; blocks only the prefix cache keeps count as free).",
    registers: [registry],
    collect() { this.set(engine.stats.kvCacheUsage); },
  });
  const cfg = engine.cacheConfig;
  new client.Gauge({
    name: "vllm:cache_config_info",
    help: "Engine configuration.",
    labelNames: ["block_size", "num_gpu_blocks", "enable_prefix_caching", "max_num_seqs", "max_model_len", "max_num_batched_tokens"],
    registers: [registry],
  }).set({
    block_size: String(cfg.blockSize), num_gpu_blocks: String(cfg.numBlocks), enable_prefix_caching: String(cfg.enablePrefixCaching),
    max_num_seqs: String(engine.maxNumSeqs), max_model_len: String(engine.maxModelLen), max_num_batched_tokens: String(cfg.maxNumBatchedTokens),
  }, 1);
  // counters the engine keeps: read at scrape time
  const fromEngine = (name: string, help: string, value: () => number) =>
    new client.Counter({ name, help, registers: [registry], collect() { this.reset(); this.inc(value()); } });
  fromEngine("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", () => engine.stats.prefixCacheQueries);
  fromEngine("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", () => engine.stats.prefixCacheHits);
  fromEngine("vllm:num_preemptions_total", "Requests preempted (KV blocks freed, recomputed later).", () => engine.stats.preemptions);
  fromEngine("torchts:hicache_loaded_blocks_total", "KV blocks loaded from the HiCache host tier instead of recomputed.", () => engine.stats.hicacheLoadedBlocks);
  fromEngine("torchts:hicache_saved_blocks_total", "KV blocks the device pool evicted into the HiCache host tier.", () => engine.stats.hicacheSavedBlocks);
  const prompt = new client.Counter({ name: "vllm:prompt_tokens_total", help: "Prompt tokens prefilled.", registers: [registry] });
  const gen = new client.Counter({ name: "vllm:generation_tokens_total", help: "Tokens generated.", registers: [registry] });
  const success = new client.Counter({ name: "vllm:request_success_total", help: "Finished requests by finish reason.", labelNames: ["finished_reason"], registers: [registry] });
  for (const r of ["stop", "length", "abort"]) success.inc({ finished_reason: r }, 0);
  const buckets = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
  const ttft = new client.Histogram({ name: "vllm:time_to_first_token_seconds", help: "Arrival to first token.", buckets, registers: [registry] });
  const itl = new client.Histogram({ name: "vllm:inter_token_latency_seconds", help: "Time between consecutive tokens of a request.", buckets, registers: [registry] });
  const e2e = new client.Histogram({ name: "vllm:e2e_request_latency_seconds", help: "Arrival to finish.", buckets: [...buckets, 160, 320, 640], registers: [registry] });
  engine.onEvent((e) => {
    if (e.type === "prefill") prompt.inc(e.promptTokens);
    else if (e.type === "token") {
      gen.inc();
      (e.index === 0 ? ttft : itl).observe((e.time - e.previous) / 1000);
    } else {
      success.inc({ finished_reason: e.reason });
      if (e.reason !== "abort") e2e.observe((e.time - e.arrival) / 1000);
    }
  });
  return registry;
}

function sse(res: ServerResponse, data: unknown): void {
  if (!res.destroyed && !res.writableEnded) res.write(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);
}

/**
 * Stream pieces for forced tool calls, per choice: nothing until the function name is whole, then
 * OpenAI's first tool_calls delta (index, id, type, name, empty arguments), then the arguments as
 * they come, and a last empty delta with finish_reason "tool_calls" once the call is whole.
 */
function toolCallDeltas(choices: number): (out: RequestOutput, i: number) => Body[] {
  const readers = Array.from({ length: choices }, () => new ToolCallReader());
  return (out, i) => {
    const r = readers[i]!;
    const { name, args } = r.push(out.text);
    const parts: Body[] = [];
    if (name !== null) parts.push({ delta: { tool_calls: [{ index: 0, id: toolCallId(), type: "function", function: { name, arguments: "" } }] } });
    if (args) parts.push({ delta: { tool_calls: [{ index: 0, function: { arguments: args } }] } });
    if (out.finishReason) parts.push(r.result() ? { delta: {}, finish_reason: "tool_calls" } : { delta: {} });
    return parts;
  };
}

export async function createServer(o: ServerOptions): Promise<Server> {
  const { engine, modelName } = o;
  const tok = engine.tokenizer;
  const names = new Set([modelName, ...(o.aliases ?? [])]);
  const maxChoices = o.maxChoices ?? 16;
  const retryAfter = String(o.retryAfter ?? 1);
  const created = Math.floor(Date.now() / 1000);
  const hasTemplate = tok.config.chat_template !== undefined && tok.config.chat_template !== null;
  let draining = false;

  const app = Fastify({
    logger: o.logger ?? false,
    bodyLimit: o.bodyLimit ?? 4 * 1024 * 1024,
    forceCloseConnections: "idle",
    // HTTP/1.1 needs Host, but a missing one is no reason for node's bare, bodiless 400
    http: { requireHostHeader: false },
    // requests node's parser refuses (bad framing, oversized headers) get OpenAI's error body too
    clientErrorHandler(err: Error & { code?: string }, socket) {
      if (err.code === "ECONNRESET" || socket.destroyed) return;
      const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
      const body = JSON.stringify(errorBody(status, `malformed HTTP request (${err.code ?? err.message})`, "invalid_request_error", null));
      if (socket.writable)
        socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      socket.destroy();
    },
    // a path fastify cannot decode (e.g. %ZZ)
    frameworkErrors(err: FastifyError, _req: FastifyRequest, reply: FastifyReply) {
      void reply.code(400).send(errorBody(400, err.message, "invalid_request_error", null));
    },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false } },
  });
  const registry = buildMetrics(engine, modelName);
  // node answers an Expect other than 100-continue with a bare 417
  app.server.on("checkExpectation", (req, res) => {
    res.writeHead(417, { "content-type": "application/json" });
    res.end(JSON.stringify(errorBody(417, `unsupported Expect: ${req.headers.expect}`, "invalid_request_error", null)));
  });

  app.setErrorHandler((err: FastifyError | HttpError, _req, reply) => {
    if (err instanceof HttpError) {
      if (err.status === 429 || err.status === 503) reply.header("retry-after", retryAfter);
      return reply.code(err.status).send(errorBody(err.status, err.message, err.type, err.param));
    }
    const fe = err as FastifyError;
    if (fe.validation) {
      const v = fe.validation[0];
      const path = v?.instancePath?.replace(/^\//, "").replace(/\//g, ".") || (v?.params as { missingProperty?: string } | undefined)?.missingProperty || null;
      return reply.code(400).send(errorBody(400, `invalid request: ${fe.message}`, "invalid_request_error", path));
    }
    const status = typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500 ? fe.statusCode : 500;
    if (status === 500) app.log.error(err);
    return reply.code(status).send(errorBody(status, status === 500 ? "internal server error" : fe.message, status === 500 ? "internal_error" : "invalid_request_error", null));
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send(errorBody(404, `no route ${req.method} ${req.url}`, "not_found_error", null)));

  app.addHook("onRequest", async (req) => {
    const url = req.url;
    const v1 = url.startsWith("/v1/") || url === "/v1";
    if (v1 && o.apiKey !== undefined) {
      const want = Buffer.from(`Bearer ${o.apiKey}`);
      const got = Buffer.from(req.headers.authorization ?? "");
      if (got.length !== want.length || !timingSafeEqual(got, want)) throw new HttpError(401, "missing or wrong API key (Authorization: Bearer KEY)", "authentication_error");
    }
    if (draining && req.method === "POST") throw new HttpError(503, "the server is shutting down", "service_unavailable_error");
  });

  const checkModel = (b: Body) => {
    if (b.model !== undefined && !names.has(b.model as string)) throw new HttpError(404, `the model '${b.model}' does not exist; this server serves '${modelName}'`, "not_found_error", "model");
  };

  /** The request's n, once `prompts` times n is known to be at most maxChoices (checked before any prompt is tokenized). */
  const choices = (prompts: number, b: Body): number => {
    const n = (b.n as number | null | undefined) ?? 1;
    if (prompts * n > maxChoices) throw new HttpError(400, `at most ${maxChoices} choices per request (prompts times n)`, "invalid_request_error", "n");
    return n;
  };

  /** Start n engine requests per prompt; all or none. */
  const start = (prompts: number[][], n: number, b: Body, maxTokens: number | undefined, signal: AbortSignal, baseId: string, spec: StructuredSpec | null = null) => {
    const base = sampling(b, maxTokens);
    const constraint = () => {
      try {
        return spec && makeConstraint(spec, tok, eosIds);
      } catch (e) {
        if (e instanceof StructuredRequestError) throw new HttpError(400, e.message, "invalid_request_error", e.param);
        throw e;
      }
    };
    const need = constraint()?.minTokens ?? 0;
    for (const p of prompts) {
      let mt: number;
      try {
        mt = engine.validate(p, base);
      } catch (e) {
        if (e instanceof EngineInputError) throw new HttpError(400, e.message, "invalid_request_error", e.param);
        throw e;
      }
      if (mt < need) throw new HttpError(400, `max_tokens too small for the ${spec!.toolCall ? "tool call" : "response_format"}: its shortest output takes ${need} tokens, max_tokens allows ${mt}`, "invalid_request_error", "max_tokens");
    }
    const its: AsyncIterableIterator<RequestOutput>[] = [];
    try {
      let k = 0;
      for (const p of prompts)
        for (let j = 0; j < n; j++) {
          const seeded = base.seed !== undefined && j > 0 ? { ...base, seed: (base.seed + j) >>> 0 } : base;
          const params = spec ? { ...seeded, constraint: constraint()! } : seeded;
          its.push(engine.generate(p, params, { requestId: `${baseId}-${k++}`, signal }));
        }
    } catch (e) {
      for (const it of its) void it.return?.();
      if (e instanceof EngineQueueFullError) throw new HttpError(429, e.message, "rate_limit_error");
      if (e instanceof EngineClosedError) throw new HttpError(503, e.message, "service_unavailable_error");
      if (e instanceof EngineInputError) throw new HttpError(400, e.message, "invalid_request_error", e.param);
      throw e;
    }
    return its;
  };

  /** An AbortController that fires when the client goes away before the response ends. */
  const disconnect = (reply: FastifyReply) => {
    const ac = new AbortController();
    // engine.generate() listens on it once per choice: up to maxChoices listeners is expected
    setMaxListeners(maxChoices + 1, ac.signal);
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) ac.abort();
    });
    return ac;
  };

  const chatPrompt = (b: Body, param = "messages"): number[] => {
    const messages = (b.messages as ChatMessage[]).map((m) => ({ ...m, content: messageText(m.content) }));
    try {
      return tok.applyChatTemplate(messages, {
        addGenerationPrompt: (b.add_generation_prompt as boolean | undefined) ?? true,
        tokenize: true,
        // the model sees the tools it may call when its template renders them (as vLLM passes them)
        ...(Array.isArray(b.tools) && b.tools.length ? { tools: b.tools } : {}),
        ...(hasTemplate ? {} : { chatTemplate: FALLBACK_CHAT_TEMPLATE }),
      });
    } catch (e) {
      throw new HttpError(400, `the chat template failed on these messages: ${(e as Error).message}`, "invalid_request_error", param);
    }
  };

  const usageOf = (prompts: number[][], outs: { completionTokens: number; cachedTokens: number }[]) => {
    const p = prompts.reduce((s, x) => s + x.length, 0);
    const c = outs.reduce((s, x) => s + x.completionTokens, 0);
    // each prompt counts once (its first choice's reuse), as prompt_tokens does
    const per = Math.max(1, Math.round(outs.length / Math.max(1, prompts.length)));
    const cached = prompts.reduce((s, _, k) => s + (outs[k * per]?.cachedTokens ?? 0), 0);
    return { prompt_tokens: p, completion_tokens: c, total_tokens: p + c, prompt_tokens_details: { cached_tokens: cached } };
  };

  /** OpenAI's logprobs objects for some tokens of a choice: chat `{content: [...]}`, completions the four parallel lists. */
  const tokenStr = (id: number) => tok.decode([id], { skipSpecialTokens: false, cleanUpTokenizationSpaces: false });
  const lpBody = (kind: Head["logprobs"], lps: TokenLogprob[], offset: number): Body | null => {
    if (kind === null) return null;
    if (kind === "chat") {
      const entry = (id: number, lp: number) => ({ token: tokenStr(id), logprob: lp, bytes: [...Buffer.from(tokenStr(id), "utf8")] });
      return { content: lps.map((t) => ({ ...entry(t.tokenId, t.logprob), top_logprobs: t.top.map((a) => entry(a.tokenId, a.logprob)) })) };
    }
    const offsets: number[] = [];
    let at = offset;
    for (const t of lps) {
      offsets.push(at);
      at += tokenStr(t.tokenId).length;
    }
    return {
      tokens: lps.map((t) => tokenStr(t.tokenId)),
      token_logprobs: lps.map((t) => t.logprob),
      top_logprobs: lps.map((t) => Object.fromEntries(t.top.map((a) => [tokenStr(a.tokenId), a.logprob]))),
      text_offset: offsets,
    };
  };

  /** What the chunks and the body of one response share: id, object kind, creation time, model, whether usage is asked for, and the prompts it counts. */
  type Head = { id: string; object: string; now: number; model: string; includeUsage: boolean; prompts: number[][]; logprobs: "chat" | "completion" | null };

  /** Stream the merged outputs as server-sent events: the `first` choices, then one chunk a piece of text or finish, then usage (when asked) and [DONE]. */
  const streamOut = async (reply: FastifyReply, its: AsyncIterableIterator<RequestOutput>[], h: Head, first: Body[], piece: (out: RequestOutput, i: number) => Body[]) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
    const chunk = (choices: unknown[]) => ({ id: h.id, object: h.object, created: h.now, model: h.model, choices, ...(h.includeUsage ? { usage: null } : {}) });
    for (const c of first) sse(res, chunk([c]));
    const last: RequestOutput[] = [];
    const offsets: number[] = its.map(() => 0);
    try {
      for await (const [i, out] of merge(its)) {
        last[i] = out;
        if (out.finishReason === "abort") continue;
        let parts = piece(out, i);
        // a chunk's logprobs are its tokens' (text held back, e.g. a partial UTF-8 character, comes in a
        // later chunk: its tokens still get a chunk of their own, with no text)
        const lp = out.logprobs?.length ? lpBody(h.logprobs, out.logprobs, offsets[i]!) : null;
        if (lp && parts.length === 0) parts = [h.logprobs === "chat" ? { delta: {} } : { text: "" }];
        offsets[i]! += out.text.length;
        parts.forEach((p, k) => {
          // the output's finish reason goes on its last part; a part may name its own (tool_calls)
          const last = k === parts.length - 1;
          const choice: Body = { index: i, logprobs: k === 0 ? lp : null, finish_reason: last ? out.finishReason : null, ...p };
          if (last && out.finishReason) choice.stop_reason = out.stopReason;
          sse(res, chunk([choice]));
        });
      }
      if (h.includeUsage) sse(res, { id: h.id, object: h.object, created: h.now, model: h.model, choices: [], usage: usageOf(h.prompts, last) });
      sse(res, "[DONE]");
    } catch (e) {
      sse(res, errorBody(500, (e as Error).message, "internal_error", null));
    } finally {
      res.end();
    }
  };

  /** Collect the merged outputs into one body (499 when the client went away); `content(i, text)` gives choice i its text field. */
  const collectOut = async (reply: FastifyReply, its: AsyncIterableIterator<RequestOutput>[], h: Head, signal: AbortSignal, content: (i: number, text: string) => Body) => {
    const texts: string[] = its.map(() => "");
    const lps: TokenLogprob[][] = its.map(() => []);
    const last: RequestOutput[] = [];
    for await (const [i, out] of merge(its)) {
      texts[i] += out.text;
      lps[i]!.push(...(out.logprobs ?? []));
      last[i] = out;
    }
    if (signal.aborted) return reply.code(499).send(errorBody(499, "client closed the request", "invalid_request_error", null));
    return {
      id: h.id,
      object: h.object,
      created: h.now,
      model: h.model,
      choices: its.map((_, i) => ({
        index: i,
        logprobs: lpBody(h.logprobs, lps[i]!, 0),
        finish_reason: last[i]!.finishReason as string | null,
        stop_reason: last[i]!.stopReason,
        ...content(i, texts[i]!),
      })),
      usage: usageOf(h.prompts, last),
    };
  };

  const unsupported = (b: Body, chat: boolean) => {
    if (chat && b.top_logprobs !== undefined && b.top_logprobs !== null && b.logprobs !== true)
      throw new HttpError(400, "top_logprobs needs logprobs: true", "invalid_request_error", "top_logprobs");
    if (!chat && b.suffix) throw new HttpError(400, "suffix is not supported", "invalid_request_error", "suffix");
  };

  /** The structured output a request asks for (response_format, forced tool calls), or null. */
  const structured = (b: Body, chat: boolean): StructuredSpec | null => {
    try {
      return structuredSpec(b, chat);
    } catch (e) {
      if (e instanceof StructuredRequestError) throw new HttpError(400, e.message, "invalid_request_error", e.param);
      throw e;
    }
  };
  // the ids that end a request: the constraint allows them only once the document is whole
  const eosIds = [...new Set([...engine.model.config.eosTokenId, ...(tok.eosTokenId !== null ? [tok.eosTokenId] : [])])];

  // ---- routes ----
  app.get("/health", async (_req, reply) => (draining ? reply.code(503).send({ status: "draining" }) : reply.send({ status: "ok" })));
  app.get("/metrics", async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  app.get("/v1/models", async () => ({
    object: "list",
    data: [{ id: modelName, object: "model", created, owned_by: "torchts", root: o.aliases?.[0] ?? modelName, parent: null, max_model_len: engine.maxModelLen }],
  }));

  app.post("/tokenize", { schema: { body: TOKENIZE_SCHEMA } }, async (req) => {
    const b = req.body as Body;
    checkModel(b);
    let tokens: number[];
    if (b.messages !== undefined) tokens = chatPrompt(b);
    else if (typeof b.prompt === "string") tokens = tok.encode(b.prompt, { addSpecialTokens: (b.add_special_tokens as boolean | undefined) ?? true });
    else throw new HttpError(400, "tokenize needs prompt or messages", "invalid_request_error", "prompt");
    return { count: tokens.length, max_model_len: engine.maxModelLen, tokens };
  });
  app.post("/detokenize", { schema: { body: DETOKENIZE_SCHEMA } }, async (req) => {
    const b = req.body as Body;
    checkModel(b);
    const ids = b.tokens as number[];
    for (const t of ids) if (t >= engine.vocabSize) throw new HttpError(400, `token id ${t} is outside the vocabulary [0, ${engine.vocabSize})`, "invalid_request_error", "tokens");
    return { prompt: tok.decode(ids) };
  });

  // vLLM's KV-event stream (its ZMQ publisher's events, here as server-sent events of JSON): a snapshot
  // of what is cached, then BlockStored / BlockRemoved as the prefix cache changes. A cache-aware router
  // (llm-d's precise prefix scorer) hashes prompts the same way (HostKVTier.keys) to find them.
  app.get("/v1/kv_events", async (req, reply) => {
    if (!o.kvEvents) throw new HttpError(404, "KV events are off (start the server with --kv-events)", "not_found_error");
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
    let seq = 0;
    const send = (e: KvCacheEvent) => {
      const { type, ...rest } = e;
      const body: Body = { seq: seq++, ts: Date.now() / 1000, type };
      for (const [k, v] of Object.entries(rest)) body[k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = v;
      sse(res, body);
    };
    engine.kvSnapshot(send);
    const off = engine.onKvEvent(send);
    req.raw.on("close", off);
    res.on("close", off);
  });

  // ---- prefill/decode disaggregation (src/kv_transfer.ts) ----
  const engineId = randomUUID();
  let transferred = 0;
  new client.Counter({
    name: "torchts:kv_transfer_blocks_total",
    help: "KV blocks pulled from prefill replicas instead of computed.",
    registers: [registry],
    collect() { this.reset(); this.inc(transferred); },
  });
  /** A prefill request (do_remote_decode) or a decode request that first pulls the prompt's blocks (do_remote_prefill). */
  const kvTransfer = async (b: Body, prompts: number[][]): Promise<KvTransferParams | null> => {
    const p = b.kv_transfer_params as KvTransferParams | null | undefined;
    if (!p || !o.kvTransfer) return null; // without a connector the field is ignored, as vLLM does
    if ((p.do_remote_decode || p.do_remote_prefill) && prompts.length !== 1) throw new HttpError(400, "kv_transfer_params needs a single prompt", "invalid_request_error", "kv_transfer_params");
    if (p.do_remote_decode && b.stream) throw new HttpError(400, "a prefill request (do_remote_decode) is not streamed", "invalid_request_error", "stream");
    if (p.do_remote_prefill) transferred += await pullBlocks(engine, p, prompts[0]!, o.apiKey);
    return p;
  };
  const withTransfer = (body: unknown, p: KvTransferParams | null, req: FastifyRequest, prompt: number[], b: Body) => {
    if (!p?.do_remote_decode || !body || typeof body !== "object" || !("choices" in body)) return body;
    const host = o.kvTransferHost ?? (req.socket.localAddress ?? "127.0.0.1").replace(/^::ffff:/, "");
    return { ...body, kv_transfer_params: prefillResponse(engine, engineId, host, req.socket.localPort ?? 0, prompt, (b.cache_salt as string | undefined) ?? "") };
  };
  app.post("/v1/kv_blocks", {
    schema: { body: { type: "object", required: ["token_ids"], properties: { token_ids: { type: "array", maxItems: 1 << 20, items: { type: "integer", minimum: 0, maximum: 2 ** 31 } }, cache_salt: { type: "string", maxLength: 1024 } } } },
  }, async (req, reply) => {
    if (!o.kvTransfer) throw new HttpError(404, "KV transfer is off (start the server with --kv-transfer)", "not_found_error");
    const b = req.body as { token_ids: number[]; cache_salt?: string };
    const { body, headers } = await exportBlocks(engine, b.token_ids, b.cache_salt ?? "");
    return reply.headers(headers).send(body);
  });

  app.post("/v1/chat/completions", { schema: { body: CHAT_SCHEMA } }, async (req: FastifyRequest, reply: FastifyReply) => {
    const b = req.body as Body;
    checkModel(b);
    unsupported(b, true);
    const spec = structured(b, true);
    const n = choices(1, b);
    const prompt = chatPrompt(b);
    const maxTokens = ((b.max_completion_tokens ?? b.max_tokens) as number | null | undefined) ?? undefined;
    const ktp = await kvTransfer(b, [prompt]);
    const ac = disconnect(reply);
    const id = `chatcmpl-${randomUUID().replace(/-/g, "")}`;
    const its = start([prompt], n, b, maxTokens, ac.signal, id, spec);
    const model = (b.model as string | undefined) ?? modelName;
    const includeUsage = Boolean((b.stream_options as { include_usage?: boolean } | null | undefined)?.include_usage);
    const h: Head = { id, object: "chat.completion", now: Math.floor(Date.now() / 1000), model, includeUsage, prompts: [prompt], logprobs: b.logprobs === true ? "chat" : null };
    const toolCall = spec?.toolCall ?? false;
    if (b.stream) {
      const first = its.map((_, i) => ({ index: i, delta: { role: "assistant", content: toolCall ? null : "" }, logprobs: null, finish_reason: null }));
      const text = (out: RequestOutput) => (out.text || out.finishReason ? [{ delta: out.text ? { content: out.text } : {} }] : []);
      return streamOut(reply, its, { ...h, object: "chat.completion.chunk" }, first, toolCall ? toolCallDeltas(its.length) : text);
    }
    const body = await collectOut(reply, its, h, ac.signal, (i, text) => {
      const call = toolCall ? parseToolCall(text) : null;
      // a tool call cut short (max_tokens, a stop string) stays text with its own finish reason
      if (!call) return { message: { role: "assistant", content: text, tool_calls: [] } };
      return { message: { role: "assistant", content: null, tool_calls: [{ id: toolCallId(), type: "function", function: call }] }, finish_reason: "tool_calls" };
    });
    return withTransfer(body, ktp, req, prompt, b);
  });

  app.post("/v1/completions", { schema: { body: COMPLETION_SCHEMA } }, async (req: FastifyRequest, reply: FastifyReply) => {
    const b = req.body as Body;
    checkModel(b);
    unsupported(b, false);
    const spec = structured(b, false);
    const p = b.prompt as string | string[] | number[] | number[][];
    const n = choices(typeof p === "string" || typeof p[0] === "number" ? 1 : p.length, b);
    const prompts: number[][] =
      typeof p === "string" ? [tok.encode(p)] : typeof p[0] === "number" ? [p as number[]] : typeof p[0] === "string" ? (p as string[]).map((s) => tok.encode(s)) : (p as number[][]);
    const maxTokens = (b.max_tokens as number | null | undefined) ?? 16;
    const ktp = await kvTransfer(b, prompts);
    const ac = disconnect(reply);
    const id = `cmpl-${randomUUID().replace(/-/g, "")}`;
    const its = start(prompts, n, b, maxTokens, ac.signal, id, spec);
    const model = (b.model as string | undefined) ?? modelName;
    const echo = Boolean(b.echo);
    const promptText = (i: number) => (typeof p === "string" ? p : typeof p[0] === "string" ? (p as string[])[Math.floor(i / n)]! : tok.decode(prompts[Math.floor(i / n)]!));
    const includeUsage = Boolean((b.stream_options as { include_usage?: boolean } | null | undefined)?.include_usage);
    const h: Head = { id, object: "text_completion", now: Math.floor(Date.now() / 1000), model, includeUsage, prompts, logprobs: typeof b.logprobs === "number" ? "completion" : null };
    if (b.stream) {
      const first = echo ? its.map((_, i) => ({ index: i, text: promptText(i), logprobs: null, finish_reason: null })) : [];
      return streamOut(reply, its, h, first, (out) => (out.text || out.finishReason ? [{ text: out.text }] : []));
    }
    const body = await collectOut(reply, its, h, ac.signal, (i, text) => ({ text: (echo ? promptText(i) : "") + text }));
    return withTransfer(body, ktp, req, prompts[0]!, b);
  });

  return {
    app,
    registry,
    async drain() {
      draining = true;
      await engine.close();
      await app.close();
    },
  };
}
