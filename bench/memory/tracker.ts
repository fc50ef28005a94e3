// Records every block of the cpu device's wasm arena (who asked for it, when, and when its
// contents were last touched) so that memory.ts can say, for the moment the arena reached its
// peak, which bytes were needed, which were held dead, which were free and why the arena was
// not smaller. Install before anything allocates: it wraps the arena instance and the cpu
// plugin's methods in place (a benchmark-only patch; nothing in the library knows about it).
//
// Clock: one tick per allocation, release or use, so "at the peak" is an exact event.
// A block is
//   - a storage block (a tensor's memory, allocated through cpu.allocate): live for the
//     allocator from alloc to release, *needed* from alloc to the last kernel or host access
//     that touched it (its value is never read again after that, whoever holds it);
//   - a scratch block (kernel staging, packed GEMM panels, argument arrays): needed from alloc
//     to release.
import v8 from "node:v8";
import vm from "node:vm";
import { cpu, type CpuBuffer } from "../../packages/torchts/src/device/cpu/index.js";
import { wasmRuntime } from "../../packages/torchts/src/device/cpu/wasm/runtime.js";
import { currentOpName } from "../../packages/torchts/src/runtime/mode.js";
import type { Arena } from "../../packages/torchts/src/device/cpu/wasm/arena.js";
import type { DeviceBuffer, Executable, KernelArg } from "../../packages/torchts/src/device/plugin.js";

interface Block {
  ptr: number;
  /** bytes the block takes in the arena (after size-class rounding) */
  size: number;
  /** bytes the caller asked for */
  bytes: number;
  storage: boolean;
  t0: number;
  /** release time (Infinity while allocated) */
  t1: number;
  /** last time a kernel or the host read or wrote it (storage blocks) */
  last: number;
  /** the public op that allocated it */
  op: string;
}

export interface Snapshot {
  /** arena reservation (the wasm memory's size): the arena's peak, since wasm memory never shrinks */
  reserved: number;
  /** end of the highest block ever handed out */
  top: number;
  /** the moment top reached its maximum */
  tPeak: number;
  /** at tPeak: bytes of allocated blocks (class sizes), what their callers asked, what was needed */
  allocatedAtPeak: number;
  requestedAtPeak: number;
  neededAtPeak: number;
  storageRequestedAtPeak: number;
  storageNeededAtPeak: number;
  scratchAtPeak: number;
  /** maxima over the whole run: allocated (asked-for bytes of allocated blocks) and needed */
  maxRequested: number;
  maxNeeded: number;
  /** storage blocks allocated at tPeak whose value was never touched again (held dead) */
  deadHeldAtPeak: number;
  /** free blocks below top at tPeak (freed, not reused): top - base - allocated */
  freeAtPeak: number;
  /** class rounding of the blocks allocated at tPeak */
  roundingAtPeak: number;
  base: number;
  blocks: number;
  /** dead-held storage bytes at tPeak by the public op that allocated them (largest first) */
  deadByOp: [string, number][];
  growth: { bytes: number; freeLists: [number, number][] };
  /** the phase (ArenaTracker.mark) the peak fell in */
  phase: string;
  /** per phase (ArenaTracker.mark), the most bytes requested by live blocks during it */
  phasePeaks: [string, number][];
}

/** The arena's free lists as (class size, count), largest total first (reads its private map). */
function freeHistogram(arena: Arena): [number, number][] {
  const free = (arena as unknown as { freeAt?: Map<number, number> }).freeAt;
  if (!(free instanceof Map)) return [];
  const bySize = new Map<number, number>();
  for (const n of free.values()) bySize.set(n, (bySize.get(n) ?? 0) + 1);
  return [...bySize].sort((a, b) => b[0] * b[1] - a[0] * a[1]).slice(0, 8);
}

export class ArenaTracker {
  private clock = 0;
  private readonly live = new Map<number, Block>();
  private readonly all: Block[] = [];
  private inAllocate = 0;
  private maxTop = 0;
  private tPeak = 0;
  /** the request that last grew the arena, and the free lists it found (class size -> blocks) */
  private growth: { bytes: number; freeLists: [number, number][] } = { bytes: 0, freeLists: [] };
  readonly arena: Arena;
  readonly base: number;

