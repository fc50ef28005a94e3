// A small DDPM UNet: two resolution levels with residual blocks (GroupNorm, SiLU, 3x3 convs and
// a per-channel shift from the timestep embedding), skip connections, nearest upsampling.
import * as torch from "../../packages/torchts/src/index.js";
import type { Tensor } from "../../packages/torchts/src/index.js";
const { nn } = torch;
const F = nn.functional;

/** Sinusoidal embedding of integer timesteps t [B] -> [B, dim]. */
export function timestepEmbedding(t: Tensor, dim: number): Tensor {
  const half = dim / 2;
  const freqs = torch.exp(torch.arange(half, { dtype: "float32", device: t.device }).mul(-Math.log(10000) / half));
  const args = t.float().unsqueeze(1).mul(freqs.unsqueeze(0));
  return torch.cat([args.sin(), args.cos()], 1);
}

const groups = (c: number) => Math.min(8, c / 2);

class ResBlock extends nn.Module {
  norm1: InstanceType<typeof nn.GroupNorm>;
  conv1: InstanceType<typeof nn.Conv2d>;
  temb: InstanceType<typeof nn.Linear>;
  norm2: InstanceType<typeof nn.GroupNorm>;
  conv2: InstanceType<typeof nn.Conv2d>;
  skip: InstanceType<typeof nn.Module>;
  constructor(cin: number, cout: number, tdim: number) {
    super();
    this.norm1 = new nn.GroupNorm(groups(cin), cin);
    this.conv1 = new nn.Conv2d(cin, cout, 3, { padding: 1 });
    this.temb = new nn.Linear(tdim, cout);
    this.norm2 = new nn.GroupNorm(groups(cout), cout);
    this.conv2 = new nn.Conv2d(cout, cout, 3, { padding: 1 });
    this.skip = cin === cout ? new nn.Identity() : new nn.Conv2d(cin, cout, 1);
  }
  override forward(x: Tensor, temb: Tensor): Tensor {
    let h = this.conv1.forward(F.silu(this.norm1.forward(x)));
    h = h.add(this.temb.forward(F.silu(temb)).unsqueeze(2).unsqueeze(3));
    h = this.conv2.forward(F.silu(this.norm2.forward(h)));
    return h.add(this.skip.forward(x) as Tensor);
  }
}

export class UNet extends nn.Module {
  time_mlp: InstanceType<typeof nn.Sequential>;
  conv_in: InstanceType<typeof nn.Conv2d>;
  down1: ResBlock;
  downsample1: InstanceType<typeof nn.Conv2d>;
  down2: ResBlock;
  downsample2: InstanceType<typeof nn.Conv2d>;
  mid: ResBlock;
  up2: ResBlock;
  up1: ResBlock;
  norm_out: InstanceType<typeof nn.GroupNorm>;
  conv_out: InstanceType<typeof nn.Conv2d>;
  constructor(
    readonly channels = 1,
    readonly base = 16,
  ) {
    super();
    const c1 = base;
    const c2 = base * 2;
    const tdim = base * 4;
    this.time_mlp = new nn.Sequential(new nn.Linear(base, tdim), new nn.SiLU(), new nn.Linear(tdim, tdim));
    this.conv_in = new nn.Conv2d(channels, c1, 3, { padding: 1 });
    this.down1 = new ResBlock(c1, c1, tdim); // H
    this.downsample1 = new nn.Conv2d(c1, c1, 3, { stride: 2, padding: 1 }); // H/2
    this.down2 = new ResBlock(c1, c2, tdim);
    this.downsample2 = new nn.Conv2d(c2, c2, 3, { stride: 2, padding: 1 }); // H/4
    this.mid = new ResBlock(c2, c2, tdim);
    this.up2 = new ResBlock(c2 + c2, c2, tdim); // H/2, with down2's skip
    this.up1 = new ResBlock(c2 + c1, c1, tdim); // H, with down1's skip
    this.norm_out = new nn.GroupNorm(groups(c1), c1);
    this.conv_out = new nn.Conv2d(c1, channels, 3, { padding: 1 });
    nn.init.zeros_(this.conv_out.weight); // start by predicting zero noise
    nn.init.zeros_(this.conv_out.bias!);
  }
  /** x [B, C, H, W] (H, W divisible by 4), t [B] int64 -> predicted noise [B, C, H, W]. */
  override forward(x: Tensor, t: Tensor): Tensor {
    const temb = this.time_mlp.forward(timestepEmbedding(t, this.base)) as Tensor;
    // nearest 2x upsampling as a broadcast view and one copy (cheaper than a general interpolate)
    const up = (h: Tensor) => {
      const [B, C, H, W] = h.shape as [number, number, number, number];
      return h.reshape(B, C, H, 1, W, 1).expand(B, C, H, 2, W, 2).reshape(B, C, 2 * H, 2 * W);
    };
    const h1 = this.down1.forward(this.conv_in.forward(x), temb);
    const h2 = this.down2.forward(this.downsample1.forward(h1), temb);
    const m = this.mid.forward(this.downsample2.forward(h2), temb);
    const u2 = this.up2.forward(torch.cat([up(m), h2], 1), temb);
    const u1 = this.up1.forward(torch.cat([up(u2), h1], 1), temb);
    return this.conv_out.forward(F.silu(this.norm_out.forward(u1)));
  }
}

/** DDPM noise schedule with linear betas. */
export class Diffusion {
  readonly betas: number[];
  readonly alphas: number[];
  readonly alphaBars: number[];
  constructor(readonly T: number, betaStart = 1e-3, betaEnd = 0.12) {
    this.betas = Array.from({ length: T }, (_, i) => betaStart + ((betaEnd - betaStart) * i) / Math.max(1, T - 1));
    this.alphas = this.betas.map((b) => 1 - b);
    this.alphaBars = [];
    let p = 1;
    for (const a of this.alphas) this.alphaBars.push((p *= a));
  }
  /** q(x_t | x_0): returns x_t and the noise used. */
  noise(x0: Tensor, t: Tensor): { xt: Tensor; eps: Tensor } {
    const ab = torch.tensor(this.alphaBars, { dtype: "float32", device: x0.device }).index(t).reshape(-1, 1, 1, 1);
    const eps = torch.randnLike(x0);
    return { xt: x0.mul(ab.sqrt()).add(eps.mul(ab.neg().add(1).sqrt())), eps };
  }
  /** Ancestral sampling: n images [n, C, H, W] in about [-1, 1]. */
  sample(model: UNet, n: number, size: number, device = "cpu"): Tensor {
    return torch.noGrad(() => {
      let x = torch.randn(n, model.channels, size, size, { device });
      for (let t = this.T - 1; t >= 0; t--) {
        const eps = model.forward(x, torch.full([n], t, { dtype: "int64", device }));
        const a = this.alphas[t]!;
        const ab = this.alphaBars[t]!;
        x = x.sub(eps.mul((1 - a) / Math.sqrt(1 - ab))).div(Math.sqrt(a));
        if (t > 0) x = x.add(torch.randnLike(x).mul(Math.sqrt(this.betas[t]!)));
      }
      return x.clamp(-1, 1);
    });
  }
}
