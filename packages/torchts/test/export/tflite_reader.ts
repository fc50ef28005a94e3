// Reads a .tflite back with flatbuffers' ByteBuffer by the field slots of TFLite's schema.fbs
// (Model, SubGraph, Tensor, Operator, OperatorCode, Buffer, SignatureDef), so tests can check
// what the converter wrote independently of the writer's helpers.
import * as flatbuffers from "flatbuffers";

export interface ReadTensor {
  name: string;
  shape: number[];
  type: number;
  buffer: number;
  scale: number[] | null;
  quantizedDimension: number;
}
export interface ReadOperator {
  opcode: number;
  inputs: number[];
  outputs: number[];
  optionsType: number;
}
export interface ReadModel {
  version: number;
  codes: { builtin: number; version: number }[];
  subgraphs: { name: string; tensors: ReadTensor[]; inputs: number[]; outputs: number[]; operators: ReadOperator[] }[];
  bufferSizes: number[];
  signatures: { key: string; subgraph: number; inputs: string[]; outputs: string[] }[];
}

export function readTflite(bytes: Uint8Array): ReadModel {
  const bb = new flatbuffers.ByteBuffer(bytes);
  if (!bb.__has_identifier("TFL3")) throw new Error("not a TFL3 flatbuffer");
  const field = (table: number, slot: number) => bb.__offset(table, 4 + 2 * slot);
  const u32 = (t: number, s: number, d = 0) => (field(t, s) ? bb.readUint32(t + field(t, s)) : d);
  const i32 = (t: number, s: number, d = 0) => (field(t, s) ? bb.readInt32(t + field(t, s)) : d);
  const i8 = (t: number, s: number, d = 0) => (field(t, s) ? bb.readInt8(t + field(t, s)) : d);
  const u8 = (t: number, s: number, d = 0) => (field(t, s) ? bb.readUint8(t + field(t, s)) : d);
  const str = (t: number, s: number) => (field(t, s) ? (bb.__string(t + field(t, s)) as string) : "");
  const vec = (t: number, s: number): { start: number; len: number } => {
    const o = field(t, s);
    return o ? { start: bb.__vector(t + o), len: bb.__vector_len(t + o) } : { start: 0, len: 0 };
  };
  const ints = (t: number, s: number) => {
    const v = vec(t, s);
    return Array.from({ length: v.len }, (_, i) => bb.readInt32(v.start + 4 * i));
  };
  const floats = (t: number, s: number) => {
    const v = vec(t, s);
    return Array.from({ length: v.len }, (_, i) => bb.readFloat32(v.start + 4 * i));
  };
  const tables = (t: number, s: number) => {
    const v = vec(t, s);
    return Array.from({ length: v.len }, (_, i) => bb.__indirect(v.start + 4 * i));
  };
  const model = bb.readInt32(bb.position()) + bb.position();
  return {
    version: u32(model, 0),
    codes: tables(model, 1).map((c) => ({ builtin: i32(c, 3, i8(c, 0)), version: i32(c, 2, 1) })),
    subgraphs: tables(model, 2).map((sg) => ({
      name: str(sg, 4),
      tensors: tables(sg, 0).map((t) => {
        const q = field(t, 4) ? bb.__indirect(t + field(t, 4)) : 0;
        return { name: str(t, 3), shape: ints(t, 0), type: i8(t, 1), buffer: u32(t, 2), scale: q ? floats(q, 2) : null, quantizedDimension: q ? i32(q, 6) : 0 };
      }),
      inputs: ints(sg, 1),
      outputs: ints(sg, 2),
      operators: tables(sg, 3).map((o) => ({ opcode: u32(o, 0), inputs: ints(o, 1), outputs: ints(o, 2), optionsType: u8(o, 3) })),
    })),
    bufferSizes: tables(model, 4).map((b) => vec(b, 0).len),
    signatures: tables(model, 7).map((s) => ({
      key: str(s, 2),
      subgraph: u32(s, 4),
      inputs: tables(s, 0).map((m) => str(m, 0)),
      outputs: tables(s, 1).map((m) => str(m, 0)),
    })),
  };
}
