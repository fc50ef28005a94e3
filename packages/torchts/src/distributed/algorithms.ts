// The collective algorithms, over a group of n ranks (ranks here are positions in the group).
// Small messages go directly (one step: every rank sends to every rank that needs its data, and
// a reduction folds the contributions in rank order, so every rank computes the same bits);
// large all-reduces and reduce-scatters use the chunked ring (a reduce-scatter pass and an
// all-gather pass over n chunks, each cut into segments that are forwarded as soon as they are
// reduced: 2(n-1)/n of the data per rank on the wire, the bandwidth optimum), large broadcasts
// a pipelined chain (each link carries the data once).
import type { DType, HostArray } from "../ir/dtype.js";
import { combine, divideInPlace, type ReduceOpName } from "./reduce_ops.js";

/** What an algorithm sees of its operation (comm_worker.ts implements it). */
export interface OpCtx {
  readonly n: number;
  readonly r: number;
  readonly dtype: DType;
  /** A fresh host array of the dtype. */
  alloc(numel: number): HostArray;
  /** Send `count` elements of `a` from `start` to group rank `to`; resolves when the socket took them. */
  send(to: number, sub: number, a: HostArray | null, start?: number, count?: number): Promise<void>;
  /** The elements group rank `from` sent with this sub (a view of the received bytes). */
  recv(from: number, sub: number): Promise<HostArray>;
  /** Send raw bytes (control messages). */
  sendBytes(to: number, sub: number, b: Uint8Array): Promise<void>;
  recvBytes(from: number, sub: number): Promise<Buffer>;
  /** A received array is consumed (its memory may hold the next message). */
  release(a: HostArray): void;
}

/** Messages up to this many bytes take the direct (one-step) algorithms. */
export const DIRECT_BYTES = 256 * 1024;
/** Ring and chain segments: each is sent as soon as it is ready, so links work in parallel. */
export const SEGMENT_BYTES = 1 << 20;

const mod = (a: number, n: number) => ((a % n) + n) % n;

/** [start, end) of n near-equal chunks of `numel` (the first `numel % n` one element longer). */
export function evenChunks(numel: number, n: number): [number, number][] {
  const base = Math.floor(numel / n);
  const extra = numel % n;
  const out: [number, number][] = [];
  let at = 0;
  for (let c = 0; c < n; c++) {
    const len = base + (c < extra ? 1 : 0);
    out.push([at, at + len]);
    at += len;
  }
  return out;
}

function segmentsOf([lo, hi]: [number, number], perSeg: number): [number, number][] {
  const out: [number, number][] = [];
  for (let a = lo; a < hi; a += perSeg) out.push([a, Math.min(hi, a + perSeg)]);
  return out;
}

function elemsPerSegment(ctx: OpCtx, a: HostArray): number {
  return Math.max(1, Math.floor(SEGMENT_BYTES / a.BYTES_PER_ELEMENT));
}

function isDirect(a: HostArray): boolean {
  return a.byteLength <= DIRECT_BYTES;
}

/** Fold contributions[0..n) in rank order into a fresh array. */
function foldInOrder(ctx: OpCtx, op: ReduceOpName, parts: HostArray[]): HostArray {
  const out = ctx.alloc(parts[0]!.length);
  out.set(parts[0]! as never);
  for (let j = 1; j < parts.length; j++) combine(op, ctx.dtype, out, 0, parts[j]!, 0, out.length);
  return out;
}

/** Receive sub 0 from every other rank; parts[j] is rank j's array (own = `mine`). */
async function fromAll(ctx: OpCtx, mine: HostArray, sub = 0): Promise<HostArray[]> {
  const parts: HostArray[] = new Array<HostArray>(ctx.n);
  parts[ctx.r] = mine;
  await Promise.all([...Array(ctx.n).keys()].filter((j) => j !== ctx.r).map(async (j) => (parts[j] = await ctx.recv(j, sub))));
  return parts;
}

function toAll(ctx: OpCtx, a: HostArray, start?: number, count?: number): Promise<void>[] {
  const out: Promise<void>[] = [];
  for (let j = 0; j < ctx.n; j++) if (j !== ctx.r) out.push(ctx.send(j, 0, a, start, count));
  return out;
}

/**
 * The ring reduce-scatter pass over `chunks`, in place in `work`: afterwards rank r holds chunk r
 * fully reduced. At step k rank r sends chunk r-k-1 to the right and reduces chunk r-k-2 from the
 * left into its own. `onDone(seg)` runs per segment of chunk r once it is final (the all-gather
 * starts from there). Returns the send promise of every (chunk, segment), for the write hazard.
 */
