// AutoModelForCausalLM.fromPretrained(dir, {deviceMap, dtype}): reads config.json, picks the
// class from `architectures` (or model_type), builds it with placeholder weights and loads the
// checkpoint tensor by tensor onto the target device.
import * as torch from "../index.js";
import type { DType } from "../index.js";
import { getDevice } from "../device/plugin.js";
import { AutoConfig, type PretrainedConfig } from "./config.js";
import { Checkpoint } from "./weights.js";
import type { InitOpts, PreTrainedModel } from "./modeling_utils.js";
import { LlamaForCausalLM } from "./models/llama.js";
import { Qwen2ForCausalLM } from "./models/qwen2.js";
import { Qwen3ForCausalLM } from "./models/qwen3.js";
import { GPT2LMHeadModel } from "./models/gpt2.js";

type ModelClass = new (config: PretrainedConfig, o?: InitOpts) => PreTrainedModel;

export const MODEL_CLASSES: Record<string, ModelClass> = {
  LlamaForCausalLM,
  MistralForCausalLM: LlamaForCausalLM,
  Qwen2ForCausalLM,
  Qwen3ForCausalLM,
  GPT2LMHeadModel,
};
const BY_MODEL_TYPE: Record<string, ModelClass> = {
  llama: LlamaForCausalLM,
  mistral: LlamaForCausalLM,
  qwen2: Qwen2ForCausalLM,
  qwen3: Qwen3ForCausalLM,
  gpt2: GPT2LMHeadModel,
};

export interface FromPretrainedOptions {
  /** "auto" picks webgpu when registered, else cpu. Default cpu. */
  deviceMap?: "cpu" | "webgpu" | "auto" | (string & {});
  /** Cast floating weights to this dtype; default keeps each tensor's stored dtype. "auto" = keep. */
  dtype?: DType | "auto";
}

/** "webgpu" and "auto" initialise torch.webgpu (finding an adapter is async); "auto" falls back to cpu. */
async function resolveDevice(map: string | undefined): Promise<string> {
  const want = map ?? "cpu";
  if (want === "webgpu" || want === "auto") {
    if (want === "auto" && !(await torch.webgpu.isAvailable())) return "cpu";
    // init() throws why (and how to get an adapter) when there is none
    await torch.webgpu.init().catch((e: Error) => {
      throw new Error(`fromPretrained: deviceMap 'webgpu' but ${e.message}`);
    });
    return "webgpu";
  }
  getDevice(want); // throws naming the device when it is not registered
  return want;
}

export function modelClassFor(config: PretrainedConfig): ModelClass {
  for (const a of config.architectures) {
    const c = MODEL_CLASSES[a];
    if (c) return c;
  }
  if (config.architectures.length)
    throw new Error(`Unsupported architecture ${config.architectures.map((a) => `'${a}'`).join(", ")}: supported architectures are ${Object.keys(MODEL_CLASSES).join(", ")}`);
  const c = BY_MODEL_TYPE[config.modelType];
  if (!c) throw new Error(`Unsupported model_type '${config.modelType}'`);
  return c;
}

export const AutoModelForCausalLM = {
  async fromPretrained(dir: string, opts: FromPretrainedOptions = {}): Promise<PreTrainedModel> {
    const config = await AutoConfig.fromPretrained(dir);
    const cls = modelClassFor(config);
    const device = await resolveDevice(opts.deviceMap);
    const dtype = opts.dtype === "auto" ? undefined : opts.dtype;
    const model = new cls(config, { meta: true, device, dtype });
    await model.loadCheckpoint(await Checkpoint.open(dir), { device, dtype });
    model.eval();
    return model;
  },
};
