// GGUF (llama.cpp's file format, version 3): write llama-family torchts models as F32, F16 or
// Q8_0, and read F32/F16/Q8_0/Q4_0 llama-family files back into a torchts model.
// Layout: "GGUF", version u32, tensor count u64, kv count u64, key/values, tensor infos
// (name, dims innermost first, ggml type, offset), padding to general.alignment, tensor data.
// Names and the Q/K row permutation of the "llama" architecture follow convert_hf_to_gguf.py.
import * as torch from "../index.js";
import type { Tensor, DType } from "../index.js";
import { f16BitsToF32, f32ToF16Bits } from "../ir/dtype.js";
import { parseConfig, type PretrainedConfig } from "./config.js";
import type { PreTrainedModel } from "./modeling_utils.js";
import type { WeightSource } from "./weights.js";
import { modelClassFor } from "./auto.js";

export const GGML_TYPE = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8 } as const;
type GgmlType = (typeof GGML_TYPE)[keyof typeof GGML_TYPE];
const TYPE_NAME: Record<number, string> = { 0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 30: "BF16" };
const QK = 32; // values per Q8_0 / Q4_0 block
const ALIGNMENT = 32;

// gguf metadata value types
const V = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12 } as const;

export type GGUFValue = number | bigint | boolean | string | GGUFValue[];
export interface GGUFTensorInfo {
  name: string;
  /** torch order (outermost first) */
  shape: number[];
  type: number;
  /** absolute byte offset in the file */
  offset: number;
}
export interface GGUFFile {
  version: number;
  metadata: Map<string, GGUFValue>;
  tensors: GGUFTensorInfo[];
}

// ---------------- writing ----------------

class Writer {
  chunks: Uint8Array[] = [];
  length = 0;
  push(b: Uint8Array): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  u32(v: number): void {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, v, true);
    this.push(b);
  }
  u64(v: number): void {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(v), true);
    this.push(b);
  }
  str(s: string): void {
    const e = new TextEncoder().encode(s);
    this.u64(e.length);
    this.push(e);
  }
  scalar(type: number, v: GGUFValue): void {
    const b = new Uint8Array(type === V.U64 || type === V.I64 || type === V.F64 ? 8 : type === V.U8 || type === V.I8 || type === V.BOOL ? 1 : 4);
    const dv = new DataView(b.buffer);
    if (type === V.STRING) return this.str(String(v));
    if (type === V.U32) dv.setUint32(0, Number(v), true);
    else if (type === V.I32) dv.setInt32(0, Number(v), true);
    else if (type === V.F32) dv.setFloat32(0, Number(v), true);
    else if (type === V.BOOL) dv.setUint8(0, v ? 1 : 0);
    else if (type === V.U64) dv.setBigUint64(0, BigInt(v as number), true);
    else if (type === V.F64) dv.setFloat64(0, Number(v), true);
    else throw new Error(`gguf: cannot write value type ${type}`);
    this.push(b);
  }
  kv(key: string, type: number, v: GGUFValue, elemType?: number): void {
    this.str(key);
    this.u32(type);
    if (type === V.ARRAY) {
      const arr = v as GGUFValue[];
      this.u32(elemType!);
      this.u64(arr.length);
      for (const x of arr) this.scalar(elemType!, x);
    } else this.scalar(type, v);
  }
  pad(to: number): void {
    const n = (to - (this.length % to)) % to;
    if (n) this.push(new Uint8Array(n));
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.length);
    let o = 0;
    for (const c of this.chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  }
}

function encodeF16(x: Float32Array): Uint8Array {
  const b = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) b[i] = f32ToF16Bits(x[i]!);
  return new Uint8Array(b.buffer);
}

/** ggml's quantize_row_q8_0_ref: per block of 32, d = amax / 127 (stored f16), q = round(x / d). */
export function quantizeQ8_0(x: Float32Array): Uint8Array {
  if (x.length % QK) throw new RangeError(`gguf: Q8_0 needs a multiple of ${QK} values per row, got ${x.length}`);
  const nb = x.length / QK;
  const out = new Uint8Array(nb * 34);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(x[b * QK + j]!));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    dv.setUint16(b * 34, f32ToF16Bits(d), true);
    for (let j = 0; j < QK; j++) dv.setInt8(b * 34 + 2 + j, Math.round(Math.fround(x[b * QK + j]! * id)));
  }
  return out;
}

