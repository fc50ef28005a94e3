// torch.profiler namespace.
export { profile, Profile } from "./profiler.js";
export type { KernelEvent } from "./profiler.js";
