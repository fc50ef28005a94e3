// Tensors between Node (tests) and the page: little-endian bytes in base64 with shape and dtype
// (JSON number arrays of image batches would make playwright's page.evaluate slow).
export type HostDtype = "float32" | "int32" | "int64" | "bool";
export interface HostTensor {
  b64: string;
  shape: number[];
  dtype: HostDtype;
}

export type Typed = Float32Array | Int32Array | BigInt64Array | Uint8Array;

export function encode(a: Typed, shape: readonly number[], dtype: HostDtype): HostTensor {
  const u8 = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  let s = "";
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode(...u8.subarray(i, i + 0x8000));
  return { b64: btoa(s), shape: [...shape], dtype };
}

export function decode(t: HostTensor): Typed {
  const s = atob(t.b64);
  const u8 = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) u8[i] = s.charCodeAt(i);
  const b = u8.buffer;
  if (t.dtype === "float32") return new Float32Array(b);
  if (t.dtype === "int32") return new Int32Array(b);
  if (t.dtype === "int64") return new BigInt64Array(b);
  return u8;
}