/** ggml's quantize_row_q4_0_ref: d = (signed max-magnitude value) / -8, q = min(15, trunc(x/d + 8.5)). */
export function quantizeQ4_0(x: Float32Array): Uint8Array {
  if (x.length % QK) throw new RangeError(`gguf: Q4_0 needs a multiple of ${QK} values per row, got ${x.length}`);
  const nb = x.length / QK;
  const out = new Uint8Array(nb * 18);
  const dv = new DataView(out.buffer);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < QK; j++) {
      const v = x[b * QK + j]!;
      if (Math.abs(v) > amax) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = max / -8;
    const id = d ? 1 / d : 0;
    dv.setUint16(b * 18, f32ToF16Bits(d), true);
    for (let j = 0; j < QK / 2; j++) {
      const x0 = Math.min(15, Math.trunc(Math.fround(x[b * QK + j]! * id) + 8.5));
      const x1 = Math.min(15, Math.trunc(Math.fround(x[b * QK + QK / 2 + j]! * id) + 8.5));
      out[b * 18 + 2 + j] = x0 | (x1 << 4);
    }
  }
  return out;
}

/** The ggml bytes of a tensor's data in the given type. */
function encodeTensor(data: Float32Array, type: GgmlType): Uint8Array {
  if (type === GGML_TYPE.F32) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (type === GGML_TYPE.F16) return encodeF16(data);
  if (type === GGML_TYPE.Q8_0) return quantizeQ8_0(data);
  return quantizeQ4_0(data);
}

// convert_hf_to_gguf's LlamaModel.permute: interleave the two rotary halves of each head's rows
function permuteRows(w: Tensor, heads: number, inverse: boolean): Tensor {
  const [O, I] = w.shape as [number, number];
  return inverse
    ? w.reshape(heads, O / heads / 2, 2, I).transpose(1, 2).reshape(O, I)
    : w.reshape(heads, 2, O / heads / 2, I).transpose(1, 2).reshape(O, I);
}

const ARCH: Record<string, string> = { llama: "llama", mistral: "llama", qwen2: "qwen2", qwen3: "qwen3" };

/** HF parameter name -> GGUF tensor name (llama family), or null when it is not stored. */
function ggufName(hf: string): string | null {
  const fixed: Record<string, string> = { "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight" };
  if (fixed[hf]) return fixed[hf]!;
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  if (!m) return null;
  const parts: Record<string, string> = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
  };
  const p = parts[m[2]!];
  return p ? `blk.${m[1]}.${p}` : null;
}

export interface WriteGGUFOptions {
  /** Storage of the 2-D weights (norms and biases stay F32, as llama.cpp does). Default "f16". */
  type?: "f32" | "f16" | "q8_0" | "q4_0";
  name?: string;
  /** Byte-level BPE token strings in id order; default: the 256 byte tokens, then "<t256>", "<t257>", ... */
  tokens?: string[];
  /** BPE merges ("a b"); default none. */
  merges?: string[];
}

/** GPT-2's bytes_to_unicode table as the first 256 tokens, then unique placeholders. */
function placeholderVocab(n: number): string[] {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const map = new Map<number, string>(bs.map((b) => [b, String.fromCharCode(b)]));
  let extra = 0;
  for (let b = 0; b < 256; b++) if (!map.has(b)) map.set(b, String.fromCharCode(256 + extra++));
  return Array.from({ length: n }, (_, i) => (i < 256 ? map.get(i)! : `<t${i}>`));
}

