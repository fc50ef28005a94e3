// The communication thread of one process: it owns the sockets to the other ranks and runs the
// collectives (algorithms.ts) while the main thread computes. Each operation checks what the
// other ranks run (mpmd safety): every frame carries the sender's fingerprint of the operation,
// and every rank also sends its fingerprint to its right neighbour in the group, so a mismatch
// anywhere is seen by some rank, which aborts the group on every rank with one message naming
// both ranks and both operations. Every operation has a timeout naming it and the ranks it waits for.
import { workerData, type MessagePort } from "node:worker_threads";
import { hostArrayCtor, type HostArray } from "../ir/dtype.js";
import * as algo from "./algorithms.js";
import type { OpCtx } from "./algorithms.js";
import { CTRL_POSTED, type FromWorker, type OpRequest, type ToWorker } from "./comm_protocol.js";
import { DistBackendError, DistTimeoutError } from "./errors.js";
import { KIND_ABORT, KIND_DATA, PeerNet, releasePayload, type Msg } from "./peer_net.js";

const { rank, host, token, ctrl, port } = workerData as { rank: number; host: string; token: string; ctrl: SharedArrayBuffer; port: MessagePort };
const flag = new Int32Array(ctrl);

function post(m: FromWorker, transfer: ArrayBuffer[] = []): void {
  port.postMessage(m, transfer);
  Atomics.add(flag, CTRL_POSTED, 1);
  Atomics.notify(flag, CTRL_POSTED);
}

const FP_SUB = 0xffffffff;

class MismatchError extends DistBackendError {}

interface GroupState {
  gid: number;
  ranks: number[];
  broken: Error | null;
  running: Set<Running>;
}
const groups = new Map<number, GroupState>();

function groupOf(req: OpRequest): GroupState {
  let g = groups.get(req.gid);
  if (!g) groups.set(req.gid, (g = { gid: req.gid, ranks: req.ranks, broken: null, running: new Set() }));
  return g;
}

/** Point-to-point message counters per (group, src, dst, tag): the n-th send matches the n-th recv. */
const p2pCount = new Map<string, number>();

function describeSeq(req: OpRequest): string {
  return req.seq === null ? `group ${req.gid}` : `sequence number ${req.seq} of group ${req.gid}`;
}

class Running {
  readonly key: string;
  readonly g: GroupState;
  private done = false;
  private timer: NodeJS.Timeout | null = null;
  /** Pending receives per peer (global rank), for the timeout's message. */
  private readonly waitingOn = new Map<number, number>();
  private readonly cancels = new Set<(e: Error) => void>();
  private readonly writes: Promise<void>[] = [];
  readonly ctx: OpCtx;

  constructor(readonly req: OpRequest) {
    this.g = groupOf(req);
    this.key = keyOf(req);
    const ctor = hostArrayCtor(req.dtype);
    const self = this;
    const ranks = req.ranks;
    this.ctx = {
      n: ranks.length,
      r: ranks.indexOf(rank),
      dtype: req.dtype,
      alloc: (n: number) => new ctor(n),
      send(to, sub, a, start = 0, count) {
        const bytes = a ? new Uint8Array(a.buffer, a.byteOffset + start * a.BYTES_PER_ELEMENT, (count ?? a.length - start) * a.BYTES_PER_ELEMENT) : undefined;
        return self.track(net.send(ranks[to]!, KIND_DATA, self.key, sub, req.fp, bytes));
      },
      async recv(from, sub) {
        const m = await self.take(ranks[from]!, sub);
        return viewAs(ctor, m.payload);
      },
      sendBytes(to, sub, b) {
        return self.track(net.send(ranks[to]!, KIND_DATA, self.key, sub, req.fp, b));
      },
      async recvBytes(from, sub) {
        return (await self.take(ranks[from]!, sub)).payload;
      },
      release: releasePayload,
    };
  }

  private track(p: Promise<void>): Promise<void> {
    this.writes.push(p);
    p.catch(() => {}); // failures surface through the operation that awaits it
    return p;
  }

  /** A frame from `peer` for this operation, checked against this rank's fingerprint. */
  async take(peer: number, sub: number): Promise<Msg> {
    this.waitingOn.set(peer, (this.waitingOn.get(peer) ?? 0) + 1);
    let cancel!: (e: Error) => void;
    try {
      const m = await net.take(peer, this.key, sub, (c) => {
        cancel = c;
        this.cancels.add(c);
      });
      if (m.fp !== this.req.fp) throw this.mismatch(peer, m.fp);
      return m;
    } finally {
      if (cancel) this.cancels.delete(cancel);
      const left = this.waitingOn.get(peer)! - 1;
      if (left) this.waitingOn.set(peer, left);
      else this.waitingOn.delete(peer);
    }
  }

  private mismatch(peer: number, theirs: string): MismatchError {
    const where = describeSeq(this.req);
    const [a, b] = peer < rank ? [[peer, theirs], [rank, this.req.fp]] : [[rank, this.req.fp], [peer, theirs]];
    const what = this.req.kind === "send" || this.req.kind === "recv" ? "point-to-point operations" : "collectives";
    return new MismatchError(
      `Detected mismatch between ${what} on ranks. Rank ${a[0]} is running ${a[1]} (${where}), but Rank ${b[0]} is running ${b[1]} (${where})`,
    );
  }

