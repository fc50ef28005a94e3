// SGD with momentum, dampening, Nesterov, weight decay and maximize (PyTorch's update, exactly).
import type { Tensor } from "../tensor.js";
import * as M from "../ops/math.js";
import * as S from "../ops/shape_ops.js";
import { hostScalars } from "../compile/host_scalars.js";
import { Optimizer, checkRange, type ParamGroup, type Params } from "./optimizer.js";

export interface SGDOptions {
  lr?: number;
  momentum?: number;
  dampening?: number;
  weightDecay?: number;
  nesterov?: boolean;
  maximize?: boolean;
}

export class SGD extends Optimizer {
  constructor(params: Params, o: SGDOptions = {}) {
    const d = { lr: 1e-3, momentum: 0, dampening: 0, weightDecay: 0, nesterov: false, maximize: false, ...o };
    checkRange("learning rate", d.lr, d.lr >= 0);
    checkRange("momentum value", d.momentum, d.momentum >= 0);
    checkRange("weight_decay value", d.weightDecay, d.weightDecay >= 0);
    if (d.nesterov && (d.momentum <= 0 || d.dampening !== 0))
      throw new Error("Nesterov momentum requires a momentum and zero dampening");
    super(params, d);
  }
  protected _updateGroup(g: ParamGroup): void {
    for (const p of g.params) {
      if (!p.grad) continue;
      let dp = this._grad(p, g);
      if (g.weightDecay !== 0) dp = M.add(dp, p, { alpha: g.weightDecay });
      if (g.momentum !== 0) {
        const st = this._state(p);
        let buf = st.momentumBuffer as Tensor | undefined;
        if (!buf) buf = st.momentumBuffer = S.detach(dp).clone();
        else buf.mul_(g.momentum).add_(dp, { alpha: 1 - g.dampening });
        dp = g.nesterov ? M.add(dp, buf, { alpha: g.momentum }) : buf;
      }
      const [negLr] = hostScalars(() => [-g.lr]); // a scheduler's lr, as torch.compile replays it
      p.add_(dp, { alpha: negLr! });
    }
  }
}
