// The parts of TFLite's published schema (tensorflow/compiler/mlir/lite/schema/schema.fbs,
// file identifier "TFL3") the converter writes, as flatbuffers Builder calls: each table's
// fields are added at their slot numbers in the schema (a union takes two slots: its type, then
// its value). The enum values below are the schema's.
import * as flatbuffers from "flatbuffers";

export const FILE_IDENTIFIER = "TFL3";
export const SCHEMA_VERSION = 3;

/** enum TensorType */
export const TensorType = { FLOAT32: 0, FLOAT16: 1, INT32: 2, UINT8: 3, INT64: 4, BOOL: 6, INT16: 7, INT8: 9 } as const;

/** enum BuiltinOperator (the ones the converter emits) */
export const Op = {
  ADD: 0, AVERAGE_POOL_2D: 1, CONCATENATION: 2, CONV_2D: 3, DEPTHWISE_CONV_2D: 4, DEQUANTIZE: 6, FLOOR: 8, FULLY_CONNECTED: 9,
  LOGISTIC: 14, MAX_POOL_2D: 17, MUL: 18, RELU: 19, RESHAPE: 22, SOFTMAX: 25, TANH: 28, PAD: 34, GATHER: 36, TRANSPOSE: 39,
  MEAN: 40, SUB: 41, DIV: 42, SQUEEZE: 43, STRIDED_SLICE: 45, EXP: 47, LOG_SOFTMAX: 50, CAST: 53, MAXIMUM: 55, ARG_MAX: 56,
  MINIMUM: 57, LESS: 58, NEG: 59, PADV2: 60, GREATER: 61, GREATER_EQUAL: 62, LESS_EQUAL: 63, SIN: 66, TRANSPOSE_CONV: 67,
  EXPAND_DIMS: 70, EQUAL: 71, NOT_EQUAL: 72, LOG: 73, SUM: 74, SQRT: 75, RSQRT: 76, SHAPE: 77, POW: 78, REDUCE_MAX: 82,
  PACK: 83, LOGICAL_OR: 84, LOGICAL_AND: 86, LOGICAL_NOT: 87, REDUCE_MIN: 89, FLOOR_DIV: 90, FILL: 94, RANGE: 96, ABS: 101,
  CEIL: 104, GATHER_ND: 107, COS: 108, SELECT_V2: 123, BATCH_MATMUL: 126, CUMSUM: 128, BROADCAST_TO: 130, GELU: 150,
} as const;
export type OpName = keyof typeof Op;

/** union BuiltinOptions: 1-based position of each options table in the union */
export const Options = {
  Conv2DOptions: 1, DepthwiseConv2DOptions: 2, Pool2DOptions: 5, FullyConnectedOptions: 8, SoftmaxOptions: 9, ConcatenationOptions: 10,
  AddOptions: 11, ReshapeOptions: 17, MulOptions: 21, PadOptions: 22, GatherOptions: 23, TransposeOptions: 26, ReducerOptions: 27,
  SubOptions: 28, DivOptions: 29, SqueezeOptions: 30, StridedSliceOptions: 32, LogSoftmaxOptions: 36, CastOptions: 37,
  ArgMaxOptions: 40, TransposeConvOptions: 49, ShapeOptions: 55, PackOptions: 59, BatchMatMulOptions: 101, CumsumOptions: 102,
  GeluOptions: 116,
} as const;
export type OptionsName = keyof typeof Options;

/** enum Padding */
export const Padding = { SAME: 0, VALID: 1 } as const;

/** A builtin-options table: its union tag and the fields to write (slot -> value). */
export interface OptionsValue {
  type: OptionsName;
  /** [slot, kind, value]: kind i8/bool, i32, f32, or an int32 vector */
  fields: [number, "i8" | "i32" | "f32" | "i32[]", number | number[]][];
}

export type B = flatbuffers.Builder;

export function int32Vector(b: B, v: readonly number[]): number {
  b.startVector(4, v.length, 4);
  for (let i = v.length - 1; i >= 0; i--) b.addInt32(v[i]!);
  return b.endVector();
}

