// The safetensors format: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}, __metadata__?}, then the raw little-endian bytes.
// load/save are pure (browser-safe); the file functions import node:fs only when called.
// `safeOpen` reads the header alone and each tensor's bytes on demand (positioned reads), so one
// tensor of a large file costs only its own bytes; sharded checkpoints follow Hugging Face's
// `model.safetensors.index.json` ({metadata: {total_size}, weight_map: {name: shard file}}).
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
import { atomicWriteFile } from "./atomic.js";

/**
 * Every dtype of the format. Those torchts lacks are widened exactly where possible:
 * I16/U16 -> int32, U32/U64 -> int64 (int64 is exact to 2^53), F8_E4M3/F8_E5M2 -> float32.
 */
const FILE_DTYPES: Record<string, { dtype: DType; size: number }> = {
  F64: { dtype: "float64", size: 8 },
  F32: { dtype: "float32", size: 4 },
  F16: { dtype: "float16", size: 2 },
  BF16: { dtype: "bfloat16", size: 2 },
  F8_E4M3: { dtype: "float32", size: 1 },
  F8_E5M2: { dtype: "float32", size: 1 },
  I64: { dtype: "int64", size: 8 },
  U64: { dtype: "int64", size: 8 },
  I32: { dtype: "int32", size: 4 },
  U32: { dtype: "int64", size: 4 },
  I16: { dtype: "int32", size: 2 },
  U16: { dtype: "int32", size: 2 },
  I8: { dtype: "int8", size: 1 },
  U8: { dtype: "uint8", size: 1 },
  BOOL: { dtype: "bool", size: 1 },
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
  fileDtype: string;
  dtype: DType;
  shape: number[];
  begin: number;
  end: number;
}

function fail(source: string, problem: string): never {
  throw new Error(`safetensors: ${source}: ${problem}`);
}

/** The header length from the first 8 bytes, checked against the total size. */
function headerLength(first8: Uint8Array, total: number, source: string): number {
  if (total < 8) fail(source, `truncated file: ${total} bytes, need at least 8 for the header length`);
  const n = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER)) fail(source, `header length ${n} is too large (limit ${MAX_HEADER} bytes)`);
  const headerLen = Number(n);
  if (8 + headerLen > total)
    fail(source, `header length ${headerLen} is larger than the rest of the file (${total - 8} bytes): truncated file?`);
  return headerLen;
}

interface Header {
  entries: Entry[];
  metadata: Record<string, string>;
  /** Byte offset of the data section in the file. */
  dataStart: number;
}

/** Validate the JSON header against a data section of `dataLen` bytes starting at `dataStart`. */
function parseJsonHeader(json: Uint8Array, dataStart: number, dataLen: number, source: string): Header {
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(json));
  } catch (e) {
    fail(source, `bad JSON header: ${(e as Error).message}`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) fail(source, "bad JSON header: not an object");
  const entries: Entry[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, raw] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (raw === null || typeof raw !== "object" || Array.isArray(raw) || Object.values(raw).some((v) => typeof v !== "string"))
        fail(source, "bad __metadata__: must be an object of strings");
      metadata = raw as Record<string, string>;
      continue;
    }
    const info = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (info === null || typeof info !== "object" || Array.isArray(info)) fail(source, `tensor '${name}': entry is not an object`);
    const fileDtype = String(info.dtype);
    if (!Object.hasOwn(FILE_DTYPES, fileDtype)) fail(source, `tensor '${name}': unknown dtype '${fileDtype}'`);
    const shape = info.shape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      fail(source, `tensor '${name}': bad shape ${JSON.stringify(shape)}`);
    const offs = info.data_offsets;
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isSafeInteger(o) && o >= 0) || offs[0] > offs[1])
      fail(source, `tensor '${name}': bad data_offsets ${JSON.stringify(offs)}`);
    const [begin, end] = offs as [number, number];
    if (end > dataLen) fail(source, `tensor '${name}': data_offsets [${begin}, ${end}] out of range (data section is ${dataLen} bytes)`);
    const want = numel(shape as number[]) * FILE_DTYPES[fileDtype]!.size;
    if (end - begin !== want)
      fail(source, `tensor '${name}': shape ${shapeStr(shape as number[])} of ${fileDtype} needs ${want} bytes but data_offsets span ${end - begin}`);
    entries.push({ name, fileDtype, dtype: FILE_DTYPES[fileDtype]!.dtype, shape: shape as number[], begin, end });
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
  return { entries, metadata, dataStart };
}

