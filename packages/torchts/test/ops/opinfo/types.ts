// OpInfo-style samples (PyTorch's torch.testing._internal.opinfo): for every op of the table, a
// few valid calls as named arguments. The fuzzer (test/fuzz/) turns each into every calling form
// (positional, options object, mixed, Tensor method) and checks they agree exactly, then mutates
// them. A sample names parameters by their schema names; an omitted parameter takes its default.
import * as torch from "../../../src/index.js";
import type { Tensor } from "../../../src/index.js";

export type Sample = Record<string, unknown>;

/** Deterministic inputs (a local PRNG, so samples never touch torch's RNG state). */
export class Maker {
  private s: number;
  constructor(seed = 1) {
    this.s = seed >>> 0 || 1;
  }
  private next(): number {
    // mulberry32
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  private vals(n: number, f: () => number): number[] {
    return Array.from({ length: n }, f);
  }
  private static numel(shape: number[]): number {
    return shape.reduce((a, b) => a * b, 1);
  }
  /** standard-normal-ish floats (float32 unless dtype given) */
  randn(shape: number[], opts: { dtype?: torch.DType; requiresGrad?: boolean } = {}): Tensor {
    const v = this.vals(Maker.numel(shape), () => (this.next() + this.next() + this.next() - 1.5) * 2);
    const t = torch.tensor(v, { dtype: opts.dtype ?? "float32" }).reshape(shape);
    return opts.requiresGrad ? t.detach().requiresGrad_() : t;
  }
  /** uniform in [lo, hi) */
  uniform(shape: number[], lo = 0, hi = 1, dtype: torch.DType = "float32"): Tensor {
    return torch.tensor(this.vals(Maker.numel(shape), () => lo + (hi - lo) * this.next()), { dtype }).reshape(shape);
  }
  /** positive floats in [0.5, 2) (for log, sqrt, pow bases, divisors) */
  positive(shape: number[], dtype: torch.DType = "float32"): Tensor {
    return this.uniform(shape, 0.5, 2, dtype);
  }
  /** integers in [lo, hi) */
  int(shape: number[], lo: number, hi: number, dtype: torch.DType = "int64"): Tensor {
    return torch.tensor(this.vals(Maker.numel(shape), () => lo + Math.floor((hi - lo) * this.next())), { dtype }).reshape(shape);
  }
  bool(shape: number[]): Tensor {
    return torch.tensor(this.vals(Maker.numel(shape), () => (this.next() < 0.5 ? 1 : 0)), { dtype: "bool" }).reshape(shape);
  }
}

/** Samples of one op: called afresh for every calling form (in-place ops mutate their inputs). */
export type SampleFn = (mk: Maker) => Sample[];
/** op-table key -> samples */
export type OpInfos = Record<string, SampleFn>;
