// model.generate: prefill the (left-padded) prompts into a block KV cache, then decode one token
// per step. Token choice runs on the host over the last position's logits, in transformers'
// processor order: repetition penalty, then (sampling) temperature, top-k, top-p, min-p.
import * as torch from "../index.js";
import type { Tensor } from "../index.js";
import { KVCache, type KVCacheOptions } from "./kv_cache.js";
import type { PreTrainedModel } from "./modeling_utils.js";
import { mulberry32 } from "../utils/prng.js";

export interface StreamEvent {
  /** row of the batch */
  batchIndex: number;
  token: number;
  /** 0-based index of the new token */
  step: number;
}

export interface GenerateOptions {
  /** New tokens per row (default 20). */
  maxNewTokens?: number;
  /** Sample instead of argmax (default false, i.e. greedy). */
  doSample?: boolean;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  /** Seed of the sampler's RNG (default 0): the same seed gives the same tokens. */
  seed?: number;
  /** Tokens that end a row (included in its output). Default: the config's eos_token_id. Pass [] to never stop. */
  stopTokenIds?: number[];
  /** Strings that end a row once the decoded new text contains them (needs `tokenizer`). */
  stopStrings?: string[];
  tokenizer?: { decode(ids: number[], opts?: { skipSpecialTokens?: boolean }): string };
  /** Pad id for left padding (default: pad_token_id, else the first eos id, else 0). */
  padTokenId?: number;
  /** Called for each new token of each row, in order. */
  streamer?: (e: StreamEvent) => void;
  /** KV cache block size (positions per block). */
  blockSize?: number;
  /**
   * Run prefill and decode as two torch.compile'd step functions: each step is one fused graph,
   * and after two or three recorded calls the decode steps inside a KV block replay the recorded
   * kernels (no op library or dispatch per op). The model keeps the compiled steps and the KV
   * cache for the next compiled generate() with the same cache shape.
   */
  compile?: boolean;
}

export interface GenerateOutput {
  /** prompt + new tokens of each row (no padding) */
  sequences: number[][];
  /** new tokens of each row (a stop token, when hit, is the last) */
  newTokens: number[][];
}

/** max of a long array (Math.max(...x) overflows the stack past ~120k elements: a 151k vocabulary). */
function maxOf(x: ArrayLike<number>): number {
  let m = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i]! > m || Number.isNaN(x[i]!)) m = x[i]!;
  return m;
}

function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[best]!) best = i;
  return best;
}

/** Choose the next token from one row of logits (a fresh Float64Array that may be modified). */
export function chooseToken(scores: Float64Array, history: number[], o: GenerateOptions, random: () => number): number {
  const V = scores.length;
  const rp = o.repetitionPenalty ?? 1;
  if (rp !== 1)
    for (const t of new Set(history)) {
      const s = scores[t]!;
      scores[t] = s < 0 ? s * rp : s / rp;
    }
  if (!o.doSample) return argmax(scores);
  const temp = o.temperature ?? 1;
  if (temp !== 1) for (let i = 0; i < V; i++) scores[i] = scores[i]! / temp;
  if (o.topK && o.topK > 0 && o.topK < V) {
    const kth = [...scores].sort((a, b) => b - a)[o.topK - 1]!;
    for (let i = 0; i < V; i++) if (scores[i]! < kth) scores[i] = -Infinity;
  }
  const softmax = (s: Float64Array): Float64Array => {
    const m = maxOf(s);
    const p = s.map((v) => Math.exp(v - m));
    const z = p.reduce((a, b) => a + b, 0);
    return p.map((v) => v / z);
  };
  if (o.topP !== undefined && o.topP < 1) {
    // HF TopPLogitsWarper: sort ascending, drop tokens whose cumulative probability <= 1 - top_p, keep >= 1
    const p = softmax(scores);
    const order = [...p.keys()].sort((a, b) => p[a]! - p[b]!);
    let cum = 0;
    for (let r = 0; r < V - 1; r++) {
      cum += p[order[r]!]!;
      if (cum <= 1 - o.topP) scores[order[r]!] = -Infinity;
    }
  }
  if (o.minP !== undefined && o.minP > 0) {
    const p = softmax(scores);
    const top = maxOf(p);
    for (let i = 0; i < V; i++) if (p[i]! < o.minP * top) scores[i] = -Infinity;
  }
  const p = softmax(scores);
  let u = random();
  for (let i = 0; i < V; i++) {
    u -= p[i]!;
    if (u < 0) return i;
  }
  return argmax(p);
}

