// torch.webgpu: PyTorch-style device management for the WebGPU device.
//   if (await torch.webgpu.isAvailable()) {      // probes for an adapter (cached), registers nothing
//     await torch.webgpu.init();                 // creates the device, registers "webgpu"
//     const y = x.to("webgpu").matmul(w.to("webgpu"));
//     await y.data(); await y.cpuAsync();         // reads are async; sync .cpu() raises on webgpu
//   }
// Finding an adapter is asynchronous in WebGPU (navigator.gpu.requestAdapter), so unlike
// torch.cuda both isAvailable() and init() are awaited, and init() comes before tensors are
// created on the device.
import { getDevice, registerDevice } from "./device/plugin.js";
import { acquire, envNumber, probe } from "./device/webgpu/context.js";
import { WebGPUDevice } from "./device/webgpu/index.js";
import type { WebGPUOptions, WebGPUStats } from "./device/webgpu/types.js";
import { setCpuFallback, cpuFallbackEnabled } from "./device/webgpu/fallback.js";
import { PRIM_NAMES, type PrimName } from "./ir/prims.js";

export { setCpuFallback, cpuFallbackEnabled };
import { Storage } from "./runtime/storage.js";
import { realize } from "./runtime/dispatch.js";
import { forgetDevice } from "./runtime/scheduler.js";
import { Tensor } from "./tensor.js";
import { attach } from "./ops/core.js";
import { _dropScalarConstants as dropScalarConstants } from "./ops/math.js";
import { _toDevice as toDevice } from "./ops/shape_ops.js";

export type { WebGPUOptions, WebGPUStats };

let dev: WebGPUDevice | null = null;
let reason = "torch.webgpu.init() has not been called";
let pending: Promise<boolean> | null = null;
/** isAvailable()'s answers, per options (a given `gpu` object is not cached). */
const probes = new Map<string, Promise<{ ok: boolean; reason: string }>>();

function probeKey(o: WebGPUOptions): string | null {
  return o.gpu === undefined ? JSON.stringify(o, Object.keys(o).sort()) : null;
}

const HOW =
  "in a browser, use one with WebGPU enabled (navigator.gpu); in Node, install the `webgpu` npm package " +
  "and a GPU driver, or use Mesa's software renderer (EGL_PLATFORM=surfaceless TORCHTS_WEBGPU_BACKEND=opengles). " +
  "Check first with `await torch.webgpu.isAvailable()`.";

/**
 * Create the WebGPU device and register it as "webgpu"; resolves true. Throws an Error saying why
 * and how to get one when there is no adapter (test first with `await isAvailable()`).
 */
export function init(options: WebGPUOptions = {}): Promise<boolean> {
  if (dev) return Promise.resolve(true);
  pending ??= (async () => {
    const { ctx, reason: why } = await acquire(options);
    if (!ctx) {
      reason = why;
      pending = null;
      const key = probeKey(options);
      if (key !== null) probes.set(key, Promise.resolve({ ok: false, reason: why }));
      const detail = why.replace(/^no WebGPU adapter found \((.*)\)$/s, "$1");
      throw new Error(`webgpu: no WebGPU adapter is available (${detail}). To get one: ${HOW}`);
    }
    const mb = (n: number | undefined) => (n === undefined ? undefined : n * 1024 * 1024);
    const limit = options.memoryLimitBytes ?? mb(envNumber("TORCHTS_WEBGPU_MEMORY_MB")) ?? Infinity;
    const cap = options.poolCapBytes ?? mb(envNumber("TORCHTS_WEBGPU_POOL_MB")) ?? 256 * 1024 * 1024;
    dev = new WebGPUDevice(ctx, limit, cap);
    const g = globalThis as { process?: { env?: Record<string, string | undefined> } };
    const off = g.process?.env?.TORCHTS_WEBGPU_DISABLE_PRIMS;
    if (off) setDisabledPrimitives(off.split(",") as PrimName[]);
    await persistShaders(dev);
    registerDevice("webgpu", dev);
    reason = "";
    return true;
  })();
  return pending;
}

