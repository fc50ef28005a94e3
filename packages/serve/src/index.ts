// @torchts/serve: the OpenAI-compatible server, its engine, and the paged KV cache's data structures.
export { BlockPool, DEFAULT_BLOCK_SIZE, type BlockPoolOptions } from "./block_pool.js";
export {
  RadixCache,
  type CacheNode,
  type CacheStats,
  type InsertResult,
  type MatchOptions,
  type MatchResult,
  type RadixCacheOptions,
} from "./radix_cache.js";
export { SequenceBlocks, type AppendResult, type BlockCopy } from "./sequence_blocks.js";
export {
  LLMEngine,
  EngineInputError,
  EngineQueueFullError,
  EngineClosedError,
  type LLMEngineOptions,
  type SamplingParams,
  type RequestOutput,
  type FinishReason,
  type EngineStats,
  type EngineEvent,
  type KvCacheEvent,
  type TokenLogprob,
} from "./engine.js";
export { createServer, type Server, type ServerOptions } from "./server.js";
export { HostKVTier, type HostTierOptions, type HostTierStats } from "./hicache.js";
export type { TokenConstraint } from "./constraint.js";
export { benchServe, BenchArgumentError, formatResult, jsonRecord, latencyPlotPng, type BenchServeOptions, type BenchServeResult, type Endpoint, type GoodputSlos } from "./bench/index.js";
