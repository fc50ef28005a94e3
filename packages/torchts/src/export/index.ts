// torch.export (ExportedProgram), torch.onnx and torch.litert: src/index.ts re-exports these.
// node:fs is imported only when a file function is called (the library also runs in browsers).
import { Dim, DimSym } from "./dims.js";
import { ExportError } from "./errors.js";
import { exportProgram } from "./export.js";
import { ExportedProgram } from "./program.js";
import { CausalLMLogits } from "./hf.js";
import { onnxBytes, onnxExport } from "./onnx/index.js";
import { convert, LiteRtModel } from "./litert/index.js";

export type { DimOptions } from "./dims.js";
export type { ExportOptions } from "./export.js";
export type { GraphJSON } from "./graph.js";
export type { OnnxExportOptions, OnnxExportResult } from "./onnx/index.js";
export type { ConvertOptions, SignatureInfo } from "./litert/index.js";

/** torch.export.save(program, path): one safetensors file (the graph is in its metadata). */
async function save(ep: ExportedProgram, path: string): Promise<void> {
  if (!(ep instanceof ExportedProgram)) throw new TypeError("torch.export.save: expected an ExportedProgram");
  const { writeFile } = await import("node:fs/promises");
  await writeFile(path, ep.serialize());
}

/** torch.export.load(path) -> ExportedProgram */
async function load(path: string): Promise<ExportedProgram> {
  const { readFile } = await import("node:fs/promises");
  return ExportedProgram.deserialize(new Uint8Array(await readFile(path)), path);
}

export const exportApi = { export: exportProgram, save, load, Dim, DimSym, ExportedProgram, ExportError, CausalLMLogits };
export { Dim, ExportedProgram, ExportError, exportProgram };

/** torch.onnx: export(module, args, path, opts) writes an ONNX model; toBytes gives it in memory. */
export const onnx = { export: onnxExport, toBytes: onnxBytes };

/** torch.litert: convert(module, sampleArgs, opts) -> LiteRtModel (.tflite bytes, save(path)). */
export const litert = { convert, LiteRtModel };
