// dist.TCPStore: PyTorch's TCP key-value store, wire-compatible with PyTorch 1.13 (a torchts client
// talks to a Python TCPStore server and a Python client to a torchts server; store_protocol.ts has
// the format). The master's server runs in its own thread (store_server_worker.ts). Requests are
// async (`await store.get(key)`); the constructor returns at once and the first request waits for
// the connection (and, with a world size, for every worker to join).
import { connect, isIP, type Socket } from "node:net";
import type { Worker } from "node:worker_threads";
import { bindArgs, boolArg, describe, intArg, timeoutArg } from "./args.js";
import { ByteQueue, Incomplete } from "./byte_queue.js";
import { DistNetworkError, DistStoreError } from "./errors.js";
import { CHECK_READY, INIT_KEY, KEY_PREFIX, Query, Request } from "./store_protocol.js";
import { spawnWorker } from "./threads.js";

/** PyTorch's default store timeout (timedelta(seconds=300)). */
export const DEFAULT_STORE_TIMEOUT = 300_000;

export interface TCPStoreOptions {
  /** Number of store users (the master included); with waitForWorkers the master waits for all of them. */
  worldSize?: number | null;
  /** Start the server (on `port`; 0 picks a free one, see `store.port`). */
  isMaster?: boolean;
  /** Milliseconds for connecting and for every request (default 300 s, PyTorch's). */
  timeout?: number;
  /** Count this client in "init/" and, on the master, wait until worldSize clients have (default true). */
  waitForWorkers?: boolean;
}

type Value = string | Uint8Array;

function bytesOf(fn: string, name: string, v: unknown): Uint8Array {
  if (typeof v === "string") return Buffer.from(v, "utf8");
  if (v instanceof Uint8Array) return v;
  throw new TypeError(`${fn}(): argument '${name}' must be str or bytes (a string or Uint8Array), got ${describe(v)}`);
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || (isIP(host) === 4 && host.startsWith("127."));
}

/** One connection: sequential request/reply (a 1.13 server answers a socket's queries in order). */
class Connection {
  private readonly q = new ByteQueue();
  private reader: { parse: (q: ByteQueue) => unknown; resolve: (v: unknown) => void; reject: (e: Error) => void } | null = null;
  private closedWith: Error | null = null;

  private constructor(readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on("data", (c: Buffer) => {
      this.q.append(c);
      this.pump();
    });
    socket.on("error", (e) => this.fail(new DistNetworkError(`TCPStore: connection error: ${e.message}`)));
    socket.on("close", () => this.fail(new DistNetworkError("TCPStore: the server closed the connection")));
  }

  static async open(host: string, port: number, deadline: number): Promise<Connection> {
    let delay = 10;
    for (;;) {
      try {
        const s = await new Promise<Socket>((resolve, reject) => {
          const sock = connect({ host, port });
          const t = setTimeout(() => sock.destroy(new Error("connect timed out")), Math.max(1, deadline - Date.now()));
          sock.once("connect", () => {
            clearTimeout(t);
            sock.off("error", reject);
            resolve(sock);
          });
          sock.once("error", (e) => {
            clearTimeout(t);
            reject(e);
          });
        });
        return new Connection(s);
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (Date.now() + delay >= deadline)
          throw new DistNetworkError(`TCPStore: could not connect to ${host}:${port} before the timeout: ${err.code ?? err.message}`);
        // the server may not be up yet (PyTorch's client retries the same way)
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(1000, delay * 2);
      }
    }
  }

  get broken(): boolean {
    return this.closedWith !== null;
  }

  private fail(e: Error): void {
    if (!this.closedWith) this.closedWith = e;
    const r = this.reader;
    this.reader = null;
    r?.reject(this.closedWith);
  }

  private pump(): void {
    const r = this.reader;
    if (!r) return;
    this.q.begin();
    let v: unknown;
    try {
      v = r.parse(this.q);
    } catch (e) {
      if (e instanceof Incomplete) return;
      this.reader = null;
      r.reject(e as Error);
      return;
    }
    this.q.commit();
    this.reader = null;
    r.resolve(v);
  }

