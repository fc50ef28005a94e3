// The safetensors format: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, __metadata__?}, then the raw little-endian bytes.
// load/save are pure (browser-safe); loadFile/saveFile import node:fs only when called.
import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBF16Bits,
  f32ToF16Bits,
  itemSize,
  type DType,
} from "../ir/dtype.js";
import { numel, shapeStr } from "../ir/shape.js";
import { fromHostData } from "../ops/core.js";
import type { Tensor } from "../tensor.js";

const TO_DTYPE: Record<string, DType> = {
  F32: "float32",
  F64: "float64",
  F16: "float16",
  BF16: "bfloat16",
  I64: "int64",
  I32: "int32",
  I8: "int8",
  U8: "uint8",
  BOOL: "bool",
};
const FROM_DTYPE: Record<DType, string> = {
  float32: "F32",
  float64: "F64",
  float16: "F16",
  bfloat16: "BF16",
  int64: "I64",
  int32: "I32",
  int8: "I8",
  uint8: "U8",
  bool: "BOOL",
};

// The reference implementation refuses headers above 100 MB; a larger length means a corrupt file.
const MAX_HEADER = 100_000_000;

interface Entry {
  name: string;
  dtype: DType;
  shape: number[];
  begin: number;
  end: number;
}

function fail(source: string, problem: string): never {
  throw new Error(`safetensors: ${source}: ${problem}`);
}

function parseHeader(bytes: Uint8Array, source: string): { entries: Entry[]; dataStart: number } {
  if (bytes.length < 8) fail(source, `truncated file: ${bytes.length} bytes, need at least 8 for the header length`);
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER)) fail(source, `header length ${n} is too large (limit ${MAX_HEADER} bytes)`);
  const headerLen = Number(n);
  if (8 + headerLen > bytes.length)
    fail(source, `header length ${headerLen} is larger than the rest of the file (${bytes.length - 8} bytes): truncated file?`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(8, 8 + headerLen)));
  } catch (e) {
    fail(source, `bad JSON header: ${(e as Error).message}`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) fail(source, "bad JSON header: not an object");
  const dataStart = 8 + headerLen;
  const dataLen = bytes.length - dataStart;
  const entries: Entry[] = [];
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") continue;
    const info = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (info === null || typeof info !== "object") fail(source, `tensor '${name}': entry is not an object`);
    const dtype = TO_DTYPE[String(info.dtype)];
    if (!dtype) fail(source, `tensor '${name}': unknown dtype '${String(info.dtype)}'`);
    const shape = info.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      fail(source, `tensor '${name}': bad shape ${JSON.stringify(shape)}`);
    const offs = info.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isSafeInteger(o) && o >= 0) || offs[0] > offs[1])
      fail(source, `tensor '${name}': bad data_offsets ${JSON.stringify(offs)}`);
    const [begin, end] = offs as [number, number];
    if (end > dataLen) fail(source, `tensor '${name}': data_offsets [${begin}, ${end}] out of range (data section is ${dataLen} bytes)`);
    const want = numel(shape as number[]) * itemSize(dtype);
    if (end - begin !== want)
      fail(source, `tensor '${name}': shape ${shapeStr(shape as number[])} of ${info.dtype} needs ${want} bytes but data_offsets span ${end - begin}`);
    entries.push({ name, dtype, shape: shape as number[], begin, end });
  }
  // The data section must be tiled exactly by the tensors: no overlaps, no holes, no trailing bytes.
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let pos = 0;
  let prev = "";
  for (const e of sorted) {
    if (e.begin < pos) fail(source, `tensor '${e.name}' overlaps tensor '${prev}' (starts at ${e.begin}, before ${pos})`);
    if (e.begin > pos) fail(source, `non-contiguous data: ${e.begin - pos} unused bytes before tensor '${e.name}' (at ${pos})`);
    pos = e.end;
    prev = e.name;
  }
  if (pos !== dataLen) fail(source, `non-contiguous data: ${dataLen - pos} trailing bytes after the last tensor`);
  return { entries, dataStart };
}

function readMetadata(bytes: Uint8Array): Record<string, string> | undefined {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  const h = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as { __metadata__?: Record<string, string> };
  return h.__metadata__;
}

