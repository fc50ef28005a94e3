// KV cache built from fixed-size blocks. Each layer owns one preallocated buffer per k and v,
// [B, kvHeads, numBlocks * blockSize, headDim], written in place. Attention reads a view of
// the blocks in use (masked beyond the written length), so tensor shapes change only when a new
// block comes into use: decode steps inside a block reuse the same compiled kernels.
// The block pool (`numBlocks` blocks per sequence, allocated up front) is what a paged
// allocator in a serving engine would own and hand out; `blockTable` maps logical to physical blocks.
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
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly keys: Tensor[] = [];
  readonly values: Tensor[] = [];
  /** Positions written so far (the same for every row: batches are left-padded). */
  length = 0;
  /** Logical block i of every sequence lives in physical block blockTable[i]. */
  readonly blockTable: number[];

  constructor(readonly opts: KVCacheOptions) {
    this.blockSize = opts.blockSize ?? 32;
    this.numBlocks = Math.ceil(opts.maxLength / this.blockSize);
    this.blockTable = Array.from({ length: this.numBlocks }, (_, i) => i);
    const shape = [opts.batchSize, opts.kvHeads, this.numBlocks * this.blockSize, opts.headDim];
    for (let l = 0; l < opts.layers; l++) {
      // zeros, not empty: masked positions must hold finite values (0 * NaN would poison the sum).
      this.keys.push(torch.zeros(shape, { dtype: opts.dtype ?? "float32", device: opts.device }));
      this.values.push(torch.zeros(shape, { dtype: opts.dtype ?? "float32", device: opts.device }));
    }
  }

  get capacity(): number {
    return this.numBlocks * this.blockSize;
  }

  /** Length of the attended view once `n` positions are written: whole blocks. */
  viewLength(n: number): number {
    return Math.min(this.capacity, Math.ceil(n / this.blockSize) * this.blockSize);
  }

  /**
   * Write k, v [B, kvHeads, L, hd] at positions [length, length + L) of `layer` and return the
   * block views to attend over. Call `advance(L)` once all layers have been updated.
   */
  update(layer: number, k: Tensor, v: Tensor): [Tensor, Tensor] {
    const L = k.shape[2]!;
    const start = this.length;
    if (start + L > this.capacity)
      throw new RangeError(`KVCache: writing ${L} positions at ${start} exceeds the capacity of ${this.capacity} (maxLength ${this.opts.maxLength})`);
    const kb = this.keys[layer]!;
    const vb = this.values[layer]!;
    torch.noGrad(() => {
      if (L === 1) {
        // Decode: select the slot with a position mask over the whole buffer. An in-place write
        // through a narrow view would bake the view's offset into the compiled kernel (one
        // recompile per step); this keeps every decode step's kernels identical.
        const at = this.slotMask(start, kb.device);
        kb.copy_(torch.where(at, k, kb));
        vb.copy_(torch.where(at, v, vb));
      } else {
        kb.narrow(2, start, L).copy_(k);
        vb.narrow(2, start, L).copy_(v);
      }
    });
    const n = this.viewLength(start + L);
    return [kb.narrow(2, 0, n), vb.narrow(2, 0, n)];
  }

  // one [capacity, 1] position mask per decode step, shared by every layer's k and v writes
  private slot: { pos: number; device: string; mask: Tensor } | null = null;
  private slotMask(pos: number, device: string): Tensor {
    if (this.slot?.pos !== pos || this.slot.device !== device) {
      const sel = new Uint8Array(this.capacity);
      sel[pos] = 1;
      this.slot = { pos, device, mask: torch.tensor(sel, { dtype: "bool", device }).reshape(this.capacity, 1) };
    }
    return this.slot.mask;
  }

  advance(n: number): void {
    this.length += n;
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t.dispose();
    this.slot = null;
  }
}
