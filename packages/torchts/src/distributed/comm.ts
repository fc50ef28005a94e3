// The main thread's side of the communication thread (comm_worker.ts). A collective returns at
// once: its inputs are copied out, and each output tensor's storage becomes pending on the
// transfer (Storage.transfer): its buffer is set aside until the result arrives, so compute on
// this thread overlaps the communication. When the result arrives (a message, handled whenever
// the event loop runs) it is written into the buffer; anything that needs the value earlier (a
// kernel reading it, an in-place write, a host read) lands it: this thread then blocks with
// Atomics.wait on a word the communication thread bumps after every message it posts, and takes
// the messages synchronously (receiveMessageOnPort), since it cannot wait on a socket itself.
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from "node:worker_threads";
import type { DeviceBuffer } from "../device/plugin.js";
import { hostArrayCtor, type DType, type HostArray } from "../ir/dtype.js";
import { realize } from "../runtime/dispatch.js";
import type { Storage } from "../runtime/storage.js";
import type { Tensor } from "../tensor.js";
import { CTRL_POSTED, type FromWorker, type OpRequest } from "./comm_protocol.js";
import { DistBackendError, DistTimeoutError, freshError } from "./errors.js";
import { spawnWorker } from "./threads.js";
import { BufferPool } from "./buffer_pool.js";

/** This thread's staging buffers: inputs are copied into them, results come back in them. */
export const staging = new BufferPool(256 << 20, 2);

/** Whoever an operation's failure is sticky for (its process group). */
export interface ErrorSink {
  error: Error | null;
}

export class PendingOp {
  done = false;
  error: Error | null = null;
  /** Someone saw the error (a read threw it, a Work's wait rejected). */
  observed = false;
  readonly promise: Promise<void>;
  private settle!: [() => void, (e: Error) => void];
  /** Applies the result to the output tensors (set by the collective that made this); `out` is not kept. */
  onOutput: (out: HostArray | null) => void = () => {};
  onError: (e: Error) => void = () => {};

  constructor(
    readonly id: number,
    readonly desc: string,
    readonly dtype: DType,
    readonly timeoutMs: number,
    readonly sink: ErrorSink,
  ) {
    this.promise = new Promise<void>((res, rej) => (this.settle = [res, rej]));
    this.promise.catch(() => {});
  }
  complete(out: HostArray | null): void {
    this.done = true;
    this.onOutput(out);
    this.settle[0]();
  }
  fail(e: Error): void {
    this.done = true;
    this.error = e;
    this.onError(e);
    this.settle[1](e);
  }
}

/** The set-aside buffer of a storage pending on one or more transfers (runtime: Storage.transfer). */
export class StorageTransfer {
  readonly ops = new Set<PendingOp>();
  private error: Error | null = null;
  constructor(readonly comm: Comm, readonly st: Storage, readonly buf: DeviceBuffer) {}

  /** Resolves when every transfer into this storage finished (land() then returns or throws at once). */
  landed(): Promise<void> {
    return Promise.allSettled([...this.ops].map((op) => op.promise)).then(() => {});
  }

  /** Block until every transfer into this storage landed; throws a failed transfer's error (once). */
  land(): void {
    for (const op of [...this.ops]) this.comm.waitFor(op);
    this.restore();
    const e = this.error;
    if (e) {
      this.error = null;
      this.comm.observe(e);
      throw freshError(e);
    }
  }

  settled(op: PendingOp, e: Error | null): void {
    this.ops.delete(op);
    if (e && !this.error) this.error = e;
    if (!this.ops.size && !this.error) this.restore();
  }

  private restore(): void {
    if (this.st.transfer !== this) return;
    this.st.buf = this.buf;
    this.st.transfer = null;
  }

  /** Write `n` elements of `src` from `from` at element `offset` of the set-aside buffer. */
  write(offset: number, src: HostArray, from: number, n: number): void {
    const { st } = this;
    const dev = st.device;
    const part = from === 0 && src.length === n ? src : src.subarray(from, from + n);
    if (offset === 0 && n === st.numel) {
      dev.write(this.buf, part);
      return;
    }
    const live = dev.readSync!(this.buf, st.dtype, st.numel);
    live.set(part as never, offset);
    // a device whose synchronous read is a copy needs the whole buffer written back (cpu's is the buffer)
    if (dev.readSync!(this.buf, st.dtype, st.numel) !== live) dev.write(this.buf, live);
  }
}

