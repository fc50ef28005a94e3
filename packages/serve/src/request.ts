// One request inside the engine: its tokens (prompt, then what it generated), its sampling state, its
// place in the KV cache (a block table, how many positions are computed, the radix node it locks) and
// the outputs waiting for its consumer.
import type { CacheNode } from "./radix_cache.js";
import type { SequenceBlocks } from "./sequence_blocks.js";
import type { FinishReason, RequestOutput, SamplingParams } from "./engine.js";
import { seededRandom } from "./sampler.js";

export class Request {
  readonly outputs: RequestOutput[] = [];
  waiter: (() => void) | null = null;
  readonly generated: number[] = [];
  readonly counts = new Map<number, number>();
  /** prompt + generated: what the KV cache must hold before the next token can be sampled. */
  readonly tokens: number[];
  finished: FinishReason | null = null;
  aborted = false;
  text = "";
  emitted = 0;
  firstToken: number | null = null;
  lastToken = 0;
  readonly random: () => number;
  // ---- KV cache state (the scheduler's)
  blocks: SequenceBlocks | null = null;
  /** Positions of `tokens` whose keys/values are in the cache. */
  numComputed = 0;
  /** The radix node of the cached prefix this request uses (locked while it runs). */
  node: CacheNode | null = null;
  /** Prompt tokens found in the prefix cache (device or host tier) when it was first scheduled. */
  cachedTokens: number | null = null;
  /** Times it was preempted (its blocks freed, to be recomputed). */
  preemptions = 0;
  /** Whether the prompt's blocks went into the prefix cache. */
  promptCached = false;

  constructor(
    readonly id: string,
    readonly prompt: readonly number[],
    readonly params: SamplingParams,
    readonly arrival: number,
    readonly maxTokens: number,
    readonly stopIds: ReadonlySet<number>,
    readonly seq: number,
  ) {
    this.tokens = [...prompt];
    this.random = seededRandom(params.seed ?? Math.floor(Math.random() * 2 ** 32));
  }

  get priority(): number {
    return this.params.priority ?? 0;
  }

  get salt(): string {
    return this.params.cacheSalt ?? "";
  }

  push(o: RequestOutput): void {
    this.outputs.push(o);
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}

/** vLLM's priority order: lower priority value first, then earlier arrival. */
export function byPriority(a: Request, b: Request): number {
  return a.priority - b.priority || a.arrival - b.arrival || a.seq - b.seq;
}
