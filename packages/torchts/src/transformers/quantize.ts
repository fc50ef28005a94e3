// Quantization of Linear layers (and GPT-2's Conv1D): int8 with one scale per output channel,
// int4 with one scale per group of `groupSize` inputs (symmetric, stored as unsigned nibbles with
// zero point 8, two per byte). By default activations stay in floating point (weight-only): the
// forward is the quantized linear op (nn/functional/quantized.ts), which the cpu runs on the
// quantized weight directly and other devices by dequantizing (q * scale) and running the
// ordinary linear. `activations: "int8"` (8-bit weights only) also quantizes each layer's input
// per token on the fly (dynamic W8A8, like torchao's Int8DynamicActivationInt8WeightConfig and
// llama.cpp's q8_0 products): the cpu then multiplies int8 by int8 exactly.
import * as torch from "../index.js";
import type { Tensor } from "../index.js";
import { Linear } from "./modeling_utils.js";
import { Conv1D } from "./models/gpt2.js";
import { dequantizeInt4, dequantizeInt8, linearInt4, linearInt8, linearW8A8 } from "../nn/functional/quantized.js";
const { nn } = torch;

export interface QuantizeOptions {
  bits: 8 | 4;
  /** Inputs per scale: int4 default 32; int8 default one scale per output channel (whole row). */
  groupSize?: number;
  /** Quantize lm_head too (default false: it is often tied to the embedding and most sensitive). */
  includeLmHead?: boolean;
  /** "int8": dynamic per-token int8 activations (bits 8 only); default "float" (weight-only). */
  activations?: "float" | "int8";
}

/**
 * int8: W[o, g*G + j] ~ q[o, g*G + j] * scale[o, g], q in [-127, 127]; one group per row = per-channel.
 * activations "int8": the input is quantized per token too (F.linearW8A8).
 */
export class Int8Linear extends nn.Module {
  constructor(
    readonly qweight: Tensor, // int8 [out, in]
    readonly scale: Tensor, // [out, groups] in the weight's dtype
    readonly bias: Tensor | null,
    readonly activations: "float" | "int8" = "float",
  ) {
    super();
    this.registerBuffer("qweight", qweight);
    this.registerBuffer("scale", scale);
    this.registerBuffer("bias", bias);
  }
  dequantize(): Tensor {
    return dequantizeInt8(this.qweight, this.scale);
  }
  override forward(x: Tensor): Tensor {
    return this.activations === "int8" ? linearW8A8(x, this.qweight, this.scale, this.bias) : linearInt8(x, this.qweight, this.scale, this.bias);
  }
}

/** int4 group-wise: W[o, g*G + j] ~ (nibble - 8) * scale[o, g] (scale may be negative); two nibbles per uint8 (low = even column). */
export class Int4Linear extends nn.Module {
  constructor(
    readonly packed: Tensor, // uint8 [out, in / 2]
    readonly scales: Tensor, // [out, in / groupSize]
    readonly bias: Tensor | null,
    readonly inFeatures: number,
    readonly groupSize: number,
  ) {
    super();
    this.registerBuffer("packed", packed);
    this.registerBuffer("scales", scales);
    this.registerBuffer("bias", bias);
  }
  dequantize(): Tensor {
    return dequantizeInt4(this.packed, this.scales, this.inFeatures, this.groupSize);
  }
  override forward(x: Tensor): Tensor {
    return linearInt4(x, this.packed, this.scales, this.bias, this.inFeatures, this.groupSize);
  }
}

