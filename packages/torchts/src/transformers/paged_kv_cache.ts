// The KV cache of a serving engine: per layer one key and one value tensor [numBlocks, blockSize,
// kvHeads, headDim] (flash-attn's paged layout) shared by every sequence of the batch. Which blocks a
// sequence owns is the engine's bookkeeping (its block pool and prefix cache); a step hands the model a
// PagedBatch: the new tokens of every sequence packed together, each sequence's block table and how
// many of its positions are already cached. Attention reads the cached positions in place through the
// table (F.pagedAttention), and each layer writes its new keys into their slots with Tensor.indexCopy_,
// touching only those rows: nothing of the context's size is gathered, concatenated or rewritten per step.
import * as torch from "../index.js";
import type { Tensor, DType } from "../index.js";
import { itemSize } from "../ir/dtype.js";

export interface PagedKVCacheOptions {
  layers: number;
  kvHeads: number;
  headDim: number;
  /** Blocks in the pool (each holds blockSize positions of every layer). */
  numBlocks: number;
  /** Positions per block (default 16, vLLM's --block-size). */
  blockSize?: number;
  dtype?: DType;
  device?: string;
}

export class PagedKVCache {
  static readonly defaultBlockSize = 16;
  readonly blockSize: number;
  readonly numBlocks: number;
  /** [numBlocks, blockSize, kvHeads, headDim] per layer. */
  readonly keys: Tensor[] = [];
  readonly values: Tensor[] = [];

  /** Bytes one block takes over all layers (keys and values): what --kv-cache-memory is divided by. */
  static bytesPerBlock(o: Omit<PagedKVCacheOptions, "numBlocks">): number {
    return 2 * o.layers * (o.blockSize ?? PagedKVCache.defaultBlockSize) * o.kvHeads * o.headDim * itemSize(o.dtype ?? "float32");
  }

