// DLRM across processes, TorchRec's way: the embedding tables sharded row-wise over the ranks
// (torch.distributed.embedding.ShardedEmbeddingBagCollection: ids travel to the rows' owners and
// pooled partial sums come back, all-to-all), the dense MLPs replicated under DDP. Each rank feeds
// its slice of the global batch; with a mean loss per rank the training equals one process on the
// whole batch (DDP averages the dense gradients, the sharded tables divide theirs by the world size).
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
import { type DLRM, dotInteraction, interactionPairs } from "./model.js";
const { nn } = torch;
const { EmbeddingBagCollection, KeyedJaggedTensor, ShardedEmbeddingBagCollection } = torch.distributed.embedding;

/** Table t embeds feature `f<t>`. */
const feature = (t: number) => `f${t}`;

/** The dense part of a DLRM (its bottom and top MLPs, the same modules): what DDP replicates. */
class DLRMDense extends nn.Module {
  bot_l: DLRM["bot_l"];
  top_l: DLRM["top_l"];
  private readonly pairs: Tensor;
  constructor(model: DLRM) {
    super();
    this.bot_l = model.bot_l;
    this.top_l = model.top_l;
    this.pairs = interactionPairs(model.cfg.tableSizes.length + 1);
  }
  /** dense [B, nDense], embs: per table [B, d] -> logits [B]. */
  override forward(dense: Tensor, embs: Tensor[]): Tensor {
    const x = this.bot_l.forward(dense) as Tensor;
    return (this.top_l.forward(dotInteraction(x, embs, this.pairs)) as Tensor).squeeze(1);
  }
}

/** Per-table ids [B, bag] as one KeyedJaggedTensor (keys f0, f1, ...; every bag `bag` long). */
export function toKeyedJagged(sparse: Tensor[]): InstanceType<typeof KeyedJaggedTensor> {
  const B = sparse[0]!.shape[0]!;
  const bag = sparse[0]!.shape[1]!;
  return KeyedJaggedTensor.fromLengthsSync(
    sparse.map((_, t) => feature(t)),
    torch.cat(sparse.map((s) => s.reshape(-1))),
    torch.full([sparse.length * B], bag, { dtype: "int64" }),
  );
}

const bagOf = (model: DLRM, t: number) => model.emb_l.get(t) as InstanceType<typeof nn.EmbeddingBag>;

export class ShardedDLRM {
  readonly dense: InstanceType<typeof nn.parallel.DistributedDataParallel>;
  readonly tables: InstanceType<typeof ShardedEmbeddingBagCollection>;
  /** Shards `model` (the same initial model on every rank): its tables row-wise, its MLPs under DDP. */
  constructor(model: DLRM, ddpOptions: ConstructorParameters<typeof nn.parallel.DistributedDataParallel>[1] = {}) {
    const ebc = new EmbeddingBagCollection(
      model.cfg.tableSizes.map((rows, t) => ({ name: `t${t}`, numEmbeddings: rows, embeddingDim: model.cfg.embDim, featureNames: [feature(t)], pooling: "sum" as const })),
    );
    torch.noGrad(() => model.cfg.tableSizes.forEach((_, t) => (ebc.embedding_bags.get(`t${t}`) as InstanceType<typeof nn.EmbeddingBag>).weight.copy_(bagOf(model, t).weight)));
    this.tables = new ShardedEmbeddingBagCollection(ebc);
    this.dense = new nn.parallel.DistributedDataParallel(new DLRMDense(model), ddpOptions);
  }
  /** This rank's samples: dense [b, nDense], per table ids [b, bag] -> logits [b]. */
  forward(dense: Tensor, sparse: Tensor[]): Tensor {
    const pooled = this.tables.forward(toKeyedJagged(sparse)).toDict();
    return this.dense.forward(dense, sparse.map((_, t) => pooled[feature(t)]!)) as Tensor;
  }
  /** The dense parameters (replicated) and this rank's table shards. */
  parameters(): InstanceType<typeof nn.Parameter>[] {
    return [...this.dense.parameters(), ...this.tables.parameters()];
  }
  /** Table t, whole (a collective: every rank calls it). */
  fullTable(t: number): Tensor {
    return (this.tables.embedding_bags.get(`t${t}`) as unknown as { weight: { fullTensor(): Tensor } }).weight.fullTensor();
  }
}