  async run(): Promise<void> {
    const g = this.g;
    if (g.broken) return this.fail(g.broken, true);
    g.running.add(this);
    this.timer = setTimeout(() => this.onTimeout(), this.req.timeoutMs);
    try {
      const out = await this.body();
      await Promise.all(this.writes); // the output's memory may still be under a socket write
      this.finish(out);
    } catch (e) {
      let err = e instanceof Error ? e : new Error(String(e));
      // name the operation in errors that came from below it (a lost peer, a failed write)
      if (!(err instanceof MismatchError) && !err.message.startsWith("[Rank ")) err = new DistBackendError(`[Rank ${rank}] ${this.req.fp} (${describeSeq(this.req)}) failed: ${err.message}`);
      if (this.req.kind === "monitoredBarrier") return this.fail(err, false); // a missing rank is reported; the group stays usable
      // the other members would wait for this rank's part: they raise too (a mismatch: the same message)
      abortGroup(g, err);
      this.fail(err, true);
    }
  }

  private async body(): Promise<HostArray | null> {
    const { req, ctx } = this;
    const ctor = hostArrayCtor(req.dtype);
    const input = req.inPlace
      ? new ctor(req.inPlace.buffer, req.inPlace.byteOffset, req.numel)
      : req.input
        ? new ctor(req.input, 0, req.input.byteLength / ctor.BYTES_PER_ELEMENT)
        : null;
    const collective = req.seq !== null && ctx.n > 1 && req.kind !== "monitoredBarrier";
    // the ring fingerprint exchange runs alongside the algorithm; the operation completes only once it matched
    const ring = collective ? this.ringCheck() : Promise.resolve();
    ring.catch(() => {});
    let out: HostArray | null;
    switch (req.kind) {
      case "allReduce":
        out = await algo.allReduce(ctx, input!, req.op!);
        break;
      case "broadcast":
        out = await algo.broadcast(ctx, input, req.numel, req.root!);
        break;
      case "reduce":
        out = await algo.reduce(ctx, input!, req.op!, req.root!);
        break;
      case "allGather":
        out = await algo.allGather(ctx, input!);
        break;
      case "reduceScatter":
        out = await algo.reduceScatter(ctx, input!, req.op!);
        break;
      case "allToAll":
        out = await algo.allToAll(ctx, input!, req.inSplits!, req.outSplits!);
        break;
      case "gather":
        out = await algo.gather(ctx, input!, req.root!);
        break;
      case "scatter":
        out = await algo.scatter(ctx, input, req.numel, req.root!);
        break;
      case "barrier":
        await algo.barrier(ctx);
        out = null;
        break;
      case "send":
        await ctx.send(req.peer!, 0, input!);
        out = null;
        break;
      case "recv": {
        const got = await this.take(req.ranks[req.peer!]!, 0);
        out = ctx.alloc(req.numel);
        out.set(viewAs(ctor, got.payload) as never);
        break;
      }
      case "monitoredBarrier":
        await this.monitoredBarrier();
        out = null;
        break;
    }
    await ring;
    if (req.inPlace) {
      // the result belongs in the operand's memory (an algorithm may have built it elsewhere)
      if (out && out !== input) input!.set(out as never);
      return null;
    }
    return out;
  }

  private async ringCheck(): Promise<void> {
    const { n, r } = this.ctx;
    const ranks = this.req.ranks;
    await Promise.all([
      this.track(net.send(ranks[(r + 1) % n]!, KIND_DATA, this.key, FP_SUB, this.req.fp)),
      this.take(ranks[(r + n - 1) % n]!, FP_SUB),
    ]);
  }

