// torch.amp.GradScaler: multiply the loss by a scale so float16 gradients do not underflow,
// unscale before the optimizer step, skip the step when any gradient is inf/NaN, and adapt the
// scale (halve on overflow, double after `growthInterval` clean steps), as PyTorch.
// step() and update() read "found inf" from the device, and host reads are async in torchts,
// so they return promises: `await scaler.step(opt); await scaler.update();`.
import { Tensor } from "../tensor.js";
import { noGrad } from "../autograd/grad_mode.js";
import * as M from "../ops/math.js";
import * as R from "../ops/reduce.js";
import type { Optimizer } from "../optim/optimizer.js";

export interface GradScalerOpts {
  initScale?: number;
  growthFactor?: number;
  backoffFactor?: number;
  growthInterval?: number;
  enabled?: boolean;
}

interface OptState {
  unscaled: boolean;
  /** Whether any unscaled gradient was inf/NaN (a 0-dim float tensor, read lazily). */
  foundInf: Tensor | null;
  stepped: boolean;
  /** foundInf as read by step(). */
  infValue?: boolean;
}

export class GradScaler {
  private scale_: number;
  private growthTracker = 0;
  readonly growthFactor: number;
  readonly backoffFactor: number;
  readonly growthInterval: number;
  readonly enabled: boolean;
  private perOpt = new Map<Optimizer, OptState>();

  constructor(
    readonly device = "cpu",
    o: GradScalerOpts = {},
  ) {
    this.scale_ = o.initScale ?? 2 ** 16;
    this.growthFactor = o.growthFactor ?? 2;
    this.backoffFactor = o.backoffFactor ?? 0.5;
    this.growthInterval = o.growthInterval ?? 2000;
    this.enabled = o.enabled ?? true;
    if (this.growthFactor <= 1) throw new RangeError("The growth factor must be > 1.0.");
    if (this.backoffFactor >= 1) throw new RangeError("The backoff factor must be < 1.0.");
  }

  getScale(): number {
    return this.enabled ? this.scale_ : 1;
  }
  getGrowthTracker(): number {
    return this.growthTracker;
  }
  isEnabled(): boolean {
    return this.enabled;
  }

  /** outputs * scale (a tensor, or every tensor of an array). */
  scale<T extends Tensor | Tensor[]>(outputs: T): T {
    if (!this.enabled) return outputs;
    const s = this.scale_;
    return (Array.isArray(outputs) ? outputs.map((t) => M.mul(t, s)) : M.mul(outputs as Tensor, s)) as T;
  }

  private state(opt: Optimizer): OptState {
    let s = this.perOpt.get(opt);
    if (!s) this.perOpt.set(opt, (s = { unscaled: false, foundInf: null, stepped: false }));
    return s;
  }

  /** Divide the optimizer's gradients by the scale in place (once per step), recording inf/NaN. */
  unscale_(opt: Optimizer): void {
    if (!this.enabled) return;
    const st = this.state(opt);
    if (st.unscaled) throw new Error("unscale_() has already been called on this optimizer since the last update().");
    if (st.stepped) throw new Error("unscale_() is being called after step().");
    const inv = 1 / this.scale_;
    noGrad(() => {
      let bad: Tensor | null = null;
      for (const g of opt.paramGroups)
        for (const p of g.params) {
          if (!p.grad) continue;
          if (p.grad.dtype === "float16" && p.dtype === "float16")
            throw new Error("Attempting to unscale FP16 gradients.");
          // a non-finite gradient stays non-finite after the multiply, so check the result
          p.grad = M.mul(p.grad, inv);
          const nf = R.any(M.logicalNot(M.isfinite(p.grad)));
          bad = bad ? M.logicalOr(bad, nf) : nf;
        }
      st.foundInf = bad;
    });
    st.unscaled = true;
  }

  /** Unscale if needed, then run `opt.step()` unless a gradient was inf/NaN. */
  async step(opt: Optimizer, closure?: () => Tensor | number): Promise<Tensor | number | undefined> {
    if (!this.enabled) return opt.step(closure);
    if (closure) throw new Error("Closure use is not currently supported if GradScaler is enabled.");
    const st = this.state(opt);
    if (st.stepped) throw new Error("step() has already been called since the last update().");
    if (!st.unscaled) this.unscale_(opt);
    st.stepped = true;
    const inf = st.foundInf ? Boolean(await st.foundInf.item()) : false;
    st.infValue = inf;
    return inf ? undefined : opt.step();
  }

  /** Adapt the scale from this iteration's steps (or set `newScale`), and reset per-step state. */
  async update(newScale?: number): Promise<void> {
    if (!this.enabled) return;
    if (newScale !== undefined) {
      this.scale_ = newScale;
    } else {
      if (this.perOpt.size === 0) throw new Error("No inf checks were recorded prior to update.");
      let anyInf = false;
      for (const st of this.perOpt.values()) {
        const v = st.infValue;
        if (v === undefined && st.foundInf) anyInf ||= Boolean(await st.foundInf.item());
        else anyInf ||= Boolean(v);
      }
      if (anyInf) {
        this.scale_ *= this.backoffFactor;
        this.growthTracker = 0;
      } else if (++this.growthTracker === this.growthInterval) {
        this.scale_ *= this.growthFactor;
        this.growthTracker = 0;
      }
    }
    this.perOpt = new Map();
  }

  stateDict(): Record<string, number> {
    if (!this.enabled) return {};
    return {
      scale: this.scale_,
      growth_factor: this.growthFactor,
      backoff_factor: this.backoffFactor,
      growth_interval: this.growthInterval,
      _growth_tracker: this.growthTracker,
    };
  }
  loadStateDict(sd: Record<string, number>): void {
    if (!this.enabled) return;
    if (Object.keys(sd).length === 0)
      throw new Error("The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
    this.scale_ = sd.scale!;
    this.growthTracker = sd._growth_tracker ?? 0;
    Object.assign(this, {
      growthFactor: sd.growth_factor ?? this.growthFactor,
      backoffFactor: sd.backoff_factor ?? this.backoffFactor,
      growthInterval: sd.growth_interval ?? this.growthInterval,
    });
  }
}
