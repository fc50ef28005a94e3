// How torchts dtypes live on WebGPU. WGSL has 32-bit scalars only (f16 behind a feature), so
// every element is one 32-bit word:
//   float32            -> f32
//   float16, bfloat16  -> f32 storage, every stored value rounded to the 16-bit type (as on cpu);
//                         with `shader-f16` the f16 rounding uses the hardware conversion
//   float64            -> DEMOTED to f32: computed and stored in float32 (reads return float64
//                         arrays holding float32 values); tolerances widen to float32's
//   int64              -> DEMOTED to i32: exact for |v| < 2^31; host writes of larger values RAISE
//                         (RangeError naming the value), arithmetic past int32 wraps
//   int32              -> i32;  int8/uint8/bool -> i32 with the stored value wrapped/normalized
import { hostArray, isFloating, type DType, type HostArray } from "../../ir/dtype.js";

export type WT = "f32" | "i32";

/** WGSL element type of a dtype's storage. */
export function storageType(d: DType): WT {
  return isFloating(d) ? "f32" : "i32";
}

const I32_MIN = -2147483648;
const I32_MAX = 2147483647;

/** Host array (cpu layout) -> the 32-bit words uploaded to the device. */
export function toDeviceWords(data: HostArray, d: DType): Float32Array | Int32Array {
  if (isFloating(d)) return data instanceof Float32Array ? data : Float32Array.from(data as ArrayLike<number>);
  if (data instanceof Int32Array) return data;
  const out = new Int32Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    if (v < I32_MIN || v > I32_MAX)
      throw new RangeError(
        `webgpu: value ${v} does not fit the device's 32-bit integer storage for ${d} (int64 is stored as int32 on webgpu; keep such tensors on cpu)`,
      );
    out[i] = v;
  }
  return out;
}

/** Device words -> the cpu host layout of the dtype. */
export function fromDeviceWords(words: ArrayBuffer, d: DType, numel: number): HostArray {
  const src = isFloating(d) ? new Float32Array(words, 0, numel) : new Int32Array(words, 0, numel);
  const out = hostArray(d, numel);
  out.set(src as never);
  return out;
}
