// The models the export tests convert, with the golden PyTorch outputs where the fixtures have
// them: minGPT (golden init weights and step-0 logits), the four golden Hugging Face checkpoints
// (full-sequence logits), torchvision ResNet-18 (golden eval logits) and the example UNet.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { AutoModelForCausalLM } from "../../src/transformers/index.js";
import { CausalLMLogits } from "../../src/export/hf.js";
import { GPT } from "../../../../examples/mingpt/model.js";
import { UNet } from "../../../../examples/unet/model.js";

const fixtures = (p: string) => fileURLToPath(new URL(`../fixtures/${p}`, import.meta.url));
const Dim = torch.export.Dim;

export interface Case {
  name: string;
  module: { forward: (...a: never[]) => unknown };
  /** sample arguments for export */
  args: unknown[];
  dynamicShapes: unknown[];
  /** two more argument sets at other dynamic sizes */
  others: unknown[][];
  /** the output tensor from the forward's result */
  pick: (r: unknown) => Tensor;
  /** a PyTorch reference: the arguments and the expected output */
  golden?: { args: unknown[]; want: Tensor };
}

export async function mingpt(): Promise<Case> {
  const cfg = JSON.parse(readFileSync(fixtures("mingpt_train/config.json"), "utf8"));
  const model = new GPT({ vocabSize: cfg.vocab_size, blockSize: cfg.block_size, nLayer: cfg.n_layer, nHead: cfg.n_head, nEmbd: cfg.n_embd });
  model.loadStateDict(new Map(Object.entries(await torch.safetensors.loadFile(fixtures("mingpt_train/init.safetensors")))), { strict: true });
  model.eval();
  const batches = await torch.safetensors.loadFile(fixtures("mingpt_train/batches.safetensors"));
  const step0 = await torch.safetensors.loadFile(fixtures("mingpt_train/step0.safetensors"));
  const x0 = batches.x!.select(0, 0);
  torch.manualSeed(1);
  return {
    name: "mingpt",
    module: model,
    args: [torch.randint(0, cfg.vocab_size, [2, 8])],
    dynamicShapes: [{ 0: Dim("batch", { max: 16 }), 1: Dim("seq", { max: cfg.block_size }) }],
    others: [[torch.randint(0, cfg.vocab_size, [3, 5])], [torch.randint(0, cfg.vocab_size, [1, 13])]],
    pick: (r) => (r as { logits: Tensor }).logits,
    golden: { args: [x0], want: step0.logits_init_batch0! },
  };
}

export async function hf(name: string): Promise<Case> {
  const dir = fixtures(`hf/${name}`);
  const lm = (await AutoModelForCausalLM.fromPretrained(dir)) as unknown as InstanceType<typeof torch.nn.Module>;
  lm.eval();
  const exp = JSON.parse(readFileSync(`${dir}/expected.json`, "utf8")) as { prompts: { full_sequence: number[] }[] };
  const ref = await torch.safetensors.loadFile(`${dir}/expected_logits.safetensors`);
  const want = ref["full_logits.0"]!; // logits of every position but the last
  const seq = exp.prompts[0]!.full_sequence.slice(0, want.shape[1]);
  const ids = (b: number, l: number, seed: number) => {
    torch.manualSeed(seed);
    return torch.randint(0, 200, [b, l]);
  };
  const withMask = (x: Tensor) => [x, torch.onesLike(x)];
  const b = Dim("batch", { max: 8 });
  const s = Dim("seq", { max: 64 });
  return {
    name,
    module: new CausalLMLogits(lm),
    args: withMask(ids(2, 6, 1)),
    dynamicShapes: [{ 0: b, 1: s }, { 0: b, 1: s }],
    others: [withMask(ids(3, 9, 2)), withMask(ids(1, 17, 3))],
    pick: (r) => r as Tensor,
    golden: { args: withMask(torch.tensor([seq], { dtype: "int64" })), want },
  };
}

export async function resnet18(): Promise<Case> {
  const model = torch.vision.resnet18({ numClasses: 10 });
  model.loadStateDict(await torch.safetensors.loadFile(fixtures("resnet18/model.safetensors")));
  model.eval();
  const exp = await torch.safetensors.loadFile(fixtures("resnet18/expected.safetensors"));
  torch.manualSeed(2);
  const hw = { min: 32, max: 224, multipleOf: 32 }; // five stride-2 stages
  return {
    name: "resnet18",
    module: model,
    args: [torch.randn(2, 3, 32, 32)],
    dynamicShapes: [{ 0: Dim("batch", { max: 16 }), 2: Dim("height", hw), 3: Dim("width", hw) }],
    others: [[torch.randn(3, 3, 32, 32)], [torch.randn(1, 3, 64, 32)]],
    pick: (r) => r as Tensor,
    golden: { args: [exp.input!], want: exp.logits! },
  };
}

/** The example UNet with random (non-zero) weights: batch and spatial dims dynamic. */
export function unet(): Case {
  torch.manualSeed(3);
  const model = new UNet(1, 16);
  for (const p of model.parameters()) torch.nn.init.normal_(p, 0, 0.2);
  model.eval();
  const b = Dim("batch", { max: 8 });
  const hw = { min: 8, max: 64, multipleOf: 4 };
  return {
    name: "unet",
    module: model,
    args: [torch.randn(2, 1, 16, 16), torch.tensor([3, 40], { dtype: "int64" })],
    dynamicShapes: [{ 0: b, 2: Dim("height", hw), 3: Dim("width", hw) }, { 0: b }],
    others: [
      [torch.randn(3, 1, 12, 20), torch.tensor([1, 2, 7], { dtype: "int64" })],
      [torch.randn(1, 1, 24, 8), torch.tensor([90], { dtype: "int64" })],
    ],
    pick: (r) => r as Tensor,
  };
}

export async function allCases(): Promise<Case[]> {
  return [await mingpt(), ...(await Promise.all(["llama_gqa", "qwen2_tied", "qwen3_qknorm", "gpt2"].map(hf))), await resnet18(), unet()];
}

export async function maxAbsDiff(a: Tensor, b: Tensor): Promise<number> {
  if (a.shape.join() !== b.shape.join()) throw new Error(`shape [${a.shape}] vs [${b.shape}]`);
  return (await a.float().sub(b.float()).abs().max().item()) as number;
}
