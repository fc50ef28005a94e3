// @torchts/router: an OpenAI-compatible router over torchts serve (or vLLM-compatible) replicas.
export { createRouter, DRY_RUN_HEADER, type Router, type Plan, type Dispatch } from "./router.js";
export { parseConfig, loadConfig, validateConfig, defaultScorers, ConfigError, type RouterConfig, type ReplicaConfig, type ScorerConfig, type FilterConfig, type Role } from "./config.js";
export { FlowController, Rejected, Cancelled, type FlowOptions } from "./flow_control.js";
export { Pool, Replica, readMetrics, type ReplicaMetrics } from "./pool.js";
export { Scheduler, type Pick, type PickInput, type Scored } from "./scheduler.js";
export { ApproxIndex, PreciseIndex, textBlockHashes, type KvEvent } from "./prefix_index.js";
export { prefillRequest, decodeRequest } from "./pd.js";
export { routeInfo, promptText, sessionToken, sessionReplica, stableHash, type RouteInfo } from "./request_info.js";
