// @torchts/serve: the serving engine's data structures (the engine and server come later).
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