function int64Vector(b: B, v: readonly number[]): number {
  b.startVector(8, v.length, 8);
  for (let i = v.length - 1; i >= 0; i--) b.addInt64(BigInt(v[i]!));
  return b.endVector();
}

function float32Vector(b: B, v: readonly number[]): number {
  b.startVector(4, v.length, 4);
  for (let i = v.length - 1; i >= 0; i--) b.addFloat32(v[i]!);
  return b.endVector();
}

function offsetVector(b: B, v: readonly number[]): number {
  b.startVector(4, v.length, 4);
  for (let i = v.length - 1; i >= 0; i--) b.addOffset(v[i]!);
  return b.endVector();
}

/** A [ubyte] vector with the schema's force_align: 16 (Buffer.data), copied in one piece. */
function alignedBytes(b: B, v: Uint8Array): number {
  b.startVector(1, v.length, 16);
  b.pad(v.length);
  const at = b.dataBuffer().capacity() - b.offset();
  b.dataBuffer().bytes().set(v, at);
  return b.endVector();
}

export function writeOptions(b: B, o: OptionsValue): number {
  const vecs = new Map<number, number>();
  for (const [slot, kind, v] of o.fields) if (kind === "i32[]") vecs.set(slot, int32Vector(b, v as number[]));
  const n = Math.max(0, ...o.fields.map((f) => f[0] + 1));
  b.startObject(n);
  for (const [slot, kind, v] of o.fields) {
    if (kind === "i8") b.addFieldInt8(slot, v as number, null);
    else if (kind === "i32") b.addFieldInt32(slot, v as number, null);
    else if (kind === "f32") b.addFieldFloat32(slot, v as number, null);
    else b.addFieldOffset(slot, vecs.get(slot)!, 0);
  }
  return b.endObject();
}

export interface QuantValue {
  scale: number[];
  zeroPoint: number[];
  quantizedDimension: number;
}

/** table QuantizationParameters { min:0, max:1, scale:2, zero_point:3, details_type:4, details:5, quantized_dimension:6 } */
function writeQuant(b: B, q: QuantValue): number {
  const scale = float32Vector(b, q.scale);
  const zp = int64Vector(b, q.zeroPoint);
  b.startObject(7);
  b.addFieldOffset(2, scale, 0);
  b.addFieldOffset(3, zp, 0);
  b.addFieldInt32(6, q.quantizedDimension, 0);
  return b.endObject();
}

export interface TensorValue {
  shape: number[];
  /** -1 for dynamic dims; omitted when static */
  shapeSignature: number[] | null;
  type: number;
  buffer: number;
  name: string;
  quant: QuantValue | null;
}

/** table Tensor { shape:0, type:1, buffer:2, name:3, quantization:4, is_variable:5, sparsity:6, shape_signature:7, has_rank:8 } */
export function writeTensor(b: B, t: TensorValue): number {
  const shape = int32Vector(b, t.shape);
  const sig = t.shapeSignature ? int32Vector(b, t.shapeSignature) : 0;
  const name = b.createString(t.name);
  const q = t.quant ? writeQuant(b, t.quant) : 0;
  b.startObject(9);
  b.addFieldOffset(0, shape, 0);
  b.addFieldInt8(1, t.type, 0);
  b.addFieldInt32(2, t.buffer, 0);
  b.addFieldOffset(3, name, 0);
  if (q) b.addFieldOffset(4, q, 0);
  if (sig) b.addFieldOffset(7, sig, 0);
  b.addFieldInt8(8, 1, 0);
  return b.endObject();
}

export interface OperatorValue {
  opcodeIndex: number;
  inputs: number[];
  outputs: number[];
  options: OptionsValue | null;
}

