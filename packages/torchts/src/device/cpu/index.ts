// The cpu device: host typed arrays and JS kernels generated per (op, shape, stride, dtype).
// Storage is a plain typed array today; the interface leaves room for a shared
// WebAssembly.Memory arena driven by worker threads (buffers are opaque handles).
import { hostArray, itemSize, type DType, type HostArray } from "../../ir/dtype.js";
import { PRIM_NAMES, type IRGraph } from "../../ir/prims.js";
import type { DeviceBuffer, DevicePlugin, Executable, KernelArg } from "../plugin.js";
import type { Arr } from "./codegen.js";
import { buildKernel } from "./kernels.js";

const EMPTY = new Float32Array(0);

export class CpuBuffer implements DeviceBuffer {
  constructor(
    public data: HostArray,
    public readonly bytes: number,
  ) {}
}

function compile(graph: IRGraph): Executable {
  if (graph.nodes.length !== 1) throw new Error("cpu: multi-node graphs are compiled by the fusion scheduler");
  const k = buildKernel(graph.nodes[0]!);
  return {
    run(inputs: KernelArg[], outputs: DeviceBuffer[], scalars: readonly number[]) {
      k(
        (outputs[0] as CpuBuffer).data as Arr,
        inputs.map((a) => (a.buf as CpuBuffer).data as Arr),
        inputs.map((a) => a.offset),
        scalars,
      );
    },
  };
}

// Freed arrays are recycled by (type, length): creating fresh ArrayBuffers is what makes V8
// run full garbage collections (external memory pressure), so a training loop that
// allocates the same shapes every step reuses the same memory instead.
const pool = new Map<string, HostArray[]>();
let pooledBytes = 0;
const POOL_CAP = 256 * 1024 * 1024;

export const cpu: DevicePlugin = {
  name: "cpu",
  allocate(dtype: DType, numel: number): DeviceBuffer {
    const probe = hostArray(dtype, 0);
    const key = `${probe.constructor.name}:${numel}`;
    const hit = pool.get(key)?.pop();
    if (hit) {
      pooledBytes -= hit.byteLength;
      return new CpuBuffer(hit, numel * itemSize(dtype));
    }
    return new CpuBuffer(hostArray(dtype, numel), numel * itemSize(dtype));
  },
  write(buf: DeviceBuffer, data: HostArray): void {
    (buf as CpuBuffer).data.set(data as ArrayLike<number>);
  },
  async read(buf: DeviceBuffer): Promise<HostArray> {
    return (buf as CpuBuffer).data;
  },
  readSync(buf: DeviceBuffer): HostArray {
    return (buf as CpuBuffer).data;
  },
  free(buf: DeviceBuffer): void {
    const b = buf as CpuBuffer;
    const d = b.data;
    if (d.length > 0 && pooledBytes + d.byteLength <= POOL_CAP) {
      const key = `${d.constructor.name}:${d.length}`;
      const list = pool.get(key) ?? [];
      list.push(d);
      pool.set(key, list);
      pooledBytes += d.byteLength;
    }
    b.data = EMPTY;
  },
  compile,
  async synchronize(): Promise<void> {},
  primitives: new Set(PRIM_NAMES),
  overrides: new Set(),
};
