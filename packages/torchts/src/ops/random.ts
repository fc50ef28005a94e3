// Random numbers from a counter-based generator (Philox4x32-10). The generator's state is
// (seed, offset); each call takes the next `numel` counters, so a stream is the same on
// every device and in every eager mode (the offset advances when the op is issued, not
// when a lazy graph runs). Streams differ from PyTorch's CPU generator (mt19937).
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import { numel, type Shape } from "../ir/shape.js";
import type { Tensor } from "../tensor.js";
import { randPrim } from "./core.js";
import { shapeAndOpts, type TensorOptions } from "./creation.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";
import * as R from "./reduce.js";
import { inplaceSet } from "./inplace.js";

export class Generator {
  seed: [number, number] = [0x2545f491, 0x4f6cdd1d];
  offset = 0;
  constructor(seed?: number) {
    if (seed !== undefined) this.manualSeed(seed);
  }
  manualSeed(seed: number | bigint): this {
    const s = BigInt.asUintN(64, BigInt(seed));
    this.seed = [Number(s & 0xffffffffn), Number(s >> 32n)];
    this.offset = 0;
    return this;
  }
  initialSeed(): number {
    return this.seed[0] + this.seed[1] * 4294967296;
  }
  getState(): { seed: [number, number]; offset: number } {
    return { seed: [...this.seed], offset: this.offset };
  }
  setState(s: { seed: [number, number]; offset: number }): void {
    this.seed = [...s.seed];
    this.offset = s.offset;
  }
  /** Reserve n counters; returns the first. */
  take(n: number): number {
    const o = this.offset;
    this.offset += n;
    return o;
  }
}

export const defaultGenerator = new Generator(0);

export function manualSeed(seed: number | bigint): Generator {
  return defaultGenerator.manualSeed(seed);
}
export function seed(): number {
  const s = Math.floor(Math.random() * 2 ** 32);
  defaultGenerator.manualSeed(s);
  return s;
}
export function getRngState() {
  return defaultGenerator.getState();
}
export function setRngState(s: { seed: [number, number]; offset: number }) {
  defaultGenerator.setState(s);
}

export interface RandOptions extends TensorOptions {
  generator?: Generator;
}

function draw(shape: Shape, dist: "uniform" | "normal", dtype: DType, device: string, gen?: Generator): Tensor {
  const g = gen ?? defaultGenerator;
  const off = g.take(numel(shape));
  return randPrim(shape, dist, dtype, device, g.seed, off);
}

type Args = (number | number[] | RandOptions)[];

export function rand(...args: Args): Tensor {
  const [s, o] = shapeAndOpts(args, "rand") as [number[], RandOptions];
  const t = draw(s, "uniform", o.dtype ?? getDefaultDtype(), o.device ?? "cpu", o.generator);
  if (o.requiresGrad) t.requiresGrad = true;
  return t;
}

export function randn(...args: Args): Tensor {
  const [s, o] = shapeAndOpts(args, "randn") as [number[], RandOptions];
  const t = draw(s, "normal", o.dtype ?? getDefaultDtype(), o.device ?? "cpu", o.generator);
  if (o.requiresGrad) t.requiresGrad = true;
  return t;
}

export function randLike(t: Tensor, o: RandOptions = {}): Tensor {
  return rand(t.shape, { dtype: o.dtype ?? t.dtype, device: o.device ?? t.device, generator: o.generator });
}
export function randnLike(t: Tensor, o: RandOptions = {}): Tensor {
  return randn(t.shape, { dtype: o.dtype ?? t.dtype, device: o.device ?? t.device, generator: o.generator });
}

/** torch.randint(low?, high, size, opts) */
export function randint(a: number, b: number | number[], c?: number[] | RandOptions, d?: RandOptions): Tensor {
  let low = 0,
    high: number,
    size: number[],
    o: RandOptions;
  if (Array.isArray(b)) {
    high = a;
    size = b;
    o = (c as RandOptions) ?? {};
  } else {
    low = a;
    high = b;
    size = c as number[];
    o = d ?? {};
  }
  if (high <= low) throw new RangeError(`randint: random_ expects 'from' to be less than 'to', but got from=${low} >= to=${high}`);
  const u = draw(size, "uniform", "float64", o.device ?? "cpu", o.generator);
  return M.add(M.floor(M.mul(u, high - low)), low).to(o.dtype ?? "int64");
}

export function randperm(n: number, o: RandOptions = {}): Tensor {
  const u = draw([n], "uniform", "float64", o.device ?? "cpu", o.generator);
  return R.argsort(u).to(o.dtype ?? "int64");
}

export function uniform_(t: Tensor, from = 0, to = 1, gen?: Generator): Tensor {
  const u = draw(t.shape, "uniform", isFloating(t.dtype) ? t.dtype : "float32", t.device, gen);
  return inplaceSet(t, M.add(M.mul(u, to - from), from), "uniform_");
}

export function normal_(t: Tensor, mean = 0, std = 1, gen?: Generator): Tensor {
  const z = draw(t.shape, "normal", isFloating(t.dtype) ? t.dtype : "float32", t.device, gen);
  return inplaceSet(t, M.add(M.mul(z, std), mean), "normal_");
}

/** torch.normal(mean, std, size) with float mean/std. */
export function normal(mean: number, std: number, size: number[], o: RandOptions = {}): Tensor {
  return M.add(M.mul(randn(size, o), std), mean);
}

export function bernoulli(p: Tensor | number, o: RandOptions & { size?: number[] } = {}): Tensor {
  if (typeof p === "number") {
    const u = draw(o.size ?? [], "uniform", o.dtype ?? getDefaultDtype(), o.device ?? "cpu", o.generator);
    return M.lt(u, p).to(o.dtype ?? getDefaultDtype());
  }
  const u = draw(p.shape, "uniform", isFloating(p.dtype) ? p.dtype : getDefaultDtype(), p.device, o.generator);
  return M.lt(u, p).to(p.dtype);
}

/** torch.multinomial(probs, numSamples, {replacement}) over the last dim of a 1-D or 2-D input. */
export function multinomial(probs: Tensor, numSamples: number, o: RandOptions & { replacement?: boolean } = {}): Tensor {
  if (probs.ndim < 1 || probs.ndim > 2) throw new RangeError("multinomial: prob_dist must be 1 or 2 dim");
  const p2 = probs.ndim === 1 ? S.unsqueeze(probs, 0) : probs;
  const n = p2.shape[1]!;
  if (!o.replacement && numSamples > n)
    throw new RangeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  let out: Tensor;
  if (o.replacement) {
    // inverse-CDF sampling: count how many cumulative probabilities each uniform passes
    const cdf = R.cumsum(M.div(p2, R.sum(p2, -1, true)), -1);
    const u = draw([p2.shape[0]!, numSamples, 1], "uniform", "float64", probs.device, o.generator);
    const c = S.unsqueeze(cdf.to("float64"), 1);
    out = R.sum(M.ge(u, c).to("int64"), -1).clamp(0, n - 1);
  } else {
    // Gumbel-top-k (equivalent to sequential sampling without replacement)
    const u = draw(p2.shape, "uniform", "float64", probs.device, o.generator);
    const keys = M.div(M.log(M.rsub(u, 1)), p2.to("float64")); // log(u)/p ordering == u^(1/p)
    out = R.topk(keys, numSamples, { dim: -1 }).indices;
  }
  return probs.ndim === 1 ? S.squeeze(out, 0) : out;
}
