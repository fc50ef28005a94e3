// ShardedEmbeddingBagCollection: an EmbeddingBagCollection sharded ROW_WISE over a 1-d mesh, as
// TorchRec's row-wise sharding. Rank r owns rows [r*c, (r+1)*c) of every table, c = ceil(rows / N)
// (torch.chunk's rule: the last ranks' shards may be short or empty); each table's weight is a
// DTensorParameter placed Shard(0), so the optimizer steps the local rows and fullTensor() /
// distributed checkpoints see the whole table.
//
// forward(kjt) on every rank, with its own local batch (data parallel input):
//   1. each id is bucketed by its owner (and made local: id - owner*c); a header exchange tells every
//      rank how many samples and ids come from each rank, and whether any rank's input is invalid
//      (then every rank raises, no rank is left waiting in a collective);
//   2. all-to-all of the bucketed lengths, then of the ids;
//   3. the owner pools its rows into partial bags for every sample of every rank (index + indexAdd);
//   4. the partial sums go back with a differentiable all-to-all and each rank sums its N parts
//      (mean tables are then divided by the bag lengths: a mean does not split over owners).
// Backward: the pooled output's gradient travels back to the owners over the same routes (divided by
// N, TorchRec's gradient division, so a batch split over N ranks trains as the whole batch on one),
// and indexAdd/index route it to exactly the rows each id used.
import { Module } from "../../nn/module.js";
import { ModuleDict } from "../../nn/layers/container.js";
import { tensor, zeros } from "../../ops/creation.js";
import { cat } from "../../ops/shape_ops.js";
import type { Tensor } from "../../tensor.js";
import { bindArgs, boolArg, describe } from "../args.js";
import { allToAllSingle } from "../collectives.js";
import { type DeviceMesh, initDeviceMesh } from "../device_mesh.js";
import { DistError } from "../errors.js";
import { getWorldSize, type ProcessGroup } from "../process_group.js";
import { DTensor, DTensorParameter } from "../tensor/dtensor.js";
import { chunkRange, Shard } from "../tensor/placement.js";
import { checkIds, EmbeddingBagCollection, type FeatureSlot, featureIndex, featureSlots } from "./collection.js";
import type { EmbeddingBagConfig } from "./config.js";
import { getGradientDivision, pooledAllToAll } from "./comm.js";
import { type KeyedJaggedTensor, KeyedTensor } from "./jagged.js";

/** TorchRec's ShardingType (only ROW_WISE is implemented). */
export const ShardingType = { ROW_WISE: "row_wise", TABLE_WISE: "table_wise", COLUMN_WISE: "column_wise", TABLE_ROW_WISE: "table_row_wise", DATA_PARALLEL: "data_parallel" } as const;
export type ShardingType = (typeof ShardingType)[keyof typeof ShardingType];

export interface ShardedEmbeddingBagCollectionOptions {
  /** A 1-d mesh (default: the whole world). */
  mesh?: DeviceMesh | null;
  /** Only ShardingType.ROW_WISE ("row_wise", the default). */
  shardingType?: ShardingType;
  /** Divide the shards' gradients by the world size (default: setGradientDivision's setting, true). */
  gradientDivision?: boolean | null;
}

/** Holds one table's shard as `weight` (so the state dict reads `embedding_bags.<table>.weight`). */
class ShardedBag extends Module {
  declare weight: DTensorParameter;
  constructor(weight: DTensorParameter) {
    super();
    this.weight = weight;
  }
}

/** What a forward's bucketing produced on this rank (nothing when its input was invalid). */
interface Buckets {
  /** Per destination: bag lengths in (feature, sample) order, F * B of them. */
  lengths: number[][];
  /** Per destination: local row ids in (feature, sample, position) order. */
  ids: number[][];
}

const FN = "ShardedEmbeddingBagCollection";
const HEADER = 3; // per pair of ranks: [batch size, number of ids, input invalid]

