// ReduceOp and the elementwise reductions the communication thread applies to host arrays.
// Values are in torchts's host representation (float16/bfloat16 in Float32Array, int64 in
// Float64Array, see ir/dtype.ts); a half-precision result is rounded after every step, as a
// reduction in that dtype rounds (so results equal a reference computed in the dtype).
import { roundBF16, roundF16, type DType, type HostArray } from "../ir/dtype.js";

/** torch.distributed.ReduceOp (a string per op; PREMUL_SUM is NCCL-only and not offered). */
export const ReduceOp = Object.freeze({
  SUM: "SUM",
  AVG: "AVG",
  PRODUCT: "PRODUCT",
  MIN: "MIN",
  MAX: "MAX",
  BAND: "BAND",
  BOR: "BOR",
  BXOR: "BXOR",
} as const);
export type ReduceOpName = (typeof ReduceOp)[keyof typeof ReduceOp];

const INTEGRAL: ReadonlySet<DType> = new Set<DType>(["int64", "int32", "int8", "uint8", "bool"]);

/** Why `op` cannot reduce `dtype` (PyTorch's rules), or null. */
export function reduceOpError(op: ReduceOpName, dtype: DType): string | null {
  if (dtype === "bool" && op !== "MAX" && op !== "MIN" && op !== "BAND" && op !== "BOR")
    return `ReduceOp.${op} is not supported for bool tensors (use MAX/BOR for "any", MIN/BAND for "all")`;
  if ((op === "BAND" || op === "BOR" || op === "BXOR") && !INTEGRAL.has(dtype))
    return `ReduceOp.${op} needs an integral (or bool) tensor, got ${dtype}`;
  if (op === "AVG" && INTEGRAL.has(dtype)) return `ReduceOp.AVG needs a floating-point tensor, got ${dtype}`;
  return null;
}

/** The rounding a dtype applies to a host value after arithmetic (identity when the host array does it). */
export function rounderOf(dtype: DType): ((x: number) => number) | null {
  if (dtype === "float16") return roundF16;
  if (dtype === "bfloat16") return roundBF16;
  return null;
}

// The hot case, float32 SUM/AVG, in loops that only ever see one array type: V8 compiles them to
// tight code, where the generic loop below (which meets every HostArray type) is ~4x slower.
function addF32(dst: Float32Array, d: number, src: Float32Array, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] += src[s + i]!;
}
function addF64(dst: Float64Array, d: number, src: Float64Array, s: number, n: number): void {
  for (let i = 0; i < n; i++) dst[d + i] += src[s + i]!;
}

/** dst[d + i] = dst[d + i] (op) src[s + i] for i < n. */
export function combine(op: ReduceOpName, dtype: DType, dst: HostArray, d: number, src: HostArray, s: number, n: number): void {
  const r = rounderOf(dtype);
  if ((op === "SUM" || op === "AVG") && !r) {
    if (dst instanceof Float32Array && src instanceof Float32Array) return addF32(dst, d, src, s, n);
    if (dst instanceof Float64Array && src instanceof Float64Array) return addF64(dst, d, src, s, n);
  }
  switch (op) {
    case "SUM":
    case "AVG":
      if (r) for (let i = 0; i < n; i++) dst[d + i] = r(dst[d + i]! + src[s + i]!);
      else for (let i = 0; i < n; i++) dst[d + i] = dst[d + i]! + src[s + i]!;
      return;
    case "PRODUCT":
      if (dtype === "int32") for (let i = 0; i < n; i++) dst[d + i] = Math.imul(dst[d + i]!, src[s + i]!);
      else if (r) for (let i = 0; i < n; i++) dst[d + i] = r(dst[d + i]! * src[s + i]!);
      else for (let i = 0; i < n; i++) dst[d + i] = dst[d + i]! * src[s + i]!;
      return;
    case "MAX":
      // NaN propagates, as torch.maximum does
      for (let i = 0; i < n; i++) {
        const a = dst[d + i]!;
        const b = src[s + i]!;
        dst[d + i] = a > b || a !== a ? a : b;
      }
      return;
    case "MIN":
      for (let i = 0; i < n; i++) {
        const a = dst[d + i]!;
        const b = src[s + i]!;
        dst[d + i] = a < b || a !== a ? a : b;
      }
      return;
    case "BAND":
      for (let i = 0; i < n; i++) dst[d + i] = bitwise(dst[d + i]!, src[s + i]!, dtype, (x, y) => x & y);
      return;
    case "BOR":
      for (let i = 0; i < n; i++) dst[d + i] = bitwise(dst[d + i]!, src[s + i]!, dtype, (x, y) => x | y);
      return;
    case "BXOR":
      for (let i = 0; i < n; i++) dst[d + i] = bitwise(dst[d + i]!, src[s + i]!, dtype, (x, y) => x ^ y);
      return;
  }
}

function bitwise(a: number, b: number, dtype: DType, f: (x: bigint, y: bigint) => bigint): number {
  if (dtype !== "int64") return Number(f(BigInt(a | 0), BigInt(b | 0)));
  return Number(f(BigInt(a), BigInt(b)));
}

/** AVG's last step: divide by the number of contributions. */
export function divideInPlace(dtype: DType, a: HostArray, by: number): void {
  const r = rounderOf(dtype);
  if (r) for (let i = 0; i < a.length; i++) a[i] = r(a[i]! / by);
  else for (let i = 0; i < a.length; i++) a[i] = a[i]! / by;
}
