// Tensor creation: tensor, zeros, ones, full, empty, arange, linspace, eye, *Like.
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import { numel, parseShape, type Shape } from "../ir/shape.js";
import { Tensor, type NestedArray } from "../tensor.js";
import { arangePrim, fromHostData, fullPrim, reshape } from "./core.js";

export interface TensorOptions {
  dtype?: DType;
  device?: string;
  requiresGrad?: boolean;
}

type ShapeArgs = (number | number[] | TensorOptions)[];

/** Split `zeros(2, 3, {dtype})` / `zeros([2, 3], {dtype})` into shape and options. */
export function shapeAndOpts(args: ShapeArgs, op: string): [number[], TensorOptions] {
  let opts: TensorOptions = {};
  const last = args[args.length - 1];
  if (last !== undefined && typeof last === "object" && !Array.isArray(last)) {
    opts = last as TensorOptions;
    args = args.slice(0, -1);
  }
  return [parseShape(args, op), opts];
}

function finish(t: Tensor, o: TensorOptions): Tensor {
  if (o.requiresGrad) t.requiresGrad = true;
  return t;
}

function inferDtype(data: unknown): DType {
  let sawFloat = false;
  let sawNum = false;
  let sawBool = false;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === "boolean") sawBool = true;
    else if (typeof v === "number") {
      sawNum = true;
      if (!Number.isInteger(v)) sawFloat = true;
    } else if (v instanceof Tensor) {
      sawFloat = true;
    } else throw new TypeError(`tensor: could not infer dtype of ${typeof v}`);
  };
  walk(data);
  if (sawFloat) return getDefaultDtype();
  if (sawNum) return "int64";
  if (sawBool) return "bool";
  return getDefaultDtype();
}

function flatten(data: unknown, shape: number[], out: number[], depth: number): void {
  if (Array.isArray(data)) {
    if (shape.length === depth) shape.push(data.length);
    else if (shape[depth] !== data.length)
      throw new RangeError(`tensor: expected sequence of length ${shape[depth]} at dim ${depth} (got ${data.length})`);
    for (const d of data) flatten(d, shape, out, depth + 1);
  } else {
    if (depth < shape.length) throw new RangeError(`tensor: ragged nested sequence at dim ${depth}`);
    out.push(typeof data === "boolean" ? (data ? 1 : 0) : (data as number));
  }
}

type TypedArr = Float32Array | Float64Array | Int32Array | Int8Array | Uint8Array | BigInt64Array | Uint16Array;

/** torch.tensor(data, {dtype, device, requiresGrad}). Accepts nested arrays, numbers, booleans and typed arrays. */
export function tensor(data: NestedArray | TypedArr, opts: TensorOptions = {}): Tensor {
  if (ArrayBuffer.isView(data)) {
    const arr = data as TypedArr;
    const dt =
      opts.dtype ??
      (arr instanceof Float32Array
        ? "float32"
        : arr instanceof Float64Array
          ? "float64"
          : arr instanceof Int32Array
            ? "int32"
            : arr instanceof BigInt64Array
              ? "int64"
              : arr instanceof Int8Array
                ? "int8"
                : "uint8");
    const nums = arr instanceof BigInt64Array ? Array.from(arr, (v) => Number(v)) : (arr as ArrayLike<number>);
    return finish(fromHostData(nums, [nums.length], dt, opts.device), opts);
  }
  const dtype = opts.dtype ?? inferDtype(data);
  const shape: number[] = [];
  const flat: number[] = [];
  flatten(data, shape, flat, 0);
  return finish(fromHostData(flat, shape, dtype, opts.device), opts);
}

export function full(shape: Shape, value: number | boolean, opts: TensorOptions = {}): Tensor {
  const dtype = opts.dtype ?? (typeof value === "boolean" ? "bool" : Number.isInteger(value) ? "int64" : getDefaultDtype());
  return finish(fullPrim(parseShape([shape as number[]], "full"), Number(value), dtype, opts.device ?? "cpu"), opts);
}

