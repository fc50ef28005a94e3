// Worker threads that share the kernels' WebAssembly.Memory. Jobs are posted through a
// control block at the start of that memory (Atomics), so a kernel call stays synchronous.
// A job is cut into more chunks than threads and every thread, the caller included, claims
// chunks until none are left: on a loaded machine a descheduled worker then costs nothing
// (the caller does its share), instead of stalling the whole call.
// Claims go through one 64-bit word (job tag << 32 | next chunk), so a worker that wakes late
// can never claim a chunk of a newer job with the older job's parameters.

export const CTL_BYTES = 1024;
export const GEN = 0, COMPLETED = 1, FN = 2, NCH = 3, READY = 4, UNITS = 5, ALIGN = 6, TOTAL = 7;
export const CLAIM_BYTE = 64, ARGS_BYTE = 512, MAX_ARGS = 16;
export const MAX_THREADS = 64;
const CHUNKS_PER_THREAD = 4;
/** Polls of the job counter a worker makes after a job before it sleeps (~0.1 ms). */
const SPIN = 50000;

// Plain JS so it can be evaluated as a worker (Node) or from a Blob URL (browsers).
const DRAIN_SRC = `
function drain(ctl, claim, args, fns, gen, load) {
  const tag = BigInt(gen) << 32n;
  for (;;) {
    const v = Atomics.load(claim, 0);
    if ((v & ~0xffffffffn) !== tag) return;
    const c = Number(v & 0xffffffffn);
    if (c >= ctl[${NCH}]) return;
    if (Atomics.compareExchange(claim, 0, v, v + 1n) !== v) continue;
    // chunk c is this thread's: the job cannot end, nor the next be posted, before it is done,
    // so the parameters read now are this job's (read before the claim, they could be the next's)
    const f = fns[ctl[${FN}]] ?? load(ctl[${FN}]), nch = ctl[${NCH}], units = ctl[${UNITS}], align = ctl[${ALIGN}], total = ctl[${TOTAL}];
    const lo = Math.min(total, Math.floor((units * c) / nch) * align);
    const hi = Math.min(total, Math.floor((units * (c + 1)) / nch) * align);
    if (lo < hi) f(lo, hi, args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7]);
    if (Atomics.add(ctl, ${COMPLETED}, 1) + 1 === nch) Atomics.notify(ctl, ${COMPLETED});
  }
}`;

const WORKER_SRC = `
const { workerData, parentPort, receiveMessageOnPort } = require("node:worker_threads");
const { memory, module, names, extra } = workerData;
const inst = new WebAssembly.Instance(module, { env: { memory } });
const fns = names.map((n) => inst.exports[n]);
// modules added after start-up (run-time generated kernels): functions from index base on
function addModule(m) {
  if (m.native) {
    // a native addon's function over the whole memory (the OpenBLAS bridge's gemmSlab)
    const f = require(m.native)[m.names[0]];
    fns[m.base] = (lo, hi, a0) => f(new Float32Array(memory.buffer), lo, hi, a0);
    return;
  }
  const x = new WebAssembly.Instance(m.module, { env: { memory } });
  m.names.forEach((n, i) => (fns[m.base + i] = x.exports[n]));
}
for (const m of extra) addModule(m);
// the caller posts a module before any job that uses it, so it is already queued here
function load(i) {
  while (fns[i] === undefined) {
    const msg = receiveMessageOnPort(parentPort);
    if (msg) addModule(msg.message);
  }
  return fns[i];
}
const ctl = new Int32Array(memory.buffer, 0, ${CTL_BYTES / 4});
const claim = new BigInt64Array(memory.buffer, ${CLAIM_BYTE}, 1);
const args = new Float64Array(memory.buffer, ${ARGS_BYTE}, ${MAX_ARGS});
${DRAIN_SRC}
let gen = Atomics.load(ctl, ${GEN});
Atomics.add(ctl, ${READY}, 1);
for (;;) {
  // spin briefly before sleeping: kernels often come back to back (a decode step's GEMVs, an
  // optimizer's per-parameter kernels), and waking from Atomics.wait costs tens of microseconds
  for (let s = 0; s < ${SPIN} && Atomics.load(ctl, ${GEN}) === gen; s++);
  if (Atomics.load(ctl, ${GEN}) === gen) Atomics.wait(ctl, ${GEN}, gen);
  gen = Atomics.load(ctl, ${GEN});
  drain(ctl, claim, args, fns, gen, load);
}
`;

type WasmFn = (...a: number[]) => void;
type Drain = (ctl: Int32Array, claim: BigInt64Array, args: Float64Array, fns: WasmFn[], gen: number, load: (i: number) => WasmFn) => void;
type Spawned = { terminate(): unknown; unref?(): void; postMessage?(m: unknown): void };
interface Extra {
  module?: object;
  native?: string; // path of a native addon, `names[0]` its function
  names: string[];
  base: number;
}
/** The claim loop every thread runs (exported for the pool's test, which plays a late worker). */
export const drain = new Function(`${DRAIN_SRC}; return drain;`)() as Drain;

