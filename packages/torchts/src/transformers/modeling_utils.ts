// Shared pieces of the Hugging Face model classes: weight-holding layers that skip random init
// (fromPretrained overwrites every weight), the attention-mask builder, RoPE tables, and the
// base class with checkpoint loading (clear errors naming the key) and generate().
import * as torch from "../index.js";
import type { Tensor, DType } from "../index.js";
import type { PretrainedConfig, RopeParameters } from "./config.js";
import type { WeightSource } from "./weights.js";
import type { KVCache } from "./kv_cache.js";
import { generate, type GenerateOptions, type GenerateOutput } from "./generate.js";
const { nn } = torch;
const F = nn.functional;

export interface InitOpts {
  dtype?: DType;
  device?: string;
  /** Placeholder weights that take no memory (zero-stride views); fromPretrained replaces them all. */
  meta?: boolean;
}

/** A parameter of the right shape; with meta, a zero-stride view of one element. */
export function placeholder(shape: number[], o: InitOpts): InstanceType<typeof nn.Parameter> {
  const t = o.meta
    ? torch.zeros([1], { dtype: o.dtype ?? "float32", device: o.device }).reshape(shape.map(() => 1)).expand(...shape)
    : torch.zeros(shape, { dtype: o.dtype ?? "float32", device: o.device });
  return new nn.Parameter(t, false);
}

/** nn.Linear without the random init: y = x W^T + b, W [out, in]. */
export class Linear extends nn.Module {
  declare weight: InstanceType<typeof nn.Parameter>;
  declare bias: InstanceType<typeof nn.Parameter> | null;
  constructor(readonly inFeatures: number, readonly outFeatures: number, bias: boolean, o: InitOpts) {
    super();
    this.weight = placeholder([outFeatures, inFeatures], o);
    if (bias) this.bias = placeholder([outFeatures], o);
    else this.registerParameter("bias", null);
  }
  override forward(x: Tensor): Tensor {
    return F.linear(x, this.weight, this.bias);
  }
}

export class Embedding extends nn.Module {
  declare weight: InstanceType<typeof nn.Parameter>;
  constructor(num: number, dim: number, o: InitOpts) {
    super();
    this.weight = placeholder([num, dim], o);
  }
  override forward(ids: Tensor): Tensor {
    return F.embedding(ids, this.weight);
  }
}

/** LlamaRMSNorm: computed in float32, weight applied after the cast back to the input dtype. */
export class RMSNorm extends nn.Module {
  declare weight: InstanceType<typeof nn.Parameter>;
  constructor(dim: number, readonly eps: number, o: InitOpts) {
    super();
    this.weight = placeholder([dim], o);
  }
  override forward(x: Tensor): Tensor {
    const h = x.to("float32");
    const variance = h.pow(2).mean(-1, true);
    return this.weight.mul(h.mul(variance.add(this.eps).rsqrt()).to(x.dtype));
  }
}

export class LayerNorm extends nn.Module {
  declare weight: InstanceType<typeof nn.Parameter>;
  declare bias: InstanceType<typeof nn.Parameter>;
  constructor(readonly dim: number, readonly eps: number, o: InitOpts) {
    super();
    this.weight = placeholder([dim], o);
    this.bias = placeholder([dim], o);
  }
  override forward(x: Tensor): Tensor {
    return F.layerNorm(x, [this.dim], { weight: this.weight, bias: this.bias, eps: this.eps });
  }
}

/** torch.finfo(dtype).min: HF's additive mask value (not -inf, so fully masked rows stay finite). */
export function maskMin(dtype: DType): number {
  if (dtype === "float16") return -65504;
  if (dtype === "bfloat16") return -3.3895313892515355e38;
  if (dtype === "float64") return -Number.MAX_VALUE;
  return -3.4028234663852886e38;
}

/**
 * Additive mask [B, 1, Lq, Lk]: query t of row b (at cache index qStart + t) sees key j when
 * j <= qStart + t, keyMask[b][j] is 1, and with a sliding window, qStart + t - j < window.
 */
