// TorchRec's sparse containers (torchrec.sparse.jagged_tensor): JaggedTensor (one feature's bags),
// KeyedJaggedTensor (the bags of several features, the input of an EmbeddingBagCollection) and
// KeyedTensor (dense per-key blocks side by side, its output).
//
// Layout, as TorchRec's: a KeyedJaggedTensor over keys [f0, f1] and a batch (stride) of B holds
// lengths [f0's B bag lengths, then f1's], and values the ids of those bags in the same order. The
// "Sync" constructors read the lengths on the host at once (torchts's sparse tensors are cpu ones),
// and the constructor validates them there, so a malformed batch fails where it is built.
import { Tensor } from "../../tensor.js";
import { isFloating } from "../../ir/dtype.js";
import { tensor } from "../../ops/creation.js";
import { bindArgs, describe, intArg } from "../args.js";

const INT_DTYPES = ["int64", "int32"];

function intTensorArg(fn: string, name: string, v: unknown): Tensor {
  if (!(v instanceof Tensor)) throw new TypeError(`${fn}(): argument '${name}' must be a Tensor, got ${describe(v)}`);
  if (v.ndim !== 1) throw new RangeError(`${fn}(): '${name}' must be 1-D, got shape [${v.shape.join(", ")}]`);
  if (!INT_DTYPES.includes(v.dtype)) throw new TypeError(`${fn}(): '${name}' must be int64 or int32, got ${v.dtype}`);
  return v;
}

function weightsArg(fn: string, v: unknown, values: Tensor): Tensor | null {
  if (v === undefined || v === null) return null;
  if (!(v instanceof Tensor)) throw new TypeError(`${fn}(): argument 'weights' must be a Tensor, got ${describe(v)}`);
  if (v.ndim !== 1 || !isFloating(v.dtype)) throw new TypeError(`${fn}(): 'weights' must be a 1-D floating tensor, got ${v.dtype} [${v.shape.join(", ")}]`);
  if (v.numel() !== values.numel()) throw new RangeError(`${fn}(): 'weights' has ${v.numel()} elements but 'values' has ${values.numel()} (one weight per value)`);
  return v;
}

const host = (t: Tensor): number[] => Array.from(t._contiguousHost(), Number);

/** Lengths from offsets (checked: starting at 0, non-decreasing, ending at `total`). */
function lengthsFromOffsets(fn: string, offsets: number[], total: number): number[] {
  if (!offsets.length || offsets[0] !== 0) throw new RangeError(`${fn}(): 'offsets' must start at 0, got ${offsets.length ? offsets[0] : "an empty tensor"}`);
  const lengths: number[] = [];
  for (let i = 1; i < offsets.length; i++) {
    const l = offsets[i]! - offsets[i - 1]!;
    if (l < 0) throw new RangeError(`${fn}(): 'offsets' must be non-decreasing, but offsets[${i}] = ${offsets[i]} < offsets[${i - 1}] = ${offsets[i - 1]}`);
    lengths.push(l);
  }
  if (offsets[offsets.length - 1] !== total) throw new RangeError(`${fn}(): the last offset (${offsets[offsets.length - 1]}) must equal the number of values (${total})`);
  return lengths;
}

function checkLengths(fn: string, lengths: number[], total: number): void {
  let sum = 0;
  for (const [i, l] of lengths.entries()) {
    if (!Number.isInteger(l) || l < 0) throw new RangeError(`${fn}(): lengths must be non-negative, got lengths[${i}] = ${l}`);
    sum += l;
  }
  if (sum !== total) throw new RangeError(`${fn}(): the lengths sum to ${sum} but there are ${total} values (they must match)`);
}

const cumulative = (xs: readonly number[]): number[] => {
  const o = [0];
  for (const x of xs) o.push(o[o.length - 1]! + x);
  return o;
};

