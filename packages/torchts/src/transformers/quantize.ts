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
import { HessianAccumulator, gptqRound } from "./gptq.js";
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
  /**
   * Calibration input ids [batch, seq] (or nested arrays): round each layer with GPTQ against the
   * inputs it sees on these tokens, layers in order, each after the ones before it are quantized.
   * Without it weights are rounded to nearest.
   */
  calibration?: Tensor | number[][];
  /** GPTQ damping, a fraction of the Hessian's mean diagonal (default 0.01). */
  dampPercent?: number;
  /** GPTQ column order: largest Hessian diagonal first (default true). */
  actOrder?: boolean;
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

/** Options of `quantizeWeight` beyond bits and groups: GPTQ's calibration Hessian. */
export interface QuantizeWeightOptions {
  /** H = 2/n sum x x^T [in, in] of the layer's calibration inputs: round with GPTQ instead of to nearest. */
  hessian?: Float64Array;
  /** GPTQ's damping, a fraction of H's mean diagonal added to it (default 0.01). */
  dampPercent?: number;
  /** GPTQ's desc_act: round the input columns with the largest H diagonal first (default true). */
  actOrder?: boolean;
}

/**
 * The quantization level of v: round(v / scale) with halves to even (torch.round), clamped to
 * [lo, hi]. Adding and removing 1.5 * 2^52 rounds a float64 to the nearest integer, halves to
 * even, for |x| < 2^51; larger values, infinities and NaN end up clamped (NaN stores as 0).
 */
function level(v: number, scale: number, lo: number, hi: number): number {
  const r = v / scale + 6755399441055744 - 6755399441055744;
  return r < lo ? lo : r > hi ? hi : r;
}

/**
 * One scale per group of gs consecutive weights: int8 absmax / 127; int4 llama.cpp's q4_0 rule,
 * the largest-magnitude value (with its sign) maps to -8 exactly, so all 16 levels are used.
 */
function groupScales(w: Float32Array, groups: number, gs: number, bits: 8 | 4): Float32Array {
  const s = new Float32Array(groups);
  for (let g = 0, i = 0; g < groups; g++) {
    let mx = 0;
    for (const end = i + gs; i < end; i++) if (Math.abs(w[i]!) > Math.abs(mx)) mx = w[i]!;
    s[g] = Math.fround(bits === 8 ? Math.abs(mx) / 127 : mx / -8) || 1;
  }
  return s;
}

/** levels[i] = level(w[i], scale of i's group); groups of gs consecutive weights. */
function roundToNearest(w: Float32Array, scales: Float32Array, levels: Int8Array, gs: number, lo: number, hi: number): void {
  for (let g = 0, i = 0; g < scales.length; g++) {
    const scale = scales[g]!;
    for (const end = i + gs; i < end; i++) levels[i] = level(w[i]!, scale, lo, hi);
  }
}

/**
 * Quantize a float weight [out, in] (host math in float64, rounding half to even like torch.round).
 * Scales come from the weight itself (int8: absmax / 127; int4: llama.cpp's q4_0 rule); levels are
 * rounded to nearest, or by GPTQ when `opts.hessian` is given.
 */
