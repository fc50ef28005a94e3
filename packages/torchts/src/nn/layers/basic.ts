// Linear-family layers and shape helpers: Identity, Linear, Bilinear, Flatten, Unflatten.
import type { Tensor } from "../../tensor.js";
import { empty } from "../../ops/creation.js";
import { linear } from "../../ops/linalg.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { withOp } from "../../runtime/mode.js";
import { Module, Parameter } from "../module.js";
import * as init from "../init.js";
import type { DType } from "../../ir/dtype.js";

export interface FactoryOpts {
  dtype?: DType;
  device?: string;
}
export const param = (shape: number[], o: FactoryOpts = {}): Parameter =>
  new Parameter(empty(shape, { dtype: o.dtype, device: o.device }));

export class Identity extends Module {
  override forward(x: Tensor): Tensor {
    return x;
  }
}

export class Linear extends Module {
  declare weight: Parameter;
  declare bias: Parameter | null;
  constructor(
    public inFeatures: number,
    public outFeatures: number,
    opts: FactoryOpts & { bias?: boolean } = {},
  ) {
    super();
    this.weight = param([outFeatures, inFeatures], opts);
    if (opts.bias ?? true) this.bias = param([outFeatures], opts);
    else this.registerParameter("bias", null);
    this.resetParameters();
  }
  resetParameters(): void {
    // kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    init.kaimingUniform_(this.weight, { a: Math.sqrt(5) });
    if (this.bias) {
      const fi = this.inFeatures;
      const b = fi > 0 ? 1 / Math.sqrt(fi) : 0;
      init.uniform_(this.bias, -b, b);
    }
  }
  override forward(x: Tensor): Tensor {
    return linear(x, this.weight, this.bias);
  }
  override extraRepr(): string {
    return `in_features=${this.inFeatures}, out_features=${this.outFeatures}, bias=${this.bias !== null ? "True" : "False"}`;
  }
}

export class Bilinear extends Module {
  declare weight: Parameter;
  declare bias: Parameter | null;
  constructor(
    public in1Features: number,
    public in2Features: number,
    public outFeatures: number,
    opts: FactoryOpts & { bias?: boolean } = {},
  ) {
    super();
    this.weight = param([outFeatures, in1Features, in2Features], opts);
    if (opts.bias ?? true) this.bias = param([outFeatures], opts);
    else this.registerParameter("bias", null);
    const b = 1 / Math.sqrt(in1Features);
    init.uniform_(this.weight, -b, b);
    if (this.bias) init.uniform_(this.bias, -b, b);
  }
  /** y = x1^T A x2 + b over the last dim; leading dims must match. */
  override forward(x1: Tensor, x2: Tensor): Tensor {
    return withOp("bilinear", () => {
      if (x1.shape.slice(0, -1).join() !== x2.shape.slice(0, -1).join())
        throw new RangeError(`bilinear: input1 and input2 must have the same leading dims, got [${x1.shape}] and [${x2.shape}]`);
      // (..., 1, 1, i) @ (o, i, j) -> (..., o, 1, j); then dot with x2 over j
      const t = S.squeeze(S.unsqueeze(S.unsqueeze(x1, -2), -3).matmul(this.weight), -2); // (..., o, j)
      let y = R.sum(M.mul(t, S.unsqueeze(x2, -2)), -1);
      if (this.bias) y = M.add(y, this.bias);
      return y;
    });
  }
}

export class Flatten extends Module {
  constructor(
    public startDim = 1,
    public endDim = -1,
  ) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return S.flatten(x, this.startDim, this.endDim);
  }
}

export class Unflatten extends Module {
  constructor(
    public dim: number,
    public unflattenedSize: number[],
  ) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return S.unflatten(x, this.dim, this.unflattenedSize);
  }
}
