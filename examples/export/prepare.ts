// Writes the demo's models: ResNet-18 with the golden torchvision weights of the torchts tests
// (10 classes), exported once by torch.export and written as .tflite and .onnx for 1x3x64x64.
//   node --import tsx examples/export/prepare.ts [out dir]    (default: examples/export/models)
// The same can be done from the command line for a Hugging Face folder: npx torchts convert.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../../packages/torchts/src/index.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const weights = join(here, "../../packages/torchts/test/fixtures/resnet18/model.safetensors");

export async function prepareModels(dir: string): Promise<{ tflite: string; onnx: string }> {
  mkdirSync(dir, { recursive: true });
  const model = torch.vision.resnet18({ numClasses: 10 });
  model.loadStateDict(await torch.safetensors.loadFile(weights));
  model.eval();
  const sample = [torch.zeros([1, 3, 64, 64])];
  const ep = torch.export.export(model, sample);
  const tflite = join(dir, "resnet18.tflite");
  const onnx = join(dir, "resnet18.onnx");
  await torch.litert.convert(ep, sample).save(tflite);
  await torch.onnx.export(ep, sample, onnx);
  return { tflite, onnx };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await prepareModels(process.argv[2] ?? join(here, "models"));
  console.log(`wrote ${r.tflite} and ${r.onnx}; serve them: node --import tsx examples/export/build.ts`);
}
