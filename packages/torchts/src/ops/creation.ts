// Tensor creation: tensor, zeros, ones, full, empty, arange, linspace, eye, *Like. Every public
// op is an entry of the op table (registry.ts): sizes are `Size` (varargs or a list, never
// negative), dtype / device / requiresGrad are keyword-only, as in PyTorch.
import { getDefaultDtype, isFloating, type DType } from "../ir/dtype.js";
import { Tensor, type NestedArray } from "../tensor.js";
import { OutOfMemoryError } from "../runtime/errors.js";
import { arangePrim, cast, fromHostData, fullPrim, reshape } from "./core.js";
import * as M from "./math.js";
import { op, type Sig } from "./registry.js";
import { pyTypeName } from "./binder.js";

export interface TensorOptions {
  dtype?: DType | null;
  device?: string | null;
  requiresGrad?: boolean;
}

type SizeArg = number | readonly number[];

/** PyTorch refuses requires_grad on integer tensors before it allocates anything. */
function checkGrad(dtype: DType, requiresGrad: boolean): void {
  if (requiresGrad && !isFloating(dtype)) throw new Error("Only Tensors of floating point and complex dtype can require gradients");
}
function finish(t: Tensor, requiresGrad: boolean): Tensor {
  if (requiresGrad) t.requiresGrad = true;
  return t;
}

/** Python's spelling of a number in messages (nan, inf). */
function pyNum(v: number): string {
  if (Number.isNaN(v)) return "nan";
  if (v === Infinity) return "inf";
  if (v === -Infinity) return "-inf";
  return String(v);
}

/** The most elements a host-built array (linspace, typed-array data) may have. */
const MAX_HOST_ELEMENTS = 2 ** 32 - 1;
function hostLimit(n: number, bytesPer: number): void {
  if (n > MAX_HOST_ELEMENTS)
    throw new OutOfMemoryError(
      `OutOfMemoryError: tried to allocate ${n * bytesPer} bytes (a host array holds at most ${MAX_HOST_ELEMENTS} elements)`,
    );
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
    } else if (v instanceof Tensor)
      throw new TypeError("a Tensor inside the data is not supported (use torch.stack, or t.clone().detach() for a copy)");
    else throw new TypeError(`Could not infer dtype of ${pyTypeName(v)}`);
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
      throw new RangeError(`expected sequence of length ${shape[depth]} at dim ${depth} (got ${data.length})`);
    for (const d of data) flatten(d, shape, out, depth + 1);
  } else {
    if (depth < shape.length) throw new RangeError(`ragged nested sequence at dim ${depth}`);
    out.push(typeof data === "boolean" ? (data ? 1 : 0) : (data as number));
  }
}

type TypedArr = Float32Array | Float64Array | Int32Array | Int8Array | Uint8Array | BigInt64Array | Uint16Array;

/** torch.tensor(data, *, dtype, device, requiresGrad): nested arrays of numbers / booleans, or a typed array. */
export const tensor = op<Sig<[data: NestedArray | TypedArr], TensorOptions & { data?: NestedArray | TypedArr }, Tensor>>(
  "tensor(Any data, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (data: unknown, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
    if (data instanceof Tensor)
      throw new TypeError("a Tensor as data is not supported (use t.clone().detach(), or t.to(dtype) for a cast)");
    if (ArrayBuffer.isView(data)) {
      const arr = data as TypedArr;
      const dt =
        dtype ??
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
      checkGrad(dt, requiresGrad);
      const nums = arr instanceof BigInt64Array ? Array.from(arr, (v) => Number(v)) : (arr as ArrayLike<number>);
      return finish(fromHostData(nums, [nums.length], dt, device ?? "cpu"), requiresGrad);
    }
    const inferred = inferDtype(data); // also checks every element
    const dt = dtype ?? inferred;
    checkGrad(dt, requiresGrad);
    const shape: number[] = [];
    const flat: number[] = [];
    flatten(data, shape, flat, 0);
    return finish(fromHostData(flat, shape, dt, device ?? "cpu"), requiresGrad);
  },
);

/** zeros(2, 3), zeros([2, 3]), zeros(2, 3, { dtype }), zeros({ size: [2, 3], dtype }) */
export interface CreateFn {
  (size: SizeArg, opts?: TensorOptions): Tensor;
  (...args: [...size: number[], opts: TensorOptions]): Tensor;
  (...size: number[]): Tensor;
  (opts: TensorOptions & { size: SizeArg }): Tensor;
}
type CreateSig = CreateFn;
function fill(size: number[], value: number, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor {
  const dt = dtype ?? getDefaultDtype();
  checkGrad(dt, requiresGrad);
  return finish(fullPrim(size, value, dt, device ?? "cpu"), requiresGrad);
}

export const zeros = op<CreateSig>(
  "zeros(Size size, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (size: number[], dtype: DType | null, device: string | null, requiresGrad: boolean) => fill(size, 0, dtype, device, requiresGrad),
);
export const ones = op<CreateSig>(
  "ones(Size size, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (size: number[], dtype: DType | null, device: string | null, requiresGrad: boolean) => fill(size, 1, dtype, device, requiresGrad),
);
/** Uninitialised in PyTorch; zero-filled here so that nothing reads garbage. */
export const empty = op<CreateSig>(
  "empty(Size size, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (size: number[], dtype: DType | null, device: string | null, requiresGrad: boolean) => fill(size, 0, dtype, device, requiresGrad),
);

export const full = op<
  Sig<[size: SizeArg, fillValue: number | boolean], TensorOptions & { size?: SizeArg; fillValue?: number | boolean }, Tensor>
>(
  "full(Size size, Scalar fillValue, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (size: number[], value: number | boolean, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
    const dt = dtype ?? (typeof value === "boolean" ? "bool" : Number.isInteger(value) ? "int64" : getDefaultDtype());
    checkGrad(dt, requiresGrad);
    return finish(fullPrim(size, Number(value), dt, device ?? "cpu"), requiresGrad);
  },
);

