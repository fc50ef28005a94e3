// Running a converted .onnx with onnxruntime-node: feeds from torchts tensors, outputs back.
import * as ort from "onnxruntime-node";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

export function toOrt(t: Tensor): ort.Tensor {
  const host = t.contiguous()._contiguousHost();
  switch (t.dtype) {
    case "int64":
      return new ort.Tensor("int64", BigInt64Array.from(Array.from(host, (v) => BigInt(v))), t.shape);
    case "float32":
      return new ort.Tensor("float32", Float32Array.from(host), t.shape);
    case "bool":
      return new ort.Tensor("bool", Uint8Array.from(host), t.shape);
    default:
      throw new Error(`toOrt: ${t.dtype}`);
  }
}

export function fromOrt(o: ort.Tensor): Tensor {
  const data = o.type === "int64" ? Array.from(o.data as BigInt64Array, Number) : Array.from(o.data as Float32Array);
  return torch.tensor(data, { dtype: o.type === "int64" ? "int64" : "float32" }).reshape([...o.dims]);
}

/** Run a session on flat tensor inputs (in input order); returns the outputs in output order. */
export async function runOrt(sess: ort.InferenceSession, inputs: Tensor[]): Promise<Tensor[]> {
  const feeds: Record<string, ort.Tensor> = {};
  inputs.forEach((t, i) => (feeds[sess.inputNames[i]!] = toOrt(t)));
  const out = await sess.run(feeds);
  return sess.outputNames.map((n) => fromOrt(out[n]!));
}

export { ort };
