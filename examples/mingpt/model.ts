// minGPT (Karpathy's refactored layout): token + position embeddings, pre-LayerNorm blocks with
// causal self-attention and a GELU MLP, final LayerNorm and an untied lm_head.
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
const { nn } = torch;
const F = nn.functional;

export interface GPTConfig {
  vocabSize: number;
  blockSize: number;
  nLayer: number;
  nHead: number;
  nEmbd: number;
  dropout?: number;
}

/** GELU with the tanh approximation, as minGPT's NewGELU. */
function newGelu(x: Tensor): Tensor {
  return F.gelu(x, { approximate: "tanh" });
}

class CausalSelfAttention extends nn.Module {
  c_attn: InstanceType<typeof nn.Linear>;
  c_proj: InstanceType<typeof nn.Linear>;
  constructor(readonly cfg: GPTConfig) {
    super();
    this.c_attn = new nn.Linear(cfg.nEmbd, 3 * cfg.nEmbd);
    this.c_proj = new nn.Linear(cfg.nEmbd, cfg.nEmbd);
  }
  override forward(x: Tensor): Tensor {
    const [B, T, C] = x.shape as [number, number, number];
    const nh = this.cfg.nHead;
    // [B, T, 3C] -> three [B, nh, T, hs]
    const [q, k, v] = this.c_attn.forward(x).split(C, 2).map((t) => t.view(B, T, nh, C / nh).transpose(1, 2));
    const y = F.scaledDotProductAttention(q!, k!, v!, { isCausal: true }); // [B, nh, T, hs]
    return this.c_proj.forward(y.transpose(1, 2).reshape(B, T, C));
  }
}

class MLP extends nn.Module {
  c_fc: InstanceType<typeof nn.Linear>;
  c_proj: InstanceType<typeof nn.Linear>;
  constructor(cfg: GPTConfig) {
    super();
    this.c_fc = new nn.Linear(cfg.nEmbd, 4 * cfg.nEmbd);
    this.c_proj = new nn.Linear(4 * cfg.nEmbd, cfg.nEmbd);
  }
  override forward(x: Tensor): Tensor {
    return this.c_proj.forward(newGelu(this.c_fc.forward(x)));
  }
}

class Block extends nn.Module {
  ln_1: InstanceType<typeof nn.LayerNorm>;
  attn: CausalSelfAttention;
  ln_2: InstanceType<typeof nn.LayerNorm>;
  mlp: MLP;
  constructor(cfg: GPTConfig) {
    super();
    this.ln_1 = new nn.LayerNorm(cfg.nEmbd);
    this.attn = new CausalSelfAttention(cfg);
    this.ln_2 = new nn.LayerNorm(cfg.nEmbd);
    this.mlp = new MLP(cfg);
  }
  override forward(x: Tensor): Tensor {
    x = x.add(this.attn.forward(this.ln_1.forward(x)));
    return x.add(this.mlp.forward(this.ln_2.forward(x)));
  }
}

export class GPT extends nn.Module {
  transformer: InstanceType<typeof nn.ModuleDict>;
  lm_head: InstanceType<typeof nn.Linear>;
  constructor(readonly cfg: GPTConfig) {
    super();
    this.transformer = new nn.ModuleDict({
      wte: new nn.Embedding(cfg.vocabSize, cfg.nEmbd),
      wpe: new nn.Embedding(cfg.blockSize, cfg.nEmbd),
      h: new nn.ModuleList(Array.from({ length: cfg.nLayer }, () => new Block(cfg))),
      ln_f: new nn.LayerNorm(cfg.nEmbd),
    });
    this.lm_head = new nn.Linear(cfg.nEmbd, cfg.vocabSize, { bias: false });
    // minGPT's init: N(0, 0.02) weights, zero biases, scaled residual projections
    for (const [name, p] of this.namedParameters()) {
      if (name.endsWith("c_proj.weight")) nn.init.normal_(p, 0, 0.02 / Math.sqrt(2 * cfg.nLayer));
      else if (name.endsWith(".bias") && !name.includes("ln_")) nn.init.zeros_(p);
      else if (!name.includes("ln_")) nn.init.normal_(p, 0, 0.02);
    }
  }

  /** idx: int64 [B, T] -> logits [B, T, vocab]; with targets also the mean cross-entropy. */
  override forward(idx: Tensor, targets?: Tensor): { logits: Tensor; loss?: Tensor } {
    const [, T] = idx.shape as [number, number];
    if (T > this.cfg.blockSize) throw new RangeError(`GPT: sequence length ${T} exceeds block size ${this.cfg.blockSize}`);
    const t = this.transformer as unknown as Record<string, InstanceType<typeof nn.Module>>;
    const pos = torch.arange(T, { device: idx.device });
    let x = t.wte!.forward(idx).add(t.wpe!.forward(pos)); // [B, T, C]
    for (const block of t.h as unknown as Iterable<Block>) x = block.forward(x);
    const logits = this.lm_head.forward(t.ln_f!.forward(x));
    if (!targets) return { logits };
    const V = this.cfg.vocabSize;
    return { logits, loss: F.crossEntropy(logits.view(-1, V), targets.reshape(-1)) };
  }

  /** AdamW with weight decay only on parameters of dim >= 2, as minGPT. */
  configureOptimizer(o: { lr: number; betas: [number, number]; weightDecay: number; eps?: number; fused?: boolean }) {
    const params = [...this.namedParameters()].map(([, p]) => p);
    return new torch.optim.AdamW(
      [
        { params: params.filter((p) => p.ndim >= 2), weightDecay: o.weightDecay },
        { params: params.filter((p) => p.ndim < 2), weightDecay: 0 },
      ],
      { lr: o.lr, betas: o.betas, eps: o.eps ?? 1e-8, fused: o.fused ?? false },
    );
  }

  /** Sample `n` new tokens autoregressively (temperature, optional top-k) from the default generator. */
  generate(idx: Tensor, n: number, o: { temperature?: number; topK?: number } = {}): Tensor {
    return torch.noGrad(() => {
      for (let i = 0; i < n; i++) {
        const T = idx.shape[1]!;
        const cond = T <= this.cfg.blockSize ? idx : idx.narrow(1, T - this.cfg.blockSize, this.cfg.blockSize);
        let logits = this.forward(cond).logits.select(1, -1).div(o.temperature ?? 1);
        if (o.topK) {
          const kth = logits.topk(Math.min(o.topK, logits.shape[1]!), { dim: -1 }).values.narrow(1, -1 + Math.min(o.topK, logits.shape[1]!), 1);
          logits = logits.maskedFill(logits.lt(kth), -Infinity);
        }
        const next = torch.multinomial(F.softmax(logits, -1), 1);
        idx = torch.cat([idx, next], 1);
      }
      return idx;
    });
  }
}