type Step = (x: Tensor, keyMask: Tensor, pos: Tensor, cachePosition: Tensor) => Tensor;
/** A prefill of unpadded rows that fill the cache's view (lk == L): plain causal attention, no mask. */
type CausalStep = (x: Tensor, pos: Tensor, cachePosition: Tensor) => Tensor;

/**
 * `compile: true` keeps, per model, the KV cache and the two compiled step functions of the last
 * generation: the next generate() with the same cache shape reuses them, so its steps replay
 * the kernels recorded before instead of recording again. (The cache's memory stays with the
 * model until a generation needs another shape, or the model is garbage-collected.)
 */
interface CompiledSession {
  key: string;
  cache: KVCache;
  prefill: Step;
  prefillCausal: CausalStep;
  decode: Step;
  busy: boolean;
  kept: boolean;
}
const sessions = new WeakMap<PreTrainedModel, CompiledSession>();

function compiledSession(model: PreTrainedModel, opts: KVCacheOptions): CompiledSession {
  const bs = opts.blockSize ?? KVCache.defaultBlockSize;
  const key = JSON.stringify({ ...opts, maxLength: Math.ceil(opts.maxLength / bs) * bs, blockSize: bs });
  const old = sessions.get(model);
  if (old && !old.busy && old.key === key && !old.cache.disposed) {
    old.cache.reset();
    old.busy = true;
    return old;
  }
  const cache = new KVCache(opts);
  // compiled steps get everything that changes per step as tensor arguments and leave the
  // cache's host bookkeeping to the generate loop, so torch.compile can replay a step's kernels
  const traced: Step = (x, keyMask, pos, cachePosition) =>
    torch.noGrad(() =>
      model.forward(x, { attentionMask: keyMask, positionIds: pos, cachePosition, cache, logitsToKeep: 1, advanceCache: false }).logits.select(1, -1).to("float32"),
    );
  const tracedCausal: CausalStep = (x, pos, cachePosition) =>
    torch.noGrad(() => model.forward(x, { positionIds: pos, cachePosition, cache, logitsToKeep: 1, advanceCache: false }).logits.select(1, -1).to("float32"));
  const name = model.constructor.name;
  const s: CompiledSession = {
    key,
    cache,
    prefill: torch.compile(traced, { modules: [model], name: `${name}.prefill` }),
    prefillCausal: torch.compile(tracedCausal, { modules: [model], name: `${name}.prefill_causal` }),
    decode: torch.compile(traced, { modules: [model], name: `${name}.decode` }),
    busy: true,
    kept: !old?.busy, // a generation already running on this model keeps its session
  };
  if (s.kept) {
    old?.cache.dispose();
    sessions.set(model, s);
  }
  return s;
}

