// LLMEngine: the engine of `torchts serve` (vLLM's continuous batching over a paged KV cache, SGLang's
// radix prefix cache and host tier). Each step the scheduler picks the tokens of one forward pass:
// every running request's next token (decode) and chunks of prompts being prefilled, under a token
// budget; requests join and leave the batch at every step. One forwardPaged call computes them all: the
// attention kernels read each sequence's cached keys in place through its block table, and each layer
// writes the new keys into their slots. The logits of the sequences that need a token are sampled per
// request (its own parameters and seeded RNG), then outputs go to the requests' async iterators.
import * as torch from "torchts";
import { PagedKVCache, pagedBatch, type PreTrainedModel, type PreTrainedTokenizer } from "torchts/transformers";
import type { TokenConstraint } from "./constraint.js";
import { HostKVTier } from "./hicache.js";
import { Request } from "./request.js";
import { sampleToken } from "./sampler.js";
import { Scheduler, type KvCacheEvent, type Scheduled } from "./scheduler.js";
export type { KvCacheEvent } from "./scheduler.js";
import { DEFAULT_BLOCK_SIZE } from "./block_pool.js";
import type { TensorParallelHooks } from "./tp/executor.js";

export type FinishReason = "stop" | "length" | "abort";

/** Per-request sampling settings (OpenAI / vLLM names in camelCase). */
export interface SamplingParams {
  /** New tokens at most; default: whatever fits in maxModelLen after the prompt. */
  maxTokens?: number;
  /** Stop tokens (eos, stopTokenIds) are ignored until this many tokens were generated. */
  minTokens?: number;
  /** 0 = greedy (argmax); default 1. */
  temperature?: number;
  topP?: number;
  /** 0 or -1 = off. */
  topK?: number;
  minP?: number;
  /** Seeds this request's own RNG: the same seed gives the same tokens whatever else runs. */
  seed?: number;
  /** Strings that end the output; the stop string itself is not in the output. */
  stop?: string[];
  /** Tokens that end the output (in addition to eos unless ignoreEos). */
  stopTokenIds?: number[];
  ignoreEos?: boolean;
  /** OpenAI penalties over the generated tokens: logit -= frequency * count + presence * (count > 0). */
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** transformers / vLLM repetition penalty over prompt + generated tokens (1 = off). */
  repetitionPenalty?: number;
  /** token id -> bias added to its logit. */
  logitBias?: Record<number, number>;
  /** Skip special tokens when decoding the text (default true). */
  skipSpecialTokens?: boolean;
  /** Constrained decoding (structured output): masks each step's scores, sees each token, ends the request when complete. */
  constraint?: TokenConstraint;
  /**
   * Return the log-probability of each sampled token and of the `logprobs` most likely tokens at its
   * position (0: the sampled token's only), from the model's raw distribution (vLLM's default).
   */
  logprobs?: number;
  /** vLLM's priority: lower values are scheduled first and preempted last (default 0). */
  priority?: number;
  /** Prefix-cache tenant: requests share cached blocks only with the same salt (vLLM's cache_salt). */
  cacheSalt?: string;
}

/** The log-probability of a token, and of the most likely alternatives at its position. */
export interface TokenLogprob {
  tokenId: number;
  logprob: number;
  top: { tokenId: number; logprob: number }[];
}

export interface RequestOutput {
  requestId: string;
  /** Token ids generated in this step (usually one; none in a final abort output). */
  tokenIds: number[];
  /** Text added in this step (text is held back while it may be the start of a stop string or of a UTF-8 character). */
  text: string;
  finishReason: FinishReason | null;
  /** The stop string or stop token id that ended the request, when one did. */
  stopReason: string | number | null;
  promptTokens: number;
  /** Tokens generated so far (the stop token included, as vLLM counts it). */
  completionTokens: number;
  /** Prompt tokens whose KV came from the prefix cache (usage.prompt_tokens_details.cached_tokens). */
  cachedTokens: number;
  /** One entry per token of tokenIds when the request asked for logprobs. */
  logprobs?: TokenLogprob[];
}

