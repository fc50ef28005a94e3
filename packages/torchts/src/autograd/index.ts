// torch.autograd
export { grad, backward } from "./engine.js";
export type { BackwardOptions } from "./engine.js";
export { Function, FunctionCtx } from "./function.js";
export { gradcheck } from "./gradcheck.js";
export type { GradcheckOptions } from "./gradcheck.js";