export class ShardedEmbeddingBagCollection extends Module {
  declare embedding_bags: ModuleDict;
  readonly mesh: DeviceMesh;
  readonly shardingType: ShardingType;
  private readonly _tables: EmbeddingBagConfig[];
  private readonly _slots: FeatureSlot[];
  /** Per table: rows per rank (the block size c). */
  private readonly _block: number[];
  private readonly _gradientDivision: boolean | null;

  /**
   * Shard `module` (every rank passes its own EmbeddingBagCollection of the same tables; each keeps
   * its rows of it, so equal seeds give the unsharded module's tables).
   */
  constructor(module: EmbeddingBagCollection, opts?: ShardedEmbeddingBagCollectionOptions);
  constructor(module: EmbeddingBagCollection, mesh?: DeviceMesh | null, shardingType?: ShardingType, gradientDivision?: boolean | null);
  constructor(...args: unknown[]) {
    super();
    const a = bindArgs(FN, ["module", "mesh", "shardingType", "gradientDivision"], args);
    if (!(a.module instanceof EmbeddingBagCollection)) throw new TypeError(`${FN}(): argument 'module' must be an EmbeddingBagCollection, got ${describe(a.module)}`);
    const st = a.shardingType ?? ShardingType.ROW_WISE;
    if (st !== ShardingType.ROW_WISE)
      throw new DistError(`${FN}(): sharding type ${describe(st)} is not supported (only ShardingType.ROW_WISE, "row_wise")`);
    this.shardingType = st;
    const mesh = (a.mesh ?? initDeviceMesh("cpu", [getWorldSize()])) as DeviceMesh;
    if (typeof mesh !== "object" || typeof (mesh as DeviceMesh).getGroup !== "function") throw new TypeError(`${FN}(): argument 'mesh' must be a DeviceMesh, got ${describe(mesh)}`);
    if (mesh.ndim !== 1) throw new DistError(`${FN}(): row-wise sharding needs a 1-d mesh, got ${mesh.ndim} dimensions`);
    this.mesh = mesh;
    this._gradientDivision = a.gradientDivision === undefined || a.gradientDivision === null ? null : boolArg(FN, "gradientDivision", a.gradientDivision, true);
    const group = mesh.getGroup();
    const n = group.size();
    const rank = group.rank();
    this._tables = a.module.embeddingBagConfigs();
    this._slots = featureSlots(this._tables);
    this._block = this._tables.map((t) => Math.ceil(t.numEmbeddings / n));
    const src = a.module.embedding_bags;
    this.embedding_bags = new ModuleDict(
      this._tables.map((t) => {
        const w = (src.get(t.name) as unknown as { weight: Tensor }).weight;
        const [start, rows] = chunkRange(t.numEmbeddings, n, rank);
        const local = w.detach().narrow(0, start, rows).contiguous().clone();
        const dt = new DTensor(local, { mesh, placements: [new Shard(0)], shape: [t.numEmbeddings, t.embeddingDim] });
        return [t.name, new ShardedBag(new DTensorParameter(dt, w.requiresGrad))] as [string, Module];
      }),
    );
  }

  embeddingBagConfigs(): EmbeddingBagConfig[] {
    return [...this._tables];
  }
  private get group(): ProcessGroup {
    return this.mesh.getGroup();
  }
  /** The rows of `table` this rank owns: [start, start + rows). */
  shardRange(table: string): { start: number; rows: number } {
    const t = this._tables.findIndex((c) => c.name === table);
    if (t < 0) throw new Error(`${FN}.shardRange(): no table '${table}'`);
    const [start, rows] = chunkRange(this._tables[t]!.numEmbeddings, this.group.size(), this.group.rank());
    return { start, rows };
  }

