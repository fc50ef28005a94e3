// KV cache built from fixed-size blocks. Each layer owns one preallocated buffer per k and v,
// [B, kvHeads, numBlocks * blockSize, headDim], plus a one-block "tail" buffer
// [B, kvHeads, blockSize, headDim] for the block being filled. An in-place write in torchts
// rewrites the whole storage it lands in, so a decode step writes its token into the small tail
// (cost O(blockSize), not O(capacity)); the tail is copied into the big buffer once per block,
// when it is full. Attention reads the completed blocks and the tail (masked beyond the written
// length), so tensor shapes change only when a new block comes into use: decode steps inside a
// block reuse the same compiled kernels.
// The block pool (`numBlocks` blocks per sequence, allocated up front) is what a paged
// allocator in a serving engine would own and hand out; `blockTable` maps logical to physical blocks.
// A decode step hands attention the completed blocks and the tail as two segments
// (`updateSegments`), so nothing of the context's size is copied per step.
import * as torch from "../index.js";
import type { Tensor, DType } from "../index.js";

export interface KVCacheOptions {
  batchSize: number;
  layers: number;
  kvHeads: number;
  headDim: number;
  /** Total positions the cache must hold (prompt + new tokens). */
  maxLength: number;
  blockSize?: number;
  dtype?: DType;
  device?: string;
}

export class KVCache {
  static readonly defaultBlockSize = 32;
  readonly blockSize: number;
  readonly numBlocks: number;
  /** Completed blocks of each layer, [B, kvHeads, capacity, hd]. */
  readonly keys: Tensor[] = [];
  readonly values: Tensor[] = [];
  /** The block being filled, [B, kvHeads, blockSize, hd]: positions [tailStart, tailStart + blockSize). */
  private readonly tailKeys: Tensor[] = [];
  private readonly tailValues: Tensor[] = [];
  /** Positions written so far (the same for every row: batches are left-padded). */
  length = 0;
  /** First position of the tail block; positions before it live in keys/values. */
  private tailStart = 0;
  /** Logical block i of every sequence lives in physical block blockTable[i]. */
  readonly blockTable: number[];

  constructor(readonly opts: KVCacheOptions) {
    this.blockSize = opts.blockSize ?? KVCache.defaultBlockSize;
    this.numBlocks = Math.ceil(opts.maxLength / this.blockSize);
    this.blockTable = Array.from({ length: this.numBlocks }, (_, i) => i);
    const [B, H, D] = [opts.batchSize, opts.kvHeads, opts.headDim];
    const o = { dtype: opts.dtype ?? "float32", device: opts.device };
    for (let l = 0; l < opts.layers; l++) {
      // zeros, not empty: masked positions must hold finite values (0 * NaN would poison the sum).
      this.keys.push(torch.zeros([B, H, this.capacity, D], o));
      this.values.push(torch.zeros([B, H, this.capacity, D], o));
      this.tailKeys.push(torch.zeros([B, H, this.blockSize, D], o));
      this.tailValues.push(torch.zeros([B, H, this.blockSize, D], o));
    }
    this.slotMask(0);
    this.slotIds = torch.arange(this.blockSize, { dtype: "int64", device: opts.device });
  }

  get capacity(): number {
    return this.numBlocks * this.blockSize;
  }

  /** Length of the attended view once `n` positions are written: whole blocks. */
  viewLength(n: number): number {
    return Math.min(this.capacity, Math.ceil(n / this.blockSize) * this.blockSize);
  }

  /**
   * Write k, v [B, kvHeads, L, hd] at positions [length, length + L) of `layer` and return
   * [B, kvHeads, viewLength(length + L), hd] keys and values to attend over. Call `advance(L)`
   * once all layers have been updated. `cachePosition` ([1] int64, equal to `length`) lets a
   * decode step select its slot on the device instead of from the host number.
   */
  update(layer: number, k: Tensor, v: Tensor, cachePosition?: Tensor): [Tensor, Tensor] {
    const { keys, values } = this.updateSegments(layer, k, v, cachePosition);
    if (keys.length === 1) return [keys[0]!, values[0]!];
    return torch.noGrad(() => [torch.cat(keys, 2), torch.cat(values, 2)] as [Tensor, Tensor]);
  }

