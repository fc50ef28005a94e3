// Seeded draws for the benchmark: the prompts and the arrival times are a function of --seed, so two
// runs (or two servers) see the same workload. pure-rand gives the generator and the uniform draws;
// the gamma draw (for bursty arrivals) is built on them here.
import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import { uniformInt } from "pure-rand/distribution/uniformInt";
import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus";
import type { JumpableRandomGenerator } from "pure-rand/types/JumpableRandomGenerator";

export class SeededRandom {
  private readonly rng: JumpableRandomGenerator;

  /** `stream` picks one of independent sequences of the seed (each a 2^64-step jump further on). */
  constructor(seed: number, stream = 0) {
    this.rng = xoroshiro128plus(seed | 0);
    for (let i = 0; i < stream; i++) this.rng.jump();
  }

  /** An integer in [lo, hi], both included. */
  int(lo: number, hi: number): number {
    return uniformInt(this.rng, lo, hi);
  }

  /** A float in [0, 1). */
  float(): number {
    return uniformFloat64(this.rng);
  }

  /** A standard normal draw (Box-Muller; 1 - u keeps the log's argument in (0, 1]). */
  normal(): number {
    const u = 1 - this.float();
    const v = this.float();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /**
   * A Gamma(shape, scale) draw, as numpy's gamma: mean shape * scale. Marsaglia and Tsang's method
   * for shape >= 1; for shape < 1 a Gamma(shape + 1) draw times U^(1/shape).
   */
  gamma(shape: number, scale: number): number {
    if (!(shape > 0) || !(scale > 0)) throw new RangeError(`gamma: shape and scale must be > 0, got ${shape}, ${scale}`);
    if (shape < 1) return this.gamma(shape + 1, scale) * Math.pow(1 - this.float(), 1 / shape);
    const d = shape - 1 / 3;
    const c = 1 / Math.sqrt(9 * d);
    for (;;) {
      let x: number, v: number;
      do {
        x = this.normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const u = 1 - this.float();
      if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return d * v * scale;
    }
  }
}
