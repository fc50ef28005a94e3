// The options of the ONNX lowering that torch.onnx.export exposes, apart from lower.ts so the published
// declarations of the public API do not reach onnx-proto's types (they need protobufjs's Long).
export interface OnnxOptions {
  opsetVersion?: number;
  inputNames?: string[];
  outputNames?: string[];
}