export function buildMask(keyMask: number[][], qStart: number, lq: number, lk: number, window: number | null, dtype: DType, device: string): Tensor {
  const B = keyMask.length;
  const data = new Float32Array(B * lq * lk);
  const neg = maskMin(dtype);
  for (let b = 0; b < B; b++)
    for (let t = 0; t < lq; t++) {
      const i = qStart + t;
      const row = (b * lq + t) * lk;
      for (let j = 0; j < lk; j++) {
        const ok = j <= i && (keyMask[b]![j] ?? 0) !== 0 && (window === null || i - j < window);
        data[row + j] = ok ? 0 : neg;
      }
    }
  return torch.tensor(data, { dtype: "float32", device }).reshape(B, 1, lq, lk).to(dtype);
}

/** inv_freq of the rotary embedding (float32), "default", "linear" or "llama3" rope types. */
export function ropeInvFreq(rope: RopeParameters, dim: number, device: string): Tensor {
  const exponent = torch.arange(0, dim, 2, { dtype: "int64", device }).float().div(dim);
  let inv = torch.tensor(1.0, { dtype: "float32", device }).div(torch.pow(torch.tensor(rope.ropeTheta, { dtype: "float32", device }), exponent));
  if (rope.ropeType === "linear") inv = inv.div(rope.factor!);
  else if (rope.ropeType === "llama3") {
    const { factor, lowFreqFactor: lo, highFreqFactor: hi, originalMaxPositionEmbeddings: old } = rope as Required<RopeParameters>;
    const lowWave = old / lo;
    const highWave = old / hi;
    const wavelen = inv.reciprocal().mul(2 * Math.PI);
    const scaled = torch.where(wavelen.gt(lowWave), inv.div(factor), inv);
    const smooth = wavelen.reciprocal().mul(old).sub(lo).div(hi - lo);
    const smoothed = smooth.rsub(1).mul(scaled).div(factor).add(smooth.mul(scaled));
    const medium = wavelen.lt(highWave).logicalNot().logicalAnd(wavelen.gt(lowWave).logicalNot());
    inv = torch.where(medium, smoothed, scaled);
  }
  return inv;
}

/** cos/sin [B, 1, L, dim] for position ids [B, L]: emb = cat(freqs, freqs) (halves, not interleaved). */
export function ropeCosSin(invFreq: Tensor, positionIds: Tensor, dtype: DType): [Tensor, Tensor] {
  const freqs = positionIds.float().unsqueeze(-1).mul(invFreq); // [B, L, dim/2]
  const emb = torch.cat([freqs, freqs], -1);
  return [emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1)];
}

export function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.ndim - 1]! / 2;
  return torch.cat([x.narrow(-1, d, d).neg(), x.narrow(-1, 0, d)], -1);
}

export interface ForwardOptions {
  /** [B, Lk] 1 = real token, 0 = padding, over all positions so far (cache + new); default all ones. */
  attentionMask?: number[][];
  /** [B, L] positions of the new tokens; default from attentionMask (cumsum - 1), or cache position. */
  positionIds?: Tensor;
  /** Reads and extends this cache. */
  cache?: KVCache;
  /** Return the residual stream: [embeddings, after each layer..., after the final norm]. */
  outputHiddenStates?: boolean;
}

export interface CausalLMOutput {
  logits: Tensor;
  hiddenStates?: Tensor[];
}

/** The state dict key a checkpoint key maps to, or null to ignore it (e.g. GPT-2's attn.bias buffers). */
export type KeyMapper = (key: string) => string | null;

export abstract class PreTrainedModel extends nn.Module {
  constructor(readonly config: PretrainedConfig) {
    super();
  }
  abstract override forward(inputIds: Tensor, opts?: ForwardOptions): CausalLMOutput;
  /** Number of KV heads and head dim per layer (for the cache). */
  abstract cacheShape(): { layers: number; kvHeads: number; headDim: number };
  /** Re-establish tied weights after loading replaced the parameters. */
  tieWeights(): void {}
  mapCheckpointKey(key: string): string | null {
    return key;
  }
  /** Keys the model has but a checkpoint may omit (a tied lm_head). */
  optionalKeys(): Set<string> {
    return new Set(this.config.tieWordEmbeddings ? ["lm_head.weight"] : []);
  }
  get device(): string {
    return this.parameters().next().value?.device ?? "cpu";
  }
  get dtype(): DType {
    return this.parameters().next().value?.dtype ?? "float32";
  }