export class Pool {
  private readonly ctl: Int32Array;
  private readonly claim: BigInt64Array;
  private readonly args: Float64Array;
  private readonly workers: Spawned[] = [];
  private readonly extra: Extra[] = [];
  private canWait = true;
  /** Test seam: called once a job's parameters are written, before any thread may claim a chunk. */
  posting: (() => void) | null = null;

  constructor(
    private readonly memory: { readonly buffer: ArrayBufferLike },
    private readonly module: object, // a WebAssembly.Module, posted to the workers
    private readonly names: string[],
    private readonly fns: WasmFn[],
    public threads: number,
    private readonly spawn: ((src: string, data: object) => Spawned) | null,
  ) {
    this.ctl = new Int32Array(memory.buffer, 0, CTL_BYTES / 4);
    this.claim = new BigInt64Array(memory.buffer, CLAIM_BYTE, 1);
    this.args = new Float64Array(memory.buffer, ARGS_BYTE, MAX_ARGS);
  }

  /** Workers that have finished starting (the caller is one more thread). */
  ready(): number {
    return Math.min(Atomics.load(this.ctl, READY), this.workers.length);
  }

  // Workers are only added, never stopped early.
  private start(): void {
    if (!this.spawn) return;
    for (let i = this.workers.length + 1; i < this.threads; i++) {
      const w = this.spawn(WORKER_SRC, { memory: this.memory, module: this.module, names: this.names, extra: this.extra });
      w.unref?.();
      this.workers.push(w);
    }
  }

  /**
   * Adds the functions of another module over the same memory (a run-time generated kernel);
   * returns the index of its first function for run(). The calling thread's instances are
   * `fns`; workers instantiate the module themselves when a job first needs it.
   */
  addModule(module: object, names: string[], fns: WasmFn[]): number {
    const base = this.fns.length;
    this.fns.push(...fns);
    const m: Extra = { module, names, base };
    this.extra.push(m);
    for (const w of this.workers) w.postMessage?.(m);
    return base;
  }

  /**
   * Adds a native addon's function `name(memF32, lo, hi, a0)` as a pool function: `fn` is the
   * calling thread's binding, workers require the addon at `path` themselves. Returns its index.
   */
  addNative(path: string, name: string, fn: WasmFn): number {
    const base = this.fns.length;
    this.fns.push(fn);
    const m: Extra = { native: path, names: [name], base };
    this.extra.push(m);
    for (const w of this.workers) w.postMessage?.(m);
    return base;
  }

  /**
   * Runs fns[fn](lo, hi, ...args) over [0, total) in `align`-sized units across the threads;
   * jobs under `minPerThread` units per thread stay on the calling thread.
   */
  run(fn: number, total: number, args: number[], align = 1, minPerThread = 1): void {
    const units = Math.ceil(total / align);
    let nt = Math.max(1, Math.min(this.threads, Math.floor(units / minPerThread)));
    if (nt > 1 && this.workers.length < this.threads - 1) this.start();
    nt = Math.min(nt, this.ready() + 1);
    if (nt === 1) {
      if (total > 0) this.fns[fn]!(0, total, ...args);
      return;
    }
    const ctl = this.ctl;
    const nch = Math.min(units, nt * CHUNKS_PER_THREAD);
    const gen = (ctl[GEN]! + 1) | 0;
    // Close the claim word first (the new tag, no chunk left): a worker still in the last job's
    // drain (woken late, descheduled) must not claim one more chunk while the parameters below
    // are half written. It did: an extra call of the attention kernel with the next job's
    // parameters trapped on its scratch slots (and its count could end the next job early).
    Atomics.store(this.claim, 0, (BigInt(gen) << 32n) | 0xffffffffn);
    for (let i = 0; i < args.length; i++) this.args[i] = args[i]!;
    ctl[FN] = fn;
    ctl[NCH] = nch;
    ctl[UNITS] = units;
    ctl[ALIGN] = align;
    ctl[TOTAL] = total;
    Atomics.store(ctl, COMPLETED, 0);
    this.posting?.();
    Atomics.store(this.claim, 0, BigInt(gen) << 32n);
    Atomics.store(ctl, GEN, gen);
    Atomics.notify(ctl, GEN);
    drain(ctl, this.claim, this.args, this.fns, gen, (i) => this.fns[i]!);
    for (let spins = 0; ; spins++) {
      const d = Atomics.load(ctl, COMPLETED);
      if (d >= nch) break;
      if (spins > 2000 && this.canWait) {
        try {
          Atomics.wait(ctl, COMPLETED, d, 50);
        } catch {
          this.canWait = false; // a browser's main thread may not block: keep spinning
        }
      }
    }
  }

  close(): void {
    for (const w of this.workers) void w.terminate();
    this.workers.length = 0;
  }
}
