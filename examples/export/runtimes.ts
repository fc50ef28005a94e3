// Browser side: run a .tflite with LiteRT.js (@litertjs/core, XNNPACK on WebAssembly) and an
// .onnx with onnxruntime-web. Tensors cross as { data, shape, dtype } of plain arrays so a test
// can drive these through playwright's page.evaluate.
import { loadLiteRt, loadAndCompile, Tensor as LiteRtTensor } from "@litertjs/core";
import * as ort from "onnxruntime-web/wasm";

export interface HostTensor {
  data: number[];
  shape: number[];
  dtype: "float32" | "int32" | "int64" | "bool";
}

let liteRt: Promise<unknown> | null = null;

/** One run of a model: its inputs, and for a .tflite the signature to run (default: the first). */
export interface Run {
  signature?: string;
  inputs: HostTensor[];
}

/** Run a .tflite once per run (LiteRT.js: wasm accelerator); returns each run's outputs. */
export async function runTflite(url: string, runs: Run[]): Promise<HostTensor[][]> {
  liteRt ??= loadLiteRt("/litert-wasm/");
  await liteRt;
  const model = await loadAndCompile(url, { accelerator: "wasm" });
  try {
    const results: HostTensor[][] = [];
    for (const { signature, inputs } of runs) {
      const ins = inputs.map((t) => new LiteRtTensor(t.dtype === "float32" ? Float32Array.from(t.data) : Int32Array.from(t.data), t.shape));
      const outs = signature ? await model.run(signature, ins) : await model.run(ins);
      results.push(
        outs.map((o) => {
          const a = o.toTypedArray();
          const r: HostTensor = { data: Array.from(a as ArrayLike<number>), shape: Array.from(o.type.layout.dimensions), dtype: a instanceof Float32Array ? "float32" : "int32" };
          o.delete();
          return r;
        }),
      );
      for (const t of ins) t.delete();
    }
    return results;
  } finally {
    model.delete();
  }
}

/** Run an .onnx once per run with onnxruntime-web (wasm execution provider). */
export async function runOnnx(url: string, runs: Run[]): Promise<HostTensor[][]> {
  ort.env.wasm.wasmPaths = "/ort/";
  ort.env.wasm.numThreads = 1;
  const sess = await ort.InferenceSession.create(url, { executionProviders: ["wasm"] });
  try {
    const results: HostTensor[][] = [];
    for (const { inputs } of runs) {
      const feeds: Record<string, ort.Tensor> = {};
      inputs.forEach((t, i) => {
        const data = t.dtype === "int64" ? BigInt64Array.from(t.data.map((v) => BigInt(v))) : t.dtype === "int32" ? Int32Array.from(t.data) : Float32Array.from(t.data);
        feeds[sess.inputNames[i]!] = new ort.Tensor(t.dtype === "bool" ? "bool" : t.dtype, data, t.shape);
      });
      const out = await sess.run(feeds);
      results.push(
        sess.outputNames.map((n) => {
          const o = out[n]!;
          const data = o.type === "int64" ? Array.from(o.data as BigInt64Array, Number) : Array.from(o.data as Float32Array);
          return { data, shape: [...o.dims], dtype: o.type === "int64" ? "int64" : "float32" } as HostTensor;
        }),
      );
    }
    return results;
  } finally {
    await sess.release();
  }
}