  /** Rank 0 of the group waits for every other rank, then releases them or names who did not come. */
  private async monitoredBarrier(): Promise<void> {
    const { n, r } = this.ctx;
    const ranks = this.req.ranks;
    if (r !== 0) {
      await this.ctx.sendBytes(0, 0, new Uint8Array(0));
      const verdict = await this.ctx.recvBytes(0, 1);
      if (verdict.length) throw new DistBackendError(verdict.toString());
      return;
    }
    const arrived = new Set<number>();
    const budget = this.req.budgetMs!;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, budget);
      let left = n - 1;
      for (let j = 1; j < n; j++)
        this.ctx.recvBytes(j, 0).then(
          () => {
            arrived.add(j);
            if (--left === 0) {
              clearTimeout(t);
              resolve();
            }
          },
          () => {},
        );
    });
    const missing = [...Array(n).keys()].filter((j) => j !== 0 && !arrived.has(j)).map((j) => ranks[j]!);
    const shown = this.req.waitAllRanks ? missing : missing.slice(0, 1);
    const text = missing.length
      ? `[Rank ${rank}]: ${shown.length > 1 ? "Ranks" : "Rank"} ${shown.join(", ")} failed to pass monitoredBarrier in ${budget} ms`
      : "";
    const verdict = Buffer.from(text);
    await Promise.all([...arrived].map((j) => this.ctx.sendBytes(j, 1, verdict)));
    if (missing.length) {
      for (const c of [...this.cancels]) c(new DistBackendError(text));
      throw new DistBackendError(text);
    }
  }

  private onTimeout(): void {
    const peers = [...this.waitingOn.keys()].sort((a, b) => a - b);
    const why = peers.length
      ? `still waiting for rank${peers.length > 1 ? "s" : ""} ${peers.join(", ")}`
      : "still sending";
    const err = new DistTimeoutError(
      `[Rank ${rank}] Timed out after ${this.req.timeoutMs} ms: ${this.req.fp} (${describeSeq(this.req)}) is ${why}`,
    );
    if (this.req.kind === "monitoredBarrier") {
      this.fail(err, false);
      return;
    }
    abortGroup(this.g, err); // the others would wait for this rank's part: tell them
  }

  fail(err: Error, breaksGroup: boolean): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.g.running.delete(this);
    for (const c of [...this.cancels]) c(err);
    if (breaksGroup) breakGroup(this.g, err);
    post({ type: "error", id: this.req.id, name: err.name, message: err.message, gid: this.req.gid, breaksGroup });
  }

  private finish(out: HostArray | null): void {
    if (this.done) return;
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    this.g.running.delete(this);
    // results travel as their own ArrayBuffer (transferred, not copied); a view into a larger
    // buffer (an input's subarray) is copied first
    let buf: ArrayBuffer | null = null;
    if (out) {
      if (out.byteOffset === 0 && out.byteLength === out.buffer.byteLength && !(out.buffer instanceof SharedArrayBuffer)) buf = out.buffer as ArrayBuffer;
      else buf = out.slice().buffer as ArrayBuffer;
    }
    post({ type: "done", id: this.req.id, output: buf }, buf ? [buf] : []);
  }
}

function keyOf(req: OpRequest): string {
  if (req.seq !== null) return `c:${req.gid}:${req.seq}`;
  const me = req.ranks.indexOf(rank);
  const [src, dst] = req.kind === "send" ? [me, req.peer!] : [req.peer!, me];
  const chan = `p:${req.gid}:${src}>${dst}:${req.tag ?? 0}`;
  const n = p2pCount.get(chan) ?? 0;
  p2pCount.set(chan, n + 1);
  return `${chan}:${n}`;
}

/** A typed view of received bytes (copied when the bytes are not aligned for the element type). */
function viewAs(ctor: ReturnType<typeof hostArrayCtor>, b: Buffer): HostArray {
  const bpe = ctor.BYTES_PER_ELEMENT;
  if (b.byteOffset % bpe === 0) return new ctor(b.buffer, b.byteOffset, b.length / bpe);
  const out = new ctor(b.length / bpe);
  new Uint8Array(out.buffer).set(b);
  return out;
}

/** Fail every operation of the group, now and later, and drop its frames still to come. */
function breakGroup(g: GroupState, err: Error): void {
  if (g.broken) return;
  g.broken = err;
  net.drop(`c:${g.gid}:`);
  net.drop(`p:${g.gid}:`);
  for (const op of [...g.running]) op.fail(err, true);
}

/** Break the group here and on every other member (they get the same message). */
function abortGroup(g: GroupState, err: Error): void {
  if (g.broken) return;
  const payload = Buffer.from(JSON.stringify({ gid: g.gid, name: err.name, message: err.message }));
  for (const r of g.ranks) if (r !== rank && !net.lost.has(r)) net.send(r, KIND_ABORT, "", 0, "", payload).catch(() => {});
  breakGroup(g, err);
}

function onAbort(m: Msg): void {
  let info: { gid?: number; name?: string; message?: string } = {};
  try {
    info = JSON.parse(m.payload.toString()) as typeof info;
  } catch {
    return;
  }
  const known = groups.get(info.gid ?? -1);
  const g = known ?? { gid: info.gid!, ranks: [], broken: null, running: new Set<Running>() };
  if (!known) groups.set(g.gid, g);
  const err = info.name === "DistTimeoutError" ? new DistTimeoutError(info.message) : new DistBackendError(info.message);
  breakGroup(g, err);
}

function onPeerLost(_peer: number, _e: Error): void {
  // the receives waiting for the peer failed (peer_net.ts), which fails their operations and breaks
  // their groups; an operation that already has everything it needs from the peer still completes
}

const net = new PeerNet(rank, token, onAbort, onPeerLost);

port.on("message", (m: ToWorker) => {
  switch (m.type) {
    case "op":
      void new Running(m).run();
      return;
    case "connect":
      net.connectAll(m.addrs, m.deadline).then(
        () => post({ type: "connected" }),
        (e: Error) => post({ type: "fatal", message: e.message }),
      );
      return;
    case "close":
      net.close();
      port.close();
      return;
  }
});

net.listen(host).then(
  (p) => post({ type: "listening", port: p }),
  (e: Error) => post({ type: "fatal", message: `[Rank ${rank}] could not listen on ${host}: ${e.message}` }),
);
