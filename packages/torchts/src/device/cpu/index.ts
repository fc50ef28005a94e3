// The cpu device: host typed arrays and JS kernels generated per (op, shape, stride, dtype).
// With the wasm backend, storage lives in the kernels' shared WebAssembly.Memory (typed-array
// views into the arena), so wasm kernels read and write tensors in place with no staging
// copies, and freed blocks are reused whatever their dtype. Memory a process touched once is
// cheap to reuse while fresh pages are not (first-touch page faults dominate large
// allocations on small VMs). Without wasm, or when the 4 GiB wasm memory is full, storage
// falls back to plain typed arrays, which the kernels stage.
import { hostArray, hostArrayCtor, itemSize, type DType, type HostArray } from "../../ir/dtype.js";
import { PRIM_NAMES, type IRGraph } from "../../ir/prims.js";
import type { DeviceBuffer, DevicePlugin, Executable, KernelArg } from "../plugin.js";
import type { Arr } from "./codegen.js";
import { buildKernel } from "./kernels.js";
import { cpuOverrides } from "./composites.js";
import { fusionDevices, isFused, type FusedGraph } from "../../runtime/fused_graph.js";
import { fusedSource, loadFused, type FusedKernel } from "./fused.js";
import { numel } from "../../ir/shape.js";
import { wasmRuntime } from "./wasm/runtime.js";
import type { Arena } from "./wasm/arena.js";
import { fmtBytes, OutOfMemoryError, outOfMemory, sizeError } from "../../runtime/errors.js";

const EMPTY = new Float32Array(0);

export class CpuBuffer implements DeviceBuffer {
  constructor(
    public data: HostArray,
    public readonly bytes: number,
    /** The arena block holding `data` (null for a plain typed array). */
    public block: { arena: Arena; ptr: number } | null = null,
  ) {}
}

const ARENA_STORAGE_BUDGET = 2 ** 31;
/** The longest typed array V8 makes (Node 20+, Chrome): 2^32 elements; other engines' limits are caught when they throw. */
const MAX_HOST_LENGTH = 2 ** 32;
let hostMemory: number | undefined;
/** The host's physical memory (Node's os.totalmem(); Infinity where unknown): no one array can be larger. */
function hostMemoryBytes(): number {
  if (hostMemory !== undefined) return hostMemory;
  hostMemory = Infinity;
  try {
    const g = globalThis as { process?: { getBuiltinModule?: (m: string) => unknown } };
    const os = g.process?.getBuiltinModule?.("node:os") as { totalmem(): number } | undefined;
    const t = os?.totalmem();
    if (t !== undefined && t > 0) hostMemory = t;
  } catch {
    // browsers: the engine's own allocation failure is the limit
  }
  return hostMemory;
}

const EMPTY_ARR: Arr = new Float32Array(0);

function arenaArray(dtype: DType, n: number): CpuBuffer | null {
  const rt = wasmRuntime();
  if (!rt) return null;
  // float16/bfloat16 live in Float32Array: the block is sized by the host array, not the dtype
  const ctor = hostArrayCtor(dtype);
  // Past the budget, storage goes to plain typed arrays: V8 sees those (so a long synchronous
  // step that drops many tensors triggers its GC), and the rest of the 4 GiB wasm memory stays
  // free for kernel scratch. The arena is reused once finalizers have returned its blocks.
  if (rt.arena.bytesInUse + n * ctor.BYTES_PER_ELEMENT > ARENA_STORAGE_BUDGET) return null;
  let ptr: number;
  try {
    ptr = rt.arena.alloc(Math.max(n * ctor.BYTES_PER_ELEMENT, 16));
  } catch (e) {
    if (e instanceof OutOfMemoryError) return null; // the wasm memory cannot grow further
    throw e;
  }
  const bytes = n * itemSize(dtype);
  return new CpuBuffer(rt.view(ctor, ptr, n), bytes, { arena: rt.arena, ptr });
}

function compileFused(graph: FusedGraph, source?: string): Executable & { source: string } {
  const src = source ?? fusedSource(graph);
  const k = loadFused(src);
  if (graph.kind === "matmul") return matmulWithEpilogue(graph, src, k);
  // argument arrays kept with the executable (a fused eager step runs ~100 of these kernels, and
  // three fresh arrays per call were ~45 KB of garbage a small training step); emptied after each
  // call, so they hold no buffer between calls
  const outs: Arr[] = [], ins: Arr[] = [], offs: number[] = [];
  return {
    source: src,
    run(inputs: KernelArg[], outputs: DeviceBuffer[]) {
      for (let i = 0; i < outputs.length; i++) outs[i] = (outputs[i] as CpuBuffer).data as Arr;
      for (let i = 0; i < inputs.length; i++) {
        ins[i] = (inputs[i]!.buf as CpuBuffer).data as Arr;
        offs[i] = inputs[i]!.offset;
      }
      outs.length = outputs.length;
      ins.length = offs.length = inputs.length;
      try {
        k(outs, ins, offs);
      } finally {
        outs.fill(EMPTY_ARR);
        ins.fill(EMPTY_ARR);
      }
    },
  };
}

