// torch.utils.data: datasets, samplers, default collation and DataLoader. The loader is
// iterable both synchronously (`for (const b of loader)`) and asynchronously
// (`for await (const b of loader)`); the async form prepares the next `prefetchFactor`
// batches in macrotasks, so they are built while the caller awaits its own work.
import { Tensor } from "../tensor.js";
import { Generator, defaultGenerator, randint, randperm } from "../ops/random.js";
import { tensor } from "../ops/creation.js";
import { stack } from "../ops/shape_ops.js";

// ---- datasets ----
/** Map-style dataset: implement getItem(index) and length. getItem may return a Promise (async loaders only). */
export abstract class Dataset<T = unknown> {
  abstract getItem(index: number): T;
  abstract readonly length: number;
}

/** Stream-style dataset: implement [Symbol.iterator] (or [Symbol.asyncIterator] for async-only use). */
export abstract class IterableDataset<T = unknown> {
  abstract [Symbol.iterator](): Iterator<T>;
}

export class TensorDataset extends Dataset<Tensor[]> {
  tensors: Tensor[];
  constructor(...tensors: Tensor[]) {
    super();
    if (!tensors.length) throw new Error("TensorDataset: expected at least one tensor");
    const n = tensors[0]!.shape[0];
    if (tensors.some((t) => t.ndim === 0 || t.shape[0] !== n)) throw new RangeError("Size mismatch between tensors");
    this.tensors = tensors;
  }
  getItem(i: number): Tensor[] {
    return this.tensors.map((t) => t.select(0, i));
  }
  get length(): number {
    return this.tensors[0]!.shape[0]!;
  }
}

export class Subset<T> extends Dataset<T> {
  constructor(
    public dataset: Dataset<T>,
    public indices: number[],
  ) {
    super();
  }
  getItem(i: number): T {
    if (i < 0 || i >= this.indices.length) throw new RangeError(`index ${i} is out of range`);
    return this.dataset.getItem(this.indices[i]!);
  }
  get length(): number {
    return this.indices.length;
  }
}

export class ConcatDataset<T> extends Dataset<T> {
  cumulativeSizes: number[] = [];
  constructor(public datasets: Dataset<T>[]) {
    super();
    let s = 0;
    for (const d of datasets) this.cumulativeSizes.push((s += d.length));
  }
  getItem(i: number): T {
    if (i < 0) i += this.length;
    const k = this.cumulativeSizes.findIndex((c) => i < c);
    if (k < 0) throw new RangeError(`index ${i} is out of range`);
    return this.datasets[k]!.getItem(i - (k ? this.cumulativeSizes[k - 1]! : 0));
  }
  get length(): number {
    return this.cumulativeSizes[this.cumulativeSizes.length - 1] ?? 0;
  }
}

/** randomSplit(dataset, lengths, {generator}): lengths are counts, or fractions summing to 1. */
export function randomSplit<T>(dataset: Dataset<T>, lengths: number[], o: { generator?: Generator } = {}): Subset<T>[] {
  const n = dataset.length;
  let sizes = lengths;
  const sum = lengths.reduce((a, b) => a + b, 0);
  if (Math.abs(sum - 1) < 1e-9 && sum <= 1 && lengths.some((l) => !Number.isInteger(l) || l < 1)) {
    sizes = lengths.map((f) => {
      if (f < 0 || f > 1) throw new RangeError(`Fraction at index ${lengths.indexOf(f)} is not between 0 and 1`);
      return Math.floor(n * f);
    });
    const rem = n - sizes.reduce((a, b) => a + b, 0);
    for (let i = 0; i < rem; i++) sizes[i % sizes.length]! += 1;
  }
  if (sizes.reduce((a, b) => a + b, 0) !== n)
    throw new RangeError("Sum of input lengths does not equal the length of the input dataset!");
  const perm = Array.from(randperm(n, { generator: o.generator })._contiguousHost(), Number);
  let off = 0;
  return sizes.map((s) => {
    const idx = perm.slice(off, off + s);
    off += s;
    return new Subset(dataset, idx);
  });
}
export const random_split = randomSplit;

// ---- samplers ----
export interface Sampler extends Iterable<number> {
  readonly length: number;
}