export interface EngineStats {
  running: number;
  waiting: number;
  /** Prompt tokens prefilled since start. */
  promptTokens: number;
  /** Tokens generated since start. */
  generationTokens: number;
  steps: number;
  /** Fraction of the KV block pool held by requests (blocks only the prefix cache keeps count as free). */
  kvCacheUsage: number;
  /** Prompt tokens looked up in the prefix cache, and of those found (vllm:prefix_cache_queries/hits_total). */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  /** Requests preempted (their blocks freed, recomputed later). */
  preemptions: number;
  /** Blocks loaded back from the host tier instead of recomputed, and blocks saved to it. */
  hicacheLoadedBlocks: number;
  hicacheSavedBlocks: number;
}

/** What the engine reports as it runs (the server's metrics listen). Times are performance.now() ms. */
export type EngineEvent =
  | { type: "prefill"; requestId: string; promptTokens: number; time: number }
  | { type: "token"; requestId: string; index: number; time: number; previous: number }
  | { type: "finish"; requestId: string; reason: FinishReason; arrival: number; firstToken: number | null; time: number; promptTokens: number; completionTokens: number };

export interface LLMEngineOptions {
  model: PreTrainedModel;
  tokenizer: PreTrainedTokenizer;
  /** Running requests at most (default 16); the others wait. */
  maxNumSeqs?: number;
  /** Prompt + generated tokens at most (default: the config's max_position_embeddings). */
  maxModelLen?: number;
  /** Waiting requests at most before generate() throws EngineQueueFullError (default unlimited). */
  maxWaiting?: number;
  /** Must match the model's device (default: the model's). */
  device?: string;
  /** Tokens per KV block (default 16). */
  blockSize?: number;
  /** KV blocks in the pool; default from kvCacheMemory, else room for maxNumSeqs requests of maxModelLen (at most 1 GiB). */
  numKvBlocks?: number;
  /** Bytes for the KV block pool (vLLM's --kv-cache-memory). */
  kvCacheMemory?: number;
  /** Tokens of one forward pass at most: decodes plus prefill chunks (default 512). */
  maxNumBatchedTokens?: number;
  /** Reuse cached prefixes across requests (default true). */
  enablePrefixCaching?: boolean;
  /** Bytes of host memory for blocks evicted from the pool (HiCache; default 0 = off). */
  hicacheSize?: number;
  /** Publish prefix-cache changes to onKvEvent listeners (vLLM's --kv-events; default false: no hashing). */
  kvEvents?: boolean;
  /** A directory for the host tier's overflow. */
  hicacheDir?: string;
  /** Tensor parallelism (src/tp): the model holds this rank's share of the heads; each step goes to the other ranks first. */
  tensorParallel?: TensorParallelHooks;
}

/** A request the engine cannot run as given (the server answers 400). */
export class EngineInputError extends Error {
  constructor(message: string, readonly param: string | null = null) {
    super(message);
  }
}
/** The waiting queue is full (the server answers 429). */
export class EngineQueueFullError extends Error {}
/** The engine is draining or closed (the server answers 503). */
export class EngineClosedError extends Error {}

/** log_softmax of the raw logits at `tok`, and the `k` most likely tokens (ties: the lower id first). */
function tokenLogprob(raw: Float32Array, tok: number, k: number): TokenLogprob {
  let mx = -Infinity;
  for (let i = 0; i < raw.length; i++) if (raw[i]! > mx) mx = raw[i]!;
  let sum = 0;
  for (let i = 0; i < raw.length; i++) sum += Math.exp(raw[i]! - mx);
  const lse = mx + Math.log(sum);
  const top: { tokenId: number; logprob: number }[] = [];
  for (let i = 0; i < raw.length && k > 0; i++) {
    if (top.length === k && raw[i]! <= top[k - 1]!.logprob) continue;
    let at = top.findIndex((t) => raw[i]! > t.logprob);
    if (at < 0) at = top.length;
    top.splice(at, 0, { tokenId: i, logprob: raw[i]! });
    if (top.length > k) top.pop();
  }
  return { tokenId: tok, logprob: raw[tok]! - lse, top: top.map((t) => ({ tokenId: t.tokenId, logprob: t.logprob - lse })) };
}

let nextId = 0;
let nextSeq = 0;
const DEFAULT_POOL_BYTES = 1 << 30;

