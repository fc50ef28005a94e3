// onnxruntime-node (native MLAS kernels, 2 intra-op threads): the native reference point.
import * as ort from "onnxruntime-node";
import { CONV, CONV_FLOPS, MATMUL_SIZES, SOFTMAX, TANH_A, TANH_B, TANH_N, guard, randomF32, report, time } from "../lib.js";
import { model, type OnnxNode } from "./onnx_proto.js";

const S = "onnxruntime-node";
const opts: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 2, interOpNumThreads: 1, graphOptimizationLevel: "all" };

async function bench(workload: string, nodes: OnnxNode[], inputs: Record<string, [number[], Float32Array]>, out: [string, number[]], flops?: number, bytes?: number) {
  await guard(S, workload, async () => {
    const m = model(nodes, Object.fromEntries(Object.entries(inputs).map(([k, [s]]) => [k, s])), { [out[0]]: out[1] });
    const sess = await ort.InferenceSession.create(m, opts);
    const feeds = Object.fromEntries(Object.entries(inputs).map(([k, [s, d]]) => [k, new ort.Tensor("float32", d, s)]));
    report(S, workload, "", await time(() => sess.run(feeds)), flops, bytes, `onnxruntime-node ${ort.env.versions?.common ?? ""}`);
    await sess.release();
  });
}

for (const n of MATMUL_SIZES)
  await bench(`matmul ${n}`, [{ op: "MatMul", inputs: ["a", "b"], outputs: ["y"] }],
    { a: [[n, n], randomF32(n * n, 1)], b: [[n, n], randomF32(n * n, 2)] }, ["y", [n, n]], 2 * n ** 3);
const { n, c, h, w, k } = CONV;
await bench("conv2d", [{ op: "Conv", inputs: ["x", "w"], outputs: ["y"], ints: { kernel_shape: [k, k], pads: [1, 1, 1, 1] } }],
  { x: [[n, c, h, w], randomF32(n * c * h * w, 3)], w: [[c, c, k, k], randomF32(c * c * k * k, 4, 0.1)] }, ["y", [n, c, h, w]], CONV_FLOPS);
await bench("softmax", [{ op: "Softmax", inputs: ["x"], outputs: ["y"], int: { axis: 1 } }],
  { x: [[SOFTMAX.rows, SOFTMAX.cols], randomF32(SOFTMAX.rows * SOFTMAX.cols, 5, 4)] }, ["y", [SOFTMAX.rows, SOFTMAX.cols]],
  undefined, 8 * SOFTMAX.rows * SOFTMAX.cols);
await bench("tanh(x*a+b)", [
  { op: "Mul", inputs: ["x", "a"], outputs: ["t"] },
  { op: "Add", inputs: ["t", "b"], outputs: ["u"] },
  { op: "Tanh", inputs: ["u"], outputs: ["y"] },
], { x: [[TANH_N], randomF32(TANH_N, 6, 2)], a: [[1], new Float32Array([TANH_A])], b: [[1], new Float32Array([TANH_B])] },
  ["y", [TANH_N]], undefined, 8 * TANH_N);

// worker pools of the peer may keep the event loop alive
process.exit(0);
