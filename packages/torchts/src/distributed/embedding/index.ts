// TorchRec-style sparse embeddings (torchrec.modules / torchrec.sparse / torchrec.distributed):
//   const ebc = new EmbeddingBagCollection([{ name: "t0", numEmbeddings: 1000, embeddingDim: 16, featureNames: ["f0"] }]);
//   const sharded = new ShardedEmbeddingBagCollection(ebc);          // ROW_WISE over the world
//   sharded.forward(KeyedJaggedTensor.fromLengthsSync(["f0"], ids, lengths)).toDict().f0;  // [B, 16]
export { EmbeddingBagConfig, PoolingType, type EmbeddingBagConfigOptions, type PoolingName } from "./config.js";
export { JaggedTensor, KeyedJaggedTensor, KeyedTensor, type KeyedJaggedTensorOptions } from "./jagged.js";
export { EmbeddingBagCollection, type EmbeddingBagCollectionOptions } from "./collection.js";
export { ShardedEmbeddingBagCollection, ShardingType, shardModules, type ShardedEmbeddingBagCollectionOptions } from "./sharded.js";
export { setGradientDivision, getGradientDivision } from "./comm.js";