  /** Send a request and, with `parse`, read its reply (rejecting after timeoutMs, which also drops the connection). */
  request<T>(req: Buffer, parse: ((q: ByteQueue) => T) | null, timeoutMs: number, what: () => string): Promise<T> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    this.socket.ref();
    this.socket.write(req);
    if (!parse) {
      this.socket.unref();
      return Promise.resolve(undefined as T);
    }
    return new Promise<T>((resolve, reject) => {
      const t = setTimeout(() => {
        this.reader = null;
        // a 1.13 server answers a given-up WAIT later: the connection cannot be reused
        this.closedWith = new DistStoreError("TCPStore: connection dropped after a timeout");
        this.socket.destroy();
        reject(new DistStoreError(what()));
      }, timeoutMs);
      this.reader = {
        parse,
        resolve: (v) => {
          clearTimeout(t);
          this.socket.unref();
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(t);
          this.socket.unref();
          reject(e);
        },
      };
      this.pump();
    });
  }

  close(): void {
    this.closedWith ??= new DistStoreError("TCPStore: closed");
    this.socket.destroy();
  }
}

export class TCPStore {
  readonly host: string;
  /** The server's port (the one picked when a master was given port 0). */
  readonly port: number;
  readonly worldSize: number | null;
  readonly isMaster: boolean;
  readonly waitForWorkers: boolean;
  private timeoutMs: number;
  private conn: Connection | null = null;
  private connecting: Promise<Connection> | null = null;
  private joined: Promise<void> | null = null;
  /** Requests run one after another on the connection. */
  private queue: Promise<unknown> = Promise.resolve();
  private server: Worker | null = null;
  private closed = false;

  constructor(hostName: string, port: number, opts?: TCPStoreOptions);
  constructor(hostName: string, port: number, worldSize?: number | null, isMaster?: boolean, timeout?: number, waitForWorkers?: boolean);
  constructor(...args: unknown[]) {
    const a = bindArgs("TCPStore", ["hostName", "port", "worldSize", "isMaster", "timeout", "waitForWorkers"], args);
    if (typeof a.hostName !== "string" || !a.hostName) throw new TypeError(`TCPStore(): argument 'hostName' must be a non-empty string, got ${describe(a.hostName)}`);
    const port = intArg("TCPStore", "port", a.port, 0);
    if (port > 65535) throw new RangeError(`TCPStore(): port must be in [0, 65535], got ${port}`);
    this.host = a.hostName;
    this.worldSize = a.worldSize === undefined || a.worldSize === null ? null : intArg("TCPStore", "worldSize", a.worldSize, 1);
    this.isMaster = boolArg("TCPStore", "isMaster", a.isMaster, false);
    this.timeoutMs = timeoutArg("TCPStore", a.timeout, DEFAULT_STORE_TIMEOUT);
    this.waitForWorkers = boolArg("TCPStore", "waitForWorkers", a.waitForWorkers, true);
    if (!this.isMaster && port === 0) throw new RangeError("TCPStore(): a client needs the server's port (0 is only for a master)");
    this.port = this.isMaster ? this.startServer(port) : port;
  }