export class SequentialSampler implements Sampler {
  constructor(public dataSource: { length: number }) {}
  *[Symbol.iterator](): Iterator<number> {
    for (let i = 0; i < this.dataSource.length; i++) yield i;
  }
  get length(): number {
    return this.dataSource.length;
  }
}

function freshGenerator(): Generator {
  // seeded from the default generator so torch.manualSeed makes shuffling reproducible
  const s = Number(randint(0, 2 ** 31 - 1, [1], { generator: defaultGenerator })._contiguousHost()[0]);
  return new Generator(s);
}

export class RandomSampler implements Sampler {
  constructor(
    public dataSource: { length: number },
    public o: { replacement?: boolean; numSamples?: number; generator?: Generator } = {},
  ) {}
  get length(): number {
    return this.o.numSamples ?? this.dataSource.length;
  }
  *[Symbol.iterator](): Iterator<number> {
    const n = this.dataSource.length;
    const g = this.o.generator ?? freshGenerator();
    if (this.o.replacement) {
      yield* Array.from(randint(0, n, [this.length], { generator: g })._contiguousHost(), Number);
      return;
    }
    for (let left = this.length; left > 0; left -= n)
      yield* Array.from(randperm(n, { generator: g })._contiguousHost(), Number).slice(0, Math.min(left, n));
  }
}

export class BatchSampler implements Iterable<number[]> {
  constructor(
    public sampler: Iterable<number> & { length?: number },
    public batchSize: number,
    public dropLast: boolean,
  ) {
    if (!Number.isInteger(batchSize) || batchSize <= 0)
      throw new RangeError(`batch_size should be a positive integer value, but got batch_size=${batchSize}`);
  }
  *[Symbol.iterator](): Iterator<number[]> {
    let b: number[] = [];
    for (const i of this.sampler) {
      b.push(i);
      if (b.length === this.batchSize) {
        yield b;
        b = [];
      }
    }
    if (b.length && !this.dropLast) yield b;
  }
  get length(): number {
    const n = this.sampler.length ?? 0;
    return this.dropLast ? Math.floor(n / this.batchSize) : Math.ceil(n / this.batchSize);
  }
}

// ---- collation ----
/** Stack tensors, turn numbers/booleans into tensors, recurse into arrays and plain objects. */
export function defaultCollate(batch: unknown[]): any {
  const first = batch[0];
  if (first instanceof Tensor) return stack(batch as Tensor[]);
  if (typeof first === "number") {
    const allInt = (batch as number[]).every(Number.isInteger);
    return tensor(batch as number[], { dtype: allInt ? "int64" : "float64" });
  }
  if (typeof first === "boolean") return tensor(batch as boolean[], { dtype: "bool" });
  if (typeof first === "string" || first === null || first === undefined) return batch;
  if (Array.isArray(first)) {
    const n = first.length;
    if (batch.some((b) => (b as unknown[]).length !== n)) throw new Error("each element in list of batch should be of equal size");
    return first.map((_, i) => defaultCollate(batch.map((b) => (b as unknown[])[i])));
  }
  if (typeof first === "object" && Object.getPrototypeOf(first) === Object.prototype)
    return Object.fromEntries(Object.keys(first).map((k) => [k, defaultCollate(batch.map((b) => (b as Record<string, unknown>)[k]))]));
  throw new TypeError(`default_collate: batch must contain tensors, numbers, dicts or lists; found ${typeof first}`);
}
export const default_collate = defaultCollate;

// ---- loader ----
export interface DataLoaderOptions<T, B = any> {
  batchSize?: number | null;
  shuffle?: boolean;
  sampler?: Sampler;
  batchSampler?: Iterable<number[]> & { length?: number };
  dropLast?: boolean;
  collateFn?: (batch: T[]) => B;
  generator?: Generator;
  /** batches the async iterator keeps in preparation (default 2, like PyTorch's prefetch_factor) */
  prefetchFactor?: number;
}

export class DataLoader<T = unknown, B = any> implements Iterable<B>, AsyncIterable<B> {
  batchSize: number | null;
  dropLast: boolean;
  sampler: Sampler | null = null;
  batchSampler: (Iterable<number[]> & { length?: number }) | null = null;
  collateFn: (batch: T[]) => B;
  prefetchFactor: number;

