// The webgpu device. Buffers come from a size-bucketed pool; dispatches are recorded into one
// command encoder and submitted in batches (on a host read/write, synchronize, or when the batch
// is full); host reads are async (mapAsync). Every dtype is stored as 32-bit words (dtypes.ts
// states the int64/float64 policy). Errors the GPU reports asynchronously (validation, out of
// memory, debug-mode checks) are raised by the next synchronize() or read().
/// <reference types="@webgpu/types" />
import type { DType, HostArray } from "../../ir/dtype.js";
import { hostArray, isFloating } from "../../ir/dtype.js";
import { cpu, CpuBuffer } from "../cpu/index.js";
import { cpuFallbackEnabled, NotImplementedError, warnFallback } from "./fallback.js";
import { PRIM_NAMES, type CompositeName, type IRGraph, type IRNode, type PrimName } from "../../ir/prims.js";
import { fusionDevices, isFused } from "../../runtime/fused_graph.js";
import { currentOpName, getEagerMode, isAnomalyEnabled } from "../../runtime/mode.js";
import type { DeviceBuffer, DevicePlugin, Executable, KernelArg } from "../plugin.js";
import type { Pass } from "./codegen.js";
import { planFused, planSingle, type Plan, type Ref, type Step } from "./plan.js";
import type { GpuContext } from "./context.js";
import { fromDeviceWords, toDeviceWords } from "./dtypes.js";
import { BufferPool } from "./pool.js";
import { fmtBytes, sizeError } from "../../runtime/errors.js";
import type { WebGPUStats } from "./types.js";
import { shaderSource, UNIFORM_BYTES, uniformWords } from "./shader.js";

export class WebGPUBuffer implements DeviceBuffer {
  constructor(
    public gpu: GPUBuffer | null,
    public readonly bytes: number,
    public readonly dtype: DType,
  ) {}
}

const SLOTS = 128; // dispatches per submitted batch (each has a 256-byte uniform slot)
const SLOT_BYTES = 256;
const SLOT_WORDS = SLOT_BYTES / 4;

interface Compiled {
  pass: Pass;
  pipeline: GPUComputePipeline;
  layout: GPUBindGroupLayout;
  src: string;
}

export class WebGPUDevice implements DevicePlugin {
  readonly name = "webgpu";
  /** Primitives switched off (TORCHTS_WEBGPU_DISABLE_PRIMS, or torch.webgpu.setDisabledPrimitives): they are
   * "missing" on the device, so they raise, or run on cpu when torch.setCpuFallback(true). */
  disabled = new Set<PrimName>();
  get primitives(): ReadonlySet<PrimName> {
    return new Set(PRIM_NAMES.filter((p) => !this.disabled.has(p)));
  }
  readonly overrides: ReadonlySet<CompositeName> = new Set<CompositeName>(["pagedAttention"]);
  readonly pool: BufferPool;
  private pipelines = new Map<string, GPUComputePipeline>();
  private layouts = new Map<number, GPUBindGroupLayout>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private uniform: GPUBuffer;
  private words = new Uint32Array(SLOTS * SLOT_WORDS);
  private slot = 0;
  private errors: string[] = [];
  private checks: Promise<void>[] = [];
  private lostReason: string | null = null;
  dispatches = 0;
  submits = 0;
  /** Called with each new shader's source (used to persist WGSL on disk). */
  onShader: ((src: string) => void) | null = null;

