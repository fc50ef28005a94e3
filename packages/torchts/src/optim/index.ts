// torch.optim: optimizers and learning-rate schedulers.
export { Optimizer } from "./optimizer.js";
export type { ParamGroup, ParamGroupInput, Params, ParamState, OptimizerStateDict } from "./optimizer.js";
export { SGD } from "./sgd.js";
export type { SGDOptions } from "./sgd.js";
export { Adam, AdamW } from "./adam.js";
export type { AdamOptions } from "./adam.js";
export { RMSprop, Adagrad } from "./rmsprop.js";
export type { RMSpropOptions, AdagradOptions } from "./rmsprop.js";
export * as lrScheduler from "./lr_scheduler.js";