export class LLMEngine {
  readonly model: PreTrainedModel;
  readonly tokenizer: PreTrainedTokenizer;
  readonly maxNumSeqs: number;
  readonly maxModelLen: number;
  readonly maxWaiting: number;
  readonly maxNumBatchedTokens: number;
  readonly device: string;
  readonly blockSize: number;
  readonly numKvBlocks: number;
  readonly enablePrefixCaching: boolean;
  readonly kvCache: PagedKVCache;
  readonly hostTier: HostKVTier | null;
  private readonly scheduler: Scheduler;
  private readonly tp: TensorParallelHooks | null;
  private readonly byId = new Map<string, Request>();
  /** Requests in the step being computed: an abort finishes them right after it. */
  private readonly inStep = new Set<Request>();
  private loop: Promise<void> | null = null;
  private closed = false;
  private readonly listeners: ((e: EngineEvent) => void)[] = [];
  private readonly kvListeners: ((e: KvCacheEvent) => void)[] = [];
  private readonly eos: number[];
  private totals = { promptTokens: 0, generationTokens: 0, steps: 0 };
  private idleWaiters: (() => void)[] = [];
  /** Host-tier saves whose block contents are still being read. */
  private pendingSaves: Promise<void>[] = [];
  /** The last error a forward pass threw (the requests of that step ended with 'abort'). */
  lastError: Error | null = null;

  constructor(o: LLMEngineOptions) {
    this.model = o.model;
    this.tokenizer = o.tokenizer;
    this.maxNumSeqs = o.maxNumSeqs ?? 16;
    this.maxModelLen = o.maxModelLen ?? o.model.config.maxPositionEmbeddings;
    this.maxWaiting = o.maxWaiting ?? Infinity;
    this.maxNumBatchedTokens = o.maxNumBatchedTokens ?? 512;
    this.device = o.device ?? o.model.device;
    this.blockSize = o.blockSize ?? DEFAULT_BLOCK_SIZE;
    this.enablePrefixCaching = o.enablePrefixCaching ?? true;
    const int = (v: number, name: string, min: number) => {
      if (!Number.isSafeInteger(v) || v < min) throw new RangeError(`LLMEngine: ${name} must be an integer >= ${min}, got ${v}`);
    };
    int(this.maxNumSeqs, "maxNumSeqs", 1);
    int(this.maxModelLen, "maxModelLen", 2);
    int(this.maxNumBatchedTokens, "maxNumBatchedTokens", 1);
    int(this.blockSize, "blockSize", 1);
    if (this.device !== o.model.device) throw new RangeError(`LLMEngine: device '${this.device}' but the model is on '${o.model.device}'`);
    const { layers, kvHeads, headDim } = o.model.cacheShape();
    this.tp = o.tensorParallel ?? null;
    if (this.tp && (o.hicacheSize ?? 0) > 0) throw new RangeError("LLMEngine: the host KV tier (hicacheSize) is not supported with tensor parallelism");
    // under tensor parallelism each rank caches its own kv heads
    const shape = { layers, kvHeads: kvHeads / (this.tp?.size ?? 1), headDim, blockSize: this.blockSize, dtype: o.model.dtype };
    const perBlock = PagedKVCache.bytesPerBlock(shape);
    const perSeq = Math.ceil(this.maxModelLen / this.blockSize);
    let blocks = o.numKvBlocks;
    if (blocks === undefined && o.kvCacheMemory !== undefined) {
      int(o.kvCacheMemory, "kvCacheMemory", 1);
      blocks = Math.floor(o.kvCacheMemory / perBlock);
      if (blocks < 1) throw new RangeError(`LLMEngine: kvCacheMemory ${o.kvCacheMemory} bytes is less than one KV block (${perBlock} bytes)`);
    }
    blocks ??= Math.max(perSeq, Math.min(this.maxNumSeqs * perSeq, Math.floor(DEFAULT_POOL_BYTES / perBlock)));
    int(blocks, "numKvBlocks", 1);
    this.numKvBlocks = blocks;
    const hic = o.hicacheSize ?? 0;
    if (hic !== 0) int(hic, "hicacheSize", 1);
    this.hostTier = hic > 0 ? new HostKVTier({ capacityBytes: hic, dir: o.hicacheDir }) : null;
    this.kvCache = new PagedKVCache({ ...shape, numBlocks: blocks, device: this.device });
    this.scheduler = new Scheduler({
      numBlocks: blocks,
      blockSize: this.blockSize,
      maxNumSeqs: this.maxNumSeqs,
      maxNumBatchedTokens: this.maxNumBatchedTokens,
      enablePrefixCaching: this.enablePrefixCaching,
      hostTier: this.hostTier,
      saveBlock: (b, key) => this.saveBlock(b, key),
      writeBlocks: (ids, data) => this.writeBlockData(ids, data),
      copyBlocks: (copies) => {
        const [src, dst] = [copies.map((c) => c.src), copies.map((c) => c.dst)];
        this.tp?.copyBlocks(src, dst);
        this.kvCache.copyBlocks(src, dst);
      },
      onKvEvent: o.kvEvents ? (e) => this.emitKv(e) : undefined,
    });
    const tokEos = o.tokenizer.eosTokenId;
    this.eos = [...new Set([...o.model.config.eosTokenId, ...(tokEos !== null ? [tokEos] : [])])];
  }

