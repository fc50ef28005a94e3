// torch.distributed.checkpoint (DCP): save / asyncSave / load with resharding, and state_dict's
// helpers (getStateDict / setStateDict) that key optimizer state by parameter name.
export { save, asyncSave, type SaveOptions } from "./save.js";
export { load, readMetadata, type LoadOptions } from "./load.js";
export type { Metadata } from "./metadata.js";
export { getStateDict, setStateDict, getModelStateDict, getOptimizerStateDict, type OptimizerStateDictByName } from "./state_dict.js";
export * as stateDict from "./state_dict.js";