/** table Operator { opcode_index:0, inputs:1, outputs:2, builtin_options_type:3, builtin_options:4, ... } */
export function writeOperator(b: B, o: OperatorValue): number {
  const ins = int32Vector(b, o.inputs);
  const outs = int32Vector(b, o.outputs);
  const opts = o.options ? writeOptions(b, o.options) : 0;
  b.startObject(5);
  b.addFieldInt32(0, o.opcodeIndex, 0);
  b.addFieldOffset(1, ins, 0);
  b.addFieldOffset(2, outs, 0);
  if (o.options) {
    b.addFieldInt8(3, Options[o.options.type], 0);
    b.addFieldOffset(4, opts, 0);
  }
  return b.endObject();
}

/** table OperatorCode { deprecated_builtin_code:0 (byte), custom_code:1, version:2, builtin_code:3 } */
export function writeOperatorCode(b: B, code: number, version: number): number {
  b.startObject(4);
  b.addFieldInt8(0, Math.min(code, 127), 0);
  b.addFieldInt32(2, version, 1);
  b.addFieldInt32(3, code, 0);
  return b.endObject();
}

/** table Buffer { data:0 (force_align 16), offset:1, size:2 } */
export function writeBuffer(b: B, data: Uint8Array | null): number {
  const d = data && data.length ? alignedBytes(b, data) : 0;
  b.startObject(3);
  if (d) b.addFieldOffset(0, d, 0);
  return b.endObject();
}

/** table SubGraph { tensors:0, inputs:1, outputs:2, operators:3, name:4 } */
export function writeSubGraph(b: B, tensors: number[], inputs: number[], outputs: number[], operators: number[], name: string): number {
  const t = offsetVector(b, tensors);
  const i = int32Vector(b, inputs);
  const o = int32Vector(b, outputs);
  const ops = offsetVector(b, operators);
  const n = b.createString(name);
  b.startObject(5);
  b.addFieldOffset(0, t, 0);
  b.addFieldOffset(1, i, 0);
  b.addFieldOffset(2, o, 0);
  b.addFieldOffset(3, ops, 0);
  b.addFieldOffset(4, n, 0);
  return b.endObject();
}

/** table TensorMap { name:0, tensor_index:1 } */
function writeTensorMap(b: B, name: string, index: number): number {
  const n = b.createString(name);
  b.startObject(2);
  b.addFieldOffset(0, n, 0);
  b.addFieldInt32(1, index, 0);
  return b.endObject();
}

/** table SignatureDef { inputs:0, outputs:1, signature_key:2, deprecated_tag:3, subgraph_index:4 } */
export function writeSignature(b: B, key: string, subgraph: number, inputs: [string, number][], outputs: [string, number][]): number {
  const ins = offsetVector(b, inputs.map(([n, i]) => writeTensorMap(b, n, i)));
  const outs = offsetVector(b, outputs.map(([n, i]) => writeTensorMap(b, n, i)));
  const k = b.createString(key);
  b.startObject(5);
  b.addFieldOffset(0, ins, 0);
  b.addFieldOffset(1, outs, 0);
  b.addFieldOffset(2, k, 0);
  b.addFieldInt32(4, subgraph, 0);
  return b.endObject();
}

/** table Model { version:0, operator_codes:1, subgraphs:2, description:3, buffers:4, metadata_buffer:5, metadata:6, signature_defs:7 } */
export function writeModel(b: B, codes: number[], subgraphs: number[], description: string, buffers: number[], signatures: number[]): void {
  const c = offsetVector(b, codes);
  const s = offsetVector(b, subgraphs);
  const d = b.createString(description);
  const bufs = offsetVector(b, buffers);
  const sigs = offsetVector(b, signatures);
  b.startObject(8);
  b.addFieldInt32(0, SCHEMA_VERSION, 0);
  b.addFieldOffset(1, c, 0);
  b.addFieldOffset(2, s, 0);
  b.addFieldOffset(3, d, 0);
  b.addFieldOffset(4, bufs, 0);
  b.addFieldOffset(7, sigs, 0);
  b.finish(b.endObject(), FILE_IDENTIFIER);
}

export { flatbuffers };
