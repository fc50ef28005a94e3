// Just enough protobuf to write one-node ONNX models (no onnx package needed): every graph
// input is fed at run time, so there are no initializers.

type Field = [number, "varint", number] | [number, "bytes", Uint8Array | string] | [number, "msg", Uint8Array];

function varint(out: number[], v: number): void {
  while (v > 127) {
    out.push((v & 127) | 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

export function msg(fields: Field[]): Uint8Array {
  const out: number[] = [];
  for (const [no, kind, v] of fields) {
    if (kind === "varint") {
      varint(out, (no << 3) | 0);
      varint(out, v as number);
    } else {
      const b = typeof v === "string" ? new TextEncoder().encode(v) : (v as Uint8Array);
      varint(out, (no << 3) | 2);
      varint(out, b.length);
      for (const x of b) out.push(x);
    }
  }
  return new Uint8Array(out);
}

function valueInfo(name: string, shape: number[]): Uint8Array {
  const dims = shape.map((d) => [1, "msg", msg([[1, "varint", d]])] as Field);
  const tensorType = msg([[1, "varint", 1 /* FLOAT */], [2, "msg", msg(dims)]]);
  return msg([[1, "bytes", name], [2, "msg", msg([[1, "msg", tensorType]])]]);
}

export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  ints?: Record<string, number[]>; // INTS attributes
  int?: Record<string, number>; // INT attributes
  float?: Record<string, number>;
}

export function model(nodes: OnnxNode[], inputs: Record<string, number[]>, outputs: Record<string, number[]>): Uint8Array {
  const nodeMsgs = nodes.map((n) => {
    const f: Field[] = [];
    for (const i of n.inputs) f.push([1, "bytes", i]);
    for (const o of n.outputs) f.push([2, "bytes", o]);
    f.push([4, "bytes", n.op]);
    for (const [k, vs] of Object.entries(n.ints ?? {}))
      f.push([5, "msg", msg([[1, "bytes", k], ...vs.map((v) => [8, "varint", v] as Field), [20, "varint", 7]])]);
    for (const [k, v] of Object.entries(n.int ?? {}))
      f.push([5, "msg", msg([[1, "bytes", k], [3, "varint", v], [20, "varint", 2]])]);
    return [1, "msg", msg(f)] as Field;
  });
  const graph = msg([
    ...nodeMsgs,
    [2, "bytes", "g"],
    ...Object.entries(inputs).map(([k, s]) => [11, "msg", valueInfo(k, s)] as Field),
    ...Object.entries(outputs).map(([k, s]) => [12, "msg", valueInfo(k, s)] as Field),
  ]);
  return msg([
    [1, "varint", 8], // ir_version
    [8, "msg", msg([[1, "bytes", ""], [2, "varint", 17]])], // opset 17
    [7, "msg", graph],
  ]);
}