/** One feature's bags: values with per-bag lengths (and optional per-value weights). */
export class JaggedTensor {
  private readonly _values: Tensor;
  private readonly _lengths: number[];
  private readonly _weights: Tensor | null;
  constructor(values: Tensor, opts: { lengths?: Tensor | null; offsets?: Tensor | null; weights?: Tensor | null } = {}) {
    const fn = "JaggedTensor";
    this._values = oneDArg(fn, values);
    const hasL = opts.lengths !== undefined && opts.lengths !== null;
    const hasO = opts.offsets !== undefined && opts.offsets !== null;
    if (hasL === hasO) throw new TypeError(`${fn}(): give exactly one of 'lengths' and 'offsets'`);
    this._lengths = opts.lengths ? host(intTensorArg(fn, "lengths", opts.lengths)) : lengthsFromOffsets(fn, host(intTensorArg(fn, "offsets", opts.offsets)), values.shape[0]!);
    checkLengths(fn, this._lengths, values.shape[0]!);
    this._weights = weightsArg(fn, opts.weights, values);
  }
  values(): Tensor {
    return this._values;
  }
  lengths(): Tensor {
    return tensor(this._lengths, { dtype: "int64" });
  }
  offsets(): Tensor {
    return tensor(cumulative(this._lengths), { dtype: "int64" });
  }
  weights(): Tensor {
    if (!this._weights) throw new Error("JaggedTensor.weights(): this JaggedTensor has no weights");
    return this._weights;
  }
  weightsOrNone(): Tensor | null {
    return this._weights;
  }
  /** Each bag's values as its own tensor. */
  toDense(): Tensor[] {
    const off = cumulative(this._lengths);
    return this._lengths.map((l, i) => this._values.narrow(0, off[i]!, l));
  }
}

function oneDArg(fn: string, v: unknown): Tensor {
  if (!(v instanceof Tensor)) throw new TypeError(`${fn}(): argument 'values' must be a Tensor, got ${describe(v)}`);
  if (v.ndim !== 1) throw new RangeError(`${fn}(): 'values' must be 1-D, got shape [${v.shape.join(", ")}]`);
  return v;
}

export interface KeyedJaggedTensorOptions {
  weights?: Tensor | null;
  lengths?: Tensor | null;
  offsets?: Tensor | null;
  /** The batch size (bags per key); default lengths.numel() / keys.length. */
  stride?: number | null;
}

/**
 * KeyedJaggedTensor.fromLengthsSync(["user", "item"], values, lengths): the bags of several
 * features for one batch. values are int64 (or int32) ids; lengths has keys.length * stride
 * entries, key-major.
 */
export class KeyedJaggedTensor {
  private readonly _keys: string[];
  private readonly _values: Tensor;
  private readonly _weights: Tensor | null;
  /** Host copy of the lengths (key-major). */
  readonly _lengthsHost: number[];
  private readonly _stride: number;

  constructor(keys: string[], values: Tensor, weights?: Tensor | null, lengths?: Tensor | null, offsets?: Tensor | null, stride?: number | null);
  constructor(keys: string[], values: Tensor, opts: KeyedJaggedTensorOptions);
  constructor(...args: unknown[]) {
    const fn = "KeyedJaggedTensor";
    const a = bindArgs(fn, ["keys", "values", "weights", "lengths", "offsets", "stride"], args);
    const keys = a.keys;
    if (!Array.isArray(keys) || keys.some((k) => typeof k !== "string")) throw new TypeError(`${fn}(): argument 'keys' must be a list of strings, got ${describe(keys)}`);
    const dup = keys.find((k, i) => keys.indexOf(k) !== i);
    if (dup !== undefined) throw new Error(`${fn}(): key '${dup}' appears twice`);
    const values = intTensorArg(fn, "values", a.values);
    const total = values.numel();
    const hasL = a.lengths !== undefined && a.lengths !== null;
    const hasO = a.offsets !== undefined && a.offsets !== null;
    if (hasL === hasO) throw new TypeError(`${fn}(): give exactly one of 'lengths' and 'offsets'`);
    const lengths = hasL ? host(intTensorArg(fn, "lengths", a.lengths)) : lengthsFromOffsets(fn, host(intTensorArg(fn, "offsets", a.offsets)), total);
    checkLengths(fn, lengths, total);
    let stride: number;
    if (a.stride !== undefined && a.stride !== null) {
      stride = intArg(fn, "stride", a.stride, 0);
      if (lengths.length !== keys.length * stride)
        throw new RangeError(`${fn}(): ${keys.length} keys with stride ${stride} need ${keys.length * stride} lengths, got ${lengths.length}`);
    } else if (keys.length) {
      if (lengths.length % keys.length) throw new RangeError(`${fn}(): ${lengths.length} lengths do not divide among ${keys.length} keys (one length per key and sample)`);
      stride = lengths.length / keys.length;
    } else {
      if (lengths.length) throw new RangeError(`${fn}(): no keys but ${lengths.length} lengths`);
      stride = 0;
    }
    this._keys = [...keys];
    this._values = values;
    this._weights = weightsArg(fn, a.weights, values);
    this._lengthsHost = lengths;
    this._stride = stride;
  }

