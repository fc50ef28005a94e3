// Normalisation layers: BatchNorm1d/2d, LayerNorm, RMSNorm, GroupNorm.
import type { Tensor } from "../../tensor.js";
import { noGrad } from "../../autograd/grad_mode.js";
import { ones, zeros, tensor } from "../../ops/creation.js";
import { Module, Parameter } from "../module.js";
import * as init from "../init.js";
import * as F from "../functional.js";
import { param, type FactoryOpts } from "./basic.js";

export interface BatchNormOpts extends FactoryOpts {
  eps?: number;
  momentum?: number | null;
  affine?: boolean;
  trackRunningStats?: boolean;
}

abstract class BatchNormBase extends Module {
  declare weight: Parameter | null;
  declare bias: Parameter | null;
  eps: number;
  momentum: number | null;
  affine: boolean;
  trackRunningStats: boolean;
  constructor(
    public numFeatures: number,
    o: BatchNormOpts = {},
  ) {
    super();
    this.eps = o.eps ?? 1e-5;
    this.momentum = o.momentum === undefined ? 0.1 : o.momentum;
    this.affine = o.affine ?? true;
    this.trackRunningStats = o.trackRunningStats ?? true;
    if (this.affine) {
      this.weight = param([numFeatures], o);
      this.bias = param([numFeatures], o);
      init.ones_(this.weight);
      init.zeros_(this.bias);
    } else {
      this.registerParameter("weight", null);
      this.registerParameter("bias", null);
    }
    if (this.trackRunningStats) {
      this.registerBuffer("running_mean", zeros([numFeatures], { dtype: o.dtype, device: o.device }));
      this.registerBuffer("running_var", ones([numFeatures], { dtype: o.dtype, device: o.device }));
      this.registerBuffer("num_batches_tracked", tensor(0, { dtype: "int64", device: o.device }));
    } else {
      this.registerBuffer("running_mean", null);
      this.registerBuffer("running_var", null);
      this.registerBuffer("num_batches_tracked", null);
    }
  }
  // buffers keep PyTorch's state-dict names (running_mean, ...) so checkpoints load as is
  get runningMean(): Tensor | null {
    return this._buffers.get("running_mean") ?? null;
  }
  get runningVar(): Tensor | null {
    return this._buffers.get("running_var") ?? null;
  }
  get numBatchesTracked(): Tensor | null {
    return this._buffers.get("num_batches_tracked") ?? null;
  }
  abstract _checkInputDim(x: Tensor): void;
  resetRunningStats(): void {
    if (!this.trackRunningStats) return;
    noGrad(() => {
      this.runningMean!.zero_();
      this.runningVar!.fill_(1);
      this.numBatchesTracked!.zero_();
    });
  }
  override forward(x: Tensor): Tensor {
    this._checkInputDim(x);
    let factor = this.momentum ?? 0;
    if (this.training && this.trackRunningStats && this.numBatchesTracked) {
      const n = this.numBatchesTracked;
      noGrad(() => n.add_(1));
      // momentum=None: cumulative moving average
      if (this.momentum === null) factor = 1 / Number(n._contiguousHost()[0]);
    }
    const useBatch = this.training || this.runningMean === null;
    return F.batchNorm(
      x,
      !this.training || this.trackRunningStats ? this.runningMean : null,
      !this.training || this.trackRunningStats ? this.runningVar : null,
      { weight: this.weight, bias: this.bias, training: useBatch, momentum: factor, eps: this.eps },
    );
  }
  override extraRepr(): string {
    return `${this.numFeatures}, eps=${this.eps}, momentum=${this.momentum}, affine=${this.affine}, track_running_stats=${this.trackRunningStats}`;
  }
}

export class BatchNorm1d extends BatchNormBase {
  override _checkInputDim(x: Tensor): void {
    if (x.ndim !== 2 && x.ndim !== 3) throw new RangeError(`expected 2D or 3D input (got ${x.ndim}D input)`);
  }
}
export class BatchNorm2d extends BatchNormBase {
  override _checkInputDim(x: Tensor): void {
    if (x.ndim !== 4) throw new RangeError(`expected 4D input (got ${x.ndim}D input)`);
  }
}

export interface LayerNormOpts extends FactoryOpts {
  eps?: number;
  elementwiseAffine?: boolean;
  bias?: boolean;
}

export class LayerNorm extends Module {
  declare weight: Parameter | null;
  declare bias: Parameter | null;
  normalizedShape: number[];
  eps: number;
  elementwiseAffine: boolean;
  constructor(normalizedShape: number | number[], o: LayerNormOpts = {}) {
    super();
    this.normalizedShape = typeof normalizedShape === "number" ? [normalizedShape] : [...normalizedShape];
    this.eps = o.eps ?? 1e-5;
    this.elementwiseAffine = o.elementwiseAffine ?? true;
    if (this.elementwiseAffine) {
      this.weight = init.ones_(param(this.normalizedShape, o)) as Parameter;
      if (o.bias ?? true) this.bias = init.zeros_(param(this.normalizedShape, o)) as Parameter;
      else this.registerParameter("bias", null);
    } else {
      this.registerParameter("weight", null);
      this.registerParameter("bias", null);
    }
  }
  override forward(x: Tensor): Tensor {
    return F.layerNorm(x, this.normalizedShape, { weight: this.weight, bias: this.bias, eps: this.eps });
  }
  override extraRepr(): string {
    return `(${this.normalizedShape}), eps=${this.eps}, elementwise_affine=${this.elementwiseAffine}`;
  }
}

export class RMSNorm extends Module {
  declare weight: Parameter | null;
  normalizedShape: number[];
  eps: number | null;
  constructor(normalizedShape: number | number[], o: FactoryOpts & { eps?: number | null; elementwiseAffine?: boolean } = {}) {
    super();
    this.normalizedShape = typeof normalizedShape === "number" ? [normalizedShape] : [...normalizedShape];
    this.eps = o.eps ?? null;
    if (o.elementwiseAffine ?? true) this.weight = init.ones_(param(this.normalizedShape, o)) as Parameter;
    else this.registerParameter("weight", null);
  }
  override forward(x: Tensor): Tensor {
    return F.rmsNorm(x, this.normalizedShape, { weight: this.weight, eps: this.eps ?? undefined });
  }
}

export class GroupNorm extends Module {
  declare weight: Parameter | null;
  declare bias: Parameter | null;
  eps: number;
  affine: boolean;
  constructor(
    public numGroups: number,
    public numChannels: number,
    o: FactoryOpts & { eps?: number; affine?: boolean } = {},
  ) {
    super();
    if (numChannels % numGroups !== 0) throw new RangeError("num_channels must be divisible by num_groups");
    this.eps = o.eps ?? 1e-5;
    this.affine = o.affine ?? true;
    if (this.affine) {
      this.weight = init.ones_(param([numChannels], o)) as Parameter;
      this.bias = init.zeros_(param([numChannels], o)) as Parameter;
    } else {
      this.registerParameter("weight", null);
      this.registerParameter("bias", null);
    }
  }
  override forward(x: Tensor): Tensor {
    return F.groupNorm(x, this.numGroups, { weight: this.weight, bias: this.bias, eps: this.eps });
  }
}
