// The webgpu device's public option and statistics types. They mention no WebGPU (DOM) types,
// so the published declarations type-check in projects without DOM or @webgpu/types.

export interface WebGPUOptions {
  /** A GPU object to use: navigator.gpu in a page, or create([...]) from the `webgpu` package in Node. */
  gpu?: unknown;
  /** Dawn backend in Node: vulkan | opengles | opengl | metal | d3d12 | null (env TORCHTS_WEBGPU_BACKEND). */
  backend?: string;
  /** Dawn adapter name in Node (env TORCHTS_WEBGPU_ADAPTER). */
  adapterName?: string;
  powerPreference?: "low-power" | "high-performance";
  featureLevel?: "core" | "compatibility";
  forceFallbackAdapter?: boolean;
  /** Extra Dawn toggles for Node, e.g. "enable-dawn-features=...". */
  dawnFlags?: string[];
  /** Pool of freed buffers kept for reuse (bytes; default 256 MiB, env TORCHTS_WEBGPU_POOL_MB). */
  poolCapBytes?: number;
  /** Device memory torchts may use (bytes; default unlimited, env TORCHTS_WEBGPU_MEMORY_MB). */
  memoryLimitBytes?: number;
  /** Use shader-f16 when the adapter has it (default true). */
  useF16?: boolean;
}

export interface PoolStats {
  liveBytes: number;
  liveBuffers: number;
  pooledBytes: number;
  pooledBuffers: number;
  peakBytes: number;
  allocations: number;
  poolHits: number;
  oomRetries: number;
  limitBytes: number;
  poolCapBytes: number;
}

export interface WebGPUStats extends PoolStats {
  pipelines: number;
  dispatches: number;
  submits: number;
}
