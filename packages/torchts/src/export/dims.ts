// Dynamic dims: `torch.export.Dim(name, { min, max })` declared per input dim in `dynamicShapes`
// (a structure mirroring the forward's arguments). Export traces the forward at the sample
// sizes, once more per dim with that dim alone changed, and once with all of them changed; the
// host ints that move with the sizes become expressions over the dims (symbolic.ts).
import { Tensor } from "../tensor.js";
import * as T from "../index.js";
import { ExportError } from "./errors.js";

export interface DimOptions {
  min?: number;
  max?: number;
  /** the size is always a multiple of this (a UNet that halves H twice needs 4) */
  multipleOf?: number;
}

export class DimSym {
  constructor(
    readonly name: string,
    readonly min: number,
    readonly max: number,
    readonly multipleOf: number,
  ) {}
  toString(): string {
    return `Dim(${this.name}, min=${this.min}, max=${this.max})`;
  }
}

/** A dynamic dim, as `torch.export.Dim("batch", min=1, max=64)`. The same Dim in several places is one size. */
export function Dim(name: string, opts: DimOptions = {}): DimSym {
  if (typeof name !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new TypeError(`torch.export.Dim: name must be an identifier, got ${JSON.stringify(name)}`);
  const min = opts.min ?? 1;
  const max = opts.max ?? 2147483647;
  const m = opts.multipleOf ?? 1;
  if (!Number.isInteger(min) || !Number.isInteger(max) || min < 0 || max < min) throw new RangeError(`torch.export.Dim('${name}'): need integers 0 <= min <= max, got min=${min}, max=${max}`);
  if (!Number.isInteger(m) || m < 1) throw new RangeError(`torch.export.Dim('${name}'): multipleOf must be a positive integer`);
  return new DimSym(name, min, max, m);
}

/** Per input dim: which Dim it is; `input` indexes the forward's tensors in traversal order. */
export interface DimUse {
  input: number;
  dim: number;
  sym: DimSym;
}

type Spec = unknown;

/** Match `dynamicShapes` against the arguments; returns the uses and the tensors in order. */
export function parseDynamicShapes(args: readonly unknown[], spec: Spec): { uses: DimUse[]; tensors: Tensor[] } {
  const uses: DimUse[] = [];
  const tensors: Tensor[] = [];
  const walk = (x: unknown, s: Spec, path: string, depth: number): void => {
    if (x instanceof Tensor) {
      const i = tensors.length;
      tensors.push(x);
      if (s === null || s === undefined) return;
      if (typeof s !== "object") throw new ExportError(`torch.export: dynamicShapes at ${path}: expected {dim: Dim} or [Dim | null, ...] for a tensor`);
      for (const [k, d] of Object.entries(s as Record<string, unknown>)) {
        if (d === null || d === undefined) continue;
        if (!(d instanceof DimSym)) throw new ExportError(`torch.export: dynamicShapes at ${path}[${k}] must be a torch.export.Dim or null`);
        const dim = Number(k);
        if (!Number.isInteger(dim) || dim < 0 || dim >= x.ndim) throw new ExportError(`torch.export: dynamicShapes at ${path} names dim ${k} of a ${x.ndim}-d tensor`);
        uses.push({ input: i, dim, sym: d });
      }
      return;
    }
    if (depth > 8) return;
    if (Array.isArray(x)) {
      if (s !== null && s !== undefined && !Array.isArray(s)) throw new ExportError(`torch.export: dynamicShapes at ${path} must be an array like the argument`);
      x.forEach((v, i) => walk(v, (s as unknown[] | null | undefined)?.[i], `${path}[${i}]`, depth + 1));
      return;
    }
    if (x && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype)
      for (const [k, v] of Object.entries(x)) walk(v, (s as Record<string, unknown> | null | undefined)?.[k], `${path}.${k}`, depth + 1);
  };
  if (spec !== undefined && spec !== null && !Array.isArray(spec)) throw new ExportError("torch.export: dynamicShapes must be an array with one entry per positional argument");
  args.forEach((a, i) => walk(a, (spec as unknown[] | undefined)?.[i], `dynamicShapes[${i}]`, 0));
  return { uses, tensors };
}

/** The dims, each with its sample size (every use of one Dim must agree). */
export function sampleSizes(uses: DimUse[], tensors: Tensor[]): Map<string, { sym: DimSym; size: number }> {
  const out = new Map<string, { sym: DimSym; size: number }>();
  for (const u of uses) {
    const size = tensors[u.input]!.shape[u.dim]!;
    const prev = out.get(u.sym.name);
    if (prev) {
      if (prev.sym !== u.sym && (prev.sym.min !== u.sym.min || prev.sym.max !== u.sym.max)) throw new ExportError(`torch.export: two different Dims are named '${u.sym.name}'`);
      if (prev.size !== size) throw new ExportError(`torch.export: Dim '${u.sym.name}' has size ${prev.size} in one input and ${size} in another`);
      continue;
    }
    const d = u.sym;
    if (size < d.min || size > d.max) throw new ExportError(`torch.export: the sample size ${size} of Dim '${d.name}' is outside [${d.min}, ${d.max}]`);
    if (size < 2) throw new ExportError(`torch.export: Dim '${d.name}' has sample size ${size}; a dynamic dim needs a sample of at least 2 (size 1 broadcasts, so PyTorch specializes it too)`);
    if (size % d.multipleOf) throw new ExportError(`torch.export: the sample size ${size} of Dim '${d.name}' is not a multiple of ${d.multipleOf}`);
    out.set(d.name, { sym: d, size });
  }
  return out;
}

/** Another allowed size for a dim, not in `avoid` (sizes near the sample, never 0 or 1). */
export function otherSize(d: DimSym, sample: number, avoid: readonly number[]): number {
  const m = d.multipleOf;
  for (let k = 1; k < 64; k++)
    for (const v of [sample + k * m, sample - k * m]) if (v >= Math.max(d.min, 2) && v <= d.max && !avoid.includes(v)) return v;
  throw new ExportError(`torch.export: Dim '${d.name}' allows too few sizes around ${sample} to trace it (min=${d.min}, max=${d.max})`);
}

/** xorshift, so perturbed inputs do not consume the user's random stream */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
}

