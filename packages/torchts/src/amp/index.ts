// torch.amp: autocast regions and the gradient scaler.
export { autocast, getAutocastDtype, isAutocastEnabled } from "./autocast.js";
export type { AutocastOpts } from "./autocast.js";
export { GradScaler } from "./grad_scaler.js";
export type { GradScalerOpts } from "./grad_scaler.js";