  get vocabSize(): number {
    return this.model.config.vocabSize;
  }

  /** The pool's shape (vllm:cache_config_info). */
  get cacheConfig(): { blockSize: number; numBlocks: number; enablePrefixCaching: boolean; maxNumBatchedTokens: number } {
    return { blockSize: this.blockSize, numBlocks: this.numKvBlocks, enablePrefixCaching: this.enablePrefixCaching, maxNumBatchedTokens: this.maxNumBatchedTokens };
  }

  /** Listen to the prefix cache's BlockStored / BlockRemoved events (needs kvEvents: true); returns the remover. */
  onKvEvent(fn: (e: KvCacheEvent) => void): () => void {
    this.kvListeners.push(fn);
    return () => {
      const i = this.kvListeners.indexOf(fn);
      if (i >= 0) this.kvListeners.splice(i, 1);
    };
  }

  /** The shape of one KV block's data ([layers, 2, 1, blockSize, kvHeads, headDim] float32) for a transfer. */
  get kvLayout(): { layers: number; kvHeads: number; headDim: number; blockSize: number; dtype: string } {
    const { layers, kvHeads, headDim } = this.model.cacheShape();
    return { layers, kvHeads, headDim, blockSize: this.blockSize, dtype: "float32" };
  }

  /**
   * The KV of the cached whole-block prefix of `tokens` (under `salt`), one float32 array per block in
   * kvLayout's order: what a decode replica pulls from this (prefill) replica.
   */
  async exportPrefix(tokens: readonly number[], salt = ""): Promise<Float32Array[]> {
    if (this.tp) throw new EngineInputError("KV transfer is not supported with tensor parallelism");
    const m = this.scheduler.radix.match(tokens, salt, { countStats: false });
    if (!m.blocks.length) return [];
    const t = this.kvCache.readBlocks(m.blocks);
    let d: Float32Array;
    try {
      d = Float32Array.from((await t.data()) as ArrayLike<number>);
    } finally {
      t.dispose();
    }
    const n = m.blocks.length;
    const { layers, kvHeads, headDim } = this.model.cacheShape();
    const row = this.blockSize * kvHeads * headDim;
    return Array.from({ length: n }, (_, j) => {
      const out = new Float32Array(layers * 2 * row);
      for (let l = 0; l < layers; l++)
        for (let kv = 0; kv < 2; kv++) out.set(d.subarray(((l * 2 + kv) * n + j) * row, ((l * 2 + kv) * n + j + 1) * row), (l * 2 + kv) * row);
      return out;
    });
  }

  /**
   * Put blocks pulled from another replica (block i = tokens [i * blockSize, (i + 1) * blockSize), in
   * exportPrefix's layout) into this engine's prefix cache, skipping what it already holds; returns the
   * blocks taken. A request for `tokens` submitted next reuses them.
   */
  importPrefix(tokens: readonly number[], blocks: readonly Float32Array[], salt = ""): number {
    if (this.tp) throw new EngineInputError("KV transfer is not supported with tensor parallelism");
    const { layers, kvHeads, headDim } = this.model.cacheShape();
    const size = layers * 2 * this.blockSize * kvHeads * headDim;
    const n = Math.min(blocks.length, Math.floor(tokens.length / this.blockSize));
    const first = this.scheduler.cachedBlocks(tokens, salt);
    const data = blocks.slice(first, n);
    if (data.some((d) => d.length !== size)) return 0;
    return this.scheduler.importBlocks(tokens, salt, first, data);
  }