  constructor() {
    const rt = wasmRuntime();
    if (!rt) throw new Error("bench/memory: the wasm backend is off (TORCHTS_CPU_BACKEND=js): there is no arena to measure");
    const arena = (this.arena = rt.arena);
        this.base = this.maxTop = arena.highWater;
    const alloc = arena.alloc.bind(arena);
    const release = arena.release.bind(arena);
    arena.alloc = (bytes: number) => {
      const ptr = alloc(bytes);
      const size = arena.blockBytes(ptr)!;
      const b: Block = { ptr, size, bytes, storage: this.inAllocate > 0, t0: ++this.clock, t1: Infinity, last: this.clock, op: currentOpName() ?? "-" };
      this.live.set(ptr, b);
      this.all.push(b);
      if (arena.highWater > this.maxTop) {
        this.maxTop = arena.highWater;
        this.tPeak = this.clock;
        this.growth = { bytes, freeLists: freeHistogram(arena) };
      }
      return ptr;
    };
    arena.release = (ptr: number) => {
      const b = this.live.get(ptr);
      const ok = release(ptr);
      if (ok && b) {
        b.t1 = ++this.clock;
        this.live.delete(ptr);
      }
      return ok;
    };
    const allocate = cpu.allocate.bind(cpu);
    cpu.allocate = (dtype, numel) => {
      this.inAllocate++;
      try {
        return allocate(dtype, numel);
      } finally {
        this.inAllocate--;
      }
    };
    const touch = (buf: DeviceBuffer) => {
      const blk = (buf as CpuBuffer).block;
      const b = blk && this.live.get(blk.ptr);
      if (b) b.last = ++this.clock;
    };
    const compile = cpu.compile.bind(cpu);
    (cpu as { compile: typeof cpu.compile }).compile = (...args: Parameters<typeof cpu.compile>): Executable => {
      const exe = compile(...args);
      const run = exe.run.bind(exe);
      exe.run = (inputs: KernelArg[], outputs: DeviceBuffer[], scalars: readonly number[]) => {
        for (const a of inputs) touch(a.buf);
        for (const o of outputs) touch(o);
        run(inputs, outputs, scalars);
        // read and written by this kernel: needed at least until it ends
        for (const a of inputs) touch(a.buf);
        for (const o of outputs) touch(o);
      };
      return exe;
    };
    const c = cpu as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const name of ["read", "readSync", "write", "writeRows"]) {
      const f = c[name];
      if (typeof f !== "function") continue;
      const g = f.bind(cpu);
      c[name] = (...a: unknown[]) => {
        touch(a[0] as DeviceBuffer);
        if (name === "writeRows") touch(a[1] as DeviceBuffer);
        return g(...a);
      };
    }
  }

  /**
   * End of the measured run: collect garbage, let the finalizers free what it held, and count
   * every storage still allocated as needed until now (weights, optimizer state, a KV cache:
   * what outlives the run would otherwise look dead after its last use in the run).
   */
  async finish(): Promise<void> {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 50));
    }
    const t = ++this.clock;
    for (const b of this.live.values()) if (b.storage) b.last = t;
  }

  private readonly marks: [string, number][] = [];
  /** Names the run's phase from now on (the snapshot says in which one the peak fell). */
  mark(label: string): void {
    this.marks.push([label, ++this.clock]);
  }

  snapshot(): Snapshot {
    const t = this.tPeak;
    const deadOps = new Map<string, number>();
    let requested = 0, needed = 0, sReq = 0, sNeed = 0, scratch = 0, dead = 0, rounding = 0, allocated = 0;
    for (const b of this.all) {
      if (b.t0 > t || b.t1 <= t) continue;
      allocated += b.size;
      requested += b.bytes;
      rounding += b.size - b.bytes;
      if (!b.storage) {
        scratch += b.bytes;
        needed += b.bytes;
        continue;
      }
      sReq += b.bytes;
      if (b.last >= t) {
        needed += b.bytes;
        sNeed += b.bytes;
      } else {
        dead += b.bytes;
        // (no WeakRef to the owning storage is kept: one would keep it alive until the end of the job)
        const k = `${b.op} (${b.t1 === Infinity ? "still held at the end" : b.size >= 1 << 20 ? `${(b.bytes / 2 ** 20).toFixed(1)} MiB blocks` : "small blocks"})`;
        deadOps.set(k, (deadOps.get(k) ?? 0) + b.bytes);
      }
    }
    // sweeps over the whole run: +bytes at t0, -bytes after the end of the interval
    const sweep = (end: (b: Block) => number) => {
      const ev: [number, number][] = [];
      for (const b of this.all) {
        ev.push([b.t0, b.bytes]);
        const e = end(b);
        if (e !== Infinity) ev.push([e + 0.5, -b.bytes]);
      }
      ev.sort((x, y) => x[0] - y[0]);
      let cur = 0, max = 0;
      for (const [, d] of ev) max = Math.max(max, (cur += d));
      return max;
    };
    return {
      reserved: this.arena.reservedBytes,
      top: this.maxTop,
      tPeak: t,
      allocatedAtPeak: allocated,
      requestedAtPeak: requested,
      neededAtPeak: needed,
      storageRequestedAtPeak: sReq,
      storageNeededAtPeak: sNeed,
      scratchAtPeak: scratch,
      maxRequested: sweep((b) => b.t1),
      maxNeeded: sweep((b) => (b.storage ? Math.min(b.last, b.t1) : b.t1)),
      deadHeldAtPeak: dead,
      freeAtPeak: this.maxTop - this.base - allocated,
      roundingAtPeak: rounding,
      base: this.base,
      blocks: this.all.length,
      deadByOp: [...deadOps].sort((a, b) => b[1] - a[1]).slice(0, 8),
      growth: this.growth,
      phase: this.marks.filter(([, t]) => t <= this.tPeak).pop()?.[0] ?? "start",
      phasePeaks: this.phasePeaks(),
    };
  }

  /** The live-bytes sweep of snapshot(), its maximum taken per phase (a phase starts at its mark). */
  private phasePeaks(): [string, number][] {
    const ev: [number, number][] = [];
    for (const b of this.all) {
      ev.push([b.t0, b.bytes]);
      if (b.t1 !== Infinity) ev.push([b.t1 + 0.5, -b.bytes]);
    }
    ev.sort((x, y) => x[0] - y[0]);
    const peaks: [string, number][] = [["start", 0]];
    let cur = 0;
    let m = 0;
    for (const [t, d] of ev) {
      while (m < this.marks.length && this.marks[m]![1] <= t) peaks.push([this.marks[m++]![0], cur]);
      cur += d;
      const last = peaks[peaks.length - 1]!;
      last[1] = Math.max(last[1], cur);
    }
    return peaks;
  }
}
