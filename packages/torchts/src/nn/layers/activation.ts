// Activation and dropout layers: thin modules over torch.nn.functional.
import type { Tensor } from "../../tensor.js";
import * as M from "../../ops/math.js";
import { Module } from "../module.js";
import * as F from "../functional.js";

export class ReLU extends Module {
  constructor(public inplace = false) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return F.relu(x);
  }
}
export class GELU extends Module {
  constructor(public approximate: "none" | "tanh" = "none") {
    super();
  }
  override forward(x: Tensor): Tensor {
    return F.gelu(x, { approximate: this.approximate });
  }
}
export class SiLU extends Module {
  override forward(x: Tensor): Tensor {
    return F.silu(x);
  }
}
export class Tanh extends Module {
  override forward(x: Tensor): Tensor {
    return M.tanh(x);
  }
}
export class Sigmoid extends Module {
  override forward(x: Tensor): Tensor {
    return M.sigmoid(x);
  }
}
export class LeakyReLU extends Module {
  constructor(
    public negativeSlope = 0.01,
    public inplace = false,
  ) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return F.leakyRelu(x, this.negativeSlope);
  }
}
export class Softmax extends Module {
  constructor(public dim: number) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return F.softmax(x, this.dim);
  }
}
export class LogSoftmax extends Module {
  constructor(public dim: number) {
    super();
  }
  override forward(x: Tensor): Tensor {
    return F.logSoftmax(x, this.dim);
  }
}
export class Dropout extends Module {
  constructor(
    public p = 0.5,
    public inplace = false,
  ) {
    super();
    if (p < 0 || p > 1) throw new RangeError(`dropout probability has to be between 0 and 1, but got ${p}`);
  }
  override forward(x: Tensor): Tensor {
    return F.dropout(x, { p: this.p, training: this.training });
  }
  override extraRepr(): string {
    return `p=${this.p}, inplace=${this.inplace}`;
  }
}