export function zeros(...args: ShapeArgs): Tensor {
  const [s, o] = shapeAndOpts(args, "zeros");
  return finish(fullPrim(s, 0, o.dtype ?? getDefaultDtype(), o.device ?? "cpu"), o);
}
export function ones(...args: ShapeArgs): Tensor {
  const [s, o] = shapeAndOpts(args, "ones");
  return finish(fullPrim(s, 1, o.dtype ?? getDefaultDtype(), o.device ?? "cpu"), o);
}
/** Uninitialised in PyTorch; zero-filled here so that nothing reads garbage. */
export function empty(...args: ShapeArgs): Tensor {
  return zeros(...args);
}

function likeOpts(t: Tensor, o: TensorOptions): TensorOptions {
  return { dtype: o.dtype ?? t.dtype, device: o.device ?? t.device, requiresGrad: o.requiresGrad };
}
export function zerosLike(t: Tensor, o: TensorOptions = {}): Tensor {
  return zeros(t.shape, likeOpts(t, o));
}
export function onesLike(t: Tensor, o: TensorOptions = {}): Tensor {
  return ones(t.shape, likeOpts(t, o));
}
export function emptyLike(t: Tensor, o: TensorOptions = {}): Tensor {
  return zeros(t.shape, likeOpts(t, o));
}
export function fullLike(t: Tensor, value: number | boolean, o: TensorOptions = {}): Tensor {
  return full(t.shape, value, likeOpts(t, o));
}

/** torch.arange(end) / arange(start, end, step?, opts?) */
export function arange(a: number, b?: number | TensorOptions, c?: number | TensorOptions, d?: TensorOptions): Tensor {
  let start = 0,
    end: number,
    step = 1,
    opts: TensorOptions = {};
  if (typeof b !== "number") {
    end = a;
    opts = b ?? {};
  } else {
    start = a;
    end = b;
    if (typeof c === "number") {
      step = c;
      opts = d ?? {};
    } else opts = c ?? {};
  }
  if (step === 0) throw new RangeError("arange: step must be nonzero");
  if ((end - start) * step < 0) throw new RangeError("arange: upper bound and larger bound inconsistent with step sign");
  const n = Math.max(0, Math.ceil((end - start) / step));
  const allInt = [start, end, step].every(Number.isInteger);
  const dtype = opts.dtype ?? (allInt ? "int64" : getDefaultDtype());
  return finish(arangePrim(n, start, step, dtype, opts.device ?? "cpu"), opts);
}

export function linspace(start: number, end: number, steps: number, opts: TensorOptions = {}): Tensor {
  if (steps < 0) throw new RangeError("linspace: number of steps must be non-negative");
  const dtype = opts.dtype ?? getDefaultDtype();
  // PyTorch fills the second half from the end for symmetry; same values in float64 then rounded
  const vals = Array.from({ length: steps }, (_, i) => {
    if (steps === 1) return start;
    const step = (end - start) / (steps - 1);
    return i < steps / 2 ? start + step * i : end - step * (steps - 1 - i);
  });
  return finish(fromHostData(vals, [steps], dtype, opts.device), opts);
}

export function eye(n: number, m?: number | TensorOptions, o?: TensorOptions): Tensor {
  const cols = typeof m === "number" ? m : n;
  const opts = (typeof m === "object" ? m : o) ?? {};
  const data = new Array<number>(n * cols).fill(0);
  for (let i = 0; i < Math.min(n, cols); i++) data[i * cols + i] = 1;
  return finish(fromHostData(data, [n, cols], opts.dtype ?? getDefaultDtype(), opts.device), opts);
}

export function scalarLike(v: number, t: Tensor): Tensor {
  return reshape(fullPrim([1], v, t.dtype, t.device), []);
}

export function isFloatDtype(d: DType): boolean {
  return isFloating(d);
}

export { numel };
