// Per-request sampling over one row of logits: logit_bias, OpenAI's presence/frequency penalties, the
// min_tokens ban on stop tokens, a constraint's mask (structured output), then torchts's chooseToken
// (temperature, top_k, top_p, min_p, repetition penalty) with the request's own seeded RNG, so a seed
// gives the same tokens whatever else is in the batch.
import { chooseToken, mulberry32, type GenerateOptions } from "torchts/transformers";
import type { SamplingParams } from "./engine.js";

// Each request owns a seeded RNG: torchts's mulberry32, the one generate({ seed }) draws from, so a
// request's seed gives generate()'s tokens.
export const seededRandom: (seed: number) => () => number = mulberry32;

/** What sampling needs to know about the request so far. */
export interface SamplingState {
  params: SamplingParams;
  prompt: readonly number[];
  generated: readonly number[];
  /** Occurrences of each generated token. */
  counts: ReadonlyMap<number, number>;
  stopIds: ReadonlySet<number>;
  random: () => number;
  /** Tokens the request may still generate (>= 1). */
  remaining: number;
}

export function sampleToken(s: SamplingState, scores: Float64Array): number {
  const p = s.params;
  const V = scores.length;
  for (const [k, v] of Object.entries(p.logitBias ?? {})) {
    const t = Number(k);
    if (t < V) scores[t] = scores[t]! + v;
  }
  const fp = p.frequencyPenalty ?? 0;
  const pp = p.presencePenalty ?? 0;
  if (fp !== 0 || pp !== 0) for (const [t, c] of s.counts) scores[t] = scores[t]! - fp * c - pp;
  if (p.minTokens && s.generated.length < p.minTokens) for (const t of s.stopIds) scores[t] = -Infinity;
  p.constraint?.mask(scores, s.remaining);
  const temp = p.temperature ?? 1;
  const o: GenerateOptions = {
    doSample: temp > 0,
    temperature: temp,
    topK: p.topK !== undefined && p.topK > 0 ? p.topK : undefined,
    topP: p.topP,
    minP: p.minP,
    repetitionPenalty: p.repetitionPenalty,
  };
  const history = (p.repetitionPenalty ?? 1) !== 1 ? [...s.prompt, ...s.generated] : [];
  return chooseToken(scores, history, o, s.random);
}
