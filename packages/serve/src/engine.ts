// LLMEngine: the first engine of `torchts serve`. It schedules at iteration level: every engine step
// advances one running request by one token (its prefill, or one decode step), round-robin over the
// running requests, so requests progress concurrently and a new one starts at the next step instead of
// waiting for the others to finish. Each request owns a torchts KVCache (batch 1) and runs its own forward;
// batching several requests into one forward pass and the paged KV read in place come in a later part.
import * as torch from "torchts";
import { chooseToken, KVCache, type GenerateOptions, type PreTrainedModel, type PreTrainedTokenizer } from "torchts/transformers";

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
}

export interface EngineStats {
  running: number;
  waiting: number;
  /** Prompt tokens prefilled since start. */
  promptTokens: number;
  /** Tokens generated since start. */
  generationTokens: number;
  steps: number;
  /** KV positions reserved by running requests / the most that maxNumSeqs requests of maxModelLen can reserve. */
  kvCacheUsage: number;
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

// Each request owns a seeded RNG, which it passes to torchts's chooseToken. This is torchts's mulberry32
// (packages/torchts/src/utils/prng.ts), copied: torchts does not export it, and its generate() seeds
// one RNG per call, not per request. The same algorithm keeps a seed's draws those of generate({ seed }).
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Waiter {
  resolve: () => void;
}

class Request {
  readonly outputs: RequestOutput[] = [];
  waiter: Waiter | null = null;
  readonly generated: number[] = [];
  readonly counts = new Map<number, number>();
  cache: KVCache | null = null;
  mask: number[] = [];
  finished: FinishReason | null = null;
  aborted = false;
  text = "";
  emitted = 0;
  firstToken: number | null = null;
  lastToken = 0;
  readonly random: () => number;
  readonly maxTokens: number;
  readonly stopIds: Set<number>;

  constructor(
    readonly id: string,
    readonly prompt: number[],
    readonly params: SamplingParams,
    readonly arrival: number,
    maxTokens: number,
    stopIds: Set<number>,
  ) {
    this.maxTokens = maxTokens;
    this.stopIds = stopIds;
    this.random = seededRandom(params.seed ?? Math.floor(Math.random() * 2 ** 32));
  }

  push(o: RequestOutput): void {
    this.outputs.push(o);
    const w = this.waiter;
    this.waiter = null;
    w?.resolve();
  }
}

let nextId = 0;

export class LLMEngine {
  readonly model: PreTrainedModel;
  readonly tokenizer: PreTrainedTokenizer;
  readonly maxNumSeqs: number;
  readonly maxModelLen: number;
  readonly maxWaiting: number;
  readonly device: string;
  private readonly waiting: Request[] = [];
  private readonly running: Request[] = [];
  private readonly byId = new Map<string, Request>();
  private cursor = 0;
  private current: Request | null = null;
  private loop: Promise<void> | null = null;
  private closed = false;
  private readonly listeners: ((e: EngineEvent) => void)[] = [];
  private readonly eos: number[];
  private totals = { promptTokens: 0, generationTokens: 0, steps: 0 };
  private idleWaiters: (() => void)[] = [];
  /** The last error a forward pass threw (that request ended with 'abort'). */
  lastError: Error | null = null;

  constructor(o: LLMEngineOptions) {
    this.model = o.model;
    this.tokenizer = o.tokenizer;
    this.maxNumSeqs = o.maxNumSeqs ?? 16;
    this.maxModelLen = o.maxModelLen ?? o.model.config.maxPositionEmbeddings;
    this.maxWaiting = o.maxWaiting ?? Infinity;
    this.device = o.device ?? o.model.device;
    if (!Number.isInteger(this.maxNumSeqs) || this.maxNumSeqs < 1) throw new RangeError(`LLMEngine: maxNumSeqs must be a positive integer, got ${o.maxNumSeqs}`);
    if (!Number.isInteger(this.maxModelLen) || this.maxModelLen < 2) throw new RangeError(`LLMEngine: maxModelLen must be an integer >= 2, got ${o.maxModelLen}`);
    if (this.device !== o.model.device) throw new RangeError(`LLMEngine: device '${this.device}' but the model is on '${o.model.device}'`);
    const tokEos = o.tokenizer.eosTokenId;
    this.eos = [...new Set([...o.model.config.eosTokenId, ...(tokEos !== null ? [tokEos] : [])])];
  }

  get vocabSize(): number {
    return this.model.config.vocabSize;
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
    const reserved = this.running.reduce((s, r) => s + (r.cache ? r.prompt.length + r.maxTokens : 0), 0);
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      ...this.totals,
      kvCacheUsage: reserved / (this.maxNumSeqs * this.maxModelLen),
    };
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
    if (this.waiting.length >= this.maxWaiting && this.running.length >= this.maxNumSeqs) throw new EngineQueueFullError(`the waiting queue is full (${this.maxWaiting} requests)`);
    if (opts.signal?.aborted) throw new EngineInputError("the request was aborted before it started");
    const stopIds = new Set<number>([...(params.ignoreEos ? [] : this.eos), ...(params.stopTokenIds ?? [])]);
    const req = new Request(id, [...promptIds], params, performance.now(), maxTokens, stopIds);
    this.byId.set(id, req);
    this.waiting.push(req);
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
        await new Promise<void>((resolve) => (req.waiter = { resolve }));
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
    const w = this.waiting.indexOf(req);
    if (w >= 0) this.waiting.splice(w, 1);
    // a request in the middle of its step finishes right after that step
    if (this.current !== req) this.finish(req, "abort", null);
    return true;
  }

