// Random numbers from a counter-based generator (Philox4x32-10). The generator's state is
// (seed, offset); each call takes the next `numel` counters, so a stream is the same on
// every device and in every eager mode (the offset advances when the op is issued, not
// when a lazy graph runs). Streams differ from PyTorch's CPU generator (mt19937).
// Every public op is an entry of the op table (registry.ts); a call checks all its arguments
// before it takes counters, so a refused call leaves the generator where it was.
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import { broadcastShapes, numel, type Shape } from "../ir/shape.js";
import type { Tensor } from "../tensor.js";
import { traceState } from "../runtime/dispatch.js";
import { cast, randPrim } from "./core.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";
import * as R from "./reduce.js";
import { inplaceSet } from "./inplace.js";
import { installMethods, method, op, type Sig } from "./registry.js";
import { pyTypeName, registerKindCheck } from "./binder.js";
import type { TensorOptions } from "./creation.js";

export class Generator {
  seed: [number, number] = [0x2545f491, 0x4f6cdd1d];
  offset = 0;
  constructor(seed?: number | bigint) {
    if (seed !== undefined) this.manualSeed(seed);
  }
  manualSeed(seed: number | bigint): this {
    const s = BigInt.asUintN(64, toSeed(seed));
    this.seed = [Number(s & 0xffffffffn), Number(s >> 32n)];
    this.offset = 0;
    return this;
  }
  initialSeed(): number {
    return this.seed[0] + this.seed[1] * 4294967296;
  }
  getState(): RngState {
    return { seed: [...this.seed], offset: this.offset };
  }
  setState(s: RngState): void {
    checkState(s, "setState");
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
registerKindCheck("Generator", (v) => v instanceof Generator);

/**
 * A generator's state (torch.get_rng_state()): a plain object, so torch.save can store it. It is
 * also setRngState's options object: setRngState(state) binds its `seed` and `offset`.
 */
export interface RngState {
  seed: [number, number];
  offset: number;
}

/** PyTorch's manual_seed takes any Python int in [-2^63, 2^64) (a float is truncated by int()). */
function toSeed(seed: unknown): bigint {
  if (typeof seed === "bigint") {
    if (seed < -(2n ** 63n) || seed >= 2n ** 64n) throw new Error("Overflow when unpacking long");
    return seed;
  }
  if (typeof seed === "number") {
    if (!Number.isFinite(seed)) throw new Error(`cannot convert float ${Number.isNaN(seed) ? "NaN" : seed > 0 ? "infinity" : "-infinity"} to integer`);
    if (seed < -(2 ** 63) || seed >= 2 ** 64) throw new Error("Overflow when unpacking long");
    return BigInt(Math.trunc(seed));
  }
  throw new TypeError(`manualSeed(): argument 'seed' must be int, not ${pyTypeName(seed)}`);
}

function checkState(s: unknown, name: string): asserts s is RngState {
  const o = s as RngState;
  const u32 = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 0 && v < 2 ** 32;
  if (
    o === null ||
    typeof o !== "object" ||
    !Array.isArray(o.seed) ||
    o.seed.length !== 2 ||
    !o.seed.every(u32) ||
    typeof o.offset !== "number" ||
    !Number.isSafeInteger(o.offset) ||
    o.offset < 0
  )
    throw new TypeError(`${name}(): expected a state from getRngState() ({ seed: [uint32, uint32], offset: int >= 0 }), got ${pyTypeName(s)}`);
}

/** torch.default_generator */
export const defaultGenerator = new Generator(0);

export const manualSeed = op<(seed: number | bigint | { seed: number | bigint }) => Generator>(
  "manualSeed(Any seed) -> Generator",
  (seed: unknown): Generator => defaultGenerator.manualSeed(toSeed(seed)),
);
export const seed = op<() => number>("seed() -> int", (): number => {
  const s = Math.floor(Math.random() * 2 ** 32);
  defaultGenerator.manualSeed(s);
  return s;
});
export const getRngState = op<() => RngState>("getRngState() -> Any", (): RngState => defaultGenerator.getState());
/** setRngState(state) with a state from getRngState() (its keys bind as keywords), or setRngState(seed, offset) */
export interface SetRngStateFn {
  (state: RngState): void;
  (seed: number[], offset: number | { offset: number }): void;
}
export const setRngState = op<SetRngStateFn>(
  "setRngState(int[] seed, int offset) -> None",
  (seed: number[], offset: number): void => {
    if (seed.length !== 2 || !seed.every((v) => v >= 0 && v < 2 ** 32))
      throw new TypeError(`setRngState(): 'seed' must be two uint32 values (a state from getRngState()), got [${seed.join(", ")}]`);
    if (!(offset >= 0 && Number.isSafeInteger(offset)))
      throw new TypeError(`setRngState(): 'offset' must be a non-negative safe integer (a state from getRngState()), got ${offset}`);
    defaultGenerator.setState({ seed: [seed[0]!, seed[1]!], offset });
  },
);

export interface RandOptions extends TensorOptions {
  generator?: Generator | null;
}

/** The counters are taken only once the primitive is made (a refused size leaves the stream as it was). */
function draw(shape: Shape, dist: "uniform" | "normal", dtype: DType, device: string, gen: Generator | null): Tensor {
  const g = gen ?? defaultGenerator;
  const off = g.offset;
  const t = randPrim(shape, dist, dtype, device, g.seed, off);
  g.take(numel(shape));
  return t;
}

const TYPE_NAMES: Record<DType, string> = {
  float32: "Float", float64: "Double", float16: "Half", bfloat16: "BFloat16", int64: "Long", int32: "Int", int8: "Char",
  uint8: "Byte", bool: "Bool",
};
/** PyTorch's kernel-dispatch message for a dtype a random kernel has no implementation for. */
function needFloat(dtype: DType, dist: "uniform" | "normal"): void {
  if (!isFloating(dtype))
    throw new Error(`"${dist === "uniform" ? "check_uniform_bounds" : "normal_kernel_cpu"}" not implemented for '${TYPE_NAMES[dtype]}'`);
}
function checkGrad(dtype: DType, requiresGrad: boolean): void {
  if (requiresGrad && !isFloating(dtype)) throw new Error("Only Tensors of floating point and complex dtype can require gradients");
}
function finish(t: Tensor, requiresGrad: boolean): Tensor {
  if (requiresGrad) t.requiresGrad = true;
  return t;
}

/** rand(2, 3), rand([2, 3]), rand(2, 3, { dtype, generator }), rand({ size: [2, 3] }) */
export interface RandFn {
  (size: number | readonly number[], opts?: RandOptions): Tensor;
  (...args: [...size: number[], opts: RandOptions]): Tensor;
  (...size: number[]): Tensor;
  (opts: RandOptions & { size: number | readonly number[] }): Tensor;
}
function randImpl(dist: "uniform" | "normal") {
  return (size: number[], gen: Generator | null, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
    const dt = dtype ?? getDefaultDtype();
    needFloat(dt, dist);
    return finish(draw(size, dist, dt, device ?? "cpu", gen), requiresGrad);
  };
}
const RAND_KW = "*, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False";
export const rand = op<RandFn>(`rand(Size size, ${RAND_KW}) -> Tensor`, randImpl("uniform"));
export const randn = op<RandFn>(`randn(Size size, ${RAND_KW}) -> Tensor`, randImpl("normal"));

function likeImpl(dist: "uniform" | "normal") {
  return (t: Tensor, gen: Generator | null, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
    const dt = dtype ?? t.dtype;
    needFloat(dt, dist);
    return finish(draw(t.shape, dist, dt, device ?? t.device, gen), requiresGrad);
  };
}
type LikeSig = Sig<[input: Tensor], RandOptions, Tensor>;
export const randLike = op<LikeSig>(`randLike(Tensor input, ${RAND_KW}) -> Tensor`, likeImpl("uniform"));
export const randnLike = op<LikeSig>(`randnLike(Tensor input, ${RAND_KW}) -> Tensor`, likeImpl("normal"));

function randintImpl(
  low: number,
  high: number,
  size: number[],
  gen: Generator | null,
  dtype: DType | null,
  device: string | null,
  requiresGrad: boolean,
): Tensor {
  if (high <= low) throw new Error(`random_ expects 'from' to be less than 'to', but got from=${low} >= to=${high}`);
  const dt = dtype ?? "int64";
  checkGrad(dt, requiresGrad);
  const u = draw(size, "uniform", "float64", device ?? "cpu", gen);
  return finish(cast(M.add(M.floor(M.mul(u, high - low)), low), dt), requiresGrad);
}
/** torch.randint(high, size) / randint(low, high, size), with keyword-only generator, dtype, device, requiresGrad. */
export const randint = op<
  Sig<[lowOrHigh: number, highOrSize: number | number[], size?: number[]], RandOptions & { low?: number; high?: number; size?: number[] }, Tensor>
>(
  [`randint(int high, Size size, ${RAND_KW}) -> Tensor`, `randint(int low, int high, Size size, ${RAND_KW}) -> Tensor`],
  [
    (high: number, size: number[], gen: Generator | null, dtype: DType | null, device: string | null, requiresGrad: boolean) =>
      randintImpl(0, high, size, gen, dtype, device, requiresGrad),
    randintImpl,
  ],
);

export const randperm = op<Sig<[n: number], RandOptions & { n?: number }, Tensor>>(
  `randperm(int n, ${RAND_KW}) -> Tensor`,
  (n: number, gen: Generator | null, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
    if (n < 0) throw new Error(`Trying to create tensor with negative dimension ${n}: [${n}]`);
    const dt = dtype ?? "int64";
    checkGrad(dt, requiresGrad);
    const u = draw([n], "uniform", "float64", device ?? "cpu", gen);
    return finish(cast(R.argsort(u), dt), requiresGrad);
  },
);

/** The values of a tensor read on the host, or null where that is no cheap synchronous read (webgpu, torch.compile tracing). */
function hostValues(t: Tensor): ArrayLike<number> | null {
  if (!t._storage.device.readSync || traceState.fn !== null) return null;
  return t._contiguousHost() as ArrayLike<number>;
}

function checkStd(std: number): void {
  if (!(std >= 0)) throw new Error(`normal expects std >= 0.0, but found std ${std}`);
}
function checkStdTensor(std: Tensor): void {
  const v = hostValues(std);
  if (v === null) return;
  for (let i = 0; i < v.length; i++) if (!(v[i]! >= 0)) throw new Error("normal expects all elements of std >= 0.0");
}
function floatOf(...ts: Tensor[]): DType {
  for (const t of ts) if (!isFloating(t.dtype)) throw new Error(`"normal_kernel_cpu" not implemented for '${TYPE_NAMES[t.dtype]}'`);
  return ts.length === 2 && ts[0]!.dtype !== ts[1]!.dtype ? (ts[0]!.dtype === "float64" || ts[1]!.dtype === "float64" ? "float64" : "float32") : ts[0]!.dtype;
}

/** normal(mean, std) with tensors and/or floats; normal(float mean, float std, size), with a keyword-only generator. */
export type NormalOpts = RandOptions & {
  mean?: Tensor | number;
  std?: Tensor | number;
  size?: number | readonly number[];
};
export type NormalFn = (
  mean: Tensor | number | NormalOpts,
  std?: Tensor | number | NormalOpts,
  size?: number | readonly number[] | NormalOpts,
  opts?: NormalOpts,
) => Tensor;
export const normal = op<NormalFn>(
  [
    "normal(Tensor mean, Tensor std, *, Generator? generator=None) -> Tensor",
    "normal(Tensor mean, float std=1, *, Generator? generator=None) -> Tensor",
    "normal(float mean, Tensor std, *, Generator? generator=None) -> Tensor",
    `normal(float mean, float std, Size size, ${RAND_KW}) -> Tensor`,
  ],
  [
    (mean: Tensor, std: Tensor, gen: Generator | null): Tensor => {
      const dt = floatOf(mean, std);
      const shape = broadcastShapes("normal", mean.shape, std.shape);
      checkStdTensor(std);
      return M.add(M.mul(draw(shape, "normal", dt, mean.device, gen), std), mean);
    },
    (mean: Tensor, std: number, gen: Generator | null): Tensor => {
      const dt = floatOf(mean);
      checkStd(std);
      return M.add(M.mul(draw(mean.shape, "normal", dt, mean.device, gen), std), mean);
    },
    (mean: number, std: Tensor, gen: Generator | null): Tensor => {
      const dt = floatOf(std);
      checkStdTensor(std);
      return M.add(M.mul(draw(std.shape, "normal", dt, std.device, gen), std), mean);
    },
    (mean: number, std: number, size: number[], gen: Generator | null, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
      checkStd(std);
      const dt = dtype ?? getDefaultDtype();
      needFloat(dt, "normal");
      const t = M.add(M.mul(draw(size, "normal", dt, device ?? "cpu", gen), std), mean);
      return finish(t, requiresGrad);
    },
  ],
);

/** bernoulli(input): 1 with probability input[i]; bernoulli(input, p): input's shape and dtype, 1 with probability p. */
export const bernoulli = op<
  Sig<[input: Tensor, p?: number], { p?: number; generator?: Generator | null }, Tensor>
>(
  ["bernoulli(Tensor input, *, Generator? generator=None) -> Tensor", "bernoulli(Tensor input, float p, *, Generator? generator=None) -> Tensor"],
  [
    (p: Tensor, gen: Generator | null): Tensor => {
      if (!isFloating(p.dtype)) throw new Error(`"bernoulli_tensor_cpu_p_" not implemented for '${TYPE_NAMES[p.dtype]}'`);
      const v = hostValues(p);
      if (v !== null)
        for (let i = 0; i < v.length; i++)
          if (!(v[i]! >= 0 && v[i]! <= 1))
            throw new Error("Expected p_in >= 0 && p_in <= 1 to be true, but got false. (a probability is outside [0, 1] or NaN)");
      const u = draw(p.shape, "uniform", p.dtype, p.device, gen);
      return cast(M.lt(u, p), p.dtype);
    },
    (x: Tensor, p: number, gen: Generator | null): Tensor => {
      if (!(p >= 0 && p <= 1)) throw new Error(`bernoulli_ expects p to be in [0, 1], but got p=${p}`);
      const u = draw(x.shape, "uniform", isFloating(x.dtype) ? x.dtype : getDefaultDtype(), x.device, gen);
      return cast(M.lt(u, p), x.dtype);
    },
  ],
);

/** torch.multinomial(input, numSamples, replacement=False, *, generator) over the last dim of a 1-D or 2-D input. */
export const multinomial = op<
  Sig<
    [input: Tensor, numSamples: number, replacement?: boolean],
    { numSamples?: number; replacement?: boolean; generator?: Generator | null },
    Tensor
  >
>(
  "multinomial(Tensor input, int numSamples, bool replacement=False, *, Generator? generator=None) -> Tensor",
  (probs: Tensor, numSamples: number, replacement: boolean, gen: Generator | null): Tensor => {
    if (probs.ndim < 1 || probs.ndim > 2) throw new Error("prob_dist must be 1 or 2 dim");
    if (!isFloating(probs.dtype)) throw new Error(`multinomial only supports floating-point dtypes for input, got: ${TYPE_NAMES[probs.dtype]}`);
    if (numSamples <= 0) throw new Error("cannot sample n_sample <= 0 samples");
    const p2 = probs.ndim === 1 ? S.unsqueeze(probs, 0) : probs;
    const n = p2.shape[1]!;
    if (!replacement && numSamples > n)
      throw new Error("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    if (n > 2 ** 24) throw new Error("number of categories cannot exceed 2^24");
    const v = hostValues(p2);
    if (v !== null)
      for (let r = 0; r < p2.shape[0]!; r++) {
        let total = 0;
        for (let i = r * n; i < (r + 1) * n; i++) {
          const q = v[i]!;
          if (!(q >= 0 && q < Infinity)) throw new Error("probability tensor contains either `inf`, `nan` or element < 0");
          total += q;
        }
        if (!(total > 0)) throw new Error("invalid multinomial distribution (sum of probabilities <= 0)");
      }
    let out: Tensor;
    if (replacement) {
      // inverse-CDF sampling: count how many cumulative probabilities each uniform passes
      const cdf = R.cumsum(M.div(p2, R.sum(p2, -1, true)), -1);
      const u = draw([p2.shape[0]!, numSamples, 1], "uniform", "float64", probs.device, gen);
      const c = S.unsqueeze(cast(cdf, "float64"), 1);
      out = M.clamp(R.sum(cast(M.ge(u, c), "int64"), -1), 0, n - 1);
    } else {
      // Gumbel-top-k (equivalent to sequential sampling without replacement)
      const u = draw(p2.shape, "uniform", "float64", probs.device, gen);
      const keys = M.div(M.log(M.rsub(u, 1)), cast(p2, "float64")); // log(u)/p ordering == u^(1/p)
      out = R.topk(keys, numSamples, { dim: -1 }).indices;
    }
    return probs.ndim === 1 ? S.squeeze(out, 0) : out;
  },
);

// Tensor methods x.bernoulli(p?) and x.multinomial(numSamples, replacement): `this` binds as the input
installMethods({ bernoulli, multinomial });

/** x.uniform_(from=0, to=1, *, generator) */
export type UniformMethod = Sig<[from?: number, to?: number], { from?: number; to?: number; generator?: Generator | null }, Tensor>;
/** x.normal_(mean=0, std=1, *, generator) */
export type NormalMethod = Sig<[mean?: number, std?: number], { mean?: number; std?: number; generator?: Generator | null }, Tensor>;
// in-place Tensor methods (the table keys are "Tensor.uniform_" / "Tensor.normal_"): they write into `this`
method("uniform_", "uniform_(Tensor self, float from=0, float to=1, *, Generator? generator=None) -> Tensor", (t: Tensor, from: number, to: number, gen: Generator | null) => {
  needFloat(t.dtype, "uniform");
  if (!(from >= -Number.MAX_VALUE && from <= Number.MAX_VALUE)) throw new Error(`from is out of bounds for ${t.dtype}`);
  if (!(to >= -Number.MAX_VALUE && to <= Number.MAX_VALUE)) throw new Error(`to is out of bounds for ${t.dtype}`);
  if (from > to) throw new Error(`uniform_ expects to return a [from, to) range, but found from=${from} > to=${to}`);
  const u = draw(t.shape, "uniform", t.dtype, t.device, gen);
  return inplaceSet(t, M.add(M.mul(u, to - from), from), "uniform_");
});
method("normal_", "normal_(Tensor self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor", (t: Tensor, mean: number, std: number, gen: Generator | null) => {
  needFloat(t.dtype, "normal");
  checkStd(std);
  const z = draw(t.shape, "normal", t.dtype, t.device, gen);
  return inplaceSet(t, M.add(M.mul(z, std), mean), "normal_");
});