  /**
   * `update`, but the keys and values to attend over come as one tensor or, in a decode step
   * past the first block, as two along the sequence: the completed blocks (a view of the big
   * buffer) and the tail. `segmentedAttention` reads both in place instead of concatenating
   * them, which would copy the whole context of every layer at every step.
   */
  updateSegments(layer: number, k: Tensor, v: Tensor, cachePosition?: Tensor): { keys: Tensor[]; values: Tensor[] } {
    const L = k.shape[2]!;
    const start = this.length;
    if (start + L > this.capacity)
      throw new RangeError(`KVCache: writing ${L} positions at ${start} exceeds the capacity of ${this.capacity} (maxLength ${this.opts.maxLength})`);
    const [kb, vb, kt, vt] = [this.keys[layer]!, this.values[layer]!, this.tailKeys[layer]!, this.tailValues[layer]!];
    const bs = this.blockSize;
    const n = this.viewLength(start + L);
    return torch.noGrad(() => {
      if (L === 1) {
        // Decode: select the slot with a position mask over the tail. (An in-place write through
        // a narrow view costs the same whole-storage pass and bakes the view's offset into the
        // kernel, one recompile per step; the mask keeps every decode step's kernels identical.)
        const at = cachePosition ? this.slotMaskAt(cachePosition) : this.slotMask(start - this.tailStart);
        kt.copy_(torch.where(at, k, kt));
        vt.copy_(torch.where(at, v, vt));
        if (this.tailStart === 0) return { keys: [kt], values: [vt] };
        return { keys: [kb.narrow(2, 0, this.tailStart), kt], values: [vb.narrow(2, 0, this.tailStart), vt] };
      }
      // Several positions (prefill): land the tail and the new positions in the big buffer, then
      // load the block that holds position start + L into the tail.
      if (start > this.tailStart) {
        kb.narrow(2, this.tailStart, bs).copy_(kt);
        vb.narrow(2, this.tailStart, bs).copy_(vt);
      }
      kb.narrow(2, start, L).copy_(k);
      vb.narrow(2, start, L).copy_(v);
      const next = Math.floor((start + L) / bs) * bs;
      if (next < this.capacity) {
        kt.copy_(kb.narrow(2, next, bs));
        vt.copy_(vb.narrow(2, next, bs));
      }
      return { keys: [kb.narrow(2, 0, n)], values: [vb.narrow(2, 0, n)] };
    });
  }

  // row i of [blockSize, blockSize, 1] selects tail slot i; made up front (not inside a caller's
  // torch.scope) and shared by every layer's k and v writes
  private slots: Tensor | null = null;
  private readonly slotIds: Tensor;
  private slotMask(slot: number): Tensor {
    this.slots ??= torch.eye(this.blockSize, { dtype: "bool", device: this.opts.device }).unsqueeze(-1);
    return this.slots.select(0, slot);
  }

  // [blockSize, 1]: slot == cachePosition - tailStart, on the device (no host number per step)
  private slotMaskAt(pos: Tensor): Tensor {
    return this.slotIds.eq(pos.sub(this.tailStart)).view(this.blockSize, 1);
  }

  advance(n: number): void {
    const bs = this.blockSize;
    const next = Math.floor((this.length + n) / bs) * bs;
    // a decode step filled the tail: it becomes a completed block (prefill already wrote there)
    if (n === 1 && next > this.tailStart)
      torch.noGrad(() => {
        for (let l = 0; l < this.keys.length; l++) {
          this.keys[l]!.narrow(2, this.tailStart, bs).copy_(this.tailKeys[l]!);
          this.values[l]!.narrow(2, this.tailStart, bs).copy_(this.tailValues[l]!);
        }
      });
    this.length += n;
    this.tailStart = next;
  }

  /** True once any buffer was freed (dispose(), or a torch.scope the cache was created in). */
  get disposed(): boolean {
    return [...this.keys, ...this.values, ...this.tailKeys, ...this.tailValues].some((t) => t.isDisposed);
  }

  /** Forget every position (the buffers keep stale values, which attention masks out). */
  reset(): void {
    this.length = 0;
    this.tailStart = 0;
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values, ...this.tailKeys, ...this.tailValues]) t.dispose();
    this.slots?.dispose();
    this.slotIds.dispose();
    this.slots = null;
  }
}