type LikeSig = Sig<[input: Tensor], TensorOptions, Tensor>;
function like(t: Tensor, value: number, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor {
  const dt = dtype ?? t.dtype;
  checkGrad(dt, requiresGrad);
  return finish(fullPrim(t.shape, value, dt, device ?? t.device), requiresGrad);
}
export const zerosLike = op<LikeSig>(
  "zerosLike(Tensor input, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (t: Tensor, dtype: DType | null, device: string | null, requiresGrad: boolean) => like(t, 0, dtype, device, requiresGrad),
);
export const onesLike = op<LikeSig>(
  "onesLike(Tensor input, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (t: Tensor, dtype: DType | null, device: string | null, requiresGrad: boolean) => like(t, 1, dtype, device, requiresGrad),
);
export const emptyLike = op<LikeSig>(
  "emptyLike(Tensor input, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (t: Tensor, dtype: DType | null, device: string | null, requiresGrad: boolean) => like(t, 0, dtype, device, requiresGrad),
);
export const fullLike = op<Sig<[input: Tensor, fillValue: number | boolean], TensorOptions & { fillValue?: number | boolean }, Tensor>>(
  "fullLike(Tensor input, Scalar fillValue, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (t: Tensor, value: number | boolean, dtype: DType | null, device: string | null, requiresGrad: boolean) =>
    like(t, Number(value), dtype, device, requiresGrad),
);

function arangeImpl(start: number, end: number, step: number, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor {
  const [a, b, s] = [Number(start), Number(end), Number(step)];
  if (!(s > 0 || s < 0)) throw new Error("step must be nonzero");
  if (!Number.isFinite(a) || !Number.isFinite(b)) throw new Error(`unsupported range: ${pyNum(a)} -> ${pyNum(b)}`);
  if (!((s > 0 && b >= a) || (s < 0 && b <= a))) throw new Error("upper bound and larger bound inconsistent with step sign");
  const size = Math.ceil((b - a) / s);
  if (!(size >= 0 && size <= 2 ** 63)) throw new Error("invalid size, possible overflow?");
  const n = Math.max(0, size);
  const allInt = [a, b, s].every(Number.isInteger);
  const dt = dtype ?? (allInt ? "int64" : getDefaultDtype());
  checkGrad(dt, requiresGrad);
  return finish(arangePrim(n, a, s, dt, device ?? "cpu"), requiresGrad);
}
type Num = number | boolean;
/** torch.arange(end) / arange(start, end, step=1), with keyword-only dtype, device, requiresGrad. */
export const arange = op<Sig<[startOrEnd: Num, end?: Num, step?: Num], TensorOptions & { start?: Num; end?: Num; step?: Num }, Tensor>>(
  [
    "arange(Scalar end, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
    "arange(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  ],
  [
    (end: Num, dtype: DType | null, device: string | null, requiresGrad: boolean) => arangeImpl(0, Number(end), 1, dtype, device, requiresGrad),
    (start: Num, end: Num, step: Num, dtype: DType | null, device: string | null, requiresGrad: boolean) =>
      arangeImpl(Number(start), Number(end), Number(step), dtype, device, requiresGrad),
  ],
);

export const linspace = op<
  Sig<[start: Num, end: Num, steps: number], TensorOptions & { start?: Num; end?: Num; steps?: number }, Tensor>
>(
  "linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  (startV: Num, endV: Num, steps: number, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor => {
    if (steps < 0) throw new Error("number of steps must be non-negative");
    const start = Number(startV);
    const end = Number(endV);
    const dt = dtype ?? getDefaultDtype();
    checkGrad(dt, requiresGrad);
    hostLimit(steps, 8);
    // PyTorch fills the second half from the end for symmetry; same values in float64 then rounded
    const vals = new Float64Array(steps);
    const step = (end - start) / (steps - 1);
    for (let i = 0; i < steps; i++) vals[i] = steps === 1 ? start : i < steps / 2 ? start + step * i : end - step * (steps - 1 - i);
    return finish(fromHostData(vals, [steps], dt, device ?? "cpu"), requiresGrad);
  },
);

function eyeImpl(n: number, m: number, dtype: DType | null, device: string | null, requiresGrad: boolean): Tensor {
  if (n < 0) throw new Error(`n must be greater or equal to 0, got ${n}`);
  if (m < 0) throw new Error(`m must be greater or equal to 0, got ${m}`);
  const dt = dtype ?? getDefaultDtype();
  checkGrad(dt, requiresGrad);
  const dev = device ?? "cpu";
  // row index == column index, computed on the device (no host array of n * m elements)
  const i = reshape(arangePrim(n, 0, 1, "int32", dev), [n, 1]);
  const j = reshape(arangePrim(m, 0, 1, "int32", dev), [1, m]);
  return finish(cast(M.eq(i, j), dt), requiresGrad);
}
/** torch.eye(n) / eye(n, m), with keyword-only dtype, device, requiresGrad. */
export const eye = op<Sig<[n: number, m?: number], TensorOptions & { n?: number; m?: number }, Tensor>>(
  [
    "eye(int n, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
    "eye(int n, int m, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor",
  ],
  [
    (n: number, dtype: DType | null, device: string | null, requiresGrad: boolean) => eyeImpl(n, n, dtype, device, requiresGrad),
    (n: number, m: number, dtype: DType | null, device: string | null, requiresGrad: boolean) => eyeImpl(n, m, dtype, device, requiresGrad),
  ],
);
