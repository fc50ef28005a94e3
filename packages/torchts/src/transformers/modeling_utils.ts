// Shared pieces of the Hugging Face model classes: weight-holding layers that skip random init
// (fromPretrained overwrites every weight), the attention-mask builder, RoPE tables, and the
// base class with checkpoint loading (clear errors naming the key) and generate().
import * as torch from "../index.js";
import type { Tensor, DType } from "../index.js";
import type { PretrainedConfig, RopeParameters } from "./config.js";
import type { WeightSource } from "./weights.js";
import type { KVCache } from "./kv_cache.js";
import type { PagedBatch, PagedKVCache } from "./paged_kv_cache.js";
import { generate, type GenerateOptions, type GenerateOutput } from "./generate.js";
import { isGradEnabled } from "../autograd/grad_mode.js";
import { traceState } from "../runtime/dispatch.js";
import { Storage } from "../runtime/storage.js";
import { opHooks, subclassDispatch } from "../ops/registry.js";
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

/** Signed rotate_half as a matrix [dim, dim]: x @ P = rotate_half(x) = cat(-x2, x1). */
export function rotateHalfMatrix(dim: number, device: string): Tensor {
  const d = dim / 2;
  const p = new Float32Array(dim * dim);
  for (let j = 0; j < d; j++) {
    p[(j + d) * dim + j] = -1; // out[j] = -x[j + d]
    p[j * dim + j + d] = 1; // out[j + d] = x[j]
  }
  return torch.tensor(p, { device }).reshape(dim, dim);
}

/**
 * RoPE tables for one forward. A single-token step (L = 1) applies RoPE as one matmul per
 * tensor, x @ rot with rot [B, 1, dim, dim] = diag(cos) + P diag(sin) (P: rotateHalfMatrix),
 * instead of the five elementwise ops and a cat of x * cos + rotate_half(x) * sin.
 */
export interface RopeTables {
  cos: Tensor; // [B, 1, L, dim]
  sin: Tensor;
  rot: Tensor | null; // [B, 1, dim, dim] when L = 1
}

export function ropeTables(invFreq: Tensor, positionIds: Tensor, dtype: DType, eye: Tensor, perm: Tensor): RopeTables {
  const [cos, sin] = ropeCosSin(invFreq, positionIds, dtype);
  if (positionIds.shape[1] !== 1) return { cos, sin, rot: null };
  // cos/sin [B, 1, 1, dim] scale the columns of eye / P
  return { cos, sin, rot: eye.to(dtype).mul(cos).add(perm.to(dtype).mul(sin)) };
}

export function applyRope(x: Tensor, r: RopeTables): Tensor {
  return r.rot ? x.matmul(r.rot) : x.mul(r.cos).add(rotateHalf(x).mul(r.sin));
}

export function rotateHalf(x: Tensor): Tensor {
  const d = x.shape[x.ndim - 1]! / 2;
  return torch.cat([x.narrow(-1, d, d).neg(), x.narrow(-1, 0, d)], -1);
}

/**
 * Whether each decoder layer may run in a torch.scope of its own (runLayers): not while
 * torch.compile or torch.export traces the forward (they record and plan every value), not when
 * autograd records (backward reads what the layers saved), and not with tensor-subclass inputs or
 * weights (DTensor: a scope cannot see the local tensors they wrap). The weights are only scanned
 * when grad mode is on or a subclass is registered: generate()'s no-grad steps pay nothing.
 */
function mayScopeLayers(layers: readonly InstanceType<typeof nn.Module>[], h: Tensor): boolean {
  if (traceState.fn !== null || opHooks.call !== null || h.constructor !== torch.Tensor) return false;
  const grad = isGradEnabled();
  if (grad && h.requiresGrad) return false;
  if (!grad && subclassDispatch.handler === null) return true;
  for (const layer of layers)
    for (const p of layer.parameters()) if ((grad && p.requiresGrad) || (p.constructor !== nn.Parameter && p.constructor !== torch.Tensor)) return false;
  return true;
}

