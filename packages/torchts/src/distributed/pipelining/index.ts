// torch.distributed.pipelining: PipelineStage and the GPipe and 1F1B schedules.
export { PipelineStage } from "./stage.js";
export { ScheduleGPipe, Schedule1F1B, type LossFn } from "./schedules.js";
