// dtypes and PyTorch's type-promotion rules. Values are plain strings so that
// `torch.float32 === "float32"` and dtypes print and serialize naturally.

export type DType =
  | "float32"
  | "float64"
  | "float16"
  | "bfloat16"
  | "int64"
  | "int32"
  | "int8"
  | "uint8"
  | "bool";

export const DTYPES: readonly DType[] = [
  "float32",
  "float64",
  "float16",
  "bfloat16",
  "int64",
  "int32",
  "int8",
  "uint8",
  "bool",
];

export type Category = 0 | 1 | 2; // bool < integer < floating

export function category(d: DType): Category {
  if (d === "bool") return 0;
  return isFloating(d) ? 2 : 1;
}

export function isFloating(d: DType): boolean {
  return d === "float32" || d === "float64" || d === "float16" || d === "bfloat16";
}

export function isIntegral(d: DType, includeBool = false): boolean {
  return d === "bool" ? includeBool : !isFloating(d);
}

/** Bytes per element as the dtype is stored in files and on accelerators. */
export function itemSize(d: DType): number {
  switch (d) {
    case "float64":
    case "int64":
      return 8;
    case "float32":
    case "int32":
      return 4;
    case "float16":
    case "bfloat16":
      return 2;
    default:
      return 1;
  }
}

/**
 * Host (CPU) array type per dtype. float16/bfloat16 live in Float32Array with every
 * stored value rounded to the dtype's precision (JS has no 16-bit float array on
 * Node 20); int64 lives in Float64Array and is exact up to 2^53.
 */
export type HostArray = Float32Array | Float64Array | Int32Array | Int8Array | Uint8Array;

type HostArrayCtor = { new (n: number): HostArray; new (buf: ArrayBufferLike, byteOffset: number, length: number): HostArray; readonly BYTES_PER_ELEMENT: number };

/** The typed-array class holding a dtype on the host (hostArray's), without allocating one. */
export function hostArrayCtor(d: DType): HostArrayCtor {
  switch (d) {
    case "float32":
    case "float16":
    case "bfloat16":
      return Float32Array;
    case "float64":
    case "int64":
      return Float64Array;
    case "int32":
      return Int32Array;
    case "int8":
      return Int8Array;
    case "uint8":
    case "bool":
      return Uint8Array;
  }
}

export function hostArray(d: DType, n: number): HostArray {
  switch (d) {
    case "float32":
    case "float16":
    case "bfloat16":
      return new Float32Array(n);
    case "float64":
    case "int64":
      return new Float64Array(n);
    case "int32":
      return new Int32Array(n);
    case "int8":
      return new Int8Array(n);
    case "uint8":
    case "bool":
      return new Uint8Array(n);
  }
}

const INT_RANK: Partial<Record<DType, number>> = { uint8: 1, int8: 1, int32: 3, int64: 4 };

/** torch.promote_types. (int8, uint8) gives int32 here: torchts has no int16. */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  if (a === "bool") return b;
  if (b === "bool") return a;
  const fa = isFloating(a);
  const fb = isFloating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    if (a === "float64" || b === "float64") return "float64";
    if (a === "float32" || b === "float32") return "float32";
    return "float32"; // float16 with bfloat16
  }
  const ra = INT_RANK[a]!;
  const rb = INT_RANK[b]!;
  if (ra === rb) return "int32"; // int8 with uint8
  return ra > rb ? a : b;
}

/** Operand kinds for torch.result_type: dimensioned tensors beat 0-dim tensors beat Python scalars. */
export interface PromoOperand {
  dtype: DType;
  kind: "tensor" | "zerodim" | "scalar";
}

let defaultFloat: DType = "float32";
export function getDefaultDtype(): DType {
  return defaultFloat;
}
export function setDefaultDtype(d: DType): void {
  if (d !== "float32" && d !== "float64" && d !== "float16" && d !== "bfloat16")
    throw new TypeError(`only floating-point types are supported as the default type, got ${d}`);
  defaultFloat = d;
}

export function resultType(ops: PromoOperand[]): DType {
  let dimT: DType | null = null;
  let zeroT: DType | null = null;
  let scalT: DType | null = null;
  for (const o of ops) {
    if (o.kind === "tensor") dimT = dimT ? promoteTypes(dimT, o.dtype) : o.dtype;
    else if (o.kind === "zerodim") zeroT = zeroT ? promoteTypes(zeroT, o.dtype) : o.dtype;
    else scalT = scalT ? promoteTypes(scalT, o.dtype) : o.dtype;
  }
  let r = dimT;
  if (zeroT) r = !r ? zeroT : category(zeroT) > category(r) ? promoteTypes(r, zeroT) : r;
  if (scalT) {
    if (!r) r = scalT === "float64" ? defaultFloat : scalT;
    else if (category(scalT) > category(r)) r = scalT === "bool" ? r : category(scalT) === 2 ? defaultFloat : "int64";
  }
  return r ?? defaultFloat;
}

/** dtype of a JS scalar as PyTorch sees a Python scalar (float -> "float64" marker, int -> int64). */
export function scalarDtype(v: number | boolean): DType {
  if (typeof v === "boolean") return "bool";
  return Number.isInteger(v) ? "int64" : "float64";
}

// ---- rounding helpers for 16-bit floats stored in Float32Array ----
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function roundBF16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7f800000) === 0x7f800000) return f32[0]!; // inf/nan unchanged
  u32[0] = (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
  return f32[0]!;
}

export function f32ToF16Bits(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++;
  return sign | h;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >>> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

export function roundF16(x: number): number {
  return f16BitsToF32(f32ToF16Bits(x));
}

export function bf16BitsToF32(h: number): number {
  u32[0] = h << 16;
  return f32[0]!;
}
export function f32ToBF16Bits(x: number): number {
  return (() => {
    const r = roundBF16(x);
    f32[0] = r;
    return u32[0]! >>> 16;
  })();
}

/** Convert a JS number to the value the dtype would store (truncation toward zero for ints, as PyTorch casts). */
export function castScalar(v: number, d: DType): number {
  switch (d) {
    case "bool":
      return v !== 0 ? 1 : 0;
    case "float16":
      return roundF16(v);
    case "bfloat16":
      return roundBF16(v);
    case "float32":
      return Math.fround(v);
    case "float64":
      return v;
    case "int64":
      return Number.isFinite(v) ? Math.trunc(v) : 0;
    case "int32":
      return Math.trunc(v) | 0;
    case "int8":
      return (Math.trunc(v) << 24) >> 24;
    case "uint8":
      return Math.trunc(v) & 0xff;
  }
}
