// torch.nn.functional (`torch.nn.functional.softmax(x, -1)`): activations, normalization,
// losses, convolution, pooling, attention and friends, all composed of differentiable ops.
// Also attaches the Tensor methods PyTorch has for these (x.softmax(dim), x.logSoftmax(dim)).
import { Tensor } from "../tensor.js";
import type { DType } from "../ir/dtype.js";
import { softmax, logSoftmax } from "./functional/activation.js";

export * from "./functional/activation.js";
export * from "./functional/normalization.js";
export * from "./functional/loss.js";
export * from "./functional/conv.js";
export * from "./functional/pooling.js";
export * from "./functional/misc.js";
export * from "./functional/attention.js";
export type { Reduction, IntOrTuple } from "./functional/util.js";

declare module "../tensor.js" {
  interface Tensor {
    softmax(dim: number, opts?: { dtype?: DType }): Tensor;
    logSoftmax(dim: number, opts?: { dtype?: DType }): Tensor;
  }
}
Tensor.prototype.softmax = function (this: Tensor, dim: number, opts?: { dtype?: DType }) {
  return softmax(this, dim, opts);
};
Tensor.prototype.logSoftmax = function (this: Tensor, dim: number, opts?: { dtype?: DType }) {
  return logSoftmax(this, dim, opts);
};