async function ringReduceScatter(
  ctx: OpCtx, op: ReduceOpName, work: HostArray, chunks: [number, number][], perSeg: number,
  onFinal: (seg: number, range: [number, number]) => void,
): Promise<Promise<void>[][]> {
  const { n, r } = ctx;
  const right = mod(r + 1, n);
  const left = mod(r - 1, n);
  const segs = chunks.map((c) => segmentsOf(c, perSeg));
  const stride = Math.max(1, ...segs.map((s) => s.length));
  const sent: Promise<void>[][] = segs.map(() => []);
  const first = mod(r - 1, n);
  segs[first]!.forEach(([a, b], i) => (sent[first]![i] = ctx.send(right, i, work, a, b - a)));
  for (let k = 0; k < n - 1; k++) {
    const t = mod(r - k - 2, n);
    for (let i = 0; i < segs[t]!.length; i++) {
      const [a, b] = segs[t]![i]!;
      const got = await ctx.recv(left, k * stride + i);
      combine(op, ctx.dtype, work, a, got, 0, b - a);
      ctx.release(got);
      if (k < n - 2) sent[t]![i] = ctx.send(right, (k + 1) * stride + i, work, a, b - a);
      else onFinal(i, [a, b]);
    }
  }
  return sent;
}

export async function allReduce(ctx: OpCtx, data: HostArray, op: ReduceOpName): Promise<HostArray> {
  const { n, r } = ctx;
  let out: HostArray;
  if (n === 1) out = data;
  else if (isDirect(data) || data.length < n) {
    const sends = toAll(ctx, data);
    out = foldInOrder(ctx, op, await fromAll(ctx, data));
    await Promise.all(sends);
  } else {
    const chunks = evenChunks(data.length, n);
    const perSeg = elemsPerSegment(ctx, data);
    const segs = chunks.map((c) => segmentsOf(c, perSeg));
    const stride = Math.max(1, ...segs.map((s) => s.length));
    const right = mod(r + 1, n);
    const left = mod(r - 1, n);
    const agSub = (j: number, i: number) => (n - 1 + j) * stride + i;
    const agSends: Promise<void>[] = [];
    // all-gather step 0: forward each final segment of chunk r as soon as it is reduced
    const rsSent = await ringReduceScatter(ctx, op, data, chunks, perSeg, (i, [a, b]) => agSends.push(ctx.send(right, agSub(0, i), data, a, b - a)));
    for (let j = 0; j < n - 1; j++) {
      const t = mod(r - j - 1, n);
      for (let i = 0; i < segs[t]!.length; i++) {
        const [a, b] = segs[t]![i]!;
        const got = await ctx.recv(left, agSub(j, i));
        await rsSent[t]![i]; // this range was sent during the reduce-scatter: the socket must be done with it
        data.set(got as never, a);
        ctx.release(got);
        if (j < n - 2) agSends.push(ctx.send(right, agSub(j + 1, i), data, a, b - a));
      }
    }
    await Promise.all([...agSends, ...rsSent.flat()]);
    out = data;
  }
  if (op === "AVG") divideInPlace(ctx.dtype, out, n);
  return out;
}

/** Every rank gets `root`'s data (`data` is null on the others). */
export async function broadcast(ctx: OpCtx, data: HostArray | null, numel: number, root: number): Promise<HostArray | null> {
  const { n, r } = ctx;
  if (n === 1) return null;
  const bytes = numel * ctx.alloc(0).BYTES_PER_ELEMENT;
  if (bytes <= DIRECT_BYTES) {
    if (r === root) {
      await Promise.all(toAll(ctx, data!));
      return null;
    }
    const got = await ctx.recv(root, 0);
    const out = ctx.alloc(numel);
    out.set(got as never);
    return out;
  }
  // chain root -> root+1 -> ... : each rank forwards a segment as soon as it has it
  const pos = mod(r - root, n);
  const next = mod(r + 1, n);
  const prev = mod(r - 1, n);
  const perSeg = Math.max(1, Math.floor(SEGMENT_BYTES / ctx.alloc(0).BYTES_PER_ELEMENT));
  const segs = segmentsOf([0, numel], perSeg);
  const sends: Promise<void>[] = [];
  if (pos === 0) {
    segs.forEach(([a, b], i) => sends.push(ctx.send(next, i, data!, a, b - a)));
    await Promise.all(sends);
    return null;
  }
  const out = ctx.alloc(numel);
  for (let i = 0; i < segs.length; i++) {
    const [a, b] = segs[i]!;
    const got = await ctx.recv(prev, i);
    out.set(got as never, a);
    ctx.release(got);
    if (pos < n - 1) sends.push(ctx.send(next, i, out, a, b - a));
  }
  await Promise.all(sends);
  return out;
}

/** `root` gets the reduction of every rank's data; the others get null. */
export async function reduce(ctx: OpCtx, data: HostArray, op: ReduceOpName, root: number): Promise<HostArray | null> {
  const { n, r } = ctx;
  let out: HostArray | null;
  if (n === 1) out = data;
  else if (isDirect(data) || data.length < n) {
    if (r !== root) {
      await ctx.send(root, 0, data);
      return null;
    }
    out = foldInOrder(ctx, op, await fromAll(ctx, data));
  } else {
    // reduce-scatter, then every rank sends its reduced chunk to the root
    const chunks = evenChunks(data.length, n);
    const sent = await ringReduceScatter(ctx, op, data, chunks, elemsPerSegment(ctx, data), () => {});
    await Promise.all(sent.flat());
    const GATHER = 0xfffffff0;
    if (r !== root) {
      const [a, b] = chunks[r]!;
      await ctx.send(root, GATHER, data, a, b - a);
      return null;
    }
    await Promise.all(
      chunks.map(async ([a], j) => {
        if (j !== r) data.set((await ctx.recv(j, GATHER)) as never, a);
      }),
    );
    out = data;
  }
  if (op === "AVG") divideInPlace(ctx.dtype, out, n);
  return out;
}