function parseHeader(bytes: Uint8Array, source: string): Header {
  const headerLen = headerLength(bytes.subarray(0, 8), bytes.length, source);
  const dataStart = 8 + headerLen;
  return parseJsonHeader(bytes.subarray(8, dataStart), dataStart, bytes.length - dataStart, source);
}

function f8ToF32(b: number, expBits: 4 | 5): number {
  const manBits = 7 - expBits;
  const bias = expBits === 4 ? 7 : 15;
  const sign = b & 0x80 ? -1 : 1;
  const e = (b >> manBits) & ((1 << expBits) - 1);
  const m = b & ((1 << manBits) - 1);
  if (expBits === 4 && e === 15 && m === 7) return NaN; // E4M3FN: no infinities, one NaN pattern
  if (expBits === 5 && e === 31) return m ? NaN : sign * Infinity;
  if (e === 0) return sign * m * 2 ** (1 - bias - manBits);
  return sign * (1 + m / (1 << manBits)) * 2 ** (e - bias);
}

// Typed-array views need aligned offsets, so each tensor's bytes are copied out first.
// (Every platform Node and browsers run on is little-endian, like the format.)
function decode(raw: Uint8Array, fileDtype: string, n: number): ArrayLike<number> {
  const buf = raw.slice().buffer;
  switch (fileDtype) {
    case "F32":
      return new Float32Array(buf, 0, n);
    case "F64":
      return new Float64Array(buf, 0, n);
    case "F16":
    case "BF16": {
      const bits = new Uint16Array(buf, 0, n);
      const out = new Float32Array(n);
      const f = fileDtype === "F16" ? f16BitsToF32 : bf16BitsToF32;
      for (let i = 0; i < n; i++) out[i] = f(bits[i]!);
      return out;
    }
    case "F8_E4M3":
    case "F8_E5M2": {
      const u = new Uint8Array(buf, 0, n);
      const eb = fileDtype === "F8_E4M3" ? 4 : 5;
      return Float32Array.from(u, (v) => f8ToF32(v, eb));
    }
    case "I64":
    case "U64": {
      const big = fileDtype === "I64" ? new BigInt64Array(buf, 0, n) : new BigUint64Array(buf, 0, n);
      const out = new Float64Array(n);
      for (let i = 0; i < n; i++) out[i] = Number(big[i]!);
      return out;
    }
    case "U32":
      return Float64Array.from(new Uint32Array(buf, 0, n));
    case "I32":
      return new Int32Array(buf, 0, n);
    case "I16":
      return Int32Array.from(new Int16Array(buf, 0, n));
    case "U16":
      return Int32Array.from(new Uint16Array(buf, 0, n));
    case "I8":
      return new Int8Array(buf, 0, n);
    case "U8":
      return new Uint8Array(buf, 0, n);
    case "BOOL":
      return new Uint8Array(buf, 0, n).map((v) => (v !== 0 ? 1 : 0));
  }
  throw new Error(`safetensors: unknown dtype '${fileDtype}'`);
}

function toTensor(e: Entry, raw: Uint8Array): Tensor {
  return fromHostData(decode(raw, e.fileDtype, numel(e.shape)), e.shape, e.dtype);
}

