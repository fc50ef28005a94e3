// torch.distributed.tensor.parallel: tensor parallel styles, parallelizeModule, and plans for the
// transformers models.
export { ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput, ParallelStyle, parallelizeModule } from "./style.js";
export { llamaTpPlan } from "./plans.js";