/** Serialize a llama-family model (Llama/Mistral, Qwen2, Qwen3) to GGUF bytes. */
export async function toGGUF(model: PreTrainedModel, opts: WriteGGUFOptions = {}): Promise<Uint8Array> {
  const cfg = model.config;
  const arch = ARCH[cfg.modelType];
  if (!arch) throw new Error(`gguf: model_type '${cfg.modelType}' is not supported for writing (llama, mistral, qwen2, qwen3)`);
  const kind = opts.type ?? "f16";
  const wtype = { f32: GGML_TYPE.F32, f16: GGML_TYPE.F16, q8_0: GGML_TYPE.Q8_0, q4_0: GGML_TYPE.Q4_0 }[kind];
  const fileType = { f32: 0, f16: 1, q8_0: 7, q4_0: 2 }[kind];
  const tensors: { name: string; shape: number[]; type: GgmlType; data: Uint8Array }[] = [];
  const named = new Map([...model.namedParameters()]);
  if (cfg.tieWordEmbeddings) named.delete("lm_head.weight");
  for (const [hf, p] of named) {
    const name = ggufName(hf);
    if (!name) throw new Error(`gguf: no GGUF name for parameter '${hf}'`);
    let w: Tensor = p.detach();
    if (arch === "llama" && name.endsWith("attn_q.weight")) w = permuteRows(w, cfg.numAttentionHeads, false);
    if (arch === "llama" && name.endsWith("attn_k.weight")) w = permuteRows(w, cfg.numKeyValueHeads, false);
    const data = new Float32Array((await w.float().contiguous().data()) as ArrayLike<number>);
    const type: GgmlType = w.ndim < 2 ? GGML_TYPE.F32 : (wtype === GGML_TYPE.Q8_0 || wtype === GGML_TYPE.Q4_0) && w.shape[1]! % QK ? GGML_TYPE.F16 : wtype;
    tensors.push({ name, shape: [...w.shape], type, data: encodeTensor(data, type) });
  }
  const md: [string, number, GGUFValue, number?][] = [
    ["general.architecture", V.STRING, arch],
    ["general.name", V.STRING, opts.name ?? cfg.modelType],
    ["general.file_type", V.U32, fileType],
    ["general.alignment", V.U32, ALIGNMENT],
    [`${arch}.context_length`, V.U32, cfg.maxPositionEmbeddings],
    [`${arch}.embedding_length`, V.U32, cfg.hiddenSize],
    [`${arch}.block_count`, V.U32, cfg.numHiddenLayers],
    [`${arch}.feed_forward_length`, V.U32, cfg.intermediateSize],
    [`${arch}.rope.dimension_count`, V.U32, cfg.headDim],
    [`${arch}.rope.freq_base`, V.F32, cfg.rope!.ropeTheta],
    [`${arch}.attention.head_count`, V.U32, cfg.numAttentionHeads],
    [`${arch}.attention.head_count_kv`, V.U32, cfg.numKeyValueHeads],
    [`${arch}.attention.key_length`, V.U32, cfg.headDim],
    [`${arch}.attention.value_length`, V.U32, cfg.headDim],
    [`${arch}.attention.layer_norm_rms_epsilon`, V.F32, cfg.normEps],
    [`${arch}.vocab_size`, V.U32, cfg.vocabSize],
    // a byte-level BPE vocabulary (llama.cpp's "gpt2" tokenizer) so llama.cpp can load the file
    ["tokenizer.ggml.model", V.STRING, "gpt2"],
    ["tokenizer.ggml.pre", V.STRING, "default"],
    ["tokenizer.ggml.tokens", V.ARRAY, opts.tokens ?? placeholderVocab(cfg.vocabSize), V.STRING],
    ["tokenizer.ggml.token_type", V.ARRAY, new Array<number>(cfg.vocabSize).fill(1), V.I32],
    ["tokenizer.ggml.merges", V.ARRAY, opts.merges ?? [], V.STRING],
  ];
  if (cfg.slidingWindow !== null) md.push([`${arch}.attention.sliding_window`, V.U32, cfg.slidingWindow]);
  if (cfg.bosTokenId !== null) md.push(["tokenizer.ggml.bos_token_id", V.U32, cfg.bosTokenId]);
  if (cfg.eosTokenId.length) md.push(["tokenizer.ggml.eos_token_id", V.U32, cfg.eosTokenId[0]!]);
  const w = new Writer();
  w.push(new TextEncoder().encode("GGUF"));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(md.length);
  for (const [k, t, v, e] of md) w.kv(k, t, v, e);
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    offsets.push(offset);
    offset += t.data.length;
    offset += (ALIGNMENT - (offset % ALIGNMENT)) % ALIGNMENT;
  }
  for (const [i, t] of tensors.entries()) {
    w.str(t.name);
    w.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) w.u64(d); // ne[0] is the innermost dim
    w.u32(t.type);
    w.u64(offsets[i]!);
  }
  w.pad(ALIGNMENT);
  for (const t of tensors) {
    w.push(t.data);
    w.pad(ALIGNMENT);
  }
  return w.bytes();
}

export async function saveGGUF(model: PreTrainedModel, path: string, opts: WriteGGUFOptions = {}): Promise<void> {
  const fs = await import("node:fs/promises");
  await fs.writeFile(path, await toGGUF(model, opts));
}

// ---------------- reading ----------------