/** Parse safetensors bytes. `source` names the data in error messages (loadFile passes the path). */
export function load(bytes: Uint8Array, source = "<bytes>"): Record<string, Tensor> {
  const { entries, dataStart } = parseHeader(bytes, source);
  const out: Record<string, Tensor> = {};
  for (const e of entries) out[e.name] = toTensor(e, bytes.subarray(dataStart + e.begin, dataStart + e.end));
  return out;
}

/** The `__metadata__` string map of a safetensors buffer (validated like load). */
export function loadMetadata(bytes: Uint8Array, source = "<bytes>"): Record<string, string> {
  return { ...parseHeader(bytes, source).metadata };
}

type FileHandle = import("node:fs/promises").FileHandle;

/** An open safetensors file: the header is parsed and validated, tensors are read on demand. */
export class SafetensorsFile {
  private readonly byName: Map<string, Entry>;
  private constructor(
    readonly path: string,
    private fh: FileHandle | null,
    private readonly header: Header,
  ) {
    this.byName = new Map(header.entries.map((e) => [e.name, e]));
  }

  static async open(path: string): Promise<SafetensorsFile> {
    const fs = await import("node:fs/promises");
    const fh = await fs.open(path, "r");
    try {
      const size = (await fh.stat()).size;
      const first8 = new Uint8Array(8);
      if (size >= 8) await readExactly(fh, first8, 0, path);
      const headerLen = headerLength(first8, size, path);
      const json = new Uint8Array(headerLen);
      await readExactly(fh, json, 8, path);
      return new SafetensorsFile(path, fh, parseJsonHeader(json, 8 + headerLen, size - 8 - headerLen, path));
    } catch (e) {
      await fh.close();
      throw e;
    }
  }

  keys(): string[] {
    return this.header.entries.map((e) => e.name);
  }
  metadata(): Record<string, string> {
    return { ...this.header.metadata };
  }
  /** dtype (torchts's) and shape of one tensor without reading its data. */
  info(name: string): { dtype: DType; fileDtype: string; shape: number[]; byteLength: number } {
    const e = this.entry(name);
    return { dtype: e.dtype, fileDtype: e.fileDtype, shape: [...e.shape], byteLength: e.end - e.begin };
  }
  /** Read one tensor: only its own bytes come from disk. */
  async getTensor(name: string): Promise<Tensor> {
    const e = this.entry(name);
    if (!this.fh) throw new Error(`safetensors: ${this.path}: file is closed`);
    const raw = new Uint8Array(e.end - e.begin);
    await readExactly(this.fh, raw, this.header.dataStart + e.begin, this.path);
    return toTensor(e, raw);
  }
  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
  private entry(name: string): Entry {
    const e = this.byName.get(name);
    if (!e) throw new RangeError(`safetensors: ${this.path}: no tensor named '${name}'`);
    return e;
  }
}

async function readExactly(fh: FileHandle, into: Uint8Array, position: number, path: string): Promise<void> {
  let done = 0;
  while (done < into.length) {
    const { bytesRead } = await fh.read(into, done, into.length - done, position + done);
    if (bytesRead === 0) fail(path, `truncated file: unexpected end of file at byte ${position + done}`);
    done += bytesRead;
  }
}

/** Open a file for lazy reading (PyTorch users know this as `safetensors.safe_open`). */
export function safeOpen(path: string): Promise<SafetensorsFile> {
  return SafetensorsFile.open(path);
}

/** Load all tensors of a file (or only `opts.keys`), reading each tensor's bytes separately. */
export async function loadFile(path: string, opts: { keys?: string[] } = {}): Promise<Record<string, Tensor>> {
  const f = await SafetensorsFile.open(path);
  try {
    const out: Record<string, Tensor> = {};
    for (const k of opts.keys ?? f.keys()) out[k] = await f.getTensor(k);
    return out;
  } finally {
    await f.close();
  }
}

/** The `__metadata__` of a file, reading only its header. */
export async function loadFileMetadata(path: string): Promise<Record<string, string>> {
  const f = await SafetensorsFile.open(path);
  await f.close();
  return f.metadata();
}

