// Browser side: run a .tflite with LiteRT.js (@litertjs/core, XNNPACK on WebAssembly) and an
// .onnx with onnxruntime-web. Tensors cross as host_tensor.ts's { b64, shape, dtype }, so a test
// can drive these through playwright's page.evaluate.
import { loadLiteRt, loadAndCompile, Tensor as LiteRtTensor } from "@litertjs/core";
import * as ort from "onnxruntime-web/wasm";
import { decode, encode, type HostDtype, type HostTensor, type Typed } from "./host_tensor.js";

export type { HostTensor };

/** One run of a model: its inputs, and for a .tflite the signature to run (default: the first). */
export interface Run {
  signature?: string;
  inputs: HostTensor[];
}

let liteRt: Promise<unknown> | null = null;

/** Run a .tflite once per run (LiteRT.js: wasm accelerator); returns each run's outputs. */
export async function runTflite(url: string, runs: Run[]): Promise<HostTensor[][]> {
  liteRt ??= loadLiteRt("/litert-wasm/");
  await liteRt;
  const model = await loadAndCompile(url, { accelerator: "wasm" });
  try {
    const results: HostTensor[][] = [];
    for (const { signature, inputs } of runs) {
      const ins = inputs.map((t) => new LiteRtTensor(decode(t) as Float32Array | Int32Array, t.shape));
      const outs = signature ? await model.run(signature, ins) : await model.run(ins);
      results.push(
        outs.map((o) => {
          const a = o.toTypedArray() as Float32Array | Int32Array;
          const r = encode(a, Array.from(o.type.layout.dimensions), a instanceof Float32Array ? "float32" : "int32");
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
      inputs.forEach((t, i) => (feeds[sess.inputNames[i]!] = new ort.Tensor(t.dtype, decode(t), t.shape)));
      const out = await sess.run(feeds);
      results.push(sess.outputNames.map((n) => encode(out[n]!.data as Typed, out[n]!.dims, out[n]!.type as HostDtype)));
    }
    return results;
  } finally {
    await sess.release();
  }
}