function matmulWithEpilogue(graph: FusedGraph, src: string, epi: FusedKernel): Executable & { source: string } {
  const mm = buildKernel(graph.nodes[0]!);
  const [a, b] = graph.srcs[0] as [{ ext: number }, { ext: number }];
  const out0 = graph.outputs.indexOf(0); // the product itself is also an output
  const mmNode = graph.nodes[0]!;
  let scratch: Arr | null = null;
  return {
    source: src,
    run(inputs: KernelArg[], outputs: DeviceBuffer[]) {
      const outs = outputs.map((o) => (o as CpuBuffer).data as Arr);
      let prod: Arr;
      // the product lives in the wasm arena for this call only, so the wasm epilogue reads it
      // in place (a host scratch array would be copied in first) and no memory stays held
      let tmp: CpuBuffer | null = null;
      if (out0 >= 0) prod = outs[out0]!;
      else if ((tmp = arenaArray(mmNode.out.dtype, numel(mmNode.out.shape)))) prod = tmp.data as Arr;
      else prod = scratch ??= hostArray(mmNode.out.dtype, numel(mmNode.out.shape)) as Arr;
      try {
        mm(prod, [(inputs[a.ext]!.buf as CpuBuffer).data as Arr, (inputs[b.ext]!.buf as CpuBuffer).data as Arr], [inputs[a.ext]!.offset, inputs[b.ext]!.offset], []);
        const ins = inputs.map((x) => (x.buf as CpuBuffer).data as Arr);
        const offs = inputs.map((x) => x.offset);
        ins.push(prod);
        offs.push(0);
        epi(outs.filter((_, q) => q !== out0), ins, offs);
      } finally {
        if (tmp) cpu.free(tmp);
      }
    },
  };
}

function compile(graph: IRGraph, source?: string): Executable {
  if (isFused(graph)) return compileFused(graph, source);
  if (graph.nodes.length !== 1) throw new Error("cpu: multi-node graphs must come from the fusion scheduler");
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

/** The sizes no cpu buffer can have (also checked when fused eager records a node, so it fails in its op). */
function checkSize(dtype: DType, numel: number): void {
  // checked before anything changes: a NaN size once made the arena's bump pointer NaN
  const per = hostArrayCtor(dtype).BYTES_PER_ELEMENT;
  if (!(numel >= 0 && numel <= MAX_HOST_LENGTH && Number.isInteger(numel)))
    throw sizeError("cpu", numel, "elements", per, `a host array holds at most ${MAX_HOST_LENGTH} elements`);
  const hostBytes = numel * per;
  // past physical memory an allocation may still succeed (overcommit) and the process be killed when it is filled
  if (hostBytes > hostMemoryBytes()) throw outOfMemory(hostBytes, `cpu: the host has ${fmtBytes(hostMemoryBytes())} of memory`);
}

export const cpu: DevicePlugin = {
  name: "cpu",
  checkSize,
  allocate(dtype: DType, numel: number): DeviceBuffer {
    checkSize(dtype, numel);
    const inArena = arenaArray(dtype, numel);
    if (inArena) return inArena;
    const key = `${hostArrayCtor(dtype).name}:${numel}`;
    const hit = pool.get(key)?.pop();
    if (hit) {
      pooledBytes -= hit.byteLength;
      return new CpuBuffer(hit, numel * itemSize(dtype));
    }
    let data: HostArray;
    try {
      data = hostArray(dtype, numel);
    } catch (e) {
      // "Array buffer allocation failed" (the host has not that much memory) or an engine's own length limit
      if (e instanceof RangeError) throw outOfMemory(numel * hostArrayCtor(dtype).BYTES_PER_ELEMENT, `cpu: ${e.message}`);
      throw e;
    }
    return new CpuBuffer(data, numel * itemSize(dtype));
  },
  write(buf: DeviceBuffer, data: HostArray): void {
    (buf as CpuBuffer).data.set(data as ArrayLike<number>);
  },
  async read(buf: DeviceBuffer): Promise<HostArray> {
    return (buf as CpuBuffer).data;
  },
  writeRows(dst: DeviceBuffer, src: DeviceBuffer, srcOffset: number, rowElems: number, rows: ArrayLike<number>): void {
    const [d, s] = [(dst as CpuBuffer).data, (src as CpuBuffer).data];
    for (let i = 0; i < rows.length; i++) {
      const at = srcOffset + i * rowElems;
      d.set(s.subarray(at, at + rowElems) as ArrayLike<number>, rows[i]! * rowElems);
    }
  },
  readSync(buf: DeviceBuffer): HostArray {
    return (buf as CpuBuffer).data;
  },
  free(buf: DeviceBuffer): void {
    const b = buf as CpuBuffer;
    const d = b.data;
    b.data = EMPTY;
    if (b.block) {
      const blk = b.block;
      b.block = null; // a second free of this buffer does nothing
      blk.arena.release(blk.ptr); // its own arena: the backend may have been switched since (never throws)
      return;
    }
    if (d.length > 0 && pooledBytes + d.byteLength <= POOL_CAP) {
      const key = `${d.constructor.name}:${d.length}`;
      const list = pool.get(key) ?? [];
      list.push(d);
      pool.set(key, list);
      pooledBytes += d.byteLength;
    }
  },
  compile,
  async synchronize(): Promise<void> {},
  primitives: new Set(PRIM_NAMES),
  get overrides() {
    return cpuOverrides();
  },
};

fusionDevices.add(cpu);