  /** Bucket this rank's ids by owner (validating them first: nothing is sent for an invalid input). */
  private bucketize(features: KeyedJaggedTensor, n: number): Buckets {
    const idx = featureIndex(FN, features, this._tables, this._slots);
    const B = features.stride();
    const F = this._slots.length;
    const ids = features.values()._contiguousHost();
    const lengths = features._lengthsHost;
    const keyOff = features.offsetPerKey();
    this._slots.forEach((s, i) => checkIds(FN, ids, keyOff[idx[i]!]!, keyOff[idx[i]! + 1]!, this._tables[s.table]!, s.feature));
    const out: Buckets = { lengths: Array.from({ length: n }, () => new Array<number>(F * B).fill(0)), ids: Array.from({ length: n }, () => []) };
    this._slots.forEach((s, i) => {
      const k = idx[i]!;
      const c = this._block[s.table]!;
      let at = keyOff[k]!;
      for (let b = 0; b < B; b++) {
        const end = at + lengths[k * B + b]!;
        for (; at < end; at++) {
          const id = ids[at]!;
          const d = Math.floor(id / c);
          out.lengths[d]![i * B + b]!++;
          out.ids[d]!.push(id - d * c);
        }
      }
    });
    return out;
  }

  override forward(features: KeyedJaggedTensor): KeyedTensor {
    const group = this.group;
    const n = group.size();
    const F = this._slots.length;
    // 1. bucket, then the header exchange (so an invalid input raises on every rank)
    let buckets: Buckets | null = null;
    let error: unknown = null;
    try {
      buckets = this.bucketize(features, n);
    } catch (e) {
      error = e;
    }
    const B = buckets ? features.stride() : 0;
    const header = new Array<number>(n * HEADER).fill(0);
    for (let d = 0; d < n; d++) header.splice(d * HEADER, HEADER, B, buckets ? buckets.ids[d]!.length : 0, buckets ? 0 : 1);
    const got = zeros([n * HEADER], { dtype: "int64" });
    allToAllSingle(got, tensor(header, { dtype: "int64" }), { group });
    const h = Array.from(got._contiguousHost(), Number);
    if (error) throw error;
    const bad = [...Array(n).keys()].filter((s) => h[s * HEADER + 2]);
    if (bad.length) throw new DistError(`${FN}.forward(): the input of rank(s) ${bad.map((s) => group.ranks[s]).join(", ")} is invalid (see the error there); no embeddings were exchanged`);
    const batch = [...Array(n).keys()].map((s) => h[s * HEADER]!);
    const counts = [...Array(n).keys()].map((s) => h[s * HEADER + 1]!);
    const bk = buckets!;

    // 2. lengths, then ids (both in flight at once; reading them waits)
    const lenOut = zeros([F * batch.reduce((p, q) => p + q, 0)], { dtype: "int64" });
    allToAllSingle(lenOut, tensor(bk.lengths.flat(), { dtype: "int64" }), batch.map((b) => F * b), bk.lengths.map(() => F * B), group, true);
    const idsOut = zeros([counts.reduce((p, q) => p + q, 0)], { dtype: "int64" });
    allToAllSingle(idsOut, tensor(bk.ids.flat(), { dtype: "int64" }), counts, bk.ids.map((x) => x.length), group, true);

    // 3. pool the owned rows into partial bags for every rank's samples
    const partial = this.poolLocal(Array.from(lenOut._contiguousHost(), Number), idsOut._contiguousHost(), batch);

    // 4. partial sums back to the samples' ranks, summed there
    const Dtot = this._slots.reduce((p, s) => p + s.dim, 0);
    const divide = this._gradientDivision ?? getGradientDivision();
    const parts = pooledAllToAll(partial, { group, sendRows: batch, recvRows: batch.map(() => B), gradDivisor: divide ? n : 1 });
    let pooled = parts.reshape(n, B, Dtot).sum(0);
    if (this._slots.some((s) => s.mean)) pooled = pooled.mul(this.meanScale(bk, B, Dtot));
    return new KeyedTensor(this._slots.map((s) => s.feature), this._slots.map((s) => s.dim), pooled);
  }

