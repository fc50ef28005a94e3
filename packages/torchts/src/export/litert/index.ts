// torch.litert.convert(module, sampleArgs, { quantize, dynamicShapes, signatures }) -> a LiteRT
// (.tflite) model: the forward exported once (torch.export), then one static subgraph per
// signature (the sample's, "serving_default", and any named extra argument sets at other sizes
// of the dynamic dims, as LiteRT-Torch's multi-signature models: LiteRT.js runs fixed shapes),
// all sharing one copy of the weights. quantize: "int8" stores FULLY_CONNECTED and convolution
// weights as symmetric per-channel int8 (dynamic-range quantization, TFLite's hybrid kernels);
// "float16" stores float constants as FLOAT16 with DEQUANTIZE ops.
import { Tensor } from "../../tensor.js";
import { ExportError } from "../errors.js";
import { exportProgram, type ExportOptions, type Exportable } from "../export.js";
import { ExportedProgram } from "../program.js";
import { sizesOf, specialize } from "../specialize.js";
import { flatten, type Leaf } from "../tracer.js";
import { ModelTables, SubgraphLowering, sanitizeName, type Quantize } from "./lower.js";
import { Op, flatbuffers, writeBuffer, writeModel, writeOperator, writeOperatorCode, writeSignature, writeSubGraph, writeTensor } from "./schema.js";

export interface ConvertOptions extends ExportOptions {
  quantize?: "int8" | "float16";
  /** more signatures: name -> the forward's arguments at other sizes of the dynamic dims */
  signatures?: Record<string, unknown[]>;
  inputNames?: string[];
  outputNames?: string[];
}

export interface SignatureInfo {
  key: string;
  inputs: { name: string; shape: number[]; dtype: string }[];
  outputs: { name: string; shape: number[]; dtype: string }[];
}

const TYPE_NAMES: Record<number, string> = { 0: "float32", 1: "float16", 2: "int32", 3: "uint8", 6: "bool", 9: "int8" };

/** A converted model: the .tflite bytes and what its signatures take and return. */
export class LiteRtModel {
  constructor(
    readonly bytes: Uint8Array,
    readonly signatures: SignatureInfo[],
    readonly quantize: Quantize,
  ) {}
  get size(): number {
    return this.bytes.length;
  }
  async save(path: string): Promise<void> {
    const { writeFile } = await import("node:fs/promises");
    await writeFile(path, this.bytes);
  }
}

/** Operator versions the runtime registers from (TFLite's op resolver starts BROADCAST_TO at 2); 1 otherwise. */
function opVersion(code: number): number {
  return code === Op.BROADCAST_TO ? 2 : 1;
}

function flatInputs(args: readonly unknown[]): Tensor[] {
  const leaves: Leaf[] = [];
  flatten([...args], "$in", leaves);
  return leaves.map((l) => l.t);
}

export function convert(target: Exportable | ExportedProgram, sampleArgs: readonly unknown[], opts: ConvertOptions = {}): LiteRtModel {
  const q = opts.quantize ?? null;
  if (q !== null && q !== "int8" && q !== "float16") throw new TypeError(`torch.litert.convert: quantize must be "int8" or "float16", got ${JSON.stringify(q)}`);
  const ep = target instanceof ExportedProgram ? target : exportProgram(target, sampleArgs, { dynamicShapes: opts.dynamicShapes });
  const sigs: [string, Tensor[]][] = [["serving_default", target instanceof ExportedProgram && !sampleArgs.length ? [] : flatInputs(sampleArgs)]];
  for (const [k, a] of Object.entries(opts.signatures ?? {})) {
    if (sigs.some(([n]) => n === k)) throw new ExportError(`torch.litert.convert: signature '${k}' is given twice`);
    sigs.push([k, flatInputs(a)]);
  }
  const users = ep.userInputs();
  const inputNames = users.map((u, i) => opts.inputNames?.[i] ?? sanitizeName(u.name, "args", `input_${i}`).replace(/^(\d)/, "args_$1"));
  const outputNames = ep.graph.outputs.map((o, i) => opts.outputNames?.[i] ?? sanitizeName(o.name, "out", ep.graph.outputs.length === 1 ? "output" : `output_${i}`));
  const tables = new ModelTables();
  const subgraphs = sigs.map(([key, inputs]) => {
    if (!inputs.length && ep.graph.dims.length) throw new ExportError(`torch.litert.convert: signature '${key}' needs sample arguments to fix the dynamic dims`);
    const env = inputs.length ? (ep.bindDims(inputs), sizesOf(ep, inputs)) : new Map<string, number>();
    const sg = new SubgraphLowering(specialize(ep, env), tables, q).run(inputNames, outputNames);
    return { key, sg };
  });
  const b = new flatbuffers.Builder(1 << 20);
  const bufs = tables.buffers.map((d) => writeBuffer(b, d));
  const sgOffsets = subgraphs.map(({ key, sg }) => {
    const ts = sg.tensors.map((t) => writeTensor(b, t));
    const ops = sg.operators.map((o) => writeOperator(b, o));
    return writeSubGraph(b, ts, sg.inputs, sg.outputs, ops, key);
  });
  const codes = tables.codes.map((c) => writeOperatorCode(b, c, opVersion(c)));
  const sigOffsets = subgraphs.map(({ key, sg }, i) =>
    writeSignature(
      b,
      key,
      i,
      sg.inputNames.map((n, j) => [n, sg.inputs[j]!]),
      sg.outputNames.map((n, j) => [n, sg.outputs[j]!]),
    ),
  );
  writeModel(b, codes, sgOffsets, "torchts (torch.litert.convert)", bufs, sigOffsets);
  const info: SignatureInfo[] = subgraphs.map(({ key, sg }) => ({
    key,
    inputs: sg.inputs.map((t, j) => ({ name: sg.inputNames[j]!, shape: sg.tensors[t]!.shape, dtype: TYPE_NAMES[sg.tensors[t]!.type]! })),
    outputs: sg.outputs.map((t, j) => ({ name: sg.outputNames[j]!, shape: sg.tensors[t]!.shape, dtype: TYPE_NAMES[sg.tensors[t]!.type]! })),
  }));
  return new LiteRtModel(b.asUint8Array(), info, q);
}
