// When each request is sent, as `vllm bench serve` schedules them: at rate inf all at time 0; else the
// gaps are Gamma(burstiness, 1 / (rate * burstiness)) draws (burstiness 1: exponential gaps, a Poisson
// process; below 1 burstier, above 1 more even; infinite burstiness: a fixed 1 / rate). The summed
// gaps are then scaled so the last request leaves at exactly numPrompts / rate, which keeps the
// offered load the same across seeds (a plain sum misses it by a few percent).
import type { SeededRandom } from "./rng.js";

/** Send times in seconds from the benchmark's start, one per request, non-decreasing. */
export function arrivalTimes(count: number, requestRate: number, burstiness: number, rng: SeededRandom): number[] {
  if (!(requestRate > 0)) throw new RangeError(`request rate must be > 0 or inf, got ${requestRate}`);
  if (!(burstiness > 0)) throw new RangeError(`burstiness must be > 0, got ${burstiness}`);
  if (requestRate === Infinity) return new Array<number>(count).fill(0);
  const times: number[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    t += burstiness === Infinity ? 1 / requestRate : rng.gamma(burstiness, 1 / (requestRate * burstiness));
    times.push(t);
  }
  const last = times[count - 1];
  if (last === undefined || last === 0) return times;
  const scale = count / requestRate / last;
  return times.map((x) => x * scale);
}