  /** Partial bags [sum(batch), Dtot] from the lengths and local ids every rank sent here. */
  private poolLocal(lengths: number[], ids: ArrayLike<number>, batch: number[]): Tensor {
    const F = this._slots.length;
    const rows = batch.reduce((p, q) => p + q, 0);
    // per table: the ids it got and the bag each one goes to, (sample row, feature of the table)
    const perTable = this._tables.map(() => ({ ids: [] as number[], bags: [] as number[] }));
    const firstSlot = this._tables.map((_, t) => this._slots.findIndex((s) => s.table === t));
    let li = 0;
    let ii = 0;
    let row0 = 0;
    for (const Bs of batch) {
      for (let i = 0; i < F; i++) {
        const s = this._slots[i]!;
        const nf = this._tables[s.table]!.featureNames.length;
        const j = i - firstSlot[s.table]!;
        const pt = perTable[s.table]!;
        for (let b = 0; b < Bs; b++) {
          const bag = (row0 + b) * nf + j;
          for (let e = lengths[li++]!; e > 0; e--) {
            pt.ids.push(ids[ii++]!);
            pt.bags.push(bag);
          }
        }
      }
      row0 += Bs;
    }
    const blocks = this._tables.map((t, k) => {
      const w = (this.embedding_bags.get(t.name) as ShardedBag).weight.toLocal();
      const nf = t.featureNames.length;
      // always through the weight, even with no ids here, so the shard gets a (zero) gradient as
      // the unsharded table does (an optimizer's step must not depend on which rank an id hit)
      const emb = w.indexSelect(0, tensor(perTable[k]!.ids, { dtype: "int64" }));
      const pooled = zeros([rows * nf, t.embeddingDim], { dtype: w.dtype }).indexAdd(0, tensor(perTable[k]!.bags, { dtype: "int64" }), emb);
      return pooled.reshape(rows, nf * t.embeddingDim);
    });
    return blocks.length === 1 ? blocks[0]! : cat(blocks, 1);
  }

  /** [B, Dtot]: 1 for sum tables' columns, 1 / bag length for mean tables' (empty bags stay 0). */
  private meanScale(bk: Buckets, B: number, Dtot: number): Tensor {
    const scale = new Float32Array(B * Dtot).fill(1);
    this._slots.forEach((s, i) => {
      if (!s.mean) return;
      for (let b = 0; b < B; b++) {
        let len = 0;
        for (const l of bk.lengths) len += l[i * B + b]!;
        if (len > 1) scale.fill(1 / len, b * Dtot + s.col, b * Dtot + s.col + s.dim);
      }
    });
    return tensor(scale, { dtype: "float32" }).reshape(B, Dtot);
  }

  override extraRepr(): string {
    return `sharding=${this.shardingType}, world=${this.group.size()}, tables=[${this._tables.map((t) => `${t.name}: ${t.numEmbeddings}x${t.embeddingDim}`).join(", ")}]`;
  }
}

/**
 * Replace every EmbeddingBagCollection inside `module` (or `module` itself) by its row-wise sharded
 * version, in place (TorchRec's shard_modules); returns the module (the sharded one when `module`
 * is itself a collection). The dense rest is left as is: wrap it in DistributedDataParallel.
 */
export function shardModules<M extends Module>(module: M, opts: ShardedEmbeddingBagCollectionOptions = {}): M | ShardedEmbeddingBagCollection {
  if (!(module instanceof Module)) throw new TypeError(`shardModules(): argument 'module' must be an nn.Module, got ${describe(module)}`);
  if (module instanceof EmbeddingBagCollection) return new ShardedEmbeddingBagCollection(module, opts);
  const visit = (m: Module): void => {
    for (const [name, child] of [...m._modules]) {
      if (!child) continue;
      if (child instanceof EmbeddingBagCollection) m.registerModule(name, new ShardedEmbeddingBagCollection(child, opts));
      else visit(child);
    }
  };
  visit(module);
  return module;
}
