// torch.profiler: per-kernel wall time while a profile is active, exported as a Chrome trace.
import { writeFileSync } from "node:fs";

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

/** Whether a profile is recording (callers skip building profileKernel's closures when not). */
export function profiling(): boolean {
  return active !== null;
}

export function profileKernel(name: string, run: () => void, shapes?: () => string): void {
  if (!active) return run();
  const t = performance.now();
  run();
  active.record(active.recordShapes && shapes ? `${name} ${shapes()}` : name, t, performance.now());
}
