// The golden op cases of fixtures/golden_ops/manifest.json (real PyTorch outputs and float64
// gradients), shared by the cpu and webgpu golden tests: the case list, the safetensors dtype
// names, and each case's tensors (file bytes read once per file).
import { readFileSync } from "node:fs";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

export interface CaseSpec {
  name: string;
  code: string;
  file: string;
  inputs: { name: string; key: string; dtype: string }[];
  outputs: { index: number; key: string; dtype: string; shape: number[]; ref64_key?: string }[];
  grad: null | { weights: { output: number; key: string }[]; grads: { input: string; key: string }[] };
}

const DIR = new URL("../fixtures/golden_ops/", import.meta.url);
export const cases = (JSON.parse(readFileSync(new URL("manifest.json", DIR), "utf8")) as { cases: CaseSpec[] }).cases;

/** safetensors dtype name -> torchts dtype. */
export const DTYPE: Record<string, string> = {
  F32: "float32", F64: "float64", F16: "float16", BF16: "bfloat16", I64: "int64", I32: "int32", I8: "int8", U8: "uint8",
  BOOL: "bool",
};

const bytesCache = new Map<string, Uint8Array>();
/** The case's tensors (inputs, outputs, gradient weights and references), fresh cpu tensors each call. */
export function caseData(c: CaseSpec): Record<string, Tensor> {
  let b = bytesCache.get(c.file);
  if (!b) bytesCache.set(c.file, (b = new Uint8Array(readFileSync(new URL(c.file, DIR)))));
  return torch.safetensors.load(b, c.file);
}