  /** Position ids [B, L] for the new tokens: cumsum(mask) - 1 with padding at 1, as HF generate. */
  positionIdsFor(mask: number[][], start: number, length: number): Tensor {
    const B = mask.length;
    const out = new Float64Array(B * length);
    for (let b = 0; b < B; b++) {
      let c = 0;
      for (let j = 0; j < start + length; j++) {
        const m = mask[b]![j] ?? 1;
        c += m;
        if (j >= start) out[b * length + j - start] = m ? c - 1 : 1;
      }
    }
    return torch.tensor(out, { dtype: "int64", device: this.device }).reshape(B, length);
  }

  /** What every forward derives from its inputs: the cache window, the key mask and the position ids. */
  protected forwardInputs(inputIds: Tensor, opts: ForwardOptions) {
    const [B, L] = inputIds.shape as [number, number];
    const cache = opts.cache;
    const start = cache?.length ?? 0;
    const lk = cache ? cache.viewLength(start + L) : L;
    const keyMask = opts.attentionMask ?? Array.from({ length: B }, () => new Array<number>(start + L).fill(1));
    const pos = opts.positionIds ?? this.positionIdsFor(keyMask, start, L);
    return { L, cache, start, lk, keyMask, pos };
  }

  /** Advance the cache past the L new tokens, apply the final norm and lm_head, and collect the hidden states. */
  protected finishForward(h: Tensor, hidden: Tensor[], L: number, opts: ForwardOptions, norm: { forward(x: Tensor): Tensor }, lmHead: Linear): CausalLMOutput {
    opts.cache?.advance(L);
    h = norm.forward(h);
    const logits = lmHead.forward(h); // [B, L, vocab]
    if (!opts.outputHiddenStates) return { logits };
    hidden.push(h);
    return { logits, hiddenStates: hidden };
  }

  /** Replace every parameter with the checkpoint's tensor; errors name missing, unexpected and mis-shaped keys. */
  async loadCheckpoint(ckpt: WeightSource, opts: { dtype?: DType; device?: string } = {}): Promise<void> {
    const own = new Map<string, { owner: InstanceType<typeof nn.Module>; leaf: string; shape: number[] }>();
    for (const [prefix, m] of this.namedModules())
      for (const [n, p] of m._parameters) if (p) own.set(prefix ? `${prefix}.${n}` : n, { owner: m, leaf: n, shape: [...p.shape] });
    const optional = this.optionalKeys();
    const unexpected: string[] = [];
    const mismatched: string[] = [];
    const plan: [string, string][] = [];
    const seen = new Set<string>();
    for (const key of ckpt.keys()) {
      const target = this.mapCheckpointKey(key);
      if (target === null) continue;
      const slot = own.get(target);
      if (!slot) {
        unexpected.push(key);
        continue;
      }
      const shape = ckpt.shapeOf(key);
      if (shape.length !== slot.shape.length || shape.some((d, i) => d !== slot.shape[i])) {
        mismatched.push(`'${key}': checkpoint has shape [${shape.join(", ")}], the model expects [${slot.shape.join(", ")}]`);
        continue;
      }
      seen.add(target);
      plan.push([key, target]);
    }
    const missing = [...own.keys()].filter((k) => !seen.has(k) && !optional.has(k));
    const errors: string[] = [];
    if (missing.length) errors.push(`missing weights: ${missing.map((k) => `'${k}'`).join(", ")}`);
    if (unexpected.length) errors.push(`unexpected weights: ${unexpected.map((k) => `'${k}'`).join(", ")}`);
    if (mismatched.length) errors.push(`mis-shaped weights: ${mismatched.join("; ")}`);
    if (errors.length) throw new Error(`${this.constructor.name}.fromPretrained(${ckpt.dir}): ${errors.join(". ")}`);
    for (const [key, target] of plan) {
      const t = await ckpt.load(key, { dtype: opts.dtype, device: opts.device });
      const slot = own.get(target)!;
      slot.owner.registerParameter(slot.leaf, new nn.Parameter(t, false));
    }
    this.tieWeights();
  }

  /** Autoregressive generation (greedy or sampling) with a KV cache; see GenerateOptions. */
  generate(inputIds: number[] | number[][], opts: GenerateOptions = {}): Promise<GenerateOutput> {
    return generate(this, inputIds, opts);
  }
}