function encodeHost(host: ArrayLike<number> & { buffer: ArrayBufferLike; byteOffset: number; byteLength: number }, dtype: DType): Uint8Array {
  const n = host.length;
  switch (dtype) {
    case "float16":
    case "bfloat16": {
      const f = dtype === "float16" ? f32ToF16Bits : f32ToBF16Bits;
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
      return Uint8Array.from({ length: n }, (_, i) => (host[i] !== 0 ? 1 : 0));
    default:
      return new Uint8Array(host.buffer, host.byteOffset, host.byteLength);
  }
}

/** Assemble header + blobs; `encoded` holds each tensor's bytes. */
function assemble(tensors: Record<string, Tensor>, encoded: Map<string, Uint8Array>, metadata?: Record<string, string>): Uint8Array {
  if (metadata)
    for (const [k, v] of Object.entries(metadata))
      if (typeof v !== "string") throw new TypeError(`safetensors.save: metadata value for '${k}' must be a string`);
  // Larger items first then by name, as the reference writer does, so every tensor stays aligned.
  const names = Object.keys(tensors).sort((a, b) => itemSize(tensors[b]!.dtype) - itemSize(tensors[a]!.dtype) || (a < b ? -1 : a > b ? 1 : 0));
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let pos = 0;
  for (const name of names) {
    const t = tensors[name]!;
    const len = encoded.get(name)!.length;
    header[name] = { dtype: FROM_DTYPE[t.dtype], shape: t.shape, data_offsets: [pos, pos + len] };
    pos += len;
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
  for (const name of names) {
    const b = encoded.get(name)!;
    out.set(b, o);
    o += b.length;
  }
  return out;
}

function checkNames(tensors: Record<string, Tensor>): void {
  if (Object.hasOwn(tensors, "__metadata__")) throw new Error("safetensors.save: '__metadata__' is reserved and cannot name a tensor");
}

/** Serialize tensors (read synchronously from host-visible devices) to safetensors bytes. */
export function save(tensors: Record<string, Tensor>, metadata?: Record<string, string>): Uint8Array {
  checkNames(tensors);
  const enc = new Map(Object.entries(tensors).map(([k, t]) => [k, encodeHost(t._contiguousHost(), t.dtype)]));
  return assemble(tensors, enc, metadata);
}

/** Like save, but reads tensors with `await t.data()`, so it works for every device. */
export async function saveAsync(tensors: Record<string, Tensor>, metadata?: Record<string, string>): Promise<Uint8Array> {
  checkNames(tensors);
  const enc = new Map<string, Uint8Array>();
  for (const [k, t] of Object.entries(tensors)) enc.set(k, encodeHost(await t.data(), t.dtype));
  return assemble(tensors, enc, metadata);
}

/** Write atomically: a temporary file in the same folder, fsync, then rename over `path`. */
export async function saveFile(tensors: Record<string, Tensor>, path: string, metadata?: Record<string, string>): Promise<void> {
  await atomicWriteFile(path, await saveAsync(tensors, metadata));
}

// ---- sharded checkpoints (Hugging Face layout) ----

export const INDEX_NAME = "model.safetensors.index.json";

export interface ShardIndex {
  metadata: { total_size: number; [k: string]: unknown };
  weight_map: Record<string, string>;
}

function tensorBytes(t: Tensor): number {
  return t.numel() * itemSize(t.dtype);
}

/**
 * Save as shards of at most `maxShardSize` bytes (a tensor larger than that gets its own shard)
 * named `model-00001-of-0000N.safetensors` plus `model.safetensors.index.json`, as
 * `save_pretrained` does; a model that fits in one shard is written as `model.safetensors`.
 * Shards are written first and the index last, each atomically.
 */
export async function saveSharded(
  tensors: Record<string, Tensor>,
  dir: string,
  opts: { maxShardSize?: number; metadata?: Record<string, string>; prefix?: string } = {},
): Promise<{ files: string[]; index: ShardIndex | null }> {
  const max = opts.maxShardSize ?? 5 * 2 ** 30;
  const prefix = opts.prefix ?? "model";
  const shards: Record<string, Tensor>[] = [];
  let cur: Record<string, Tensor> = {};
  let size = 0;
  for (const [k, t] of Object.entries(tensors)) {
    const b = tensorBytes(t);
    if (size > 0 && size + b > max) {
      shards.push(cur);
      cur = {};
      size = 0;
    }
    cur[k] = t;
    size += b;
  }
  if (Object.keys(cur).length || !shards.length) shards.push(cur);
  const { join } = await import("node:path");
  const { mkdir } = await import("node:fs/promises");
  await mkdir(dir, { recursive: true });
  const meta = { format: "pt", ...opts.metadata };
  if (shards.length === 1) {
    const name = `${prefix}.safetensors`;
    await saveFile(shards[0]!, join(dir, name), meta);
    return { files: [name], index: null };
  }
  const pad = (i: number) => String(i).padStart(5, "0");
  const files = shards.map((_, i) => `${prefix}-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`);
  const index: ShardIndex = { metadata: { total_size: 0 }, weight_map: {} };
  for (let i = 0; i < shards.length; i++) {
    await saveFile(shards[i]!, join(dir, files[i]!), meta);
    for (const [k, t] of Object.entries(shards[i]!)) {
      index.weight_map[k] = files[i]!;
      index.metadata.total_size += tensorBytes(t);
    }
  }
  await atomicWriteFile(join(dir, `${prefix}.safetensors.index.json`), new TextEncoder().encode(JSON.stringify(index, null, 2) + "\n"));
  return { files, index };
}

/**
 * Load a sharded checkpoint from its index file, or from a folder holding either
 * `model.safetensors.index.json` or a single `model.safetensors`. Each shard is opened lazily
 * and only the tensors the index assigns to it are read.
 */
export async function loadSharded(pathOrDir: string): Promise<Record<string, Tensor>> {
  const fs = await import("node:fs/promises");
  const { join, dirname } = await import("node:path");
  let indexPath = pathOrDir;
  if ((await fs.stat(pathOrDir)).isDirectory()) {
    indexPath = join(pathOrDir, INDEX_NAME);
    const single = join(pathOrDir, "model.safetensors");
    const has = async (p: string) => fs.access(p).then(() => true, () => false);
    if (!(await has(indexPath))) {
      if (await has(single)) return loadFile(single);
      throw new Error(`safetensors: ${pathOrDir}: neither ${INDEX_NAME} nor model.safetensors found`);
    }
  }
  let index: ShardIndex;
  try {
    index = JSON.parse(await fs.readFile(indexPath, "utf8")) as ShardIndex;
  } catch (e) {
    throw new Error(`safetensors: ${indexPath}: bad index file: ${(e as Error).message}`, { cause: e });
  }
  const wm = index?.weight_map;
  if (!wm || typeof wm !== "object" || Object.values(wm).some((f) => typeof f !== "string" || f.includes("/") || f.includes("\\")))
    throw new Error(`safetensors: ${indexPath}: bad index file: weight_map must map tensor names to shard file names`);
  const byFile = new Map<string, string[]>();
  for (const [k, f] of Object.entries(wm)) byFile.set(f, [...(byFile.get(f) ?? []), k]);
  const out: Record<string, Tensor> = {};
  for (const [file, keys] of byFile) {
    const f = await SafetensorsFile.open(join(dirname(indexPath), file));
    try {
      const have = new Set(f.keys());
      const missing = keys.filter((k) => !have.has(k));
      if (missing.length)
        throw new Error(`safetensors: ${indexPath}: shard ${file} lacks tensor(s) ${missing.map((k) => `'${k}'`).join(", ")} listed in the index`);
      for (const k of keys) out[k] = await f.getTensor(k);
    } finally {
      await f.close();
    }
  }
  return out;
}
