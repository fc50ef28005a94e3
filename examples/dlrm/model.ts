// DLRM (Naumov et al. 2019): a bottom MLP embeds the dense features, one EmbeddingBag per
// categorical table embeds its multi-hot ids, the dot products of every pair of these vectors
// (the "dot interaction") are concatenated with the bottom output and a top MLP predicts the
// click logit.
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
const { nn } = torch;

function mlp(sizes: number[], lastActivation: boolean): InstanceType<typeof nn.Sequential> {
  const layers: InstanceType<typeof nn.Module>[] = [];
  for (let i = 0; i + 1 < sizes.length; i++) {
    layers.push(new nn.Linear(sizes[i]!, sizes[i + 1]!));
    if (i + 2 < sizes.length || lastActivation) layers.push(new nn.ReLU());
  }
  return new nn.Sequential(...layers);
}

export interface DLRMConfig {
  nDense: number;
  tableSizes: number[];
  embDim: number;
  bottom: number[]; // hidden sizes; the last layer outputs embDim
  top: number[]; // hidden sizes; the last layer outputs 1
}

export class DLRM extends nn.Module {
  bot_l: InstanceType<typeof nn.Sequential>;
  emb_l: InstanceType<typeof nn.ModuleList>;
  top_l: InstanceType<typeof nn.Sequential>;
  private readonly pairs: Tensor;
  constructor(readonly cfg: DLRMConfig) {
    super();
    this.bot_l = mlp([cfg.nDense, ...cfg.bottom, cfg.embDim], true);
    this.emb_l = new nn.ModuleList(
      cfg.tableSizes.map((n) => {
        const e = new nn.EmbeddingBag(n, cfg.embDim, { mode: "sum" });
        // small uniform init as the reference DLRM: U(-1/sqrt(n), 1/sqrt(n))
        nn.init.uniform_(e.weight, -1 / Math.sqrt(n), 1 / Math.sqrt(n));
        return e;
      }),
    );
    const f = cfg.tableSizes.length + 1;
    const nPairs = (f * (f - 1)) / 2;
    this.top_l = mlp([cfg.embDim + nPairs, ...cfg.top, 1], false);
    this.pairs = interactionPairs(f);
  }

  /** dense [B, nDense]; sparse: per table [B, bag] ids -> logits [B]. */
  override forward(dense: Tensor, sparse: Tensor[]): Tensor {
    const x = this.bot_l.forward(dense) as Tensor; // [B, d]
    const embs = sparse.map((ids, t) => (this.emb_l.get(t) as InstanceType<typeof nn.EmbeddingBag>).forward(ids));
    const logits = this.top_l.forward(dotInteraction(x, embs, this.pairs)) as Tensor;
    return logits.squeeze(1);
  }
}

/** Flat indices i*f+j of the strictly lower triangle of the f x f interaction matrix. */
export function interactionPairs(f: number): Tensor {
  const li: number[] = [];
  for (let i = 0; i < f; i++) for (let j = 0; j < i; j++) li.push(i * f + j);
  return torch.tensor(li, { dtype: "int64" });
}

/** The top MLP's input: the bottom output x [B, d] and the dot products of every pair of (x, embs...). */
export function dotInteraction(x: Tensor, embs: Tensor[], pairs: Tensor): Tensor {
  const B = x.shape[0]!;
  const T = torch.stack([x, ...embs], 1); // [B, f, d]
  const Z = T.matmul(T.transpose(1, 2)).reshape(B, -1); // [B, f*f]
  const inter = Z.indexSelect(1, pairs.to(Z.device));
  return torch.cat([x, inter], 1);
}
