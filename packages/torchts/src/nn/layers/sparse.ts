// Embedding and EmbeddingBag.
import type { Tensor } from "../../tensor.js";
import { noGrad } from "../../autograd/grad_mode.js";
import { fromHostData } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { matmul } from "../../ops/linalg.js";
import { zeros } from "../../ops/creation.js";
import { withOp } from "../../runtime/mode.js";
import { Module, Parameter } from "../module.js";
import * as init from "../init.js";
import * as F from "../functional.js";
import { param, type FactoryOpts } from "./basic.js";

export interface EmbeddingOpts extends FactoryOpts {
  paddingIdx?: number | null;
  maxNorm?: number | null;
  scaleGradByFreq?: boolean;
  sparse?: boolean;
  _weight?: Tensor;
}

function normPadding(p: number | null | undefined, n: number): number | null {
  if (p === null || p === undefined) return null;
  if (p >= n || p < -n) throw new RangeError("Padding_idx must be within num_embeddings");
  return p < 0 ? p + n : p;
}

export class Embedding extends Module {
  declare weight: Parameter;
  paddingIdx: number | null;
  constructor(
    public numEmbeddings: number,
    public embeddingDim: number,
    opts: EmbeddingOpts = {},
  ) {
    super();
    this.paddingIdx = normPadding(opts.paddingIdx, numEmbeddings);
    if (opts._weight) {
      if (opts._weight.shape.join() !== `${numEmbeddings},${embeddingDim}`)
        throw new RangeError("Shape of weight does not match num_embeddings and embedding_dim");
      this.weight = new Parameter(opts._weight);
    } else {
      this.weight = param([numEmbeddings, embeddingDim], opts);
      this.resetParameters();
    }
  }
  resetParameters(): void {
    init.normal_(this.weight);
    if (this.paddingIdx !== null) {
      const p = this.paddingIdx;
      noGrad(() => S.select(this.weight, 0, p).fill_(0));
    }
  }
  static fromPretrained(embeddings: Tensor, opts: { freeze?: boolean; paddingIdx?: number | null } = {}): Embedding {
    if (embeddings.ndim !== 2) throw new RangeError("Embeddings parameter is expected to be 2-dimensional");
    const e = new Embedding(embeddings.shape[0]!, embeddings.shape[1]!, { _weight: embeddings, paddingIdx: opts.paddingIdx });
    e.weight.requiresGrad = !(opts.freeze ?? true);
    return e;
  }
  override forward(input: Tensor): Tensor {
    return F.embedding(input, this.weight, { paddingIdx: this.paddingIdx });
  }
  override extraRepr(): string {
    return `${this.numEmbeddings}, ${this.embeddingDim}${this.paddingIdx !== null ? `, padding_idx=${this.paddingIdx}` : ""}`;
  }
}

export interface EmbeddingBagOpts extends FactoryOpts {
  mode?: "sum" | "mean" | "max";
  paddingIdx?: number | null;
  includeLastOffset?: boolean;
}

export class EmbeddingBag extends Module {
  declare weight: Parameter;
  mode: "sum" | "mean" | "max";
  paddingIdx: number | null;
  includeLastOffset: boolean;
  constructor(
    public numEmbeddings: number,
    public embeddingDim: number,
    opts: EmbeddingBagOpts = {},
  ) {
    super();
    this.mode = opts.mode ?? "mean";
    this.paddingIdx = normPadding(opts.paddingIdx, numEmbeddings);
    this.includeLastOffset = opts.includeLastOffset ?? false;
    this.weight = param([numEmbeddings, embeddingDim], opts);
    init.normal_(this.weight);
    if (this.paddingIdx !== null) {
      const p = this.paddingIdx;
      noGrad(() => S.select(this.weight, 0, p).fill_(0));
    }
  }
  /** input: 2-D (bags of equal length) or 1-D with offsets (bag starts). */
  override forward(input: Tensor, offsets?: Tensor | null, perSampleWeights?: Tensor | null): Tensor {
    return withOp("embedding_bag", () => {
      let flat: Tensor;
      let starts: number[];
      if (input.ndim === 2) {
        if (offsets) throw new Error("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed length sequences.");
        const [b, n] = input.shape as [number, number];
        flat = S.reshape(input, [b * n]);
        starts = Array.from({ length: b }, (_, i) => i * n);
        if (perSampleWeights) perSampleWeights = S.reshape(perSampleWeights, [b * n]);
      } else if (input.ndim === 1) {
        if (!offsets) throw new Error("offsets has to be a 1D Tensor but got None");
        if (offsets.ndim !== 1) throw new Error("offsets has to be a 1D Tensor");
        flat = input;
        starts = Array.from(offsets._contiguousHost(), Number);
        if (this.includeLastOffset) starts = starts.slice(0, -1);
      } else throw new RangeError(`input has to be 1D or 2D Tensor, but got Tensor of dimension ${input.ndim}`);
      if (perSampleWeights && this.mode !== "sum")
        throw new Error("embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for mode='sum'");
      const n = flat.shape[0]!;
      const ids = Array.from(flat._contiguousHost(), Number);
      const ends = starts.map((s, i) => (i + 1 < starts.length ? starts[i + 1]! : n));
      let emb = F.embedding(flat, this.weight); // (n, d)
      if (perSampleWeights) emb = M.mul(emb, S.unsqueeze(perSampleWeights, 1));
      const keep = (j: number) => this.paddingIdx === null || ids[j] !== this.paddingIdx;
      if (this.mode === "max") {
        const rows = starts.map((s, i) => {
          const js = Array.from({ length: ends[i]! - s }, (_, k) => s + k).filter(keep);
          if (!js.length) return zeros([this.embeddingDim], { dtype: this.weight.dtype, device: this.weight.device });
          const sel = S.cat(js.map((j) => S.narrow(emb, 0, j, 1)));
          return R.amax(sel, 0);
        });
        return S.stack(rows);
      }
      // bag-membership matrix (bags x n) turns sum/mean into one matmul
      const mat = new Array<number>(starts.length * n).fill(0);
      starts.forEach((s, i) => {
        const js = Array.from({ length: ends[i]! - s }, (_, k) => s + k).filter(keep);
        for (const j of js) mat[i * n + j] = this.mode === "mean" ? 1 / js.length : 1;
      });
      return matmul(fromHostData(mat, [starts.length, n], emb.dtype, emb.device), emb);
    });
  }
}

