// Adam and AdamW (PyTorch's single-tensor update: bias corrections, eps added after the
// bias-corrected sqrt, amsgrad keeps the running max of exp_avg_sq).
import type { Tensor } from "../tensor.js";
import * as M from "../ops/math.js";
import { zerosLike } from "../ops/creation.js";
import { hostScalars } from "../compile/host_scalars.js";
import { getEagerMode, withEagerMode } from "../runtime/mode.js";
import { flushAll, traceState } from "../runtime/dispatch.js";
import { Optimizer, checkRange, type ParamGroup, type Params } from "./optimizer.js";

export interface AdamOptions {
  lr?: number;
  betas?: [number, number];
  eps?: number;
  weightDecay?: number;
  amsgrad?: boolean;
  maximize?: boolean;
  /**
   * Run each group's update as fused kernels (one per parameter) even in strict mode, like
   * PyTorch's `fused=True`: the update is recorded in fused eager mode and run at once.
   * Results are bit-identical to the per-op update (default false, as PyTorch on cpu).
   */
  fused?: boolean;
}

function validate(d: Required<AdamOptions>): void {
  checkRange("learning rate", d.lr, d.lr >= 0);
  checkRange("epsilon value", d.eps, d.eps >= 0);
  checkRange("beta parameter at index 0", d.betas[0], d.betas[0] >= 0 && d.betas[0] < 1);
  checkRange("beta parameter at index 1", d.betas[1], d.betas[1] >= 0 && d.betas[1] < 1);
  checkRange("weight_decay value", d.weightDecay, d.weightDecay >= 0);
  if (typeof d.fused !== "boolean") throw new TypeError(`Adam: fused must be a boolean, got ${String(d.fused)}`);
}

export class Adam extends Optimizer {
  /** AdamW decays the weights directly instead of adding wd*p to the gradient. */
  protected decoupled = false;
  constructor(params: Params, o: AdamOptions = {}, defaultWd = 0) {
    const d = { lr: 1e-3, betas: [0.9, 0.999] as [number, number], eps: 1e-8, weightDecay: defaultWd, amsgrad: false, maximize: false, ...o, fused: o.fused ?? false };
    validate(d);
    super(params, d);
  }
  protected _updateGroup(g: ParamGroup): void {
    // strict mode only: fused eager and torch.compile fuse the update already, debug checks each op
    if (g.fused && getEagerMode() === "strict" && traceState.fn === null)
      withEagerMode("fused", () => {
        this._update(g);
        flushAll();
      });
    else this._update(g);
  }
  private _update(g: ParamGroup): void {
    const [beta1, beta2] = g.betas as [number, number];
    const { eps, weightDecay: wd } = g;
    for (const p of g.params) {
      if (!p.grad) continue;
      let grad = this._grad(p, g);
      const st = this._state(p, (st) => {
        st.expAvg = zerosLike(p);
        st.expAvgSq = zerosLike(p);
        if (g.amsgrad) st.maxExpAvgSq = zerosLike(p);
      });
      // step-dependent numbers (and the step count) as torch.compile replays them
      const [decay, bc2Sqrt, stepSize] = hostScalars(() => {
        const step = ++st.step;
        return [1 - g.lr * wd, Math.sqrt(1 - beta2 ** step), -g.lr / (1 - beta1 ** step)];
      });
      if (wd !== 0) {
        if (this.decoupled) p.mul_(decay!);
        else grad = M.add(grad, p, { alpha: wd });
      }
      const expAvg = st.expAvg as Tensor;
      const expAvgSq = st.expAvgSq as Tensor;
      expAvg.mul_(beta1).add_(grad, { alpha: 1 - beta1 });
      expAvgSq.mul_(beta2).addcmul_(grad, grad, { value: 1 - beta2 });
      let second = expAvgSq;
      if (g.amsgrad) {
        const mx = st.maxExpAvgSq as Tensor;
        mx.copy_(M.maximum(mx, expAvgSq));
        second = mx;
      }
      const denom = M.add(M.div(M.sqrt(second), bc2Sqrt!), eps);
      p.addcdiv_(expAvg, denom, { value: stepSize! });
    }
  }
}

export class AdamW extends Adam {
  constructor(params: Params, o: AdamOptions = {}) {
    super(params, o, 1e-2);
    this.decoupled = true;
  }
}
