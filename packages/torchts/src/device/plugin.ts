// The device-plugin interface (torchts's PrivateUse1). A device owns memory, compiles IR
// graphs into executables and runs them. `cpu` is the reference implementation.
import type { DType, HostArray } from "../ir/dtype.js";
import type { CompositeName, IRGraph, PrimName } from "../ir/prims.js";

/** Opaque device memory. `bytes` lets the runtime account for it. */
export interface DeviceBuffer {
  readonly bytes: number;
}

/** A kernel input: a buffer plus the element offset of the view into it (offsets are runtime, not cache keys). */
export interface KernelArg {
  buf: DeviceBuffer;
  offset: number;
}

export interface Executable {
  /** Enqueue (or run) the graph. Scalars are runtime values (fill values, RNG seeds) so they never cause recompiles. */
  run(inputs: KernelArg[], outputs: DeviceBuffer[], scalars: readonly number[]): void;
}


export interface DevicePlugin {
  readonly name: string;
  allocate(dtype: DType, numel: number): DeviceBuffer;
  /**
   * Throws (RangeError, OutOfMemoryError) for a size this device can never allocate; the storage of
   * every op's result calls it, so a lazily recorded node (fused eager) fails in the op that made it.
   */
  checkSize?(dtype: DType, numel: number): void;
  write(buf: DeviceBuffer, data: HostArray): void;
  read(buf: DeviceBuffer, dtype: DType, numel: number): Promise<HostArray>;
  /** Host-visible devices (cpu) can read synchronously; used for printing and debug checks. */
  readSync?(buf: DeviceBuffer, dtype: DType, numel: number): HostArray;
  free(buf: DeviceBuffer): void;
  /**
   * Copy `rows.length` contiguous rows of `rowElems` elements from `src` (starting at element
   * `srcOffset`) into rows rows[i] of `dst`, in place, ordered after the work already issued on both
   * (Tensor.indexCopy_'s fast path: a paged KV cache takes a step's new keys without rewriting itself).
   */
  writeRows?(dst: DeviceBuffer, src: DeviceBuffer, srcOffset: number, rowElems: number, rows: ArrayLike<number>): void;
  compile(graph: IRGraph): Executable;
  synchronize(): Promise<void>;
  readonly primitives: ReadonlySet<PrimName>;
  /** Composites this device runs as one `composite` node with its own kernel. */
  readonly overrides: ReadonlySet<CompositeName>;
}

const registry = new Map<string, DevicePlugin>();

export function registerDevice(name: string, plugin: DevicePlugin): void {
  registry.set(name, plugin);
}

export function getDevice(name: string): DevicePlugin {
  const base = name.split(":")[0]!;
  const d = registry.get(base);
  if (!d)
    throw new Error(
      `Expected one of the registered device types (${[...registry.keys()].join(", ")}) at start of device string: ${name}`,
    );
  return d;
}

export function registeredDevices(): string[] {
  return [...registry.keys()];
}