/** Every rank gets every rank's data, in rank order (n * numel elements). */
export async function allGather(ctx: OpCtx, data: HostArray): Promise<HostArray> {
  const m = data.length;
  const out = ctx.alloc(ctx.n * m);
  const sends = toAll(ctx, data);
  const parts = await fromAll(ctx, data);
  parts.forEach((p, j) => out.set(p as never, j * m));
  await Promise.all(sends);
  return out;
}

/** Rank j gets the reduction of block j (of n equal blocks) over every rank's data. */
export async function reduceScatter(ctx: OpCtx, data: HostArray, op: ReduceOpName): Promise<HostArray> {
  const { n, r } = ctx;
  const m = data.length / n;
  let out: HostArray;
  if (n === 1) out = data;
  else if (isDirect(data) || m === 0) {
    const sends: Promise<void>[] = [];
    for (let j = 0; j < n; j++) if (j !== r) sends.push(ctx.send(j, 0, data, j * m, m));
    const parts: HostArray[] = new Array<HostArray>(n);
    parts[r] = data.subarray(r * m, (r + 1) * m);
    await Promise.all([...Array(n).keys()].filter((j) => j !== r).map(async (j) => (parts[j] = await ctx.recv(j, 0))));
    out = foldInOrder(ctx, op, parts);
    await Promise.all(sends);
  } else {
    const chunks = [...Array(n).keys()].map((c) => [c * m, (c + 1) * m] as [number, number]);
    const sent = await ringReduceScatter(ctx, op, data, chunks, elemsPerSegment(ctx, data), () => {});
    await Promise.all(sent.flat());
    out = ctx.alloc(m);
    out.set(data.subarray(r * m, (r + 1) * m) as never);
  }
  if (op === "AVG") divideInPlace(ctx.dtype, out, n);
  return out;
}

/**
 * Rank j gets block r of every rank's data: `inSplits[j]` elements go to rank j and `outSplits[j]`
 * come from it (both in elements).
 */
export async function allToAll(ctx: OpCtx, data: HostArray, inSplits: number[], outSplits: number[]): Promise<HostArray> {
  const { n, r } = ctx;
  const inOff = offsets(inSplits);
  const outOff = offsets(outSplits);
  const out = ctx.alloc(outOff[n]!);
  const sends: Promise<void>[] = [];
  for (let j = 0; j < n; j++) if (j !== r) sends.push(ctx.send(j, 0, data, inOff[j]!, inSplits[j]!));
  out.set(data.subarray(inOff[r]!, inOff[r]! + inSplits[r]!) as never, outOff[r]!);
  if (inSplits[r] !== outSplits[r]) throw new Error(`allToAllSingle: this rank sends itself ${inSplits[r]} elements but expects ${outSplits[r]}`);
  await Promise.all(
    [...Array(n).keys()].filter((j) => j !== r).map(async (j) => {
      const got = await ctx.recv(j, 0);
      if (got.length !== outSplits[j])
        throw new Error(`allToAllSingle: group rank ${j} sent ${got.length} elements but outputSplitSizes[${j}] is ${outSplits[j]}`);
      out.set(got as never, outOff[j]!);
    }),
  );
  await Promise.all(sends);
  return out;
}

function offsets(splits: number[]): number[] {
  const o = [0];
  for (const s of splits) o.push(o[o.length - 1]! + s);
  return o;
}

/** `root` gets every rank's data in rank order; the others get null. */
export async function gather(ctx: OpCtx, data: HostArray, root: number): Promise<HostArray | null> {
  if (ctx.r !== root) {
    await ctx.send(root, 0, data);
    return null;
  }
  const m = data.length;
  const out = ctx.alloc(ctx.n * m);
  (await fromAll(ctx, data)).forEach((p, j) => out.set(p as never, j * m));
  return out;
}

/** Rank j gets block j of `root`'s data (n blocks of numel elements; `data` is null elsewhere). */
export async function scatter(ctx: OpCtx, data: HostArray | null, numel: number, root: number): Promise<HostArray> {
  const out = ctx.alloc(numel);
  if (ctx.r === root) {
    const sends: Promise<void>[] = [];
    for (let j = 0; j < ctx.n; j++) if (j !== root) sends.push(ctx.send(j, 0, data!, j * numel, numel));
    out.set(data!.subarray(root * numel, (root + 1) * numel) as never);
    await Promise.all(sends);
    return out;
  }
  out.set((await ctx.recv(root, 0)) as never);
  return out;
}

/** Every rank has arrived. */
export async function barrier(ctx: OpCtx): Promise<void> {
  const empty = ctx.alloc(0);
  const sends = toAll(ctx, empty);
  await fromAll(ctx, empty);
  await Promise.all(sends);
}
