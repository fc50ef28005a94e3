// The TCPStore server (PyTorch's TCPStoreMasterDaemon): a key-value map served over the 1.13
// wire format (store_protocol.ts). It runs in a worker thread for TCPStore (store_server_worker.ts),
// so it keeps answering while the main thread is blocked waiting for a collective, and directly
// in the launcher's thread (the launcher never blocks).
import { createServer, type Server, type Socket } from "node:net";
import { ByteQueue, Incomplete } from "./byte_queue.js";
import {
  CHECK_NOT_READY, CHECK_READY, encodeBytes, encodeI64, encodeU8, Query, STOP_WAITING, V2_VALIDATION_MAGIC,
} from "./store_protocol.js";

interface Waiter {
  socket: Socket;
  missing: Set<string>;
}

/** Keys are held as latin1 strings of their bytes (a 1:1 map), values as the bytes themselves. */
export class StoreServer {
  private readonly data = new Map<string, Buffer>();
  private readonly waiters = new Map<string, Waiter[]>();
  private readonly sockets = new Set<Socket>();
  private server: Server | null = null;
  /** Called with a line for each client the server had to drop (a protocol it does not speak). */
  onWarning: (msg: string) => void = (m) => process.stderr.write(`[torchts TCPStore] ${m}\n`);

  /** Listen on host:port (0: a free port); resolves with the port. "::" (every interface) falls back to IPv4 only. */
  async listen(host: string, port: number): Promise<number> {
    try {
      return await this.listenOn(host, port);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (host === "::" && (code === "EAFNOSUPPORT" || code === "EADDRNOTAVAIL")) return this.listenOn("0.0.0.0", port);
      throw e;
    }
  }

  private listenOn(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const srv = createServer((s) => this.accept(s));
      srv.once("error", reject);
      srv.listen({ host, port, exclusive: true }, () => {
        srv.off("error", reject);
        srv.on("error", (e) => this.onWarning(`server error: ${e.message}`));
        this.server = srv;
        resolve((srv.address() as { port: number }).port);
      });
    });
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    const srv = this.server;
    this.server = null;
    return new Promise((resolve) => (srv ? srv.close(() => resolve()) : resolve()));
  }

  private accept(s: Socket): void {
    s.setNoDelay(true);
    this.sockets.add(s);
    const q = new ByteQueue();
    let first = true;
    s.on("data", (chunk: Buffer) => {
      q.append(chunk);
      if (first) {
        q.begin();
        if (q.u8() === 0) {
          if (q.available < 5) return; // too early to tell a 2.x VALIDATE from a 1.13 SET
          if (q.u32() === V2_VALIDATION_MAGIC) {
            this.onWarning(
              `a PyTorch >= 2.0 client connected from ${s.remoteAddress}:${s.remotePort}; this store speaks PyTorch 1.13's protocol, so the client was disconnected`,
            );
            s.destroy();
            return;
          }
        }
        first = false;
      }
      try {
        for (;;) {
          q.begin();
          if (!this.handle(s, q)) break;
          q.commit();
        }
      } catch (e) {
        if (e instanceof Incomplete) return;
        this.onWarning(`dropped client ${s.remoteAddress}:${s.remotePort}: ${(e as Error).message}`);
        s.destroy();
      }
    });
    s.on("error", () => {});
    s.on("close", () => {
      this.sockets.delete(s);
      for (const [k, ws] of this.waiters) {
        const left = ws.filter((w) => w.socket !== s);
        if (left.length) this.waiters.set(k, left);
        else this.waiters.delete(k);
      }
    });
  }

  /** Parse and answer one request; false when none is buffered. Throws Incomplete mid-request. */
  private handle(s: Socket, q: ByteQueue): boolean {
    if (q.available === 0) return false;
    const type = q.u8();
    const key = () => q.bytes(q.u64()).toString("latin1");
    const vec = () => q.bytes(q.u64());
    const keyList = () => {
      const n = q.u64();
      const ks: string[] = [];
      for (let i = 0; i < n; i++) ks.push(key());
      return ks;
    };
    switch (type) {
      case Query.SET: {
        const k = key();
        this.put(k, vec());
        return true;
      }
      case Query.COMPARE_SET: {
        const k = key();
        const expected = vec();
        const desired = vec();
        const cur = this.data.get(k);
        if (cur === undefined) {
          // PyTorch 1.13: a missing key is created only when the expected value is empty
          if (expected.length === 0) {
            this.put(k, desired);
            s.write(encodeBytes(desired));
          } else s.write(encodeBytes(expected));
        } else if (cur.equals(expected)) {
          this.put(k, desired);
          s.write(encodeBytes(desired));
        } else s.write(encodeBytes(cur));
        return true;
      }
      case Query.GET:
        s.write(encodeBytes(this.data.get(key()) ?? Buffer.alloc(0)));
        return true;
      case Query.ADD: {
        const k = key();
        const by = q.i64();
        const cur = this.data.get(k);
        let base = 0n;
        if (cur !== undefined) {
          const text = cur.toString("latin1");
          if (!/^\s*[-+]?\d+\s*$/.test(text)) throw new Error(`ADD on key '${k}' whose value '${text.slice(0, 40)}' is not an integer`);
          base = BigInt(text.trim());
        }
        const next = base + by;
        this.put(k, Buffer.from(next.toString(), "latin1"));
        s.write(encodeI64(next));
        return true;
      }
      case Query.CHECK: {
        const ks = keyList();
        s.write(encodeU8(ks.every((k) => this.data.has(k)) ? CHECK_READY : CHECK_NOT_READY));
        return true;
      }
      case Query.WAIT: {
        const missing = new Set(keyList().filter((k) => !this.data.has(k)));
        if (!missing.size) s.write(encodeU8(STOP_WAITING));
        else {
          const w: Waiter = { socket: s, missing };
          for (const k of missing) {
            const ws = this.waiters.get(k);
            if (ws) ws.push(w);
            else this.waiters.set(k, [w]);
          }
        }
        return true;
      }
      case Query.GETNUMKEYS:
        s.write(encodeI64(BigInt(this.data.size)));
        return true;
      case Query.DELETE_KEY:
        s.write(encodeI64(this.data.delete(key()) ? 1n : 0n));
        return true;
      case Query.WATCH_KEY:
        throw new Error("WATCH_KEY is not supported by this store");
      default:
        throw new Error(`unknown query type ${type}`);
    }
  }

  private put(k: string, v: Buffer): void {
    this.data.set(k, v);
    const ws = this.waiters.get(k);
    if (!ws) return;
    this.waiters.delete(k);
    for (const w of ws) {
      w.missing.delete(k);
      if (w.missing.size === 0 && !w.socket.destroyed) w.socket.write(encodeU8(STOP_WAITING));
    }
  }
}