  constructor(
    public dataset: Dataset<T> | IterableDataset<T>,
    o: DataLoaderOptions<T, B> = {},
  ) {
    this.batchSize = o.batchSize === undefined ? 1 : o.batchSize;
    this.dropLast = o.dropLast ?? false;
    this.prefetchFactor = o.prefetchFactor ?? 2;
    if (dataset instanceof IterableDataset) {
      if (o.shuffle) throw new Error(`DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle=${o.shuffle}`);
      if (o.sampler) throw new Error("DataLoader with IterableDataset: expected unspecified sampler option");
      if (o.batchSampler) throw new Error("DataLoader with IterableDataset: expected unspecified batch_sampler option");
    } else {
      if (o.sampler && o.shuffle) throw new Error("sampler option is mutually exclusive with shuffle");
      if (o.batchSampler) {
        if (o.batchSize !== undefined && o.batchSize !== 1 || o.shuffle || o.sampler || o.dropLast)
          throw new Error("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last");
        this.batchSize = null;
        this.batchSampler = o.batchSampler;
      } else {
        this.sampler = o.sampler ?? (o.shuffle ? new RandomSampler(dataset, { generator: o.generator }) : new SequentialSampler(dataset));
        if (this.batchSize !== null) this.batchSampler = new BatchSampler(this.sampler, this.batchSize, this.dropLast);
      }
    }
    this.collateFn = (o.collateFn ?? (this.batchSize === null && !o.batchSampler ? (b: T[]) => b[0] : defaultCollate)) as (b: T[]) => B;
  }

  get length(): number {
    if (this.dataset instanceof IterableDataset) throw new TypeError("object of type 'IterableDataset' has no len()");
    if (this.batchSampler) return this.batchSampler.length ?? 0;
    return this.sampler!.length;
  }

  /** Index lists per batch (map-style) or item chunks (iterable-style). */
  *_plans(): IterableIterator<{ indices?: number[]; items?: T[] }> {
    const ds = this.dataset;
    if (ds instanceof IterableDataset) {
      const bs = this.batchSize;
      let chunk: T[] = [];
      for (const x of ds as Iterable<T>) {
        if (bs === null) {
          yield { items: [x] };
          continue;
        }
        chunk.push(x);
        if (chunk.length === bs) {
          yield { items: chunk };
          chunk = [];
        }
      }
      if (chunk.length && !this.dropLast) yield { items: chunk };
      return;
    }
    if (this.batchSampler) for (const b of this.batchSampler) yield { indices: b };
    else for (const i of this.sampler!) yield { indices: [i] };
  }

  _fetchSync(p: { indices?: number[]; items?: T[] }): B {
    const items = p.items ?? p.indices!.map((i) => (this.dataset as Dataset<T>).getItem(i));
    if (items.some((x) => x instanceof Promise)) throw new Error("dataset returned a Promise: iterate the DataLoader with `for await`");
    return this.collateFn(items);
  }

  *[Symbol.iterator](): Iterator<B> {
    for (const p of this._plans()) yield this._fetchSync(p);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<B> {
    const plans = this._plans();
    const queue: Promise<B>[] = [];
    const fetch = (p: { indices?: number[]; items?: T[] }): Promise<B> =>
      new Promise<B>((resolve, reject) =>
        setImmediate(async () => {
          try {
            const items = p.items ?? (await Promise.all(p.indices!.map((i) => (this.dataset as Dataset<T>).getItem(i))));
            resolve(this.collateFn(items));
          } catch (e) {
            reject(e);
          }
        }),
      );
    const fill = (): void => {
      while (queue.length < Math.max(1, this.prefetchFactor)) {
        const n = plans.next();
        if (n.done) return;
        const pr = fetch(n.value);
        pr.catch(() => {}); // reported when awaited, not as an unhandled rejection
        queue.push(pr);
      }
    };
    fill();
    while (queue.length) {
      const b = await queue.shift()!;
      fill(); // the next batches are built while the caller works on this one
      yield b;
    }
  }
}