  /** Resolves once nothing is running or waiting. */
  idle(): Promise<void> {
    if (!this.running.length && !this.waiting.length) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Stop accepting requests; with `abortAll`, abort the running and waiting ones; resolves when idle. */
  async close(opts: { abortAll?: boolean } = {}): Promise<void> {
    this.closed = true;
    if (opts.abortAll) for (const r of [...this.waiting, ...this.running]) this.abort(r.id);
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
      while (this.running.length < this.maxNumSeqs && this.waiting.length) this.running.push(this.waiting.shift()!);
      if (!this.running.length) {
        for (const r of this.idleWaiters.splice(0)) r();
        return;
      }
      const i = this.cursor % this.running.length;
      const req = this.running[i]!;
      this.current = req;
      try {
        await this.step(req);
      } catch (e) {
        // a failed forward ends that request only
        if (!req.finished) this.finish(req, "abort", null, e as Error);
      } finally {
        this.current = null;
      }
      if (req.aborted && !req.finished) this.finish(req, "abort", null);
      // round-robin: the next request after this one (a finished one's successor slid into its place)
      const j = this.running.indexOf(req);
      this.cursor = j >= 0 ? j + 1 : i;
      this.totals.steps++;
      // let the server accept requests and see disconnects between steps
      await new Promise<void>((r) => setImmediate(r));
    }
  }

  private logits(req: Request, ids: number[]): torch.Tensor {
    const x = torch.tensor([ids], { dtype: "int64", device: this.device });
    const mask = [req.mask];
    const cache = req.cache!;
    return torch.scope(() =>
      torch.noGrad(() => this.model.forward(x, { attentionMask: mask, cache, logitsToKeep: 1 }).logits.select(1, -1).to("float32")),
    );
  }

  private async step(req: Request): Promise<void> {
    let input: number[];
    if (!req.cache) {
      const { layers, kvHeads, headDim } = this.model.cacheShape();
      req.cache = new KVCache({ batchSize: 1, layers, kvHeads, headDim, maxLength: req.prompt.length + req.maxTokens, dtype: this.model.dtype, device: this.device });
      req.mask = new Array<number>(req.prompt.length).fill(1);
      input = req.prompt;
      this.totals.promptTokens += req.prompt.length;
      this.emit({ type: "prefill", requestId: req.id, promptTokens: req.prompt.length, time: performance.now() });
    } else {
      req.mask.push(1);
      input = [req.generated[req.generated.length - 1]!];
    }
    const last = this.logits(req, input);
    let host: ArrayLike<number>;
    try {
      host = (await last.data()) as ArrayLike<number>;
    } finally {
      last.dispose();
    }
    if (req.aborted) return;
    const tok = this.sample(req, Float64Array.from(host));
    this.accept(req, tok);
  }

  private sample(req: Request, scores: Float64Array): number {
    const p = req.params;
    const V = scores.length;
    for (const [k, v] of Object.entries(p.logitBias ?? {})) {
      const t = Number(k);
      if (t < V) scores[t] = scores[t]! + v;
    }
    const fp = p.frequencyPenalty ?? 0;
    const pp = p.presencePenalty ?? 0;
    if (fp !== 0 || pp !== 0) for (const [t, c] of req.counts) scores[t] = scores[t]! - fp * c - pp;
    if (p.minTokens && req.generated.length < p.minTokens) for (const t of req.stopIds) scores[t] = -Infinity;
    const temp = p.temperature ?? 1;
    const o: GenerateOptions = {
      doSample: temp > 0,
      temperature: temp,
      topK: p.topK !== undefined && p.topK > 0 ? p.topK : undefined,
      topP: p.topP,
      minP: p.minP,
      repetitionPenalty: p.repetitionPenalty,
    };
    const history = (p.repetitionPenalty ?? 1) !== 1 ? [...req.prompt, ...req.generated] : [];
    return chooseToken(scores, history, o, req.random);
  }

  private accept(req: Request, tok: number): void {
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
    const text = this.tokenizer.decode(textIds, { skipSpecialTokens: req.params.skipSpecialTokens ?? true });
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
    if (finish) this.finish(req, finish, stopReason, undefined, [tok], delta);
    else req.push({ requestId: req.id, tokenIds: [tok], text: delta, finishReason: null, stopReason: null, promptTokens: req.prompt.length, completionTokens: n });
  }

  private finish(req: Request, reason: FinishReason, stopReason: string | number | null, error?: Error, tokenIds: number[] = [], text = ""): void {
    if (req.finished) return;
    req.finished = reason;
    if (error) this.lastError = error;
    const r = this.running.indexOf(req);
    if (r >= 0) {
      this.running.splice(r, 1);
    }
    const w = this.waiting.indexOf(req);
    if (w >= 0) this.waiting.splice(w, 1);
    req.cache?.dispose();
    req.cache = null;
    this.byId.delete(req.id);
    req.push({ requestId: req.id, tokenIds, text, finishReason: reason, stopReason, promptTokens: req.prompt.length, completionTokens: req.generated.length });
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
    if (!this.running.length && !this.waiting.length) for (const f of this.idleWaiters.splice(0)) f();
  }
}