  /** BlockStored events for everything cached now (a new subscriber's starting point). */
  kvSnapshot(emit: (e: KvCacheEvent) => void): void {
    this.scheduler.snapshot(emit);
  }

  private emitKv(e: KvCacheEvent): void {
    for (const l of this.kvListeners) {
      try {
        l(e);
      } catch {
        /* a listener's error never stops the engine */
      }
    }
  }

  /** Listen to prefill / token / finish events; returns a function that removes the listener. */
  onEvent(fn: (e: EngineEvent) => void): () => void {
    this.listeners.push(fn);
    return () => {
      const i = this.listeners.indexOf(fn);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  get stats(): EngineStats {
    const s = this.scheduler;
    const r = s.radix.stats;
    const h = this.hostTier?.stats;
    return {
      running: s.running.length,
      waiting: s.waiting.length,
      ...this.totals,
      kvCacheUsage: s.usage,
      prefixCacheQueries: r.queries,
      prefixCacheHits: r.hits,
      preemptions: s.preemptions,
      hicacheLoadedBlocks: h?.loadedBlocks ?? 0,
      hicacheSavedBlocks: h?.savedBlocks ?? 0,
    };
  }

  /** The block pool and prefix cache (tests check their invariants). */
  get blockManager(): Pick<Scheduler, "pool" | "radix"> {
    return this.scheduler;
  }

  /** Checks a request without queueing it; throws EngineInputError. Returns the max tokens it will get. */
  validate(promptIds: number[], params: SamplingParams = {}): number {
    if (!Array.isArray(promptIds) || promptIds.length === 0) throw new EngineInputError("the prompt must have at least one token", "prompt");
    const V = this.vocabSize;
    for (const t of promptIds)
      if (!Number.isInteger(t) || t < 0 || t >= V) throw new EngineInputError(`token id ${t} is outside the vocabulary [0, ${V})`, "prompt");
    const room = this.maxModelLen - promptIds.length;
    if (room < 1) throw new EngineInputError(`the prompt has ${promptIds.length} tokens; this model's context is ${this.maxModelLen} tokens, which leaves no room for output`, "prompt");
    const mt = params.maxTokens ?? room;
    if (!Number.isInteger(mt) || mt < 1) throw new EngineInputError(`max_tokens must be a positive integer, got ${mt}`, "max_tokens");
    if (promptIds.length + mt > this.maxModelLen)
      throw new EngineInputError(
        `this model's maximum context length is ${this.maxModelLen} tokens; the prompt has ${promptIds.length} tokens and max_tokens is ${mt} (${promptIds.length + mt} in all)`,
        "max_tokens",
      );
    const num = (v: number | undefined, name: string, lo: number, hi: number) => {
      if (v !== undefined && !(typeof v === "number" && Number.isFinite(v) && v >= lo && v <= hi)) throw new EngineInputError(`${name} must be a number in [${lo}, ${hi}], got ${v}`, name);
    };
    num(params.temperature, "temperature", 0, 1e4);
    num(params.topP, "top_p", 1e-9, 1);
    num(params.minP, "min_p", 0, 1);
    num(params.presencePenalty, "presence_penalty", -2, 2);
    num(params.frequencyPenalty, "frequency_penalty", -2, 2);
    num(params.repetitionPenalty, "repetition_penalty", 1e-6, 1e4);
    if (params.topK !== undefined && !(Number.isInteger(params.topK) && params.topK >= -1)) throw new EngineInputError(`top_k must be an integer >= -1, got ${params.topK}`, "top_k");
    if (params.minTokens !== undefined && !(Number.isInteger(params.minTokens) && params.minTokens >= 0 && params.minTokens <= mt))
      throw new EngineInputError(`min_tokens must be an integer in [0, max_tokens], got ${params.minTokens}`, "min_tokens");
    if (params.seed !== undefined && !Number.isFinite(params.seed)) throw new EngineInputError("seed must be a finite number", "seed");
    if (params.priority !== undefined && !Number.isSafeInteger(params.priority)) throw new EngineInputError(`priority must be an integer, got ${params.priority}`, "priority");
    if (params.cacheSalt !== undefined && typeof params.cacheSalt !== "string") throw new EngineInputError("cache_salt must be a string", "cache_salt");
    if (params.logprobs !== undefined && !(Number.isInteger(params.logprobs) && params.logprobs >= 0 && params.logprobs <= 20))
      throw new EngineInputError(`logprobs must be an integer in [0, 20], got ${params.logprobs}`, "logprobs");
    if (params.constraint && mt < 1) throw new EngineInputError("max_tokens must be positive for a constrained request", "max_tokens");
    for (const t of params.stopTokenIds ?? []) if (!Number.isInteger(t) || t < 0 || t >= V) throw new EngineInputError(`stop_token_ids: ${t} is outside the vocabulary`, "stop_token_ids");
    for (const [k, v] of Object.entries(params.logitBias ?? {})) {
      // the key must be written as a token id: Number() would also read "", " 3", "1e1" and "0x1"
      if (!/^(0|[1-9][0-9]*)$/.test(k) || Number(k) >= V) throw new EngineInputError(`logit_bias: '${k}' is not a token id of this vocabulary`, "logit_bias");
      if (typeof v !== "number" || !Number.isFinite(v) || v < -100 || v > 100) throw new EngineInputError(`logit_bias: the bias of ${k} must be a number in [-100, 100]`, "logit_bias");
    }
    for (const s of params.stop ?? []) if (typeof s !== "string" || s.length === 0) throw new EngineInputError("stop strings must be non-empty strings", "stop");
    return mt;
  }

  /**
   * Queue a request and iterate over its outputs. Throws (synchronously, before the first output)
   * EngineInputError, EngineQueueFullError or EngineClosedError. Leaving the loop early (break, or an
   * error in the consumer) aborts the request, as does `signal` or `abort(requestId)`.
   */
  generate(promptIds: number[], params: SamplingParams = {}, opts: { requestId?: string; signal?: AbortSignal } = {}): AsyncIterableIterator<RequestOutput> {
    if (this.closed) throw new EngineClosedError("the engine is shutting down");
    const maxTokens = this.validate(promptIds, params);
    const id = opts.requestId ?? `req-${nextId++}`;
    if (this.byId.has(id)) throw new EngineInputError(`request id '${id}' is already in use`, "request_id");
    const { waiting, running } = this.scheduler;
    if (waiting.length >= this.maxWaiting && running.length >= this.maxNumSeqs) throw new EngineQueueFullError(`the waiting queue is full (${this.maxWaiting} requests)`);
    if (opts.signal?.aborted) throw new EngineInputError("the request was aborted before it started");
    const stopIds = new Set<number>([...(params.ignoreEos ? [] : this.eos), ...(params.stopTokenIds ?? [])]);
    const req = new Request(id, [...promptIds], params, performance.now(), maxTokens, stopIds, nextSeq++);
    this.byId.set(id, req);
    waiting.push(req);
    const onAbort = () => this.abort(id);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    this.kick();
    const cleanup = () => opts.signal?.removeEventListener("abort", onAbort);
    const it = this.iterate(req, cleanup);
    // an async generator's return() before its first next() skips the generator's finally: abort here
    const close = it.return!.bind(it);
    it.return = (value?: unknown) => {
      cleanup();
      if (!req.finished) this.abort(id);
      return close(value);
    };
    return it;
  }

  private async *iterate(req: Request, cleanup: () => void): AsyncIterableIterator<RequestOutput> {
    try {
      for (;;) {
        const o = req.outputs.shift();
        if (o) {
          yield o;
          if (o.finishReason) return;
          continue;
        }
        await new Promise<void>((resolve) => (req.waiter = resolve));
      }
    } finally {
      cleanup();
      if (!req.finished) this.abort(req.id);
    }
  }

  /** Abort a waiting or running request: its iterator ends with finishReason 'abort' within one step. */
  abort(requestId: string): boolean {
    const req = this.byId.get(requestId);
    if (!req || req.finished) return false;
    req.aborted = true;
    // a request in the middle of a step finishes right after that step
    if (!this.inStep.has(req)) this.finish(req, "abort", null);
    return true;
  }

  /** Resolves once nothing is running or waiting. */
  idle(): Promise<void> {
    if (!this.scheduler.running.length && !this.scheduler.waiting.length) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Stop accepting requests; with `abortAll`, abort the running and waiting ones; resolves when idle. */
  async close(opts: { abortAll?: boolean } = {}): Promise<void> {
    this.closed = true;
    if (opts.abortAll) for (const r of [...this.scheduler.waiting, ...this.scheduler.running]) this.abort(r.id);
    await this.idle();
    await this.loop;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private emit(e: EngineEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        /* a listener's error never stops the engine */
      }
    }
  }

  private kick(): void {
    this.loop ??= this.run().finally(() => (this.loop = null));
  }

  private async run(): Promise<void> {
    for (;;) {
      const sched = this.scheduler;
      if (!sched.running.length && !sched.waiting.length) {
        await Promise.all(this.pendingSaves.splice(0));
        for (const r of this.idleWaiters.splice(0)) r();
        return;
      }
      const batch = sched.schedule();
      if (!batch.length) {
        // nothing fits (a request larger than the whole pool): it can never run
        const stuck = sched.waiting[0];
        if (stuck) this.finish(stuck, "abort", null, new Error(`request ${stuck.id} needs more KV blocks than the pool has (${this.numKvBlocks})`));
        continue;
      }
      try {
        await this.step(batch);
      } catch (e) {
        // a failed forward ends the requests of that step only
        for (const s of batch) if (!s.req.finished) this.finish(s.req, "abort", null, e as Error);
      } finally {
        this.inStep.clear();
      }
      for (const s of batch) if (s.req.aborted && !s.req.finished) this.finish(s.req, "abort", null);
      this.totals.steps++;
      if (this.pendingSaves.length > 8) await Promise.all(this.pendingSaves.splice(0));
      // let the server accept requests and see disconnects between steps
      await new Promise<void>((r) => setImmediate(r));
    }
  }

  private async step(batch: Scheduled[]): Promise<void> {
    const now = performance.now();
    for (const s of batch) {
      this.inStep.add(s.req);
      if (s.start === s.req.cachedTokens && s.req.preemptions === 0 && s.start < s.req.prompt.length) {
        this.totals.promptTokens += s.req.prompt.length;
        this.emit({ type: "prefill", requestId: s.req.id, promptTokens: s.req.prompt.length, time: now });
      }
    }
    const seqs = batch.map((s) => ({ tokens: s.req.tokens.slice(s.start, s.start + s.count), cached: s.start, blocks: s.req.blocks!.blocks, wantLogits: s.sample }));
    const logits = torch.scope(() =>
      torch.noGrad(() => {
        const b = pagedBatch(seqs, this.blockSize, this.device);
        this.tp?.step(seqs);
        return this.model.forwardPaged(b, this.kvCache).to("float32");
      }),
    );
    let host: Float32Array;
    try {
      host = (await logits.data()) as Float32Array;
    } finally {
      logits.dispose();
    }
    const V = this.vocabSize;
    let row = 0;
    for (const s of batch) {
      this.scheduler.computed(s);
      if (!s.sample) continue;
      const raw = host.subarray(row * V, (row + 1) * V);
      const scores = Float64Array.from(raw);
      row++;
      const req = s.req;
      if (req.aborted || req.finished) continue;
      const tok = sampleToken(
        { params: req.params, prompt: req.prompt, generated: req.generated, counts: req.counts, stopIds: req.stopIds, random: req.random, remaining: req.maxTokens - req.generated.length },
        scores,
      );
      this.accept(req, tok, req.params.logprobs === undefined ? undefined : tokenLogprob(raw, tok, req.params.logprobs));
    }
  }

  /** The radix tree evicts block b: keep a copy of its KV (all layers) in the host tier under `key`. */
  private saveBlock(b: number, key: string): void {
    const t = this.kvCache.readBlocks([b]); // a copy: the pool block may be reused at once
    this.pendingSaves.push(
      t.data().then(
        (d) => {
          this.hostTier!.save(key, Float32Array.from(d as ArrayLike<number>));
          t.dispose();
        },
        () => t.dispose(),
      ),
    );
  }

  /** Write blocks' data (host-tier layout, [layers, 2, 1, blockSize, kvHeads, headDim] each) into pool blocks `ids`, in one write per layer. */
  private writeBlockData(ids: number[], data: readonly Float32Array[]): void {
    const { layers, kvHeads, headDim } = this.model.cacheShape();
    const row = this.blockSize * kvHeads * headDim;
    const n = ids.length;
    const all = new Float32Array(layers * 2 * n * row);
    data.forEach((d, j) => {
      for (let lk = 0; lk < layers * 2; lk++) all.set(d.subarray(lk * row, (lk + 1) * row), (lk * n + j) * row);
    });
    torch.scope(() => this.kvCache.writeBlocks(ids, torch.tensor(all, { device: this.device }).reshape(layers, 2, n, this.blockSize, kvHeads, headDim)));
  }

  private accept(req: Request, tok: number, lp?: TokenLogprob): void {
    const now = performance.now();
    req.generated.push(tok);
    req.counts.set(tok, (req.counts.get(tok) ?? 0) + 1);
    this.totals.generationTokens++;
    this.emit({ type: "token", requestId: req.id, index: req.generated.length - 1, time: now, previous: req.firstToken === null ? req.arrival : req.lastToken });
    req.firstToken ??= now;
    req.lastToken = now;
    const n = req.generated.length;
    const isStop = req.stopIds.has(tok);
    const textIds = isStop ? req.generated.slice(0, -1) : req.generated;
    // no clean-up of tokenization spaces: it would rewrite text already streamed (as vLLM's detokenizer)
    const text = this.tokenizer.decode(textIds, { skipSpecialTokens: req.params.skipSpecialTokens ?? true, cleanUpTokenizationSpaces: false });
    let finish: FinishReason | null = null;
    let stopReason: string | number | null = null;
    let final = text;
    const stops = req.params.stop ?? [];
    if (stops.length) {
      let at = -1;
      for (const s of stops) {
        const i = text.indexOf(s, Math.max(0, req.emitted - s.length));
        if (i >= 0 && (at < 0 || i < at)) {
          at = i;
          stopReason = s;
        }
      }
      if (at >= 0) {
        final = text.slice(0, at);
        finish = "stop";
      }
    }
    if (!finish && isStop) {
      finish = "stop";
      // as vLLM: the id for a stop_token_ids hit, null for eos
      stopReason = req.params.stopTokenIds?.includes(tok) ? tok : null;
    }
    // a constrained output ends once it is whole (the constraint never lets it run past max_tokens)
    if (!finish && req.params.constraint) {
      req.params.constraint.accept(tok);
      if (req.params.constraint.isComplete()) finish = "stop";
    }
    if (!finish && n >= req.maxTokens) finish = "length";
    req.text = final;
    let upTo = final.length;
    if (!finish) {
      // hold back a partial UTF-8 character and anything that may begin a stop string
      while (upTo > req.emitted && final.charCodeAt(upTo - 1) === 0xfffd) upTo--;
      const hold = stops.reduce((m, s) => Math.max(m, s.length - 1), 0);
      upTo = Math.max(req.emitted, Math.min(upTo, final.length - hold));
    }
    const delta = final.slice(req.emitted, upTo);
    req.emitted = Math.max(req.emitted, upTo);
    if (finish) this.finish(req, finish, stopReason, undefined, [tok], delta, lp);
    else {
      req.tokens.push(tok);
      req.push({ requestId: req.id, tokenIds: [tok], text: delta, finishReason: null, stopReason: null, promptTokens: req.prompt.length, completionTokens: n, cachedTokens: req.cachedTokens ?? 0, ...(lp ? { logprobs: [lp] } : {}) });
    }
  }

  private finish(req: Request, reason: FinishReason, stopReason: string | number | null, error?: Error, tokenIds: number[] = [], text = "", lp?: TokenLogprob): void {
    if (req.finished) return;
    req.finished = reason;
    if (error) this.lastError = error;
    this.scheduler.finish(req);
    this.byId.delete(req.id);
    req.push({ requestId: req.id, tokenIds, text, finishReason: reason, stopReason, promptTokens: req.prompt.length, completionTokens: req.generated.length, cachedTokens: req.cachedTokens ?? 0, ...(lp ? { logprobs: [lp] } : {}) });
    this.emit({
      type: "finish",
      requestId: req.id,
      reason,
      arrival: req.arrival,
      firstToken: req.firstToken,
      time: performance.now(),
      promptTokens: req.prompt.length,
      completionTokens: req.generated.length,
    });
    if (!this.scheduler.running.length && !this.scheduler.waiting.length && !this.loop) for (const f of this.idleWaiters.splice(0)) f();
  }
}