/**
 * A forward's decoder layers in order, h = step(layer, h, i), each in a torch.scope of its own
 * when mayScopeLayers allows. PyTorch frees a layer's intermediates (norms, q/k/v, attention, the
 * MLP's hidden units) as soon as nothing references them; here an unreferenced strict-eager tensor
 * waits for the garbage collector, which does not run inside one synchronous forward, and
 * generate()'s step scope held them to its end: a 512-token prefill of a 12-layer model kept every
 * layer's activations (bench/memory/README.md). A layer's output and its KV-cache writes (in
 * place, into the cache's own storage) outlive its scope; everything else it made is freed when it
 * returns, and its output once the next layer has returned. With `hidden`
 * (outputHiddenStates) each output is pushed there and kept. Whatever runs inside a layer must
 * not stash a tensor it made (torch.keep exempts one); `step` must take anything shared by several
 * layers (the attention mask, RoPE tables) from outside, made before the first layer.
 */
export function runLayers<M extends InstanceType<typeof nn.Module>>(layers: readonly M[], h: Tensor, step: (layer: M, h: Tensor, i: number) => Tensor, hidden?: Tensor[]): Tensor {
  if (!mayScopeLayers(layers, h)) {
    layers.forEach((layer, i) => {
      h = step(layer, h, i);
      hidden?.push(h);
    });
    return h;
  }
  // storages made after `born` belong to the previous layer's scope (its output, not a view of
  // an outer tensor that a layer returned unchanged)
  let born = Infinity;
  layers.forEach((layer, i) => {
    const prev = h;
    const start = Storage.created;
    h = torch.scope(() => step(layer, prev, i));
    if (hidden) hidden.push(h);
    else if (prev._storage.serial > born && prev._storage !== h._storage) prev.dispose();
    born = start;
  });
  return h;
}

export interface ForwardOptions {
  /**
   * [B, Lk] 1 = real token, 0 = padding, over all positions so far (cache + new); default all ones.
   * As a tensor it may be longer than that (entries past the new tokens are ignored): the mask is
   * then built on the device, so a compiled step that gets it as an argument (with `positionIds`
   * and `cachePosition`) does no host work per call and can be replayed.
   */
  attentionMask?: number[][] | Tensor;
  /** [B, L] positions of the new tokens; default from attentionMask (cumsum - 1), or cache position. */
  positionIds?: Tensor;
  /** Reads and extends this cache. */
  cache?: KVCache;
  /** [1] int64: cache index of the first new token (transformers' cache_position[0]); default the cache's length. */
  cachePosition?: Tensor;
  /**
   * Advance the cache past the new tokens at the end of forward (default true). A caller that
   * compiles the step passes false and calls `cache.advance(L)` itself, outside the compiled
   * function (a replayed step runs no host code).
   */
  advanceCache?: boolean;
  /** Return the residual stream: [embeddings, after each layer..., after the final norm]. */
  outputHiddenStates?: boolean;
  /**
   * Logits only for the last `logitsToKeep` positions (transformers' `logits_to_keep`; 0 or
   * unset = all): generation needs only the last one, which skips most of the lm_head work.
   */
  logitsToKeep?: number;
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
  /**
   * One serving step over a paged KV cache: the logits [N, vocab] of batch.logitsIndices' tokens. The new
   * tokens' keys and values are written into the cache. Models without it cannot be served by the engine.
   */
  forwardPaged(batch: PagedBatch, cache: PagedKVCache): Tensor {
    void batch;
    void cache;
    throw new Error(`${this.constructor.name} does not support a paged KV cache (forwardPaged)`);
  }
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
  positionIdsFor(mask: number[][], start: number, length: number, device = this.device): Tensor {
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
    return torch.tensor(out, { dtype: "int64", device }).reshape(B, length);
  }

