// The export page. window.__runtimes lets tests run any converted model; with ?demo it classifies
// an image with ResNet-18 converted by torchts: /models/resnet18.tflite through LiteRT.js and
// /models/resnet18.onnx through onnxruntime-web, and shows both results side by side
// (window.__demo holds the numbers it shows, for tests).
import { runOnnx, runTflite } from "./runtimes.js";
import { decode, encode } from "./host_tensor.js";
import { drawImage, SIZE, toInput } from "./image.js";

(window as unknown as { __runtimes: unknown }).__runtimes = { runTflite, runOnnx };

export interface DemoResult {
  input: { b64: string; shape: number[] };
  tflite: number[];
  onnx: number[];
  top1: { tflite: number; onnx: number };
  maxDiff: number;
  ms: { tflite: number; onnx: number };
}

const softmax = (z: number[]) => {
  const m = Math.max(...z);
  const e = z.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
};
const argmax = (z: number[]) => z.indexOf(Math.max(...z));

async function demo(): Promise<void> {
  const status = document.getElementById("status")!;
  const canvas = document.getElementById("image") as HTMLCanvasElement;
  const seed = Number(new URLSearchParams(location.search).get("seed") ?? 1);
  drawImage(canvas, seed);
  const x = toInput(canvas.getContext("2d")!.getImageData(0, 0, SIZE, SIZE));
  const input = encode(x, [1, 3, SIZE, SIZE], "float32");
  status.textContent = "running LiteRT.js…";
  let t = performance.now();
  const [[lt]] = await runTflite("/models/resnet18.tflite", [{ inputs: [input] }]);
  const msT = performance.now() - t;
  status.textContent = "running onnxruntime-web…";
  t = performance.now();
  const [[ox]] = await runOnnx("/models/resnet18.onnx", [{ inputs: [input] }]);
  const msO = performance.now() - t;
  const a = Array.from(decode(lt!) as Float32Array);
  const b = Array.from(decode(ox!) as Float32Array);
  const r: DemoResult = {
    input: { b64: input.b64, shape: input.shape },
    tflite: a,
    onnx: b,
    top1: { tflite: argmax(a), onnx: argmax(b) },
    maxDiff: Math.max(...a.map((v, i) => Math.abs(v - b[i]!))),
    ms: { tflite: msT, onnx: msO },
  };
  const pa = softmax(a);
  const pb = softmax(b);
  const rows = a.map((_, k) => `class ${k}  ${pa[k]!.toFixed(4)}  ${pb[k]!.toFixed(4)}  ${a[k]!.toFixed(5)}  ${b[k]!.toFixed(5)}`);
  document.getElementById("out")!.textContent = [
    `ResNet-18 (torchts -> .tflite / .onnx; the torchts tests' golden torchvision weights, 10 classes), ${SIZE}x${SIZE} image, seed ${seed}`,
    `top-1: LiteRT.js class ${r.top1.tflite}, onnxruntime-web class ${r.top1.onnx}`,
    `max |logit difference| between the runtimes: ${r.maxDiff.toExponential(2)}`,
    `time: LiteRT.js ${msT.toFixed(0)} ms, onnxruntime-web ${msO.toFixed(0)} ms (load + run)`,
    "",
    "         p(LiteRT)  p(ORT)   logit(LiteRT)  logit(ORT)",
    ...rows,
  ].join("\n");
  status.textContent = "done";
  (window as unknown as { __demo: DemoResult }).__demo = r;
}

if (new URLSearchParams(location.search).has("demo"))
  demo().catch((e: unknown) => {
    document.getElementById("status")!.textContent = `error: ${String(e)}`;
    (window as unknown as { __demo: { error: string } }).__demo = { error: String(e) };
  });
else document.getElementById("status")!.textContent = "runtimes ready (open ?demo to classify an image)";
