// Loss modules: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss.
import type { Tensor } from "../../tensor.js";
import { Module } from "../module.js";
import * as F from "../functional.js";

export type Reduction = "none" | "mean" | "sum";


abstract class Loss extends Module {
  reduction: Reduction;
  constructor(o: { reduction?: Reduction } = {}) {
    super();
    this.reduction = o.reduction ?? "mean";
  }
}

abstract class WeightedLoss extends Loss {
  declare weight: Tensor | null;
  constructor(o: { reduction?: Reduction; weight?: Tensor | null } = {}) {
    super(o);
    this.registerBuffer("weight", o.weight ?? null);
  }
}

export class CrossEntropyLoss extends WeightedLoss {
  ignoreIndex: number;
  labelSmoothing: number;
  constructor(o: { weight?: Tensor | null; ignoreIndex?: number; reduction?: Reduction; labelSmoothing?: number } = {}) {
    super(o);
    this.ignoreIndex = o.ignoreIndex ?? -100;
    this.labelSmoothing = o.labelSmoothing ?? 0;
  }
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.crossEntropy(input, target, {
      weight: this.weight, ignoreIndex: this.ignoreIndex, reduction: this.reduction, labelSmoothing: this.labelSmoothing,
    });
  }
}

export class NLLLoss extends WeightedLoss {
  ignoreIndex: number;
  constructor(o: { weight?: Tensor | null; ignoreIndex?: number; reduction?: Reduction } = {}) {
    super(o);
    this.ignoreIndex = o.ignoreIndex ?? -100;
  }
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.nllLoss(input, target, { weight: this.weight, ignoreIndex: this.ignoreIndex, reduction: this.reduction });
  }
}

export class MSELoss extends Loss {
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.mseLoss(input, target, { reduction: this.reduction });
  }
}

export class L1Loss extends Loss {
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.l1Loss(input, target, { reduction: this.reduction });
  }
}

export class BCEWithLogitsLoss extends WeightedLoss {
  constructor(o: { weight?: Tensor | null; reduction?: Reduction; posWeight?: Tensor | null } = {}) {
    super(o);
    this.registerBuffer("pos_weight", o.posWeight ?? null);
  }
  override forward(input: Tensor, target: Tensor): Tensor {
    return F.binaryCrossEntropyWithLogits(input, target, {
      weight: this.weight, posWeight: this._buffers.get("pos_weight") ?? null, reduction: this.reduction,
    });
  }
}
