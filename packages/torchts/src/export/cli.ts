// `torchts convert --model DIR|FILE --to tflite|onnx [--quantize int8|float16] [--out FILE]`:
// a Hugging Face folder (config.json + safetensors) is exported as (input_ids, attention_mask) ->
// logits; a file written by torch.export.save (or a folder holding model.pt2) is converted as is.
// ONNX keeps batch and sequence dynamic; a .tflite gets one static signature per --seq-len.
// Prints one JSON line describing what it wrote.
import { parseArgs } from "node:util";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../index.js";
import { AutoModelForCausalLM } from "../transformers/index.js";
import { Module } from "../nn/module.js";
import { CausalLMLogits } from "./hf.js";
import type { ExportedProgram } from "./program.js";
import { evalSym } from "./graph.js";

const USAGE = `usage: torchts convert --model DIR|FILE --to tflite|onnx [--quantize int8|float16] [--out FILE]
  --model       a Hugging Face folder (config.json, model.safetensors) or a torch.export.save file (.pt2)
  --to          tflite (LiteRT) or onnx
  --quantize    tflite only: int8 (dynamic-range weights) or float16
  --out         output file (default: <model>/model.tflite or <model>/model.onnx)
  --batch N     batch size of the sample (default 1; dynamic in ONNX)
  --seq-len L   sequence length(s) of the sample, comma separated: one tflite signature each (default 64)
  --max-seq-len M  upper bound of the dynamic sequence dim in ONNX (default: the model's max positions)
  --opset N     ONNX opset (default 17)`;

class UsageError extends Error {}

const OPTIONS = {
  model: { type: "string" },
  to: { type: "string" },
  quantize: { type: "string" },
  out: { type: "string" },
  batch: { type: "string" },
  "seq-len": { type: "string" },
  "max-seq-len": { type: "string" },
  opset: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

function int(v: string | undefined, flag: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${flag} must be a positive integer, got '${v}'`);
  return n;
}

function hfSample(batch: number, len: number, vocab: number): [torch.Tensor, torch.Tensor] {
  const ids = torch.tensor(Array.from({ length: batch * len }, (_, i) => (i * 7919 + 13) % vocab), { dtype: "int64" }).reshape([batch, len]);
  return [ids, torch.onesLike(ids)];
}

export async function main(argv: string[]): Promise<number> {
  let v: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };
  try {
    v = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }).values as typeof v;
  } catch (e) {
    process.stderr.write(`torchts convert: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (v.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  try {
    if (!v.model) throw new UsageError("--model is required");
    if (v.to !== "tflite" && v.to !== "onnx") throw new UsageError(`--to must be tflite or onnx${v.to ? `, got '${v.to}'` : ""}`);
    if (v.quantize !== undefined && v.quantize !== "int8" && v.quantize !== "float16") throw new UsageError(`--quantize must be int8 or float16, got '${v.quantize}'`);
    if (v.quantize && v.to !== "tflite") throw new UsageError("--quantize applies to --to tflite");
    if (!existsSync(v.model)) throw new Error(`${v.model} does not exist`);
    const batch = int(v.batch, "batch", 1);
    const lens = (v["seq-len"] ?? "64").split(",").map((s) => int(s.trim(), "seq-len", 64));
    const isDir = statSync(v.model).isDirectory();
    const programFile = isDir ? (existsSync(join(v.model, "model.pt2")) ? join(v.model, "model.pt2") : null) : v.model;
    const out = v.out ?? join(isDir ? v.model : ".", v.to === "tflite" ? "model.tflite" : "model.onnx");
    let summary: Record<string, unknown>;
    if (programFile && !existsSync(join(isDir ? v.model : "", "config.json"))) {
      const ep = await torch.export.load(programFile);
      summary = await convertProgram(ep, v.to, out, v.quantize as "int8" | "float16" | undefined, int(v.opset, "opset", 17));
    } else {
      if (!isDir || !existsSync(join(v.model, "config.json"))) throw new Error(`${v.model}: expected a Hugging Face folder with config.json, or a file written by torch.export.save`);
      const lm = (await AutoModelForCausalLM.fromPretrained(v.model)) as unknown as Module;
      lm.eval();
      const cfg = (lm as unknown as { config: { vocabSize: number; maxPositionEmbeddings: number } }).config;
      const module = new CausalLMLogits(lm);
      const maxLen = int(v["max-seq-len"], "max-seq-len", cfg.maxPositionEmbeddings);
      if (v.to === "onnx") {
        const b = torch.export.Dim("batch", { max: 1024 });
        const s = torch.export.Dim("sequence", { max: maxLen });
        const sample = hfSample(2, Math.min(8, maxLen), cfg.vocabSize);
        const r = await torch.onnx.export(module, sample, out, { dynamicShapes: [{ 0: b, 1: s }, { 0: b, 1: s }], inputNames: ["input_ids", "attention_mask"], outputNames: ["logits"], opsetVersion: int(v.opset, "opset", 17) });
        summary = { format: "onnx", inputs: r.inputNames, outputs: r.outputNames, dataPath: r.dataPath, dims: ["batch", "sequence"] };
      } else {
        const [first, ...rest] = lens;
        const signatures = Object.fromEntries(rest.map((l) => [`seq_${l}`, hfSample(batch, l, cfg.vocabSize)]));
        // more than one length: export once with the sequence dynamic, then one static signature per length
        const s = torch.export.Dim("sequence", { max: maxLen });
        const dynamicShapes = rest.length ? [{ 1: s }, { 1: s }] : undefined;
        const m = torch.litert.convert(module, hfSample(batch, first!, cfg.vocabSize), { dynamicShapes, quantize: v.quantize as "int8" | "float16" | undefined, signatures, inputNames: ["input_ids", "attention_mask"], outputNames: ["logits"] });
        await m.save(out);
        summary = { format: "tflite", quantize: v.quantize ?? null, signatures: m.signatures };
      }
    }
    process.stdout.write(`${JSON.stringify({ out, bytes: statSync(out).size, ...summary })}\n`);
    return 0;
  } catch (e) {
    process.stderr.write(`torchts convert: ${(e as Error).message}\n`);
    if (e instanceof UsageError) process.stderr.write(`${USAGE}\n`);
    return e instanceof UsageError ? 2 : 1;
  }
}

/** A saved ExportedProgram: ONNX keeps its dims dynamic; a .tflite is written at the dims' sample sizes. */
async function convertProgram(ep: ExportedProgram, to: "tflite" | "onnx", out: string, quantize: "int8" | "float16" | undefined, opset: number): Promise<Record<string, unknown>> {
  if (to === "onnx") {
    const r = await torch.onnx.export(ep, [], out, { opsetVersion: opset });
    return { format: "onnx", inputs: r.inputNames, outputs: r.outputNames, dataPath: r.dataPath, dims: ep.graph.dims.map((d) => d.name) };
  }
  const env = new Map(ep.graph.dims.map((d) => [d.name, d.sample ?? Math.max(d.min, 2)]));
  const inputs = ep.userInputs().map((u) => torch.zeros(ep.graph.values[u.value]!.shape.map((s) => (typeof s === "number" ? s : evalSym(s, env))), { dtype: ep.graph.values[u.value]!.dtype }));
  const m = torch.litert.convert(ep, inputs, { quantize });
  await m.save(out);
  return { format: "tflite", quantize: quantize ?? null, signatures: m.signatures };
}