/** Where an output tensor's elements go. */
export interface Target {
  t: Tensor;
  /** Element of the operation's result its first element comes from. */
  from: number;
}

/**
 * Before an operation is submitted: make each output storage's value exist (an earlier transfer
 * into it lands now) and, in fused mode, move the current value aside for pending nodes that
 * still read it (runtime/storage.ts moveOut), keeping a copy for the elements outside the views.
 */
export function prepareOutputs(targets: Target[]): void {
  for (const { t } of targets) {
    const st = t._storage;
    realize(st);
    if (st.readers?.length || st.lent()) {
      const dev = st.device;
      const copy = dev.readSync!(st.buf!, st.dtype, st.numel).slice();
      if (st.moveOut()) dev.write(st.allocate(), copy);
    }
  }
}

/** After submitting: the output storages become pending on `op`. */
export function pendOutputs(comm: Comm, op: PendingOp, targets: Target[]): void {
  const handles = new Map<Storage, StorageTransfer>();
  for (const { t } of targets) {
    const st = t._storage;
    if (handles.has(st)) continue;
    const h = (st.transfer as StorageTransfer | null) ?? new StorageTransfer(comm, st, st.buf!);
    if (!st.transfer) {
      st.buf = null;
      st.transfer = h;
    }
    h.ops.add(op);
    st.version++; // an in-place write, as far as autograd's saved-tensor checks go
    handles.set(st, h);
  }
  op.onOutput = (out) => {
    if (out) for (const { t, from } of targets) handles.get(t._storage)!.write(t._offset, out, from, t.numel());
    if (out) staging.give(out.buffer); // copied into the outputs: the next staging copy reuses it
    for (const h of handles.values()) h.settled(op, null);
  };
  op.onError = (e) => {
    for (const h of handles.values()) h.settled(op, e);
  };
}

export class Comm {
  private readonly inflight = new Map<number, PendingOp>();
  private nextId = 1;
  private fatal: Error | null = null;
  private control: ((m: FromWorker) => void) | null = null;
  /** Failed operations nobody saw fail yet (reported at exit). */
  private readonly unseen = new Set<PendingOp>();

  private constructor(
    private readonly worker: Worker,
    private readonly port: MessagePort,
    private readonly ctrl: Int32Array,
    readonly rank: number,
  ) {
    port.on("message", (m: FromWorker) => this.handle(m));
    port.unref();
    worker.unref();
    process.on("exit", this.reportUnseen);
  }

  /** Start the thread; resolves once it listens (with its port). */
  static async start(rank: number, host: string, token: string): Promise<{ comm: Comm; port: number }> {
    const ctrlBuf = new SharedArrayBuffer(8);
    const { port1, port2 } = new MessageChannel();
    const w = spawnWorker("comm_worker", { rank, host, token, ctrl: ctrlBuf, port: port2 }, [port2]);
    const comm = new Comm(w, port1, new Int32Array(ctrlBuf), rank);
    const m = await comm.nextControl(60_000, "start listening");
    if (m.type !== "listening") throw new DistBackendError(m.type === "fatal" ? m.message : `communication thread: unexpected ${m.type}`);
    return { comm, port: m.port };
  }

  /** Connect to every peer (`addrs[rank]` is this rank's). */
  async connect(addrs: string[], timeoutMs: number): Promise<void> {
    this.port.postMessage({ type: "connect", addrs, deadline: Date.now() + timeoutMs });
    const m = await this.nextControl(timeoutMs + 5000, "connect to its peers");
    if (m.type !== "connected") throw new DistBackendError(m.type === "fatal" ? m.message : `communication thread: unexpected ${m.type}`);
  }

  private nextControl(ms: number, what: string): Promise<FromWorker> {
    this.port.ref();
    return new Promise<FromWorker>((resolve, reject) => {
      const t = setTimeout(() => {
        this.control = null;
        this.port.unref();
        reject(new DistBackendError(`[Rank ${this.rank}] the communication thread did not ${what} within ${ms} ms`));
      }, ms);
      const onExit = (code: number) => reject(new DistBackendError(`[Rank ${this.rank}] the communication thread exited (${code}) before it could ${what}`));
      this.worker.once("exit", onExit);
      this.worker.once("error", (e) => reject(e));
      this.control = (m) => {
        clearTimeout(t);
        this.worker.off("exit", onExit);
        this.control = null;
        this.port.unref();
        resolve(m);
      };
    });
  }