  /**
   * What every forward derives from its inputs: the cache window, the position ids and the
   * additive attention mask [B, 1, L, lk] per sliding window (null = full attention), built once.
   */
  protected forwardInputs(inputIds: Tensor, opts: ForwardOptions, dtype: DType) {
    const [B, L] = inputIds.shape as [number, number];
    const cache = opts.cache;
    const start = cache?.length ?? 0;
    const lk = cache ? cache.viewLength(start + L) : L;
    const device = inputIds.device;
    const am = opts.attentionMask;
    const masks = new Map<number | null, Tensor>();
    if (am instanceof torch.Tensor) {
      if (am.ndim !== 2 || am.shape[0] !== B || am.shape[1]! < Math.max(start + L, lk))
        throw new RangeError(`${this.constructor.name}.forward: attentionMask tensor must be [${B}, >= ${Math.max(start + L, lk)}], got [${am.shape.join(", ")}]`);
      const cachePos = opts.cachePosition ?? torch.tensor([start], { dtype: "int64", device });
      const keys = am.narrow(1, 0, lk).ne(0); // [B, lk]
      // query t sits at cache index cachePos + t
      const qi = cachePos.view(1, 1).add(torch.arange(L, { dtype: "int64", device }).view(L, 1)); // [L, 1]
      const kj = torch.arange(lk, { dtype: "int64", device }); // [lk]
      const causal = kj.le(qi); // [L, lk]
      const pos =
        opts.positionIds ??
        torch.noGrad(() => {
          // cumsum(mask) - 1, padding at 1, over positions [cachePos, cachePos + L)
          const m = am.narrow(1, 0, lk).to("int64");
          const c = torch.where(m.ne(0), m.cumsum(1).sub(1), 1); // [B, lk]
          return c.gather(1, qi.view(1, L).expand(B, L));
        });
      const maskFor = (window: number | null): Tensor => {
        if (!masks.has(window)) {
          let ok = causal.unsqueeze(0).logicalAnd(keys.unsqueeze(1)); // [B, L, lk]
          if (window !== null) ok = ok.logicalAnd(qi.sub(kj).lt(window).unsqueeze(0));
          // 1 * min for masked keys, 0 (exactly) for the others: the same values as buildMask
          masks.set(window, ok.logicalNot().to(dtype).mul(maskMin(dtype)).unsqueeze(1));
        }
        return masks.get(window)!;
      };
      return { L, cache, start, lk, pos, maskFor, causalOnly: (_window: number | null) => false };
    }
    const keyMask = am ?? Array.from({ length: B }, () => new Array<number>(start + L).fill(1));
    const pos = opts.positionIds ?? this.positionIdsFor(keyMask, start, L, device);
    const maskFor = (window: number | null): Tensor => {
      if (!masks.has(window)) masks.set(window, buildMask(keyMask, start, L, lk, window, dtype, device));
      return masks.get(window)!;
    };
    // The mask is exactly is_causal (query t sees keys 0..t of L == lk keys) when no row is padded
    // and the prompt starts the cache: float32 attention then runs causal with no mask, as HF's sdpa
    // path drops such a mask (the kernel skips the key blocks above the diagonal; a 512-token
    // prompt's attention took 14 ms a layer against 27 with the mask, same outputs)
    const unpadded = start === 0 && lk === L && L > 1 && dtype === "float32" && keyMask.every((r) => r.length >= L && r.slice(0, L).every((m) => m !== 0)); // (buildMask reads a missing entry as 0)
    const causalOnly = (window: number | null): boolean => unpadded && (window === null || window >= L);
    return { L, cache, start, lk, pos, maskFor, causalOnly };
  }

  /** Advance the cache past the L new tokens, apply the final norm and lm_head, and collect the hidden states. */
  protected finishForward(h: Tensor, hidden: Tensor[], L: number, opts: ForwardOptions, norm: { forward(x: Tensor): Tensor }, lmHead: Linear): CausalLMOutput {
    if (opts.advanceCache ?? true) opts.cache?.advance(L);
    const keep = opts.logitsToKeep ?? 0;
    const last = (t: Tensor) => (keep > 0 && keep < L ? t.narrow(1, L - keep, keep) : t);
    if (!opts.outputHiddenStates) return { logits: lmHead.forward(norm.forward(last(h))) }; // norm is per position
    h = norm.forward(h);
    hidden.push(h);
    return { logits: lmHead.forward(last(h)), hiddenStates: hidden };
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
