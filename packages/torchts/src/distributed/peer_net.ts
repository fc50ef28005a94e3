// The communication thread's sockets: two TCP connections per pair of ranks, one per direction,
// framed messages, and an inbox where each message waits for the operation that takes it. A rank
// dials every peer and receives on the connection it dialed, and sends on the connections it
// accepted: only a dialed socket can read into buffers of ours (node:net's `onread`; FrameReader
// reads payloads in place), which moves a loopback stream 2-4x faster than node's default of a
// fresh 64 KB Buffer per read. A message is addressed by (sender, key, sub): the key names one
// collective (its group and sequence number) or one point-to-point transfer, sub the step within it.
// Frame: u8 kind, u32 sub, u16 key length, u16 fingerprint length, u48 payload length, then the
// key (latin1), the fingerprint (utf8) and the payload. Every data frame carries the sender's
// fingerprint of the operation (mpmd safety: a receiver compares it with its own).
import { createServer, connect, type Server, type Socket } from "node:net";
import { BufferPool } from "./buffer_pool.js";
import { DistNetworkError } from "./errors.js";

/**
 * Received payloads (the communication thread's): consumers hand them back with `releasePayload`.
 * Many of one size: a ring step can have every segment of a chunk in flight.
 */
const payloads = new BufferPool(256 << 20, 256);

/** A payload that nothing uses any more (its bytes were reduced or copied out). */
export function releasePayload(b: ArrayBufferView): void {
  if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) payloads.give(b.buffer);
}

export const KIND_DATA = 1;
export const KIND_ABORT = 2;
const KIND_HELLO = 3;
const FIXED = 15;
/** Reads that may hold headers go into a buffer of this size; payloads are read into directly. */
const SCRATCH_BYTES = 256 << 10;

export interface Msg {
  from: number;
  kind: number;
  key: string;
  sub: number;
  fp: string;
  payload: Buffer;
}

interface Waiter {
  resolve(m: Msg): void;
  reject(e: Error): void;
}

const EMPTY = Buffer.alloc(0);

/** Splits a byte stream into frames. */
class FrameReader {
  private rest: Buffer = EMPTY;
  private cur: Msg | null = null;
  private got = 0;
  constructor(private readonly from: () => number, private readonly emit: (m: Msg) => void) {}

  feed(chunk: Buffer): void {
    const buf = this.rest.length ? Buffer.concat([this.rest, chunk]) : chunk;
    this.rest = EMPTY;
    let off = 0;
    while (off < buf.length) {
      const m = this.cur;
      if (m) {
        const n = Math.min(m.payload.length - this.got, buf.length - off);
        buf.copy(m.payload, this.got, off, off + n);
        this.got += n;
        off += n;
        if (this.got === m.payload.length) this.finish();
        continue;
      }
      if (buf.length - off < FIXED) break;
      const keyLen = buf.readUInt16LE(off + 5);
      const fpLen = buf.readUInt16LE(off + 7);
      if (buf.length - off < FIXED + keyLen + fpLen) break;
      const len = buf.readUInt32LE(off + 9) + buf.readUInt16LE(off + 13) * 2 ** 32;
      const k0 = off + FIXED;
      this.cur = {
        from: this.from(),
        kind: buf[off]!,
        sub: buf.readUInt32LE(off + 1),
        key: buf.toString("latin1", k0, k0 + keyLen),
        fp: buf.toString("utf8", k0 + keyLen, k0 + keyLen + fpLen),
        payload: len ? Buffer.from(payloads.take(len)) : EMPTY,
      };
      this.got = 0;
      off = k0 + keyLen + fpLen;
      if (len === 0) this.finish();
    }
    if (off < buf.length) this.rest = Buffer.from(buf.subarray(off));
  }

  private finish(): void {
    const m = this.cur!;
    this.cur = null;
    this.emit(m);
  }

  // Reading straight into payloads (node:net's onread with a buffer function, which is called
  // before every read): while a payload is incomplete the socket reads into the rest of it, so
  // its bytes are copied once, by the kernel; headers (and whatever follows them in the same
  // read) go through `scratch` and feed().
  private readonly scratch = Buffer.allocUnsafe(SCRATCH_BYTES);

  /** Where the socket's next read goes. */
  nextBuffer(): Buffer {
    const m = this.cur;
    return m && !this.rest.length ? m.payload.subarray(this.got) : this.scratch;
  }

