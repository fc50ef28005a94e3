// torch.vision: torchvision-compatible models (`torch.vision.models.resnet18()` or `torch.vision.resnet18()`).
export { ResNet, BasicBlock, Bottleneck, ResNetBlock, resnet18, resnet34, resnet50, resnet101 } from "./resnet.js";
export type { ResNetOpts, ResNetFeatures, BlockClass, NormLayer } from "./resnet.js";
import * as models from "./resnet.js";
export { models };