export async function generate(model: PreTrainedModel, input: number[] | number[][], o: GenerateOptions = {}): Promise<GenerateOutput> {
  const rows = (input.length > 0 && Array.isArray(input[0]) ? input : [input]) as number[][];
  if (rows.length === 0 || rows.some((r) => r.length === 0)) throw new RangeError("generate: every prompt needs at least one token");
  const maxNew = o.maxNewTokens ?? 20;
  const cfg = model.config;
  const stopIds = new Set(o.stopTokenIds ?? cfg.eosTokenId);
  const pad = o.padTokenId ?? cfg.padTokenId ?? cfg.eosTokenId[0] ?? 0;
  if (o.stopStrings?.length && !o.tokenizer) throw new Error("generate: stopStrings needs a tokenizer to decode the new tokens");
  const B = rows.length;
  const L = Math.max(...rows.map((r) => r.length));
  // left padding: every row's last prompt token sits at position L-1
  const ids = rows.map((r) => [...new Array<number>(L - r.length).fill(pad), ...r]);
  const mask = rows.map((r) => [...new Array<number>(L - r.length).fill(0), ...new Array<number>(r.length).fill(1)]);
  const device = model.device;
  const { layers, kvHeads, headDim } = model.cacheShape();
  const cacheOpts = { batchSize: B, layers, kvHeads, headDim, maxLength: L + maxNew, blockSize: o.blockSize, dtype: model.dtype, device };
  const session = o.compile ? compiledSession(model, cacheOpts) : null;
  const cache = session?.cache ?? new KVCache(cacheOpts);
  const random = mulberry32(o.seed ?? 0);
  const newTokens: number[][] = rows.map(() => []);
  const done = rows.map(() => maxNew <= 0);
  try {
    // last-position logits [B, V]; the mask and cache are read from the enclosing scope
    const run = (x: Tensor): Tensor =>
      torch.noGrad(() => model.forward(x, { attentionMask: mask, cache, logitsToKeep: 1 }).logits.select(1, -1).to("float32"));
    // eager steps free their intermediates at once: the next step reuses that memory (fresh
    // memory is slow to touch) instead of waiting for the garbage collector. (Each decoder layer
    // frees its own when it returns, modeling_utils.ts runLayers, so a long prefill holds one
    // layer's activations at a time.) In fused eager the step is one lazy graph: torch.sync()
    // flushes it freeing each value it materializes after its last reader, where the read below
    // would keep them all to the end of the flush (bench/memory/README.md)
    const eager = (x: Tensor): Tensor => {
      const out = torch.scope(() => run(x));
      if (torch.getEagerMode() === "fused") torch.sync();
      return out;
    };
    const compiled = session ? [session.prefill, session.decode] : null;
    const forward = (x: Tensor, t: number): Tensor => {
      if (!compiled) return eager(x);
      const n = x.shape[1]!;
      const start = cache.length;
      const lk = cache.viewLength(start + n);
      // float32, no padding and the prompt fills the view: the step without a key mask, whose
      // attention is plain causal (forwardInputs' causalOnly)
      if (t === 0 && start === 0 && lk === n && n > 1 && model.dtype === "float32" && mask.every((r) => r.every((m) => m !== 0))) {
        const out = session!.prefillCausal(x, model.positionIdsFor(mask, 0, n, device), torch.tensor([0], { dtype: "int64", device }));
        cache.advance(n);
        return out;
      }
      const keys = new Float32Array(B * lk);
      for (let b = 0; b < B; b++) for (let j = 0; j < start + n; j++) keys[b * lk + j] = mask[b]![j]!;
      const pos = model.positionIdsFor(mask, start, n, device);
      const out = compiled[t === 0 ? 0 : 1]!(x, torch.tensor(keys, { device }).reshape(B, lk), pos, torch.tensor([start], { dtype: "int64", device }));
      cache.advance(n);
      return out;
    };
    let step = torch.tensor(ids, { dtype: "int64", device });
    for (let t = 0; t < maxNew; t++) {
      const last = forward(step, t);
      const V = last.shape[1]!;
      const host = await last.data();
      const next: number[] = [];
      for (let b = 0; b < B; b++) {
        if (done[b]) {
          next.push(pad);
          continue;
        }
        const row = host as ArrayLike<number> & { subarray?: (a: number, b: number) => ArrayLike<number> };
        const scores = row.subarray ? Float64Array.from(row.subarray(b * V, (b + 1) * V)) : Float64Array.from({ length: V }, (_, i) => Number(row[b * V + i]));
        // the history is read only by the repetition penalty
        const history = (o.repetitionPenalty ?? 1) !== 1 ? [...rows[b]!, ...newTokens[b]!] : [];
        const tok = chooseToken(scores, history, o, random);
        newTokens[b]!.push(tok);
        next.push(tok);
        o.streamer?.({ batchIndex: b, token: tok, step: t });
        if (stopIds.has(tok)) done[b] = true;
        else if (o.stopStrings?.length) {
          const text = o.tokenizer!.decode(newTokens[b]!);
          if (o.stopStrings.some((s) => text.includes(s))) done[b] = true;
        }
      }
      if (done.every(Boolean) || t === maxNew - 1) break;
      for (let b = 0; b < B; b++) mask[b]!.push(1);
      step = torch.tensor(next.map((x) => [x]), { dtype: "int64", device });
    }
  } finally {
    if (session) session.busy = false;
    if (!session?.kept) cache.dispose();
  }
  return { sequences: rows.map((r, b) => [...r, ...newTokens[b]!]), newTokens };
}
