// torch.onnx.export(module, args, path, { dynamicAxes | dynamicShapes, opsetVersion }): export the
// forward (torch.export), lower it to ONNX (lower.ts) and write the protobuf; initializers go to
// an external data file (`<path>.data`) when the model would pass protobuf's 2 GB limit, or
// when asked with `externalData: true`.
import onnxPkg from "onnx-proto";
import { Tensor } from "../../tensor.js";
import { Dim, type DimSym } from "../dims.js";
import { ExportError } from "../errors.js";
import { exportProgram, type ExportOptions } from "../export.js";
import { ExportedProgram } from "../program.js";
import { lowerToOnnx, type LoweredModel } from "./lower.js";
import type { OnnxOptions } from "./options.js";

const { onnx } = onnxPkg;

export interface OnnxExportOptions extends OnnxOptions, ExportOptions {
  /** PyTorch's legacy form: input name -> { dim: "name" } or [dims] (each dim named `<input>_dim<d>`) */
  dynamicAxes?: Record<string, Record<number, string> | number[]>;
  /** store initializers in `<path>.data` (automatic above protobuf's 2 GB limit) */
  externalData?: boolean;
}

export interface OnnxExportResult {
  path: string;
  /** the external data file, when one was written */
  dataPath: string | null;
  inputNames: string[];
  outputNames: string[];
  program: ExportedProgram;
}

/** Above this the protobuf cannot hold the initializers inline (2 GiB minus headroom for the graph). */
const INLINE_LIMIT = 2 ** 31 - 2 ** 26;
/** Initializers smaller than this stay inline even with external data (as onnx's size_threshold). */
const SMALL_INIT = 1024;

function defaultInputNames(args: readonly unknown[]): string[] {
  return args.map((_, i) => `input_${i}`);
}

/** dynamicAxes (by input name) as dynamicShapes (by argument position); top-level tensor arguments only. */
function axesToShapes(args: readonly unknown[], names: string[], axes: NonNullable<OnnxExportOptions["dynamicAxes"]>): unknown[] {
  const dims = new Map<string, DimSym>();
  const spec: unknown[] = args.map(() => null);
  for (const [input, ax] of Object.entries(axes)) {
    const i = names.indexOf(input);
    if (i < 0) continue; // output axes follow from the graph
    if (!(args[i] instanceof Tensor)) throw new ExportError(`torch.onnx.export: dynamicAxes names '${input}', which is not a tensor argument`);
    const entries: [number, string][] = Array.isArray(ax) ? ax.map((d) => [d, `${input}_dim${d}`]) : Object.entries(ax).map(([d, n]) => [Number(d), n]);
    const s: Record<number, DimSym> = {};
    for (const [d, n] of entries) {
      const name = n.replace(/[^A-Za-z0-9_]/g, "_").replace(/^(\d)/, "_$1");
      if (!dims.has(name)) dims.set(name, Dim(name));
      s[d] = dims.get(name)!;
    }
    spec[i] = s;
  }
  return spec;
}

function toProgram(target: unknown, args: readonly unknown[], opts: OnnxExportOptions): ExportedProgram {
  if (target instanceof ExportedProgram) return target;
  if (opts.dynamicAxes && opts.dynamicShapes) throw new ExportError("torch.onnx.export: pass dynamicAxes or dynamicShapes, not both");
  const names = opts.inputNames ?? defaultInputNames(args);
  const dynamicShapes = opts.dynamicAxes ? axesToShapes(args, names, opts.dynamicAxes) : opts.dynamicShapes;
  return exportProgram(target as Parameters<typeof exportProgram>[0], args, { dynamicShapes });
}

function lower(ep: ExportedProgram, args: readonly unknown[], opts: OnnxExportOptions): LoweredModel {
  const inputNames = opts.inputNames ?? (args.every((a) => a instanceof Tensor) ? defaultInputNames(args) : undefined);
  return lowerToOnnx(ep, { ...opts, inputNames });
}

/** The ONNX file in memory (every initializer inline; for browsers and small models). */
export function onnxBytes(target: unknown, args: readonly unknown[] = [], opts: OnnxExportOptions = {}): Uint8Array {
  const ep = toProgram(target, args, opts);
  const { model, initializers } = lower(ep, args, opts);
  const total = initializers.reduce((s, i) => s + i.bytes.length, 0);
  if (total > INLINE_LIMIT) throw new ExportError(`torch.onnx: the initializers take ${total} bytes, more than a protobuf holds; use torch.onnx.export with a path (external data)`);
  return onnx.ModelProto.encode(model).finish();
}

/** torch.onnx.export: write the module's forward as an ONNX model to `path`. */
export async function onnxExport(target: unknown, args: readonly unknown[], path: string, opts: OnnxExportOptions = {}): Promise<OnnxExportResult> {
  if (typeof path !== "string" || !path) throw new TypeError("torch.onnx.export: path must be a file name");
  const ep = toProgram(target, args, opts);
  const { model, initializers } = lower(ep, args, opts);
  const total = initializers.reduce((s, i) => s + i.bytes.length, 0);
  const fs = await import("node:fs/promises");
  const { basename } = await import("node:path");
  let dataPath: string | null = null;
  if (opts.externalData || total > INLINE_LIMIT) {
    dataPath = `${path}.data`;
    const fh = await fs.open(dataPath, "w");
    try {
      let off = 0;
      for (const init of initializers) {
        if (init.bytes.length < SMALL_INIT) continue;
        const pad = (64 - (off % 64)) % 64; // aligned so runtimes can map the data
        if (pad) await fh.write(new Uint8Array(pad), 0, pad, off);
        off += pad;
        await fh.write(init.bytes, 0, init.bytes.length, off);
        init.proto.rawData = null;
        init.proto.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
        init.proto.externalData = [
          { key: "location", value: basename(dataPath) },
          { key: "offset", value: String(off) },
          { key: "length", value: String(init.bytes.length) },
        ];
        off += init.bytes.length;
      }
    } finally {
      await fh.close();
    }
  }
  await fs.writeFile(path, onnx.ModelProto.encode(model).finish());
  const g = model.graph!;
  return { path, dataPath, inputNames: g.input!.map((i) => i.name!), outputNames: g.output!.map((o) => o.name!), program: ep };
}