/** Quantize a float weight [out, in] (host math in float64, rounding half to even like torch.round). */
export async function quantizeWeight(w: Tensor, bits: 8 | 4, groupSize = bits === 8 ? Infinity : 32): Promise<{ q: Tensor; scale: Tensor }> {
  const [O, I] = w.shape as [number, number];
  const data = (await w.float().contiguous().data()) as ArrayLike<number>;
  const roundEven = (v: number) => {
    const r = Math.round(v);
    return Math.abs(v - Math.trunc(v)) === 0.5 && r % 2 !== 0 ? r - 1 : r;
  };
  if (bits === 8) {
    // groupSize >= in_features (the default for int8) means one scale per output channel
    const gs8 = Math.min(groupSize, I);
    if (I % gs8 !== 0) throw new RangeError(`quantize: in_features ${I} is not a multiple of groupSize ${gs8}`);
    const G = I / gs8;
    const q = new Int8Array(O * I);
    const s = new Float32Array(O * G);
    for (let o = 0; o < O; o++)
      for (let g = 0; g < G; g++) {
        const base = o * I + g * gs8;
        let m = 0;
        for (let j = 0; j < gs8; j++) m = Math.max(m, Math.abs(data[base + j]!));
        const scale = Math.fround(m / 127) || 1;
        s[o * G + g] = scale;
        for (let j = 0; j < gs8; j++) q[base + j] = Math.max(-127, Math.min(127, roundEven(data[base + j]! / scale)));
      }
    return { q: torch.tensor(q, { dtype: "int8", device: w.device }).reshape(O, I), scale: torch.tensor(s, { device: w.device }).reshape(O, G) };
  }
  if (I % groupSize !== 0 || groupSize % 2 !== 0) throw new RangeError(`quantize: in_features ${I} is not a multiple of groupSize ${groupSize}`);
  const G = I / groupSize;
  const packed = new Uint8Array((O * I) / 2);
  const s = new Float32Array(O * G);
  for (let o = 0; o < O; o++)
    for (let g = 0; g < G; g++) {
      // llama.cpp's q4_0 rule: the largest-magnitude value (with its sign) maps to -8 exactly,
      // so all 16 levels are used
      let mx = 0;
      const base = o * I + g * groupSize;
      for (let j = 0; j < groupSize; j++) if (Math.abs(data[base + j]!) > Math.abs(mx)) mx = data[base + j]!;
      const scale = Math.fround(mx / -8) || 1;
      s[o * G + g] = scale;
      for (let j = 0; j < groupSize; j++) {
        const v = Math.max(-8, Math.min(7, roundEven(data[base + j]! / scale))) + 8;
        const idx = base + j;
        packed[idx >> 1] |= (idx & 1) === 0 ? v : v << 4;
      }
    }
  return {
    q: torch.tensor(packed, { dtype: "uint8", device: w.device }).reshape(O, I / 2),
    scale: torch.tensor(s, { device: w.device }).reshape(O, G),
  };
}

/** Replace the model's Linear (and Conv1D) layers by Int8Linear / Int4Linear, in place. */
export async function quantize<M extends InstanceType<typeof nn.Module>>(model: M, opts: QuantizeOptions): Promise<M> {
  if (opts.bits !== 8 && opts.bits !== 4) throw new RangeError(`quantize: bits must be 8 or 4, got ${String(opts.bits)}`);
  const act = opts.activations ?? "float";
  if (act !== "float" && act !== "int8") throw new RangeError(`quantize: activations must be "float" or "int8", got ${String(act)}`);
  if (act === "int8" && opts.bits !== 8) throw new RangeError("quantize: int8 activations need 8-bit weights (bits: 8)");
  const gs = opts.groupSize ?? (opts.bits === 8 ? Infinity : 32);
  const targets: [InstanceType<typeof nn.Module>, string, Linear | Conv1D, string][] = [];
  for (const [prefix, parent] of model.namedModules())
    for (const [name, child] of parent.namedChildren()) {
      const full = prefix ? `${prefix}.${name}` : name;
      if (!(child instanceof Linear || child instanceof Conv1D)) continue;
      if (!opts.includeLmHead && /(^|\.)lm_head$/.test(full)) continue;
      targets.push([parent, name, child, full]);
    }
  for (const [parent, name, layer] of targets) {
    const weight = layer instanceof Conv1D ? layer.weight.t() : layer.weight; // [out, in]
    const bias = layer.bias ? torch.noGrad(() => layer.bias!.detach()) : null;
    const { q, scale } = await quantizeWeight(weight, opts.bits, gs);
    const dt = weight.dtype;
    const m = opts.bits === 8 ? new Int8Linear(q, scale.to(dt), bias, act) : new Int4Linear(q, scale.to(dt), bias, weight.shape[1]!, gs);
    parent.addModule(name, m);
  }
  return model;
}