export async function quantizeWeight(w: Tensor, bits: 8 | 4, groupSize = bits === 8 ? Infinity : 32, opts: QuantizeWeightOptions = {}): Promise<{ q: Tensor; scale: Tensor }> {
  const [O, I] = w.shape as [number, number];
  const host = (await w.float().contiguous().data()) as Float32Array;
  // GPTQ updates the weights it has not rounded yet: a float64 copy; round-to-nearest reads them as they are
  const data: Float64Array | Float32Array = opts.hessian ? Float64Array.from(host) : host;
  // groupSize >= in_features (the default for int8) means one scale per output channel
  const gs = bits === 8 ? Math.min(groupSize, I) : groupSize;
  if (I % gs !== 0 || (bits === 4 && gs % 2 !== 0)) throw new RangeError(`quantize: in_features ${I} is not a multiple of groupSize ${gs}`);
  const G = I / gs;
  const s = groupScales(host, O * G, gs, bits);
  const [lo, hi] = bits === 8 ? [-127, 127] : [-8, 7];
  const levels = new Int8Array(O * I);
  const round = (o: number, i: number, v: number): number => {
    const scale = s[o * G + Math.floor(i / gs)]!;
    const l = level(v, scale, lo, hi);
    levels[o * I + i] = l;
    return l * scale;
  };
  if (opts.hessian) {
    if (opts.hessian.length !== I * I) throw new RangeError(`quantize: the Hessian has ${opts.hessian.length} entries, expected ${I}x${I}`);
    gptqRound(data as Float64Array, O, I, opts.hessian, opts.dampPercent ?? 0.01, round, opts.actOrder ?? true);
  } else roundToNearest(host, s, levels, gs, lo, hi);
  const scale = torch.tensor(s, { device: w.device }).reshape(O, G);
  if (bits === 8) return { q: torch.tensor(levels, { dtype: "int8", device: w.device }).reshape(O, I), scale };
  const packed = new Uint8Array((O * I) / 2);
  for (let idx = 0; idx < O * I; idx++) packed[idx >> 1] |= (idx & 1) === 0 ? levels[idx]! + 8 : (levels[idx]! + 8) << 4;
  return { q: torch.tensor(packed, { dtype: "uint8", device: w.device }).reshape(O, I / 2), scale };
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
  const calib = opts.calibration === undefined ? null : opts.calibration instanceof torch.Tensor ? opts.calibration : torch.tensor(opts.calibration);
  if (calib && calib.dim() !== 2) throw new RangeError(`quantize: calibration must be input ids [batch, seq], got shape [${calib.shape.join(", ")}]`);
  for (const [parent, name, layer, full] of targets) {
    const weight = layer instanceof Conv1D ? layer.weight.t() : layer.weight; // [out, in]
    const bias = layer.bias ? torch.noGrad(() => layer.bias!.detach()) : null;
    const hessian = calib ? await layerHessian(model, layer, full, calib) : undefined;
    const { q, scale } = await quantizeWeight(weight, opts.bits, gs, { hessian, dampPercent: opts.dampPercent, actOrder: opts.actOrder });
    const dt = weight.dtype;
    const m = opts.bits === 8 ? new Int8Linear(q, scale.to(dt), bias, act) : new Int4Linear(q, scale.to(dt), bias, weight.shape[1]!, gs);
    parent.addModule(name, m);
  }
  return model;
}

/** Runs the calibration batch up to `layer` (the layers before it already quantized) and returns H of its input. */
async function layerHessian(model: InstanceType<typeof nn.Module>, layer: Linear | Conv1D, name: string, ids: Tensor): Promise<Float64Array> {
  const stop = Symbol("captured");
  let seen: Tensor | null = null;
  const own = Object.getOwnPropertyDescriptor(layer, "forward");
  layer.forward = (x: Tensor): Tensor => {
    seen = x.detach().contiguous();
    throw stop; // the rest of the model is not needed for this layer
  };
  try {
    torch.noGrad(() => (model as unknown as { forward(ids: Tensor): unknown }).forward(ids));
  } catch (e) {
    if (e !== stop) throw e;
  } finally {
    if (own) Object.defineProperty(layer, "forward", own);
    else delete (layer as { forward?: unknown }).forward;
  }
  if (!seen) throw new Error(`quantize: the calibration forward never reached ${name}, so GPTQ has no inputs for it`);
  const x: Tensor = seen;
  const I = x.shape[x.dim() - 1]!;
  const acc = new HessianAccumulator(I);
  acc.add((await x.float().data()) as ArrayLike<number>, x.numel() / I);
  return acc.h;
}
