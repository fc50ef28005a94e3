// torch.nn: modules, layers, init and losses. F lives in ./functional.ts.
// Convention: `m.forward(x)` runs the layer alone; `m.call(x)` is PyTorch's `m(x)` (runs hooks).
export * as functional from "./functional.js";
export * as init from "./init.js";
export * as utils from "./utils.js";
export * as parallel from "./parallel.js";
export { Module, Parameter } from "./module.js";
export type { RemovableHandle, ForwardHook, ForwardPreHook, StateDict, LoadResult } from "./module.js";
export { Identity, Linear, Bilinear, Flatten, Unflatten } from "./layers/basic.js";
export type { FactoryOpts } from "./layers/basic.js";
export { ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, Softmax, LogSoftmax, Dropout } from "./layers/activation.js";
export { Sequential, ModuleList, ModuleDict } from "./layers/container.js";
export { Embedding, EmbeddingBag } from "./layers/sparse.js";
export { Conv1d, Conv2d, ConvTranspose2d } from "./layers/conv.js";
export { BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm, GroupNorm } from "./layers/norm.js";
export { MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Upsample } from "./layers/pool.js";
export { MultiheadAttention, TransformerEncoderLayer } from "./layers/transformer.js";
export { CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss } from "./layers/loss.js";
export type { Reduction } from "./layers/loss.js";
