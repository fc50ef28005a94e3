// torch.profiler: per-kernel wall time while a profile is active, exported as a Chrome trace.
import { writeFileSync } from "node:fs";
import type { DeviceBuffer, Executable, KernelArg } from "../device/plugin.js";
import type { IRNode } from "../ir/prims.js";

export interface KernelEvent {
  name: string;
  ts: number; // microseconds since the profile started
  dur: number;
}

let active: Profile | null = null;

export class Profile {
  readonly events: KernelEvent[] = [];
  /** Name single-op kernels with their input shapes/strides/dtypes (PyTorch's record_shapes). */
  recordShapes = false;
  private readonly t0 = performance.now();
  private prev: Profile | null = null;
  start(): this {
    this.prev = active;
    active = this;
    return this;
  }
  stop(): void {
    if (active === this) active = this.prev;
  }
  record(name: string, start: number, end: number): void {
    this.events.push({ name, ts: (start - this.t0) * 1000, dur: (end - start) * 1000 });
  }
  /** Per-kernel totals, slowest first. */
  keyAverages(): { name: string; count: number; totalMs: number }[] {
    const m = new Map<string, { name: string; count: number; totalMs: number }>();
    for (const e of this.events) {
      const r = m.get(e.name) ?? { name: e.name, count: 0, totalMs: 0 };
      r.count++;
      r.totalMs += e.dur / 1000;
      m.set(e.name, r);
    }
    return [...m.values()].sort((a, b) => b.totalMs - a.totalMs);
  }
  /** Chrome trace JSON (chrome://tracing, Perfetto). */
  chromeTrace(): string {
    return JSON.stringify({
      traceEvents: this.events.map((e) => ({ name: e.name, cat: "kernel", ph: "X", ts: e.ts, dur: e.dur, pid: 0, tid: 0 })),
    });
  }
  exportChromeTrace(path: string): void {
    writeFileSync(path, this.chromeTrace());
  }
  [Symbol.dispose](): void {
    this.stop();
  }
}

/** torch.profiler.profile(): starts recording now; stop() (or `using`) ends it. */
export function profile(opts: { recordShapes?: boolean } = {}): Profile {
  const p = new Profile();
  p.recordShapes = opts.recordShapes ?? false;
  return p.start();
}

/**
 * Runs one kernel: the eager, fused and compiled paths all call this. While a profile records it
 * is timed (and named with `node`'s params and shapes under recordShapes); otherwise it is a plain
 * call, with no closure or timestamp on the per-op path.
 */
export function runKernel(name: string, exe: Executable, ins: KernelArg[], outs: DeviceBuffer[], scalars: readonly number[], node?: IRNode): void {
  if (!active) return exe.run(ins, outs, scalars);
  const t = performance.now();
  exe.run(ins, outs, scalars);
  active.record(active.recordShapes && node ? `${name} ${shapesOf(node)}` : name, t, performance.now());
}

/** How the profiler names a node under recordShapes: params, input views and output. */
function shapesOf(n: IRNode): string {
  const ins = n.inputs.map((v) => `${v.dtype}[${v.shape.join(",")}]{${v.strides.join(",")}}`).join(" ");
  return `${JSON.stringify(n.params)} ${ins} -> ${n.out.dtype}[${n.out.shape.join(",")}]`;
}
