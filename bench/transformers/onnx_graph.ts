// A small ONNX graph builder that writes whole models: initializers (weights as raw_data, written
// to the file without copying them into one buffer), named symbolic dims, int64/bool tensors,
// negative ints and FLOAT attributes. bench/suites/onnx_proto.ts only writes one-node float
// graphs without initializers, so this is a separate file rather than an extension of it.
import { closeSync, openSync, writeSync } from "node:fs";

/** ONNX TensorProto.DataType */
export const DT = { float: 1, int64: 7, bool: 9 } as const;
export type ElemType = keyof typeof DT;

/** Protobuf bytes of a message under construction; large payloads stay separate chunks. */
class Pb {
  chunks: Uint8Array[] = [];
  private cur: number[] = [];
  private flush(): void {
    if (this.cur.length) this.chunks.push(Uint8Array.from(this.cur));
    this.cur = [];
  }
  get length(): number {
    return this.chunks.reduce((s, c) => s + c.length, 0) + this.cur.length;
  }
  varint(v: number | bigint): void {
    // int64 fields: negatives are 10-byte two's complement varints
    let x = BigInt.asUintN(64, BigInt(v));
    while (x > 127n) {
      this.cur.push(Number(x & 127n) | 128);
      x >>= 7n;
    }
    this.cur.push(Number(x));
  }
  tag(no: number, wire: number): void {
    this.varint((no << 3) | wire);
  }
  int(no: number, v: number | bigint): void {
    this.tag(no, 0);
    this.varint(v);
  }
  float(no: number, v: number): void {
    this.tag(no, 5);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.cur.push(...b);
  }
  bytes(no: number, v: Uint8Array | string): void {
    const b = typeof v === "string" ? new TextEncoder().encode(v) : v;
    this.tag(no, 2);
    this.varint(b.length);
    if (b.length > 4096) {
      this.flush();
      this.chunks.push(b);
    } else for (const x of b) this.cur.push(x);
  }
  msg(no: number, m: Pb): void {
    this.tag(no, 2);
    this.varint(m.length);
    m.flush();
    this.flush();
    this.chunks.push(...m.chunks);
  }
  done(): Uint8Array[] {
    this.flush();
    return this.chunks;
  }
}

export type Dim = number | string;
export type AttrValue = number | number[] | { f: number } | { t: { type: ElemType; dims: number[]; data: ArrayBufferView } };

function tensorProto(name: string, type: ElemType, dims: number[], data: ArrayBufferView): Pb {
  const t = new Pb();
  for (const d of dims) t.int(1, d);
  t.int(2, DT[type]);
  t.bytes(8, name);
  t.bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return t;
}

function valueInfo(name: string, type: ElemType, shape: Dim[]): Pb {
  const dims = new Pb();
  for (const d of shape) {
    const dim = new Pb();
    if (typeof d === "number") dim.int(1, d);
    else dim.bytes(2, d);
    dims.msg(1, dim);
  }
  const tt = new Pb();
  tt.int(1, DT[type]);
  tt.msg(2, dims);
  const tp = new Pb();
  tp.msg(1, tt);
  const vi = new Pb();
  vi.bytes(1, name);
  vi.msg(2, tp);
  return vi;
}

/**
 * Nodes get generated output names; `node()` returns them. Attributes: an integer number is INT,
 * an array INTS, `{ f }` FLOAT, `{ t }` TENSOR.
 */
export class Graph {
  private nodes: Pb[] = [];
  private inits: Pb[] = [];
  private inputs: Pb[] = [];
  private outputs: Pb[] = [];
  private n = 0;
  private consts = new Map<string, string>();

  input(name: string, type: ElemType, shape: Dim[]): string {
    this.inputs.push(valueInfo(name, type, shape));
    return name;
  }
  output(name: string, type: ElemType, shape: Dim[]): void {
    this.outputs.push(valueInfo(name, type, shape));
  }
  init(name: string, type: ElemType, dims: number[], data: ArrayBufferView): string {
    this.inits.push(tensorProto(name, type, dims, data));
    return name;
  }
  /** A small int64 constant (deduplicated): shapes, axes, indices. */
  i64(values: number[], dims: number[] = [values.length]): string {
    const key = `i64:${dims}:${values}`;
    let name = this.consts.get(key);
    if (!name) {
      name = this.init(`const_${this.consts.size}`, "int64", dims, BigInt64Array.from(values.map(BigInt)));
      this.consts.set(key, name);
    }
    return name;
  }
  /** A float scalar constant (deduplicated). */
  f32(value: number): string {
    const key = `f32:${value}`;
    let name = this.consts.get(key);
    if (!name) {
      name = this.init(`const_${this.consts.size}`, "float", [], Float32Array.of(value));
      this.consts.set(key, name);
    }
    return name;
  }
  node(op: string, inputs: string[], attrs: Record<string, AttrValue> = {}, nOut = 1, outNames?: string[]): string[] {
    const id = this.n++;
    const outs = outNames ?? Array.from({ length: nOut }, (_, i) => `${op}_${id}${nOut > 1 ? `_${i}` : ""}`);
    const p = new Pb();
    for (const i of inputs) p.bytes(1, i);
    for (const o of outs) p.bytes(2, o);
    p.bytes(3, `${op}_${id}`);
    p.bytes(4, op);
    for (const [k, v] of Object.entries(attrs)) {
      const a = new Pb();
      a.bytes(1, k);
      if (typeof v === "number") {
        a.int(3, v);
        a.int(20, 2);
      } else if (Array.isArray(v)) {
        for (const x of v) a.int(8, x);
        a.int(20, 7);
      } else if ("f" in v) {
        a.float(2, v.f);
        a.int(20, 1);
      } else {
        a.msg(5, tensorProto("", v.t.type, v.t.dims, v.t.data));
        a.int(20, 4);
      }
      p.msg(5, a);
    }
    this.nodes.push(p);
    return outs;
  }
  /** One-output node. */
  op(op: string, inputs: string[], attrs: Record<string, AttrValue> = {}, outName?: string): string {
    return this.node(op, inputs, attrs, 1, outName ? [outName] : undefined)[0]!;
  }

  /** Writes the model (ir_version 8, default-domain opset `opset`) chunk by chunk. */
  save(file: string, opset = 17): number {
    const g = new Pb();
    for (const n of this.nodes) g.msg(1, n);
    g.bytes(2, "main");
    for (const t of this.inits) g.msg(5, t);
    for (const v of this.inputs) g.msg(11, v);
    for (const v of this.outputs) g.msg(12, v);
    const m = new Pb();
    m.int(1, 8);
    m.bytes(2, "torchts");
    const os = new Pb();
    os.bytes(1, "");
    os.int(2, opset);
    m.msg(8, os);
    m.msg(7, g);
    const fd = openSync(file, "w");
    let total = 0;
    try {
      for (const c of m.done()) {
        let off = 0;
        while (off < c.length) off += writeSync(fd, c, off, c.length - off);
        total += c.length;
      }
    } finally {
      closeSync(fd);
    }
    return total;
  }
}