  /** A read of `n` bytes into `buf` (what nextBuffer returned) completed. */
  onRead(n: number, buf: Uint8Array): void {
    if (buf === this.scratch || !this.cur) return this.feed(this.scratch.subarray(0, n));
    this.got += n;
    if (this.got === this.cur.payload.length) this.finish();
  }
}

function header(kind: number, key: string, sub: number, fp: string, len: number): Buffer {
  const k = Buffer.from(key, "latin1");
  const f = Buffer.from(fp, "utf8");
  const h = Buffer.allocUnsafe(FIXED + k.length + f.length);
  h[0] = kind;
  h.writeUInt32LE(sub >>> 0, 1);
  h.writeUInt16LE(k.length, 5);
  h.writeUInt16LE(f.length, 7);
  h.writeUInt32LE(len % 2 ** 32, 9);
  h.writeUInt16LE(Math.floor(len / 2 ** 32), 13);
  k.copy(h, FIXED);
  f.copy(h, FIXED + k.length);
  return h;
}

export class PeerNet {
  private server: Server | null = null;
  /** The connection this rank sends to each peer on (the peer dialed it). */
  private readonly peers = new Map<number, Socket>();
  /** The connection this rank receives from each peer on (this rank dialed it). */
  private readonly inbound = new Map<number, Socket>();
  /** Why a peer is gone (its connection closed or failed). */
  readonly lost = new Map<number, Error>();
  private readonly inbox = new Map<string, Msg[]>();
  private readonly waiters = new Map<string, Waiter[]>();
  /** Frames whose key starts with one of these are dropped (a failed group's stragglers). */
  private readonly dropped = new Set<string>();
  private closing = false;

  constructor(
    readonly rank: number,
    private readonly token: string,
    private readonly onAbort: (m: Msg) => void,
    private readonly onPeerLost: (peer: number, e: Error) => void,
  ) {}

