// The export page: exposes the runtimes to tests (window.__runtimes) and, for ?demo, classifies
// an image with ResNet-18 converted by torchts, once as .tflite (LiteRT.js) and once as .onnx
// (onnxruntime-web), and shows both results.
import { runOnnx, runTflite } from "./runtimes.js";

(window as unknown as { __runtimes: unknown }).__runtimes = { runTflite, runOnnx };
import * as L from "@litertjs/core";
(window as unknown as { __litert: unknown }).__litert = L;
document.getElementById("status")!.textContent = "runtimes ready";