  static fromLengthsSync(keys: string[], values: Tensor, lengths: Tensor, weights?: Tensor | null, stride?: number | null): KeyedJaggedTensor;
  static fromLengthsSync(keys: string[], values: Tensor, lengths: Tensor, opts: { weights?: Tensor | null; stride?: number | null }): KeyedJaggedTensor;
  static fromLengthsSync(...args: unknown[]): KeyedJaggedTensor {
    const a = bindArgs("KeyedJaggedTensor.fromLengthsSync", ["keys", "values", "lengths", "weights", "stride"], args);
    if (a.lengths === undefined || a.lengths === null) throw new TypeError("KeyedJaggedTensor.fromLengthsSync(): missing required argument 'lengths'");
    return new KeyedJaggedTensor(a.keys as string[], a.values as Tensor, { lengths: a.lengths as Tensor, weights: a.weights as Tensor, stride: a.stride as number });
  }

  static fromOffsetsSync(keys: string[], values: Tensor, offsets: Tensor, weights?: Tensor | null, stride?: number | null): KeyedJaggedTensor;
  static fromOffsetsSync(keys: string[], values: Tensor, offsets: Tensor, opts: { weights?: Tensor | null; stride?: number | null }): KeyedJaggedTensor;
  static fromOffsetsSync(...args: unknown[]): KeyedJaggedTensor {
    const a = bindArgs("KeyedJaggedTensor.fromOffsetsSync", ["keys", "values", "offsets", "weights", "stride"], args);
    if (a.offsets === undefined || a.offsets === null) throw new TypeError("KeyedJaggedTensor.fromOffsetsSync(): missing required argument 'offsets'");
    return new KeyedJaggedTensor(a.keys as string[], a.values as Tensor, { offsets: a.offsets as Tensor, weights: a.weights as Tensor, stride: a.stride as number });
  }

  keys(): string[] {
    return [...this._keys];
  }
  values(): Tensor {
    return this._values;
  }
  weights(): Tensor {
    if (!this._weights) throw new Error("KeyedJaggedTensor.weights(): this KeyedJaggedTensor has no weights");
    return this._weights;
  }
  weightsOrNone(): Tensor | null {
    return this._weights;
  }
  lengths(): Tensor {
    return tensor(this._lengthsHost, { dtype: "int64" });
  }
  offsets(): Tensor {
    return tensor(cumulative(this._lengthsHost), { dtype: "int64" });
  }
  /** The batch size: bags per key. */
  stride(): number {
    return this._stride;
  }
  /** Number of values of each key. */
  lengthPerKey(): number[] {
    const B = this._stride;
    return this._keys.map((_, k) => {
      let s = 0;
      for (let b = 0; b < B; b++) s += this._lengthsHost[k * B + b]!;
      return s;
    });
  }
  offsetPerKey(): number[] {
    return cumulative(this.lengthPerKey());
  }
  /** One key's bags (TorchRec's kjt[key]). */
  get(key: string): JaggedTensor {
    const k = this._keys.indexOf(key);
    if (k < 0) throw new Error(`KeyedJaggedTensor: no key '${key}' (keys: ${this._keys.join(", ") || "none"})`);
    const off = this.offsetPerKey();
    const B = this._stride;
    const n = off[k + 1]! - off[k]!;
    return new JaggedTensor(this._values.narrow(0, off[k]!, n), {
      lengths: tensor(this._lengthsHost.slice(k * B, (k + 1) * B), { dtype: "int64" }),
      weights: this._weights?.narrow(0, off[k]!, n) ?? null,
    });
  }
  toDict(): Record<string, JaggedTensor> {
    return Object.fromEntries(this._keys.map((k) => [k, this.get(k)]));
  }
  toString(): string {
    return `KeyedJaggedTensor(keys=[${this._keys.join(", ")}], stride=${this._stride}, values=${this._values.numel()})`;
  }
}