  listen(host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const srv = createServer((s) => this.accepted(s));
      srv.once("error", reject);
      srv.listen({ host, port: 0 }, () => {
        this.server = srv;
        resolve((srv.address() as { port: number }).port);
      });
    });
  }

  /** Connect to every peer and wait until every peer connected to this one. */
  async connectAll(addrs: string[], deadline: number): Promise<void> {
    const world = addrs.length;
    const joins: Promise<void>[] = [];
    for (let j = 0; j < world; j++) if (j !== this.rank) joins.push(this.dial(j, addrs[j]!, deadline));
    await Promise.all(joins);
    while (this.peers.size < world - 1) {
      if (Date.now() > deadline) {
        const missing = [...Array(world).keys()].filter((r) => r !== this.rank && !this.peers.has(r));
        throw new DistNetworkError(`[Rank ${this.rank}] timed out waiting for rank(s) ${missing.join(", ")} to connect`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private async dial(peer: number, addr: string, deadline: number): Promise<void> {
    const i = addr.lastIndexOf(":");
    const host = addr.slice(0, i).replace(/^\[|\]$/g, "");
    const port = Number(addr.slice(i + 1));
    let delay = 10;
    for (;;) {
      try {
        const reader = new FrameReader(() => peer, (m) => this.deliver(m));
        const s = await new Promise<Socket>((resolve, reject) => {
          const onread = { buffer: () => reader.nextBuffer(), callback: (n: number, b: Uint8Array) => (reader.onRead(n, b), true) };
          const sock = connect({ host, port, onread });
          sock.once("connect", () => {
            sock.off("error", reject);
            resolve(sock);
          });
          sock.once("error", reject);
        });
        const hello = Buffer.from(JSON.stringify({ rank: this.rank, token: this.token }));
        s.write(Buffer.concat([header(KIND_HELLO, "", 0, "", hello.length), hello]));
        this.inbound.set(peer, s);
        this.watch(s, peer);
        return;
      } catch (e) {
        if (Date.now() + delay > deadline)
          throw new DistNetworkError(`[Rank ${this.rank}] could not connect to rank ${peer} at ${addr}: ${(e as Error).message}`);
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(500, delay * 2);
      }
    }
  }

  private accepted(s: Socket): void {
    // the first frame must be a HELLO with the rendezvous token; anything else is not a peer
    let peer = -1;
    const reader = new FrameReader(
      () => peer,
      (m) => {
        if (peer >= 0) return this.deliver(m);
        let hello: { rank?: unknown; token?: unknown } = {};
        try {
          hello = JSON.parse(m.payload.toString()) as typeof hello;
        } catch {
          /* refused below */
        }
        const r = hello.rank;
        if (m.kind !== KIND_HELLO || hello.token !== this.token || typeof r !== "number" || r === this.rank || this.peers.has(r)) {
          s.destroy();
          return;
        }
        peer = r;
        s.setNoDelay(true);
        this.peers.set(r, s);
        this.watch(s, r);
      },
    );
    s.on("data", (c: Buffer) => reader.feed(c));
    s.on("error", () => {});
  }

  /** Either connection with a peer failing or closing loses the peer. */
  private watch(s: Socket, peer: number): void {
    s.on("error", (e: NodeJS.ErrnoException) =>
      this.lose(
        peer,
        new DistNetworkError(
          e.code === "ECONNRESET" || e.code === "EPIPE"
            ? `rank ${peer} closed its connection (its process exited or was killed)`
            : `connection to rank ${peer} failed: ${e.message}`,
        ),
      ),
    );
    s.on("close", () => this.lose(peer, new DistNetworkError(`rank ${peer} closed its connection (its process exited or was killed)`)));
  }

  /**
   * A peer's connection ended: what it sent before stays in the inbox (a rank that finished and
   * exited sent everything first); only receives still waiting for it fail.
   */
  private lose(peer: number, e: Error): void {
    if (this.closing || this.lost.has(peer)) return;
    this.lost.set(peer, e);
    this.peers.delete(peer);
    this.inbound.delete(peer);
    const prefix = `${peer}\0`;
    for (const [id, ws] of [...this.waiters]) {
      if (!id.startsWith(prefix)) continue;
      this.waiters.delete(id);
      for (const w of ws) w.reject(e);
    }
    this.onPeerLost(peer, e);
  }

  private deliver(m: Msg): void {
    if (m.kind === KIND_ABORT) return this.onAbort(m);
    for (const d of this.dropped) if (m.key.startsWith(d)) return;
    const id = `${m.from}\0${m.key}\0${m.sub}`;
    const ws = this.waiters.get(id);
    if (ws?.length) {
      const w = ws.shift()!;
      if (!ws.length) this.waiters.delete(id);
      w.resolve(m);
      return;
    }
    const q = this.inbox.get(id);
    if (q) q.push(m);
    else this.inbox.set(id, [m]);
  }

  /** The next message from `peer` with this key and sub. `cancel` registers how to give up waiting. */
  take(peer: number, key: string, sub: number, cancel: (abort: (e: Error) => void) => void): Promise<Msg> {
    const id = `${peer}\0${key}\0${sub}`;
    const q = this.inbox.get(id);
    if (q?.length) {
      const m = q.shift()!;
      if (!q.length) this.inbox.delete(id);
      return Promise.resolve(m);
    }
    const gone = this.lost.get(peer);
    if (gone) return Promise.reject(gone);
    return new Promise<Msg>((resolve, reject) => {
      const w: Waiter = { resolve, reject };
      const ws = this.waiters.get(id);
      if (ws) ws.push(w);
      else this.waiters.set(id, [w]);
      cancel((e) => {
        const list = this.waiters.get(id);
        const i = list ? list.indexOf(w) : -1;
        if (i >= 0) {
          list!.splice(i, 1);
          if (!list!.length) this.waiters.delete(id);
        }
        reject(e);
      });
    });
  }

  /** Send a frame; resolves once the socket took the bytes (the payload must not change before). */
  send(peer: number, kind: number, key: string, sub: number, fp: string, payload: Uint8Array = EMPTY): Promise<void> {
    const s = this.peers.get(peer);
    if (!s) return Promise.reject(this.lost.get(peer) ?? new DistNetworkError(`no connection to rank ${peer}`));
    return new Promise<void>((resolve, reject) => {
      const done = (e?: Error | null) => (e ? reject(new DistNetworkError(`sending to rank ${peer} failed: ${e.message}`)) : resolve());
      s.cork();
      if (payload.length) {
        s.write(header(kind, key, sub, fp, payload.length));
        s.write(payload, done);
      } else s.write(header(kind, key, sub, fp, 0), done);
      s.uncork();
    });
  }

  /** Drop waiting and future messages whose key starts with `prefix` (a failed group). */
  drop(prefix: string): void {
    this.dropped.add(prefix);
    for (const id of [...this.inbox.keys()]) if (id.split("\0")[1]!.startsWith(prefix)) this.inbox.delete(id);
  }

  close(): void {
    this.closing = true;
    for (const s of [...this.peers.values(), ...this.inbound.values()]) s.destroy();
    this.peers.clear();
    this.inbound.clear();
    this.server?.close();
  }
}
