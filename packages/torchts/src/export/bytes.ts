// A tensor's contents as the little-endian bytes both file formats store (torchts keeps int64
// in Float64Array and 16-bit floats in Float32Array on the host: they are converted here).
import type { DType } from "../ir/dtype.js";
import { f32ToBF16Bits, f32ToF16Bits } from "../ir/dtype.js";
import type { Tensor } from "../tensor.js";

export function hostBytes(src: ArrayLike<number>, dtype: DType): Uint8Array {
  const n = src.length;
  let out: ArrayBufferView;
  switch (dtype) {
    case "float32":
      out = Float32Array.from(src);
      break;
    case "float64":
      out = Float64Array.from(src);
      break;
    case "int64": {
      const a = new BigInt64Array(n);
      for (let i = 0; i < n; i++) a[i] = BigInt(Math.trunc(src[i]!));
      out = a;
      break;
    }
    case "int32":
      out = Int32Array.from(src);
      break;
    case "int8":
      out = Int8Array.from(src);
      break;
    case "uint8":
    case "bool":
      out = Uint8Array.from(src);
      break;
    case "float16": {
      const a = new Uint16Array(n);
      for (let i = 0; i < n; i++) a[i] = f32ToF16Bits(src[i]!);
      out = a;
      break;
    }
    case "bfloat16": {
      const a = new Uint16Array(n);
      for (let i = 0; i < n; i++) a[i] = f32ToBF16Bits(src[i]!);
      out = a;
      break;
    }
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/** The tensor's elements in row-major order as little-endian bytes of its dtype. */
export function tensorBytes(t: Tensor): Uint8Array {
  return hostBytes(t._contiguousHost() as ArrayLike<number>, t.dtype);
}