  /**
   * Start the server thread and block until it listens (so a taken port throws here, as in PyTorch).
   * Loopback hosts are listened on as given; any other host on every interface, as PyTorch does.
   */
  private startServer(port: number): number {
    const flag = new SharedArrayBuffer(8 + 512);
    const state = new Int32Array(flag, 0, 2);
    const listenHost = isLoopback(this.host) ? this.host : "::";
    const w = spawnWorker("store_server_worker", { host: listenHost, port, flag });
    w.unref();
    // (the thread's 'error' event cannot arrive while this thread is blocked: a thread that fails to
    // start shows as the deadline passing)
    const deadline = Date.now() + Math.max(this.timeoutMs, 10_000);
    while (Atomics.load(state, 0) === 0) {
      if (Date.now() > deadline) {
        void w.terminate();
        throw new DistNetworkError(`TCPStore: the server thread did not start listening on ${listenHost}:${port}`);
      }
      Atomics.wait(state, 0, 0, 100);
    }
    if (Atomics.load(state, 0) === 2) {
      const bytes = new Uint8Array(flag, 8);
      const msg = new TextDecoder().decode(bytes.subarray(0, bytes.indexOf(0) < 0 ? bytes.length : bytes.indexOf(0)));
      void w.terminate();
      throw new DistNetworkError(`TCPStore: the server could not listen on ${this.host}:${port}: ${msg}`);
    }
    this.server = w;
    return Atomics.load(state, 1);
  }

  /** Milliseconds every later request may take. */
  setTimeout(ms: number): void {
    this.timeoutMs = timeoutArg("TCPStore.setTimeout", ms, this.timeoutMs);
  }
  get timeout(): number {
    return this.timeoutMs;
  }

  /** Connected (and, with a world size, every worker joined). Every request awaits it. */
  ready(): Promise<void> {
    return (this.joined ??= this.join());
  }