/**
 * Dense blocks of several keys laid side by side along keyDim (TorchRec's KeyedTensor): an
 * EmbeddingBagCollection's output, values [B, sum of the keys' dims].
 */
export class KeyedTensor {
  private readonly _keys: string[];
  private readonly _lengthPerKey: number[];
  private readonly _values: Tensor;
  private readonly _keyDim: number;
  constructor(keys: string[], lengthPerKey: number[], values: Tensor, keyDim?: number);
  constructor(keys: string[], lengthPerKey: number[], values: Tensor, opts: { keyDim?: number });
  constructor(...args: unknown[]) {
    const fn = "KeyedTensor";
    const a = bindArgs(fn, ["keys", "lengthPerKey", "values", "keyDim"], args);
    const keys = a.keys;
    if (!Array.isArray(keys) || keys.some((k) => typeof k !== "string")) throw new TypeError(`${fn}(): argument 'keys' must be a list of strings, got ${describe(keys)}`);
    const lpk = a.lengthPerKey;
    if (!Array.isArray(lpk) || lpk.length !== keys.length || lpk.some((l) => !Number.isInteger(l) || l < 0))
      throw new TypeError(`${fn}(): 'lengthPerKey' must be one non-negative integer per key (${keys.length}), got ${describe(lpk)}`);
    if (!(a.values instanceof Tensor)) throw new TypeError(`${fn}(): argument 'values' must be a Tensor, got ${describe(a.values)}`);
    const values = a.values;
    const keyDim = a.keyDim === undefined || a.keyDim === null ? 1 : intArg(fn, "keyDim", a.keyDim, 0);
    if (keyDim >= values.ndim) throw new RangeError(`${fn}(): keyDim ${keyDim} is out of range for a ${values.ndim}-d 'values'`);
    const sum = (lpk as number[]).reduce((p, q) => p + q, 0);
    if (values.shape[keyDim] !== sum) throw new RangeError(`${fn}(): 'values' has ${values.shape[keyDim]} entries along dim ${keyDim}, but lengthPerKey sums to ${sum}`);
    this._keys = [...keys];
    this._lengthPerKey = [...(lpk as number[])];
    this._values = values;
    this._keyDim = keyDim;
  }
  keys(): string[] {
    return [...this._keys];
  }
  values(): Tensor {
    return this._values;
  }
  keyDim(): number {
    return this._keyDim;
  }
  lengthPerKey(): number[] {
    return [...this._lengthPerKey];
  }
  offsetPerKey(): number[] {
    return cumulative(this._lengthPerKey);
  }
  /** One key's block (TorchRec's kt[key]). */
  get(key: string): Tensor {
    const k = this._keys.indexOf(key);
    if (k < 0) throw new Error(`KeyedTensor: no key '${key}' (keys: ${this._keys.join(", ") || "none"})`);
    return this._values.narrow(this._keyDim, this.offsetPerKey()[k]!, this._lengthPerKey[k]!);
  }
  toDict(): Record<string, Tensor> {
    return Object.fromEntries(this._keys.map((k) => [k, this.get(k)]));
  }
}