  constructor(readonly opts: PagedKVCacheOptions) {
    const int = (v: unknown, name: string, min: number) => {
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min) throw new RangeError(`PagedKVCache: ${name} must be an integer >= ${min}, got ${String(v)}`);
      return v;
    };
    this.blockSize = int(opts.blockSize ?? PagedKVCache.defaultBlockSize, "blockSize", 1);
    this.numBlocks = int(opts.numBlocks, "numBlocks", 1);
    const [L, H, D] = [int(opts.layers, "layers", 1), int(opts.kvHeads, "kvHeads", 1), int(opts.headDim, "headDim", 1)];
    const o = { dtype: opts.dtype ?? "float32", device: opts.device };
    const shape = [this.numBlocks, this.blockSize, H, D];
    try {
      for (let l = 0; l < L; l++) {
        // zeros: a slot not yet written is never weighted, but finite values keep 0 * x at 0
        this.keys.push(torch.zeros(shape, o));
        this.values.push(torch.zeros(shape, o));
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /**
   * Write the new keys and values [T, kvHeads, headDim] of `layer` into their slots (slotMapping [T]
   * int64: block * blockSize + offset; on the cpu for a cache elsewhere), in place.
   */
  write(layer: number, k: Tensor, v: Tensor, slotMapping: Tensor): void {
    const rows = this.numBlocks * this.blockSize;
    const [H, D] = [this.opts.kvHeads, this.opts.headDim];
    torch.noGrad(() => {
      this.keys[layer]!.view(rows, H, D).indexCopy_(0, slotMapping, k.contiguous());
      this.values[layer]!.view(rows, H, D).indexCopy_(0, slotMapping, v.contiguous());
    });
  }

  /** Copy whole blocks src[i] -> dst[i] of every layer (copy-on-write of a shared partial block). */
  copyBlocks(src: readonly number[], dst: readonly number[]): void {
    if (!src.length) return;
    const rows = (ids: readonly number[]) => torch.tensor(ids.flatMap((b) => Array.from({ length: this.blockSize }, (_, s) => b * this.blockSize + s)), { dtype: "int64", device: this.opts.device });
    const [from, to] = [rows(src), rows(dst)];
    const n = this.numBlocks * this.blockSize;
    const [H, D] = [this.opts.kvHeads, this.opts.headDim];
    torch.noGrad(() => {
      for (const t of [...this.keys, ...this.values]) {
        const flat = t.view(n, H, D);
        flat.indexCopy_(0, to, flat.indexSelect(0, from));
      }
    });
  }

  /** The blocks' contents [layers, 2, n, blockSize, kvHeads, headDim] as one tensor (a host tier saves it). */
  readBlocks(ids: readonly number[]): Tensor {
    const idx = torch.tensor([...ids], { dtype: "int64", device: this.opts.device });
    return torch.noGrad(() => torch.stack(this.keys.map((k, l) => torch.stack([k.indexSelect(0, idx), this.values[l]!.indexSelect(0, idx)]))));
  }

  /** Put back what readBlocks returned into blocks `ids` (any blocks: a host tier loads into free ones). */
  writeBlocks(ids: readonly number[], data: Tensor): void {
    const idx = torch.tensor([...ids], { dtype: "int64", device: this.opts.device });
    torch.noGrad(() =>
      this.keys.forEach((k, l) => {
        k.indexCopy_(0, idx, data.select(0, l).select(0, 0).to(k.dtype));
        this.values[l]!.indexCopy_(0, idx, data.select(0, l).select(0, 1).to(k.dtype));
      }),
    );
  }

  dispose(): void {
    for (const t of [...this.keys, ...this.values]) t.dispose();
  }
}

/** One sequence of a step: its new tokens, how many of its positions are cached, the blocks it owns. */
export interface PagedSequence {
  tokens: readonly number[];
  /** Positions already in the cache (the new tokens are positions cached .. cached + tokens.length - 1). */
  cached: number;
  /** Its block table: position p lives in block blocks[p / blockSize], slot p % blockSize. */
  blocks: readonly number[];
  /** Return the logits of its last new token (a decode step, or the last chunk of a prefill). */
  wantLogits: boolean;
}

/** What forwardPaged reads (all on the model's device); build it with pagedBatch(). */
export interface PagedBatch {
  inputIds: Tensor; // [T] int64
  positions: Tensor; // [T] int64
  blockTable: Tensor; // [B, maxBlocks] int32
  cuSeqlensQ: Tensor; // [B + 1] int32
  cacheSeqlens: Tensor; // [B] int32
  slotMapping: Tensor; // [T] int64
  /** The slot mapping on the cpu when the batch is elsewhere: the cache write reads its rows on the host. */
  slotMappingHost: Tensor | null;
  /** Rows of the packed tokens whose logits forwardPaged returns, in sequence order. */
  logitsIndices: Tensor; // [N] int64
}

/** Pack a step's sequences into the tensors of a PagedBatch. */
export function pagedBatch(seqs: readonly PagedSequence[], blockSize: number, device = "cpu"): PagedBatch {
  const T = seqs.reduce((a, s) => a + s.tokens.length, 0);
  const MB = Math.max(1, ...seqs.map((s) => Math.ceil((s.cached + s.tokens.length) / blockSize)));
  const ids = new Float64Array(T), pos = new Float64Array(T), slots = new Float64Array(T);
  const table = new Int32Array(seqs.length * MB), cu = new Int32Array(seqs.length + 1), lens = new Int32Array(seqs.length);
  const keep: number[] = [];
  let t = 0;
  seqs.forEach((s, b) => {
    if (s.blocks.length * blockSize < s.cached + s.tokens.length)
      throw new RangeError(`pagedBatch: sequence ${b} has ${s.blocks.length} blocks of ${blockSize} for ${s.cached + s.tokens.length} positions`);
    for (let j = 0; j < Math.min(MB, s.blocks.length); j++) table[b * MB + j] = s.blocks[j]!;
    lens[b] = s.cached;
    s.tokens.forEach((tok, i) => {
      const p = s.cached + i;
      ids[t] = tok;
      pos[t] = p;
      slots[t] = s.blocks[Math.floor(p / blockSize)]! * blockSize + (p % blockSize);
      t++;
    });
    cu[b + 1] = t;
    if (s.wantLogits && s.tokens.length) keep.push(t - 1);
  });
  const i64 = { dtype: "int64" as const, device };
  const i32 = { dtype: "int32" as const, device };
  return {
    inputIds: torch.tensor(ids, i64),
    positions: torch.tensor(pos, i64),
    blockTable: torch.tensor(table, i32).reshape(seqs.length, MB),
    cuSeqlensQ: torch.tensor(cu, i32),
    cacheSeqlens: torch.tensor(lens, i32),
    slotMapping: torch.tensor(slots, i64),
    slotMappingHost: device === "cpu" ? null : torch.tensor(slots, { dtype: "int64" }),
    logitsIndices: torch.tensor(keep, i64),
  };
}