  private async join(): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    await this.connection();
    if (this.worldSize === null || !this.waitForWorkers) return;
    await this.raw(new Request(Query.ADD).bytes(Buffer.from(INIT_KEY)).i64(1n).build(), (q) => q.i64(), () => "TCPStore: timed out joining");
    if (!this.isMaster) return;
    // the master waits for every worker, so its server outlives their start-up (PyTorch's waitForWorkers)
    for (;;) {
      const v = await this.rawGet(Buffer.from(INIT_KEY), deadline);
      const n = Number(v.toString("latin1"));
      if (n >= this.worldSize) return;
      if (Date.now() > deadline) throw new DistStoreError(`Timed out waiting for clients. ${n}/${this.worldSize} clients joined.`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  private connection(): Promise<Connection> {
    if (this.closed) return Promise.reject(new DistStoreError("TCPStore: the store was closed"));
    if (this.conn && !this.conn.broken) return Promise.resolve(this.conn);
    return (this.connecting ??= Connection.open(this.host, this.port, Date.now() + this.timeoutMs).then(
      (c) => {
        this.conn = c;
        this.connecting = null;
        c.socket.unref();
        return c;
      },
      (e: unknown) => {
        this.connecting = null;
        throw e;
      },
    ));
  }

  /** One request on the connection, after the ones before it. */
  private raw<T>(req: Buffer, parse: ((q: ByteQueue) => T) | null, what: () => string, timeoutMs = this.timeoutMs): Promise<T> {
    const run = async () => (await this.connection()).request(req, parse, timeoutMs, what);
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => {});
    return p;
  }

  private async rawGet(key: Buffer, deadline: number): Promise<Buffer> {
    const ms = Math.max(1, deadline - Date.now());
    await this.raw(new Request(Query.WAIT).keys([key]).build(), (q) => q.u8(), () => `TCPStore.get: timed out after ${ms} ms waiting for key '${key.toString()}'`, ms);
    return this.raw(new Request(Query.GET).bytes(key).build(), (q) => q.bytes(q.u64()), () => "TCPStore.get: timed out reading the value");
  }

  private key(fn: string, k: unknown): Buffer {
    if (typeof k !== "string") throw new TypeError(`${fn}(): argument 'key' must be str, got ${describe(k)}`);
    return Buffer.from(KEY_PREFIX + k, "utf8");
  }

  async set(key: string, value: Value): Promise<void> {
    const k = this.key("TCPStore.set", key);
    const v = bytesOf("TCPStore.set", "value", value);
    await this.ready();
    await this.raw(new Request(Query.SET).bytes(k).bytes(v).build(), null, () => "");
  }

  /** The value of `key`, waiting (up to the store timeout) until some client sets it. */
  async get(key: string): Promise<Uint8Array> {
    const k = this.key("TCPStore.get", key);
    await this.ready();
    return this.rawGet(k, Date.now() + this.timeoutMs);
  }

  /** Add `amount` to the integer at `key` (0 when absent) and return the result. */
  async add(key: string, amount: number): Promise<number> {
    const k = this.key("TCPStore.add", key);
    const by = intArg("TCPStore.add", "amount", amount);
    await this.ready();
    const v = await this.raw(new Request(Query.ADD).bytes(k).i64(BigInt(by)).build(), (q) => q.i64(), () => "TCPStore.add: timed out");
    return Number(v);
  }

  /**
   * Set `key` to `desired` if its value is `expected` (or if it is absent and `expected` is empty);
   * returns the value the key holds afterwards (PyTorch 1.13: `expected` when absent and not empty).
   */
  async compareSet(key: string, expected: Value, desired: Value): Promise<Uint8Array> {
    const k = this.key("TCPStore.compareSet", key);
    const e = bytesOf("TCPStore.compareSet", "expected", expected);
    const d = bytesOf("TCPStore.compareSet", "desired", desired);
    await this.ready();
    return this.raw(new Request(Query.COMPARE_SET).bytes(k).bytes(e).bytes(d).build(), (q) => q.bytes(q.u64()), () => "TCPStore.compareSet: timed out");
  }

  /** Wait until every key is set; rejects after `timeout` ms (default: the store's). */
  async wait(keys: string[], timeout?: number): Promise<void> {
    if (!Array.isArray(keys)) throw new TypeError(`TCPStore.wait(): argument 'keys' must be a list of str, got ${describe(keys)}`);
    const ks = keys.map((k) => this.key("TCPStore.wait", k));
    const ms = timeoutArg("TCPStore.wait", timeout, this.timeoutMs);
    await this.ready();
    await this.raw(new Request(Query.WAIT).keys(ks).build(), (q) => q.u8(), () => `TCPStore.wait: timed out after ${ms} ms waiting for keys ${keys.map((k) => `'${k}'`).join(", ")}`, ms);
  }

  /** Whether every key is set (without waiting). */
  async check(keys: string[]): Promise<boolean> {
    if (!Array.isArray(keys)) throw new TypeError(`TCPStore.check(): argument 'keys' must be a list of str, got ${describe(keys)}`);
    const ks = keys.map((k) => this.key("TCPStore.check", k));
    await this.ready();
    return (await this.raw(new Request(Query.CHECK).keys(ks).build(), (q) => q.u8(), () => "TCPStore.check: timed out")) === CHECK_READY;
  }

  /** Delete `key`; whether it existed. */
  async deleteKey(key: string): Promise<boolean> {
    const k = this.key("TCPStore.deleteKey", key);
    await this.ready();
    return (await this.raw(new Request(Query.DELETE_KEY).bytes(k).build(), (q) => q.i64(), () => "TCPStore.deleteKey: timed out")) > 0n;
  }

  /** Number of keys in the store (PyTorch counts its "init/" key too). */
  async numKeys(): Promise<number> {
    await this.ready();
    return Number(await this.raw(new Request(Query.GETNUMKEYS).build(), (q) => q.i64(), () => "TCPStore.numKeys: timed out"));
  }

  /** The local address of the connection to the server: how other hosts reach this one. */
  async localAddress(): Promise<string> {
    const c = await this.connection();
    return c.socket.localAddress ?? "127.0.0.1";
  }

  /** Close the connection and, on the master, stop the server. */
  async close(): Promise<void> {
    this.closed = true;
    this.conn?.close();
    this.conn = null;
    const w = this.server;
    this.server = null;
    if (w) {
      w.postMessage({ type: "close" });
      await new Promise<void>((r) => {
        const t = setTimeout(() => void w.terminate().then(() => r()), 2000);
        w.once("exit", () => {
          clearTimeout(t);
          r();
        });
      });
    }
  }
}