/** WGSL sources are written to $TORCHTS_WEBGPU_SHADER_DIR (Node) for inspection and offline compilation. */
async function persistShaders(d: WebGPUDevice): Promise<void> {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> } };
  const dir = g.process?.env?.TORCHTS_WEBGPU_SHADER_DIR;
  if (!dir) return;
  const fsName = "node:fs";
  const fs = (await import(/* @vite-ignore */ fsName)) as typeof import("node:fs");
  fs.mkdirSync(dir, { recursive: true });
  d.onShader = (src) => {
    let h = 2166136261;
    for (let i = 0; i < src.length; i++) h = Math.imul(h ^ src.charCodeAt(i), 16777619);
    fs.writeFileSync(`${dir}/${(h >>> 0).toString(16).padStart(8, "0")}.wgsl`, src);
  };
}

/**
 * Whether a WebGPU adapter can be found (with these init() options), like
 * `navigator.gpu.requestAdapter()`: asynchronous, so `await torch.webgpu.isAvailable()`. Probes
 * once and caches the answer; creates no device and registers nothing (init() does). True while
 * the device exists.
 */
export async function isAvailable(options: WebGPUOptions = {}): Promise<boolean> {
  if (dev) return true;
  const key = probeKey(options);
  let p = key === null ? undefined : probes.get(key);
  if (!p) {
    p = probe(options);
    if (key !== null) probes.set(key, p);
  }
  const r = await p;
  if (!dev && !r.ok) reason = r.reason;
  return r.ok;
}

/** Whether init() has created the device (and shutdown() has not destroyed it); like torch.cuda.is_initialized(). */
export function isInitialized(): boolean {
  return dev !== null;
}

/** Why the device is not there: why isAvailable() is false or init() failed ("" once init() succeeded). */
export function unavailableReason(): string {
  return reason;
}

function need(): WebGPUDevice {
  if (!dev) throw new Error(`webgpu is not available: ${reason}`);
  return dev;
}

/** Wait for all submitted work; raises errors the GPU reported asynchronously. */
export async function synchronize(): Promise<void> {
  await need().synchronize();
}

export function memoryStats(): WebGPUStats {
  return need().stats();
}

/** Release the pooled (free) buffers back to the GPU. */
export function emptyCache(): void {
  const d = need();
  d.pool.emptyPool();
  d.flush();
  d.pool.afterSubmit();
}

/** Bytes of device memory torchts may hold (live + pooled); allocations past it raise OutOfMemoryError. */
export function setMemoryLimit(bytes: number): void {
  need().pool.s.limitBytes = bytes;
}

export function getDeviceInfo(): { backend: string; adapter: string; shaderF16: boolean } {
  const d = need();
  return { backend: d.ctx.backend, adapter: d.ctx.info, shaderF16: d.ctx.hasF16 };
}

/**
 * Mark primitives as missing on webgpu (they raise NotImplementedError, or run on cpu with
 * torch.setCpuFallback(true)). For testing the fallback and for working around a device bug.
 */
export function setDisabledPrimitives(prims: PrimName[]): void {
  for (const p of prims) if (!PRIM_NAMES.includes(p)) throw new TypeError(`setDisabledPrimitives: unknown primitive '${p}'`);
  need().disabled = new Set(prims);
}

/**
 * Destroy the device (and drop Dawn's handle so a Node process can exit). Tensors on it become
 * unusable; init() may be called again for a new device.
 */
export function shutdown(): void {
  if (!dev) return;
  dev.destroy();
  dev = null;
  pending = null; // a later init() finds an adapter again and makes a new device
  // nothing compiled for or allocated on the old device may serve the next one
  forgetDevice("webgpu");
  dropScalarConstants("webgpu");
  reason = "torch.webgpu.shutdown() was called";
}

/** Copy a tensor to another device, awaiting the host read when the source is not host-visible (differentiable). */
export async function toAsync(x: Tensor, device: string): Promise<Tensor> {
  const target = device.split(":")[0]!;
  if (x.device === target) return x;
  const src = x._storage.device;
  if (src.readSync) return toDevice(x, device);
  realize(x._storage);
  const host = await x.data();
  const out = new Tensor(Storage.fromHost(getDevice(target), x.dtype, host), x.shape);
  const from = x.device;
  return attach(out, "ToCopyBackward0", [x], [], ([g]) => [toDevice(g!, from)]);
}

declare module "./tensor.js" {
  interface Tensor {
    /** Async .to(device): works from every device (webgpu reads are asynchronous). */
    toAsync(device: string): Promise<Tensor>;
    /** Async .cpu(). */
    cpuAsync(): Promise<Tensor>;
  }
}
Tensor.prototype.toAsync = function (this: Tensor, device: string) {
  return toAsync(this, device);
};
Tensor.prototype.cpuAsync = function (this: Tensor) {
  return toAsync(this, "cpu");
};