  submit(req: Omit<OpRequest, "type" | "id">, sink: ErrorSink, transfer: ArrayBuffer[] = []): PendingOp {
    const op = new PendingOp(this.nextId++, req.fp, req.dtype, req.timeoutMs, sink);
    if (this.fatal) {
      op.fail(this.fatal);
      return op;
    }
    this.inflight.set(op.id, op);
    if (this.inflight.size === 1) this.port.ref(); // results still to come keep the process alive
    this.port.postMessage({ ...req, type: "op", id: op.id }, transfer);
    return op;
  }

  /** Handle every message already posted (never blocks). */
  drain(): void {
    for (let m = receiveMessageOnPort(this.port); m; m = receiveMessageOnPort(this.port)) this.handle(m.message as FromWorker);
  }

  /** Block this thread until `op` finished (its result or error is applied). */
  waitFor(op: PendingOp): void {
    // the communication thread fails an operation at its timeout; past that (and a margin) it is gone
    const deadline = Date.now() + op.timeoutMs + 30_000;
    while (!op.done) {
      const seen = Atomics.load(this.ctrl, CTRL_POSTED);
      this.drain();
      if (op.done) break;
      const left = deadline - Date.now();
      if (left <= 0) {
        this.failAll(new DistTimeoutError(`[Rank ${this.rank}] the communication thread did not answer for ${op.desc} (it may have crashed)`));
        break;
      }
      Atomics.wait(this.ctrl, CTRL_POSTED, seen, Math.min(left, 1000));
    }
  }

  private handle(m: FromWorker): void {
    switch (m.type) {
      case "done":
      case "error": {
        const op = this.inflight.get(m.id);
        if (!op) return;
        this.inflight.delete(m.id);
        if (!this.inflight.size) this.port.unref();
        if (m.type === "done") {
          const ctor = hostArrayCtor(op.dtype);
          const out = m.output ? new ctor(m.output, 0, m.output.byteLength / ctor.BYTES_PER_ELEMENT) : null;
          op.complete(out);
        } else {
          const e = m.name === "DistTimeoutError" ? new DistTimeoutError(m.message) : new DistBackendError(m.message);
          if (m.breaksGroup && !op.sink.error) op.sink.error = e;
          this.unseen.add(op);
          op.fail(e);
        }
        return;
      }
      case "fatal":
        if (this.control) return this.control(m);
        this.failAll(new DistBackendError(m.message));
        return;
      default:
        this.control?.(m);
    }
  }

  private failAll(e: Error): void {
    this.fatal = e;
    for (const op of this.inflight.values()) {
      if (!op.sink.error) op.sink.error = e;
      this.unseen.add(op);
      op.fail(e);
    }
    this.inflight.clear();
    this.port.unref();
  }

  /** An error was shown to the user: the operations that failed with it need no report at exit. */
  observe(e: Error): void {
    for (const op of this.unseen)
      if (op.error === e) {
        op.observed = true;
        this.unseen.delete(op);
      }
  }

  /** A failed collective whose error nobody read would otherwise vanish: print it and fail the exit code. */
  private readonly reportUnseen = (): void => {
    const left = [...this.unseen].filter((op) => !op.observed);
    if (!left.length) return;
    process.stderr.write(`torchts.distributed: ${left.length} collective(s) failed and their results were never read:\n`);
    for (const op of left.slice(0, 5)) process.stderr.write(`  ${op.error!.message}\n`);
    if (!process.exitCode) process.exitCode = 1;
  };

  get pending(): number {
    return this.inflight.size;
  }

  /** Wait for what is in flight, then stop the thread. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.inflight.values()].map((op) => op.promise));
    process.off("exit", this.reportUnseen);
    this.reportUnseen();
    this.port.postMessage({ type: "close" });
    await new Promise<void>((r) => {
      const t = setTimeout(() => void this.worker.terminate().then(() => r()), 1000);
      this.worker.once("exit", () => {
        clearTimeout(t);
        r();
      });
    });
    this.port.close();
  }
}