  constructor(
    readonly ctx: GpuContext,
    limitBytes: number,
    poolCapBytes: number,
  ) {
    const dev = ctx.device;
    // a tensor's buffer is bound whole as a storage buffer: both limits apply
    this.pool = new BufferPool(dev, limitBytes, poolCapBytes, Math.min(dev.limits.maxBufferSize || Infinity, dev.limits.maxStorageBufferBindingSize));
    this.uniform = dev.createBuffer({ size: SLOTS * SLOT_BYTES, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    dev.addEventListener("uncapturederror", (ev) => {
      this.errors.push(`webgpu: ${(ev as GPUUncapturedErrorEvent).error.message}`);
    });
    fusionDevices.add(this);
    void dev.lost.then((info) => {
      this.lostReason = `webgpu: the device was lost (${info.reason}): ${info.message}`;
    });
  }

  private alive(): void {
    if (this.lostReason) throw new Error(this.lostReason);
  }

  checkSize(_dtype: DType, numel: number): void {
    const bytes = numel * 4;
    if (!(numel >= 0 && Number.isInteger(numel)) || bytes > this.pool.maxBuffer)
      throw sizeError("webgpu", bytes, "bytes", 1, `the adapter's largest storage buffer (maxBufferSize, maxStorageBufferBindingSize) is ${fmtBytes(this.pool.maxBuffer)}`);
  }

  allocate(dtype: DType, numel: number): DeviceBuffer {
    this.alive();
    if (!(numel >= 0 && Number.isInteger(numel))) throw sizeError("webgpu", numel, "elements", 4, "");
    return new WebGPUBuffer(this.pool.acquire(numel * 4), numel * 4, dtype);
  }

  write(buf: DeviceBuffer, data: HostArray): void {
    this.alive();
    const b = buf as WebGPUBuffer;
    const words = toDeviceWords(data, b.dtype);
    if (!words.length) return;
    this.flush(); // the buffer may be a recycled one still read by recorded dispatches
    const gpu = b.gpu!;
    const copy = this.draining ? words.slice() : words;
    this.enqueue(() => this.ctx.device.queue.writeBuffer(gpu, 0, copy.buffer, copy.byteOffset, copy.byteLength));
  }

  writeRows(dst: DeviceBuffer, src: DeviceBuffer, srcOffset: number, rowElems: number, rows: ArrayLike<number>): void {
    this.alive();
    if (!rows.length || !rowElems) return;
    this.flush(); // ordered after the dispatches recorded so far
    const [d, s] = [(dst as WebGPUBuffer).gpu!, (src as WebGPUBuffer).gpu!];
    const at = Array.from(rows);
    this.enqueue(() => {
      const enc = this.ctx.device.createCommandEncoder();
      at.forEach((r, i) => enc.copyBufferToBuffer(s, (srcOffset + i * rowElems) * 4, d, r * rowElems * 4, rowElems * 4));
      this.ctx.device.queue.submit([enc.finish()]);
    });
  }

  async read(buf: DeviceBuffer, dtype: DType, numel: number): Promise<HostArray> {
    this.alive();
    const b = buf as WebGPUBuffer;
    if (numel === 0) return fromDeviceWords(new ArrayBuffer(0), dtype, 0);
    this.flush();
    await this.drained();
    const dev = this.ctx.device;
    const staging = dev.createBuffer({ size: numel * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = dev.createCommandEncoder();
    enc.copyBufferToBuffer(b.gpu!, 0, staging, 0, numel * 4);
    dev.queue.submit([enc.finish()]);
    try {
      await staging.mapAsync(GPUMapMode.READ);
      const words = staging.getMappedRange().slice(0);
      staging.unmap();
      await this.raisePending();
      return fromDeviceWords(words, dtype, numel);
    } finally {
      staging.destroy();
    }
  }

  free(buf: DeviceBuffer): void {
    const b = buf as WebGPUBuffer;
    if (!b.gpu) return;
    this.pool.release(b.gpu);
    b.gpu = null;
  }

  /** One node, or a fused graph (FusedGraph from the scheduler; `source` is a disk-cached copy of our WGSL, unused: regenerating is cheap). */
  compile(graph: IRGraph, _source?: string): Executable & { source?: string } {
    this.alive();
    if (!isFused(graph) && graph.nodes.length === 1) {
      // cached executables outlive setDisabledPrimitives: a single node decides per run
      const node = graph.nodes[0]!;
      let real: Executable | null = null;
      return {
        run: (inputs, outputs, scalars) => {
          if (this.disabled.size && this.disabled.has(node.prim)) this.fallback(node, inputs, outputs, scalars);
          else (real ??= this.compileReal(graph)).run(inputs, outputs, scalars);
        },
      };
    }
    return this.compileReal(graph);
  }

  private compileReal(graph: IRGraph): Executable & { source?: string } {
    const plan: Plan = isFused(graph) ? planFused(graph) : planSingle(graph);
    const steps = plan.steps.map((st) => ({ ...st, c: st.passes.map((p) => this.pipelineFor(p)) }));
    const source = steps.flatMap((st) => st.c.map((c) => c.src)).join("\n// ----\n");
    return {
      source,
      run: (inputs, outputs, scalars) => this.runPlan(plan, steps, inputs, outputs, scalars),
    };
  }

  private pipelineFor(pass: Pass): Compiled {
    const src = shaderSource(pass, this.ctx.hasF16);
    const layout = this.layoutFor(pass.outTypes?.length ?? 1, pass.inTypes.length);
    let pipeline = this.pipelines.get(src);
    if (!pipeline) {
      const dev = this.ctx.device;
      const module = dev.createShaderModule({ code: src });
      pipeline = dev.createComputePipeline({
        layout: dev.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint: "main" },
      });
      this.pipelines.set(src, pipeline);
      this.onShader?.(src);
    }
    return { pass, pipeline, layout, src };
  }

  private layoutFor(nOut: number, nIn: number): GPUBindGroupLayout {
    const key = nOut * 64 + nIn;
    let l = this.layouts.get(key);
    if (!l) {
      const entries: GPUBindGroupLayoutEntry[] = [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform" } }];
      for (let q = 0; q < nOut; q++) entries.push({ binding: q + 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: "storage" } });
      for (let k = 0; k < nIn; k++)
        entries.push({ binding: k + 1 + nOut, visibility: GPUShaderStage.COMPUTE, buffer: { type: "read-only-storage" } });
      l = this.ctx.device.createBindGroupLayout({ entries });
      this.layouts.set(key, l);
    }
    return l;
  }

  private runPlan(
    plan: Plan,
    steps: (Step & { c: Compiled[] })[],
    inputs: KernelArg[],
    outputs: DeviceBuffer[],
    scalars: readonly number[],
  ): void {
    this.alive();
    const temps = plan.temps.map((n) => this.pool.acquire(n * 4));
    const buf = (r: Ref): GPUBuffer =>
      "ext" in r ? (inputs[r.ext]!.buf as WebGPUBuffer).gpu! : "out" in r ? (outputs[r.out] as WebGPUBuffer).gpu! : temps[r.tmp]!;
    const offset = (r: Ref): number => ("ext" in r ? inputs[r.ext]!.offset : 0);
    const debug = getEagerMode() === "debug";
    if (debug) {
      this.flush();
      this.ctx.device.pushErrorScope("validation");
      this.ctx.device.pushErrorScope("out-of-memory");
    }
    for (const st of steps) {
      st.check?.(scalars);
      const offsets = st.ins.map(offset);
      for (const c of st.c) {
        if (c.pass.threads === 0) continue;
        if (this.slot === SLOTS) this.flush();
        if (!this.pass) {
          this.encoder = this.ctx.device.createCommandEncoder();
          this.pass = this.encoder.beginComputePass();
        }
        const s = this.slot++;
        const grid = uniformWords(c.pass, offsets, scalars, this.words.subarray(s * SLOT_WORDS, s * SLOT_WORDS + UNIFORM_BYTES / 4));
        const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: this.uniform, offset: s * SLOT_BYTES, size: UNIFORM_BYTES } }];
        st.outs.forEach((r, q) => entries.push({ binding: q + 1, resource: { buffer: buf(r) } }));
        c.pass.bind.forEach((k, j) => entries.push({ binding: j + 1 + st.outs.length, resource: { buffer: buf(st.ins[k]!) } }));
        this.pass.setPipeline(c.pipeline);
        this.pass.setBindGroup(0, this.ctx.device.createBindGroup({ layout: c.layout, entries }));
        this.pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
        this.dispatches++;
      }
    }
    for (const t of temps) this.pool.release(t); // reusable by later dispatches: the queue keeps their order
    if (debug) this.debugCheck(plan.node, outputs[0] as WebGPUBuffer);
  }

