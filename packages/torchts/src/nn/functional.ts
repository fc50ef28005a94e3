// torch.nn.functional (`torch.nn.functional.softmax(x, -1)`): activations, normalization,
// losses, convolution, pooling, attention and friends, all composed of differentiable ops and
// all in the op table (PyTorch's F signatures). Only the ops are exported: helpers the modules
// share (windows, segmentedAttention, the quantized kernels) stay internal to nn/functional/.
// Also installs the Tensor methods PyTorch has for these (x.softmax(dim), x.logSoftmax(dim)),
// which are torch.softmax / torch.log_softmax (dim required, dtype positional).
import type { Method } from "../ops/registry.js";
import { installMethods } from "../ops/registry.js";
import { torchSoftmax, torchLogSoftmax } from "./functional/activation.js";

export {
  softmax, logSoftmax, softmin, relu, hardtanh, relu6, leakyRelu, elu, celu, selu, gelu, silu, softplus, mish, logsigmoid,
  hardsigmoid, hardswish, softsign, tanhshrink, threshold, glu, sigmoid, tanh,
} from "./functional/activation.js";
export type { SoftmaxOpts } from "./functional/activation.js";
export { layerNorm, rmsNorm, batchNorm, groupNorm, instanceNorm, normalize } from "./functional/normalization.js";
export type { LayerNormOpts, BatchNormOpts, InstanceNormOpts } from "./functional/normalization.js";
export {
  nllLoss, crossEntropy, mseLoss, l1Loss, smoothL1Loss, huberLoss, binaryCrossEntropy, binaryCrossEntropyWithLogits, klDiv,
} from "./functional/loss.js";
export type { NllLossOpts, CrossEntropyOpts, LegacyReductionOpts } from "./functional/loss.js";
export { conv1d, conv2d, conv3d, convTranspose1d, convTranspose2d } from "./functional/conv.js";
export type { ConvOpts, ConvTransposeOpts } from "./functional/conv.js";
export {
  maxPool1d, maxPool2d, maxPool3d, maxPool2dWithIndices, avgPool1d, avgPool2d, avgPool3d, adaptiveAvgPool1d, adaptiveAvgPool2d,
} from "./functional/pooling.js";
export type { MaxPoolOpts, AvgPoolOpts } from "./functional/pooling.js";
export {
  pad, embedding, oneHot, dropout, interpolate, upsample, cosineSimilarity, pairwiseDistance, linear,
} from "./functional/misc.js";
export type { PadMode, EmbeddingOpts, InterpolateMode, InterpolateOpts } from "./functional/misc.js";
export { scaledDotProductAttention } from "./functional/attention.js";
export { pagedAttention } from "./functional/paged_attention.js";
export type { SdpaOpts } from "./functional/attention.js";
export type { Reduction, IntOrTuple } from "./functional/util.js";

declare module "../tensor.js" {
  interface Tensor {
    softmax: Method<typeof torchSoftmax>;
    logSoftmax: Method<typeof torchLogSoftmax>;
  }
}
installMethods({ softmax: torchSoftmax, logSoftmax: torchLogSoftmax });
