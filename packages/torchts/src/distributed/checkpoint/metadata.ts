// The `.metadata` of a distributed checkpoint (JSON): for each tensor its dtype, global shape and
// chunks (offsets, sizes, and the file and safetensors key holding them); the plain values.
export const DCP_FORMAT = "torchts.dcp/1";
export const METADATA_NAME = ".metadata";

export interface ChunkMeta {
  offsets: number[];
  sizes: number[];
  file: string;
  key: string;
}

export interface Metadata {
  format: string;
  saveId: string;
  /** The number of ranks that saved it. */
  worldSize: number;
  tensors: Record<string, { dtype: string; shape: number[]; chunks: ChunkMeta[] }>;
  values: Record<string, unknown>;
}
