// TorchRec's EmbeddingBagCollection (torchrec.modules.embedding_modules): one nn.EmbeddingBag per
// table, each pooling the bags of the features it lists; forward(KeyedJaggedTensor) -> KeyedTensor
// with one block per feature, tables in order and each table's features in order.
import { noGrad } from "../../autograd/grad_mode.js";
import { Module } from "../../nn/module.js";
import { ModuleDict } from "../../nn/layers/container.js";
import { EmbeddingBag } from "../../nn/layers/sparse.js";
import * as init from "../../nn/init.js";
import { zeros } from "../../ops/creation.js";
import { cat } from "../../ops/shape_ops.js";
import type { Tensor } from "../../tensor.js";
import { bindArgs, boolArg, describe } from "../args.js";
import { type EmbeddingBagConfig, type EmbeddingBagConfigOptions, PoolingType, tablesArg } from "./config.js";
import { KeyedJaggedTensor, KeyedTensor } from "./jagged.js";

/** One output block: a feature, the table that embeds it and where its columns go. */
export interface FeatureSlot {
  feature: string;
  table: number;
  dim: number;
  mean: boolean;
  /** First output column of this feature. */
  col: number;
}

/** The output layout shared by the plain and the sharded collection. */
export function featureSlots(tables: readonly EmbeddingBagConfig[]): FeatureSlot[] {
  const out: FeatureSlot[] = [];
  let col = 0;
  tables.forEach((t, table) => {
    for (const feature of t.featureNames) {
      out.push({ feature, table, dim: t.embeddingDim, mean: t.pooling === PoolingType.MEAN, col });
      col += t.embeddingDim;
    }
  });
  return out;
}

/** The features' positions among the input's keys; raises naming a missing feature and its table. */
export function featureIndex(fn: string, features: unknown, tables: readonly EmbeddingBagConfig[], slots: readonly FeatureSlot[]): number[] {
  if (!(features instanceof KeyedJaggedTensor)) throw new TypeError(`${fn}.forward(): argument 'features' must be a KeyedJaggedTensor, got ${describe(features)}`);
  const keys = features.keys();
  return slots.map((s) => {
    const k = keys.indexOf(s.feature);
    if (k < 0) throw new Error(`${fn}.forward(): the input has no feature '${s.feature}' (table '${tables[s.table]!.name}'; its keys are ${keys.join(", ") || "none"})`);
    return k;
  });
}

/** Raises naming the table, the feature and the id when an id is outside [0, rows). */
export function checkIds(fn: string, ids: ArrayLike<number>, from: number, to: number, table: EmbeddingBagConfig, feature: string): void {
  for (let i = from; i < to; i++) {
    const id = ids[i]!;
    if (!(id >= 0 && id < table.numEmbeddings))
      throw new RangeError(`${fn}.forward(): id ${id} of feature '${feature}' is out of range for table '${table.name}' (${table.numEmbeddings} rows: ids must be in [0, ${table.numEmbeddings}))`);
  }
}

export interface EmbeddingBagCollectionOptions {
  /** Weighted bags (per-value weights) are not supported yet; must be false. */
  isWeighted?: boolean;
  device?: string;
}

/**
 * new EmbeddingBagCollection([{ name: "t0", numEmbeddings: 100, embeddingDim: 8, featureNames: ["f0"] }, ...])
 * ebc.forward(kjt).toDict()["f0"]  // [B, 8]
 * Parameters: `embedding_bags.<table>.weight` (TorchRec's state-dict names), initialised
 * U(weightInitMin, weightInitMax).
 */
export class EmbeddingBagCollection extends Module {
  declare embedding_bags: ModuleDict;
  private readonly _tables: EmbeddingBagConfig[];
  private readonly _slots: FeatureSlot[];

  constructor(tables: (EmbeddingBagConfig | EmbeddingBagConfigOptions)[], isWeighted?: boolean, device?: string);
  constructor(tables: (EmbeddingBagConfig | EmbeddingBagConfigOptions)[], opts: EmbeddingBagCollectionOptions);
  constructor(...args: unknown[]) {
    super();
    const fn = "EmbeddingBagCollection";
    const a = bindArgs(fn, ["tables", "isWeighted", "device"], args);
    this._tables = tablesArg(fn, a.tables);
    if (boolArg(fn, "isWeighted", a.isWeighted, false)) throw new Error(`${fn}(): weighted features (isWeighted: true) are not supported`);
    const device = a.device === undefined || a.device === null ? undefined : String(a.device);
    this._slots = featureSlots(this._tables);
    this.embedding_bags = new ModuleDict(
      this._tables.map((t) => {
        const bag = new EmbeddingBag(t.numEmbeddings, t.embeddingDim, { mode: t.pooling === PoolingType.MEAN ? "mean" : "sum", device });
        noGrad(() => init.uniform_(bag.weight, t.weightInitMin, t.weightInitMax));
        return [t.name, bag] as [string, Module];
      }),
    );
  }

  embeddingBagConfigs(): EmbeddingBagConfig[] {
    return [...this._tables];
  }
  isWeighted(): boolean {
    return false;
  }
  /** The output's keys and widths (feature names and their tables' dims). */
  _outputLayout(): { keys: string[]; dims: number[] } {
    return { keys: this._slots.map((s) => s.feature), dims: this._slots.map((s) => s.dim) };
  }

  override forward(features: KeyedJaggedTensor): KeyedTensor {
    const fn = "EmbeddingBagCollection";
    const idx = featureIndex(fn, features, this._tables, this._slots);
    const B = features.stride();
    const ids = features.values()._contiguousHost();
    const off = features.offsetPerKey();
    const blocks: Tensor[] = this._slots.map((s, i) => {
      const table = this._tables[s.table]!;
      const k = idx[i]!;
      checkIds(fn, ids, off[k]!, off[k + 1]!, table, s.feature);
      const bag = this.embedding_bags.get(table.name) as EmbeddingBag;
      if (B === 0) return zeros([0, s.dim], { dtype: bag.weight.dtype, device: bag.weight.device });
      const jt = features.get(s.feature);
      return bag.forward(jt.values(), jt.offsets().narrow(0, 0, B));
    });
    const { keys, dims } = this._outputLayout();
    return new KeyedTensor(keys, dims, B === 0 ? zeros([0, dims.reduce((p, q) => p + q, 0)]) : cat(blocks, 1));
  }
}
