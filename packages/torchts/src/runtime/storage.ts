// A Storage is the memory behind one or more tensor views. In fused mode it may still be
// pending: an IR node that will produce it when something needs the value.
import type { DeviceBuffer, DevicePlugin } from "../device/plugin.js";
import { castScalar, type DType, type HostArray } from "../ir/dtype.js";
import type { IRNode } from "../ir/prims.js";
import type { Shape } from "../ir/shape.js";
import { trackAlloc, trackFree, transferOwnership } from "./memory.js";

/** What a kernel needs to know about one input view. */
export interface ViewRef {
  readonly storage: Storage;
  readonly shape: Shape;
  readonly strides: Shape;
  readonly offset: number;
  readonly dtype: DType;
}

export interface Pending {
  node: IRNode;
  inputs: ViewRef[];
  scalars: number[];
  callSite?: string;
}

export class Storage {
  buf: DeviceBuffer | null = null;
  pending: Pending | null = null;
  /** Bumped by every in-place write; autograd compares it with the version it saved. */
  version = 0;
  disposed = false;
  constructor(
    readonly device: DevicePlugin,
    readonly dtype: DType,
    readonly numel: number,
  ) {}

  allocate(): DeviceBuffer {
    const b = this.device.allocate(this.dtype, this.numel);
    this.buf = b;
    trackAlloc(this, this.device, b);
    return b;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.pending = null;
    if (this.buf) trackFree(this, this.device, this.buf);
    this.buf = null;
  }

  /** Take over another (realized, unshared) storage's buffer: how in-place writes land. */
  adopt(other: Storage): void {
    if (!other.buf) throw new Error("internal: adopt() needs a realized storage");
    if (this.buf) trackFree(this, this.device, this.buf);
    this.buf = other.buf;
    this.pending = null;
    transferOwnership(other, this, this.device, other.buf);
    other.buf = null;
    other.disposed = true;
  }

  static fromHost(device: DevicePlugin, dtype: DType, data: ArrayLike<number>): Storage {
    const s = new Storage(device, dtype, data.length);
    const b = s.allocate();
    const arr = new (hostCtor(dtype))(data.length);
    for (let i = 0; i < data.length; i++) arr[i] = castScalar(data[i]!, dtype);
    device.write(b, arr);
    return s;
  }
}

function hostCtor(d: DType): new (n: number) => HostArray {
  switch (d) {
    case "float32":
    case "float16":
    case "bfloat16":
      return Float32Array;
    case "float64":
    case "int64":
      return Float64Array;
    case "int32":
      return Int32Array;
    case "int8":
      return Int8Array;
    default:
      return Uint8Array;
  }
}
