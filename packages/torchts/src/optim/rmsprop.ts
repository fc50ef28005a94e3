// RMSprop (optionally centered, with momentum) and Adagrad, as PyTorch's single-tensor updates.
import type { Tensor } from "../tensor.js";
import * as M from "../ops/math.js";
import { fullLike, zerosLike } from "../ops/creation.js";
import { hostScalars } from "../compile/host_scalars.js";
import { Optimizer, checkRange, type ParamGroup, type Params } from "./optimizer.js";

export interface RMSpropOptions {
  lr?: number;
  alpha?: number;
  eps?: number;
  weightDecay?: number;
  momentum?: number;
  centered?: boolean;
  maximize?: boolean;
}

export class RMSprop extends Optimizer {
  constructor(params: Params, o: RMSpropOptions = {}) {
    const d = { lr: 1e-2, alpha: 0.99, eps: 1e-8, weightDecay: 0, momentum: 0, centered: false, maximize: false, ...o };
    checkRange("learning rate", d.lr, d.lr >= 0);
    checkRange("epsilon value", d.eps, d.eps >= 0);
    checkRange("momentum value", d.momentum, d.momentum >= 0);
    checkRange("weight_decay value", d.weightDecay, d.weightDecay >= 0);
    checkRange("alpha value", d.alpha, d.alpha >= 0);
    super(params, d);
  }
  protected _updateGroup(g: ParamGroup): void {
    const { alpha, eps, momentum, centered } = g;
    for (const p of g.params) {
      if (!p.grad) continue;
      let grad = this._grad(p, g);
      const st = this._state(p, (st) => {
        st.squareAvg = zerosLike(p);
        if (momentum > 0) st.momentumBuffer = zerosLike(p);
        if (centered) st.gradAvg = zerosLike(p);
      });
      // the step count and a scheduler's lr, as torch.compile replays them
      const [negLr] = hostScalars(() => (st.step++, [-g.lr]));
      if (g.weightDecay !== 0) grad = M.add(grad, p, { alpha: g.weightDecay });
      const sq = st.squareAvg as Tensor;
      sq.mul_(alpha).addcmul_(grad, grad, { value: 1 - alpha });
      let avg: Tensor;
      if (centered) {
        const ga = st.gradAvg as Tensor;
        ga.mul_(alpha).add_(grad, { alpha: 1 - alpha });
        avg = M.sqrt(M.addcmul(sq, ga, ga, { value: -1 }));
      } else avg = M.sqrt(sq);
      avg = M.add(avg, eps);
      if (momentum > 0) {
        const buf = st.momentumBuffer as Tensor;
        buf.mul_(momentum).addcdiv_(grad, avg);
        p.add_(buf, { alpha: negLr! });
      } else p.addcdiv_(grad, avg, { value: negLr! });
    }
  }
}

export interface AdagradOptions {
  lr?: number;
  lrDecay?: number;
  weightDecay?: number;
  initialAccumulatorValue?: number;
  eps?: number;
  maximize?: boolean;
}

export class Adagrad extends Optimizer {
  constructor(params: Params, o: AdagradOptions = {}) {
    const d = { lr: 1e-2, lrDecay: 0, weightDecay: 0, initialAccumulatorValue: 0, eps: 1e-10, maximize: false, ...o };
    checkRange("learning rate", d.lr, d.lr >= 0);
    checkRange("lr_decay value", d.lrDecay, d.lrDecay >= 0);
    checkRange("weight_decay value", d.weightDecay, d.weightDecay >= 0);
    checkRange("initial_accumulator_value value", d.initialAccumulatorValue, d.initialAccumulatorValue >= 0);
    checkRange("epsilon value", d.eps, d.eps >= 0);
    super(params, d);
    // PyTorch creates the accumulator eagerly
    for (const gr of this.paramGroups)
      for (const p of gr.params) {
        const st = this._state(p);
        st.step = 0;
        st.sum = fullLike(p, gr.initialAccumulatorValue);
      }
  }
  protected _updateGroup(g: ParamGroup): void {
    for (const p of g.params) {
      if (!p.grad) continue;
      let grad = this._grad(p, g);
      const st = this._state(p);
      st.sum ??= fullLike(p, g.initialAccumulatorValue);
      // the step count and the decayed lr, as torch.compile replays them
      const [negClr] = hostScalars(() => {
        const step = (st.step = (st.step ?? 0) + 1);
        return [-(g.lr / (1 + (step - 1) * g.lrDecay))];
      });
      if (g.weightDecay !== 0) grad = M.add(grad, p, { alpha: g.weightDecay });
      const sum = st.sum as Tensor;
      sum.addcmul_(grad, grad, { value: 1 });
      const std = M.add(M.sqrt(sum), g.eps);
      p.addcdiv_(grad, std, { value: negClr! });
    }
  }
}