// Typed-array views need aligned offsets, so each tensor's bytes are copied out first.
// (Every platform Node and browsers run on is little-endian, like the format.)
function decode(raw: Uint8Array, dtype: DType, n: number): ArrayLike<number> {
  const buf = raw.slice().buffer;
  switch (dtype) {
    case "float32":
      return new Float32Array(buf, 0, n);
    case "float64":
      return new Float64Array(buf, 0, n);
    case "float16":
    case "bfloat16": {
      const bits = new Uint16Array(buf, 0, n);
      const out = new Float32Array(n);
      const f = dtype === "float16" ? f16BitsToF32 : bf16BitsToF32;
      for (let i = 0; i < n; i++) out[i] = f(bits[i]!);
      return out;
    }
    case "int64": {
      const big = new BigInt64Array(buf, 0, n);
      const out = new Float64Array(n);
      for (let i = 0; i < n; i++) out[i] = Number(big[i]!);
      return out;
    }
    case "int32":
      return new Int32Array(buf, 0, n);
    case "int8":
      return new Int8Array(buf, 0, n);
    case "uint8":
      return new Uint8Array(buf, 0, n);
    case "bool": {
      const u = new Uint8Array(buf, 0, n);
      return u.map((v) => (v !== 0 ? 1 : 0));
    }
  }
}

/** Parse safetensors bytes. `source` names the data in error messages (loadFile passes the path). */
export function load(bytes: Uint8Array, source = "<bytes>"): Record<string, Tensor> {
  const { entries, dataStart } = parseHeader(bytes, source);
  const out: Record<string, Tensor> = {};
  for (const e of entries) {
    const raw = bytes.subarray(dataStart + e.begin, dataStart + e.end);
    out[e.name] = fromHostData(decode(raw, e.dtype, numel(e.shape)), e.shape, e.dtype);
  }
  return out;
}

/** The `__metadata__` string map of a safetensors buffer (validated like load). */
export function loadMetadata(bytes: Uint8Array, source = "<bytes>"): Record<string, string> {
  parseHeader(bytes, source);
  return readMetadata(bytes) ?? {};
}

export async function loadFile(path: string): Promise<Record<string, Tensor>> {
  const fs = await import("node:fs/promises");
  const buf = await fs.readFile(path);
  return load(new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength), path);
}

function encode(t: Tensor): Uint8Array {
  const host = t._contiguousHost();
  const n = host.length;
  switch (t.dtype) {
    case "float16":
    case "bfloat16": {
      const f = t.dtype === "float16" ? f32ToF16Bits : f32ToBF16Bits;
      const bits = new Uint16Array(n);
      for (let i = 0; i < n; i++) bits[i] = f(host[i]!);
      return new Uint8Array(bits.buffer);
    }
    case "int64": {
      const big = new BigInt64Array(n);
      for (let i = 0; i < n; i++) big[i] = BigInt(host[i]!);
      return new Uint8Array(big.buffer);
    }
    case "bool":
      return (host as Uint8Array).map((v) => (v !== 0 ? 1 : 0));
    default:
      return new Uint8Array(host.buffer, host.byteOffset, host.byteLength);
  }
}

/** Serialize tensors (read synchronously from host-visible devices) to safetensors bytes. */
export function save(tensors: Record<string, Tensor>, metadata?: Record<string, string>): Uint8Array {
  if (metadata)
    for (const [k, v] of Object.entries(metadata))
      if (typeof v !== "string") throw new TypeError(`safetensors.save: metadata value for '${k}' must be a string`);
  // Larger items first then by name, as the reference writer does, so every tensor stays aligned.
  const names = Object.keys(tensors).sort((a, b) => itemSize(tensors[b]!.dtype) - itemSize(tensors[a]!.dtype) || (a < b ? -1 : a > b ? 1 : 0));
  if (names.includes("__metadata__")) throw new Error("safetensors.save: '__metadata__' is reserved and cannot name a tensor");
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  const blobs: Uint8Array[] = [];
  let pos = 0;
  for (const name of names) {
    const t = tensors[name]!;
    const b = encode(t);
    header[name] = { dtype: FROM_DTYPE[t.dtype], shape: t.shape, data_offsets: [pos, pos + b.length] };
    blobs.push(b);
    pos += b.length;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const pad = (8 - (json.length % 8)) % 8; // spaces keep the data section 8-byte aligned
  if (pad) {
    const p = new Uint8Array(json.length + pad).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.length + pos);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let o = 8 + json.length;
  for (const b of blobs) {
    out.set(b, o);
    o += b.length;
  }
  return out;
}

/** Write atomically: a temporary file in the same folder, fsync, then rename over `path`. */
export async function saveFile(tensors: Record<string, Tensor>, path: string, metadata?: Record<string, string>): Promise<void> {
  const bytes = save(tensors, metadata);
  const fs = await import("node:fs/promises");
  const tmp = `${path}.tmp-${process.pid}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  try {
    const fh = await fs.open(tmp, "w");
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, path);
  } catch (e) {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    throw e;
  }
}
