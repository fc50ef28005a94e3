// Finding a WebGPU implementation, adapter and device. In a page that is navigator.gpu; in Node
// it is the `webgpu` npm package (Dawn), loaded only on demand so the library still bundles for
// browsers. Options win over environment variables:
//   TORCHTS_WEBGPU_BACKEND   Dawn backend in Node: vulkan | opengles | opengl | metal | d3d12 | null
//   TORCHTS_WEBGPU_ADAPTER   Dawn adapter name substring in Node (lists adapters on mismatch)
//   TORCHTS_WEBGPU_POWER     low-power | high-performance
//   TORCHTS_WEBGPU_FEATURE_LEVEL  core | compatibility (opengles needs compatibility)
/// <reference types="@webgpu/types" />
import type { WebGPUOptions } from "./types.js";
export type { WebGPUOptions };

export interface GpuContext {
  gpu: GPU;
  adapter: GPUAdapter;
  device: GPUDevice;
  backend: string;
  hasF16: boolean;
  info: string;
}

function env(name: string): string | undefined {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> } };
  const v = g.process?.env?.[name];
  return v === "" ? undefined : v;
}

export function envNumber(name: string): number | undefined {
  const v = env(name);
  return v === undefined ? undefined : Number(v);
}

interface DawnModule {
  create(flags: string[]): GPU;
  globals: Record<string, unknown>;
}

async function loadDawn(): Promise<DawnModule | null> {
  const name = "webgpu"; // a variable, so bundlers leave this Node-only import alone
  try {
    return (await import(/* @vite-ignore */ name)) as DawnModule;
  } catch {
    return null;
  }
}

/** Each attempt: a backend flag and the adapter options it needs. */
function attempts(o: WebGPUOptions): { backend: string; featureLevel?: "core" | "compatibility" }[] {
  const backend = o.backend ?? env("TORCHTS_WEBGPU_BACKEND");
  const fl = o.featureLevel ?? (env("TORCHTS_WEBGPU_FEATURE_LEVEL") as "core" | "compatibility" | undefined);
  if (backend) return [{ backend, featureLevel: fl ?? (backend.startsWith("opengl") ? "compatibility" : undefined) }];
  // Dawn's default order (a real GPU via Vulkan/Metal/D3D), then Mesa's GLES (llvmpipe) as a last resort
  return [{ backend: "", featureLevel: fl }, { backend: "opengles", featureLevel: fl ?? "compatibility" }];
}

interface Candidate {
  gpu: GPU;
  backend: string;
  featureLevel?: "core" | "compatibility";
}

/** The GPU objects to ask for an adapter, in order, or the reason when there is no WebGPU at all. */
async function candidates(o: WebGPUOptions, errors: string[]): Promise<Candidate[] | string> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (o.gpu) return [{ gpu: o.gpu as GPU, backend: "given", featureLevel: o.featureLevel }];
  if (nav?.gpu) return [{ gpu: nav.gpu, backend: "navigator.gpu", featureLevel: o.featureLevel }];
  const dawn = await loadDawn();
  if (!dawn) return "no navigator.gpu and the `webgpu` npm package (Dawn for Node) is not installed";
  for (const k of ["GPUBufferUsage", "GPUMapMode", "GPUShaderStage"])
    if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = dawn.globals[k];
  const adapterName = o.adapterName ?? env("TORCHTS_WEBGPU_ADAPTER");
  const out: Candidate[] = [];
  for (const a of attempts(o)) {
    const flags = [...(o.dawnFlags ?? [])];
    if (a.backend) flags.push(`backend=${a.backend}`);
    if (adapterName) flags.push(`adapter=${adapterName}`);
    try {
      out.push({ gpu: dawn.create(flags), backend: a.backend || "default", featureLevel: a.featureLevel });
    } catch (e) {
      errors.push(`${a.backend || "default"}: ${(e as Error).message}`);
    }
  }
  return out;
}

function requestAdapter(c: Candidate, o: WebGPUOptions): Promise<GPUAdapter | null> {
  const power = o.powerPreference ?? (env("TORCHTS_WEBGPU_POWER") as GPUPowerPreference | undefined);
  const opts: GPURequestAdapterOptions & { featureLevel?: string } = {};
  if (power) opts.powerPreference = power;
  if (o.forceFallbackAdapter) opts.forceFallbackAdapter = true;
  if (c.featureLevel) opts.featureLevel = c.featureLevel;
  return c.gpu.requestAdapter(opts);
}

/**
 * The first candidate's adapter for which `use` succeeds, with `use`'s result; null and the
 * reasons every candidate failed otherwise.
 */
async function firstAdapter<T>(o: WebGPUOptions, use: (c: Candidate, adapter: GPUAdapter) => Promise<T>): Promise<{ value: T | null; reason: string }> {
  const errors: string[] = [];
  const cs = await candidates(o, errors);
  if (typeof cs === "string") return { value: null, reason: cs };
  for (const c of cs) {
    try {
      const adapter = await requestAdapter(c, o);
      if (adapter) return { value: await use(c, adapter), reason: "" };
      errors.push(`${c.backend}: no adapter`);
    } catch (e) {
      errors.push(`${c.backend}: ${(e as Error).message}`);
    }
  }
  return { value: null, reason: `no WebGPU adapter found (${errors.join("; ") || "none offered"})` };
}

/** Whether acquire(o) would find an adapter, without creating a device ("" reason when it would). */
export async function probe(o: WebGPUOptions): Promise<{ ok: boolean; reason: string }> {
  const r = await firstAdapter(o, async () => true);
  return { ok: r.value === true, reason: r.reason };
}

export async function acquire(o: WebGPUOptions): Promise<{ ctx: GpuContext | null; reason: string }> {
  const r = await firstAdapter(o, async (c, adapter): Promise<GpuContext> => {
    const hasF16 = (o.useF16 ?? true) && adapter.features.has("shader-f16");
    const lim = adapter.limits;
    const device = await adapter.requestDevice({
      requiredFeatures: hasF16 ? ["shader-f16"] : [],
      requiredLimits: {
        maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
        maxBufferSize: lim.maxBufferSize,
        maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize,
        maxComputeInvocationsPerWorkgroup: Math.max(256, Math.min(lim.maxComputeInvocationsPerWorkgroup, 1024)),
        maxComputeWorkgroupSizeX: Math.max(64, Math.min(lim.maxComputeWorkgroupSizeX, 256)),
        maxComputeWorkgroupSizeY: Math.max(16, Math.min(lim.maxComputeWorkgroupSizeY, 256)),
        maxStorageBuffersPerShaderStage: lim.maxStorageBuffersPerShaderStage,
      },
    });
    const i = adapter.info;
    const info = [i?.vendor, i?.architecture, i?.device, i?.description].filter((s) => s).join(" ") || "unknown adapter";
    return { gpu: c.gpu, adapter, device, backend: c.backend, hasF16, info };
  });
  return { ctx: r.value, reason: r.reason };
}