  /** Debug mode: submit now, then (asynchronously) await the GPU and check errors and the output. */
  private debugCheck(node: IRNode, out: WebGPUBuffer): void {
    this.flush();
    const dev = this.ctx.device;
    const op = currentOpName() ?? node.prim;
    const oom = dev.popErrorScope();
    const val = dev.popErrorScope();
    const anomaly = isAnomalyEnabled() && isFloating(node.out.dtype);
    const n = node.out.shape.reduce((a, b) => a * b, 1);
    const check = (async () => {
      const [e1, e2] = await Promise.all([oom, val]);
      for (const e of [e1, e2]) if (e) this.errors.push(`webgpu (debug): ${op} failed on the device: ${e.message}`);
      await dev.queue.onSubmittedWorkDone();
      if (anomaly && out.gpu) {
        const data = await this.readRaw(out.gpu, n);
        for (let i = 0; i < n; i++)
          if (!Number.isFinite(data[i]!)) {
            this.errors.push(`Function '${op}' returned ${data[i] !== data[i] ? "nan" : "inf"} values in its output (element ${i}) on webgpu`);
            break;
          }
      }
    })();
    this.checks.push(check.catch((e: Error) => void this.errors.push(`webgpu (debug): ${op}: ${e.message}`)));
  }

  /** A missing primitive: raise, or (opted in) run it on cpu once its inputs' host copies arrive. */
  private fallback(node: IRNode, inputs: KernelArg[], outputs: DeviceBuffer[], scalars: readonly number[]): void {
    const op = currentOpName() ?? node.prim;
    if (!cpuFallbackEnabled())
      throw new NotImplementedError(
        `The operator '${op}' (primitive '${node.prim}') is not currently implemented for the webgpu device. ` +
          `Call torch.setCpuFallback(true) to run it on the cpu instead (slower: its data makes a round trip to the host).`,
      );
    warnFallback(op);
    this.flush();
    const dev = this.ctx.device;
    const bufs = inputs.map((a) => a.buf as WebGPUBuffer);
    const staging = bufs.map((b) => dev.createBuffer({ size: Math.max(4, b.bytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }));
    this.enqueue(() => {
      const enc = dev.createCommandEncoder();
      bufs.forEach((b, k) => b.bytes && enc.copyBufferToBuffer(b.gpu!, 0, staging[k]!, 0, b.bytes));
      dev.queue.submit([enc.finish()]);
    });
    const out = outputs[0] as WebGPUBuffer;
    const gpuOut = out.gpu!;
    this.enqueue(async () => {
      try {
        await Promise.all(staging.map((s) => s.mapAsync(GPUMapMode.READ)));
        const host = bufs.map((b, k) => new CpuBuffer(fromDeviceWords(staging[k]!.getMappedRange().slice(0), b.dtype, b.bytes / 4), b.bytes));
        const n = node.out.shape.reduce((x, y) => x * y, 1);
        const res = new CpuBuffer(hostArray(node.out.dtype, n), n * 4);
        cpu.compile({ nodes: [node] }).run(host.map((h, k) => ({ buf: h, offset: inputs[k]!.offset })), [res], scalars);
        const words = toDeviceWords(res.data, node.out.dtype);
        if (words.length) dev.queue.writeBuffer(gpuOut, 0, words.buffer, words.byteOffset, words.byteLength);
      } finally {
        for (const s of staging) s.destroy();
      }
    });
  }

  private async readRaw(gpu: GPUBuffer, n: number): Promise<Float32Array> {
    await this.drained();
    const dev = this.ctx.device;
    const staging = dev.createBuffer({ size: Math.max(4, n * 4), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = dev.createCommandEncoder();
    enc.copyBufferToBuffer(gpu, 0, staging, 0, n * 4);
    dev.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const r = new Float32Array(staging.getMappedRange().slice(0));
    staging.destroy();
    return r;
  }

  /** Submit the recorded dispatches (after any cpu-fallback work queued before them). */
  flush(): void {
    if (!this.pass) return;
    this.pass.end();
    const cb = this.encoder!.finish();
    const words = this.words.slice(0, this.slot * SLOT_WORDS);
    const dead = this.pool.takeDead();
    this.submits++;
    this.pass = null;
    this.encoder = null;
    this.slot = 0;
    this.enqueue(() => {
      const q = this.ctx.device.queue;
      q.writeBuffer(this.uniform, 0, words.buffer, 0, words.byteLength);
      q.submit([cb]);
      for (const b of dead) b.destroy();
    });
  }

  // Queue work in order behind asynchronous cpu-fallback steps: while one is in flight (it waits for
  // its inputs' host copies), submits and uploads wait in `queued` so the GPU sees them after its result.
  private queued: (() => void | Promise<void>)[] = [];
  private draining: Promise<void> | null = null;

  private enqueue(op: () => void | Promise<void>): void {
    if (this.draining) {
      this.queued.push(op);
      return;
    }
    const r = op();
    if (r instanceof Promise) this.draining = this.drain(r);
  }

  private async drain(first: Promise<void>): Promise<void> {
    const run = async (p: void | Promise<void>) => {
      try {
        await p;
      } catch (e) {
        this.errors.push(`webgpu: ${(e as Error).message}`);
      }
    };
    await run(first);
    while (this.queued.length) await run(this.queued.shift()!());
    this.draining = null;
  }

  /** Wait until queued fallback work and everything behind it has been handed to the GPU. */
  async drained(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async raisePending(): Promise<void> {
    if (this.checks.length) {
      const c = this.checks;
      this.checks = [];
      await Promise.all(c);
    }
    if (this.errors.length) {
      const e = this.errors;
      this.errors = [];
      throw new Error(e.join("\n"));
    }
    this.alive();
  }

  async synchronize(): Promise<void> {
    this.flush();
    await this.drained();
    await this.ctx.device.queue.onSubmittedWorkDone();
    await this.raisePending();
  }

  stats(): WebGPUStats {
    return { ...this.pool.s, pipelines: this.pipelines.size, dispatches: this.dispatches, submits: this.submits };
  }

  destroy(): void {
    this.flush();
    this.queued = [];
    this.pool.emptyPool();
    this.pool.afterSubmit();
    this.ctx.device.destroy();
  }
}