/**
 * The arguments with dims resized (contents repeated cyclically along each resized dim, so ids
 * stay valid vocabulary indices and masks stay masks) and, with `shuffle`, every tensor's
 * elements permuted: a tensor the forward builds from input values on the host then differs.
 */
export function resizeArgs(args: readonly unknown[], tensors: Tensor[], uses: DimUse[], sizes: Map<string, number>, shuffle: number | null): unknown[] {
  const replaced = new Map<Tensor, Tensor>();
  tensors.forEach((x, i) => {
    let y = x.detach();
    for (const u of uses.filter((u) => u.input === i)) {
      const n = sizes.get(u.sym.name)!;
      const old = y.shape[u.dim]!;
      if (n === old) continue;
      const idx = T.tensor(Array.from({ length: n }, (_, j) => j % old), { dtype: "int64" });
      y = T.indexSelect(y, u.dim, idx);
    }
    if (shuffle !== null && y.numel() > 1) {
      const r = rng(shuffle + 7919 * i);
      const n = y.numel();
      const p = Array.from({ length: n }, (_, j) => j);
      for (let j = n - 1; j > 0; j--) {
        const k = Math.floor(r() * (j + 1));
        [p[j], p[k]] = [p[k]!, p[j]!];
      }
      y = T.indexSelect(y.reshape([-1]), 0, T.tensor(p, { dtype: "int64" })).reshape([...y.shape]);
    }
    if (x.requiresGrad) y.requiresGrad_(true);
    replaced.set(x, y);
  });
  const rebuild = (x: unknown, depth: number): unknown => {
    if (x instanceof Tensor) return replaced.get(x) ?? x;
    if (depth > 8) return x;
    if (Array.isArray(x)) return x.map((v) => rebuild(v, depth + 1));
    if (x && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype)
      return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, rebuild(v, depth + 1)]));
    return x;
  };
  return args.map((a) => rebuild(a, 0));
}