class Reader {
  dv: DataView;
  pos = 0;
  constructor(readonly bytes: Uint8Array) {
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  u32(): number {
    const v = this.dv.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(): number {
    const v = this.dv.getBigUint64(this.pos, true);
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`gguf: 64-bit value ${v} too large`);
    return Number(v);
  }
  str(): string {
    const n = this.u64();
    const s = new TextDecoder().decode(this.bytes.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
  value(type: number): GGUFValue {
    const dv = this.dv;
    const at = this.pos;
    switch (type) {
      case V.U8: this.pos += 1; return dv.getUint8(at);
      case V.I8: this.pos += 1; return dv.getInt8(at);
      case V.U16: this.pos += 2; return dv.getUint16(at, true);
      case V.I16: this.pos += 2; return dv.getInt16(at, true);
      case V.U32: this.pos += 4; return dv.getUint32(at, true);
      case V.I32: this.pos += 4; return dv.getInt32(at, true);
      case V.F32: this.pos += 4; return dv.getFloat32(at, true);
      case V.BOOL: this.pos += 1; return dv.getUint8(at) !== 0;
      case V.STRING: return this.str();
      case V.U64: this.pos += 8; return Number(dv.getBigUint64(at, true));
      case V.I64: this.pos += 8; return Number(dv.getBigInt64(at, true));
      case V.F64: this.pos += 8; return dv.getFloat64(at, true);
      case V.ARRAY: {
        const et = this.u32();
        const n = this.u64();
        const out: GGUFValue[] = [];
        for (let i = 0; i < n; i++) out.push(this.value(et));
        return out;
      }
    }
    throw new Error(`gguf: unknown metadata value type ${type} at byte ${at}`);
  }
}

/** Parse a GGUF header (metadata and tensor directory). */
export function parseGGUF(bytes: Uint8Array): GGUFFile {
  const r = new Reader(bytes);
  const magic = new TextDecoder().decode(bytes.subarray(0, 4));
  if (magic !== "GGUF") throw new Error(`gguf: bad magic '${magic}' (not a GGUF file)`);
  r.pos = 4;
  const version = r.u32();
  if (version !== 2 && version !== 3) throw new Error(`gguf: unsupported version ${version} (2 and 3 are supported)`);
  const nt = r.u64();
  const nkv = r.u64();
  const metadata = new Map<string, GGUFValue>();
  for (let i = 0; i < nkv; i++) {
    const k = r.str();
    metadata.set(k, r.value(r.u32()));
  }
  const infos: { name: string; shape: number[]; type: number; rel: number }[] = [];
  for (let i = 0; i < nt; i++) {
    const name = r.str();
    const nd = r.u32();
    const ne: number[] = [];
    for (let d = 0; d < nd; d++) ne.push(r.u64());
    infos.push({ name, shape: ne.reverse(), type: r.u32(), rel: r.u64() });
  }
  const align = Number(metadata.get("general.alignment") ?? ALIGNMENT);
  const dataStart = r.pos + ((align - (r.pos % align)) % align);
  return { version, metadata, tensors: infos.map((t) => ({ name: t.name, shape: t.shape, type: t.type, offset: dataStart + t.rel })) };
}

/** Dequantize one tensor's data to float32. */
export function decodeGGUFTensor(bytes: Uint8Array, t: GGUFTensorInfo): Float32Array {
  const n = t.shape.reduce((a, b) => a * b, 1);
  const dv = new DataView(bytes.buffer, bytes.byteOffset + t.offset);
  const out = new Float32Array(n);
  switch (t.type) {
    case GGML_TYPE.F32:
      for (let i = 0; i < n; i++) out[i] = dv.getFloat32(4 * i, true);
      return out;
    case GGML_TYPE.F16:
      for (let i = 0; i < n; i++) out[i] = f16BitsToF32(dv.getUint16(2 * i, true));
      return out;
    case GGML_TYPE.Q8_0:
      for (let b = 0; b < n / QK; b++) {
        const d = f16BitsToF32(dv.getUint16(b * 34, true));
        for (let j = 0; j < QK; j++) out[b * QK + j] = d * dv.getInt8(b * 34 + 2 + j);
      }
      return out;
    case GGML_TYPE.Q4_0:
      for (let b = 0; b < n / QK; b++) {
        const d = f16BitsToF32(dv.getUint16(b * 18, true));
        for (let j = 0; j < QK / 2; j++) {
          const q = dv.getUint8(b * 18 + 2 + j);
          out[b * QK + j] = ((q & 15) - 8) * d;
          out[b * QK + QK / 2 + j] = ((q >> 4) - 8) * d;
        }
      }
      return out;
  }
  throw new Error(`gguf: tensor '${t.name}' has type ${TYPE_NAME[t.type] ?? t.type}; supported: F32, F16, Q8_0, Q4_0`);
}

/** transformers-style config from GGUF metadata (llama, qwen2, qwen3 architectures). */
export function ggufConfig(f: GGUFFile): PretrainedConfig {
  const arch = String(f.metadata.get("general.architecture"));
  if (!["llama", "qwen2", "qwen3"].includes(arch)) throw new Error(`gguf: architecture '${arch}' is not supported (llama, qwen2, qwen3)`);
  const m = (k: string) => f.metadata.get(`${arch}.${k}`);
  const need = (k: string) => {
    const v = m(k);
    if (v === undefined) throw new Error(`gguf: missing metadata '${arch}.${k}'`);
    return Number(v);
  };
  const heads = need("attention.head_count");
  const hidden = need("embedding_length");
  const tokens = f.metadata.get("tokenizer.ggml.tokens") as unknown[] | undefined;
  const embd = f.tensors.find((t) => t.name === "token_embd.weight");
  const raw: Record<string, unknown> = {
    model_type: arch,
    architectures: [{ llama: "LlamaForCausalLM", qwen2: "Qwen2ForCausalLM", qwen3: "Qwen3ForCausalLM" }[arch]],
    vocab_size: Number(m("vocab_size") ?? tokens?.length ?? embd?.shape[0]),
    hidden_size: hidden,
    intermediate_size: need("feed_forward_length"),
    num_hidden_layers: need("block_count"),
    num_attention_heads: heads,
    num_key_value_heads: Number(m("attention.head_count_kv") ?? heads),
    head_dim: Number(m("attention.key_length") ?? hidden / heads),
    max_position_embeddings: Number(m("context_length") ?? 2048),
    rms_norm_eps: need("attention.layer_norm_rms_epsilon"),
    rope_theta: Number(m("rope.freq_base") ?? 10000),
    tie_word_embeddings: !f.tensors.some((t) => t.name === "output.weight"),
    attention_bias: f.tensors.some((t) => t.name === "blk.0.attn_output.bias"),
    bos_token_id: f.metadata.get("tokenizer.ggml.bos_token_id") ?? null,
    eos_token_id: f.metadata.get("tokenizer.ggml.eos_token_id") ?? null,
  };
  const sw = m("attention.sliding_window");
  if (sw !== undefined) Object.assign(raw, { sliding_window: Number(sw), use_sliding_window: true, max_window_layers: 0 });
  return parseConfig(raw);
}

class GGUFSource implements WeightSource {
  readonly byHf = new Map<string, GGUFTensorInfo>();
  constructor(readonly dir: string, readonly bytes: Uint8Array, readonly file: GGUFFile, readonly config: PretrainedConfig) {
    const arch = String(file.metadata.get("general.architecture"));
    const toHf = new Map<string, string>();
    const L = config.numHiddenLayers;
    const names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"];
    for (let i = 0; i < L; i++)
      for (const s of ["input_layernorm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"])
        names.push(`model.layers.${i}.${s}`);
    for (let i = 0; i < L; i++)
      for (const p of ["q", "k", "v", "o"])
        for (const s of ["weight", "bias"]) names.push(`model.layers.${i}.self_attn.${p}_proj.${s}`);
    for (let i = 0; i < L; i++) names.push(`model.layers.${i}.self_attn.q_norm.weight`, `model.layers.${i}.self_attn.k_norm.weight`);
    for (const n of names) toHf.set(ggufName(n)!, n);
    for (const t of file.tensors) {
      const hf = toHf.get(t.name);
      if (!hf) throw new Error(`gguf: unexpected tensor '${t.name}' for architecture '${arch}'`);
      this.byHf.set(hf, t);
    }
  }
  keys(): string[] {
    return [...this.byHf.keys()];
  }
  shapeOf(key: string): number[] {
    return this.byHf.get(key)!.shape;
  }
  async load(key: string, opts: { device?: string; dtype?: DType } = {}): Promise<Tensor> {
    const t = this.byHf.get(key)!;
    let w = torch.tensor(decodeGGUFTensor(this.bytes, t), { dtype: "float32", device: opts.device }).reshape(...t.shape);
    const arch = String(this.file.metadata.get("general.architecture"));
    if (arch === "llama" && key.endsWith("q_proj.weight")) w = permuteRows(w, this.config.numAttentionHeads, true);
    if (arch === "llama" && key.endsWith("k_proj.weight")) w = permuteRows(w, this.config.numKeyValueHeads, true);
    return opts.dtype ? w.to(opts.dtype) : w.contiguous();
  }
}

/** Load a llama-family GGUF file (F32/F16/Q8_0/Q4_0 tensors, all dequantized to float32 unless opts.dtype). */
export async function loadGGUF(path: string, opts: { device?: string; dtype?: DType } = {}): Promise<PreTrainedModel> {
  const fs = await import("node:fs/promises");
  const buf = await fs.readFile(path);
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  const file = parseGGUF(bytes);
  const config = ggufConfig(file);
  const cls = modelClassFor(config);
  const model = new cls(config, { meta: true, device: opts.device });
  await model.loadCheckpoint(new GGUFSource(path, bytes, file, config), opts);
  model.eval();
  return model;
}
