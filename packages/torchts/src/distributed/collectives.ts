// The collectives and point-to-point operations (PyTorch's names in camelCase, its argument
// order, or a trailing options object). Each returns at once: inputs are copied to the
// communication thread and outputs become pending on the transfer (comm.ts), so the caller keeps
// computing; `asyncOp: true` returns a Work to await. barrier and monitoredBarrier block, as in
// PyTorch. A failed collective (a mismatch between ranks, a timeout, a lost peer) breaks its
// group: reading its outputs, waiting for it, and every later call on the group raise the error.
import type { DType, HostArray } from "../ir/dtype.js";
import { Tensor } from "../tensor.js";
import { bindArgs, boolArg, describe, intArg, timeoutArg } from "./args.js";
import { realize } from "../runtime/dispatch.js";
import { pendOutputs, prepareOutputs, staging, type Target } from "./comm.js";
import type { OpKind, OpRequest } from "./comm_protocol.js";
import { DistError, freshError } from "./errors.js";
import { current, groupArg, type ProcessGroup } from "./process_group.js";
import { ReduceOp, reduceOpError, type ReduceOpName } from "./reduce_ops.js";
import { Work } from "./work.js";

const DTYPES: ReadonlySet<DType> = new Set<DType>(["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]);

function shapeOf(t: Tensor): string {
  return `${t.dtype}[${t.shape.join(", ")}]`;
}

function tensorArg(fn: string, name: string, t: unknown): Tensor {
  if (!(t instanceof Tensor)) throw new TypeError(`${fn}(): argument '${name}' must be Tensor, got ${describe(t)}`);
  if (t.isDisposed) throw new DistError(`${fn}: argument '${name}' has been disposed`);
  if (!t._storage.device.readSync)
    throw new DistError(`${fn}: tensors must be on the cpu (the TCP backend, like gloo, communicates host memory), got a ${t.device} tensor`);
  if (!t.isContiguous() && t.numel() > 0) throw new DistError(`${fn}: Tensors must be contiguous`); // (an empty tensor is, as in PyTorch)
  if (!DTYPES.has(t.dtype)) throw new DistError(`${fn}: unsupported dtype ${t.dtype}`);
  return t;
}

function tensorListArg(fn: string, name: string, v: unknown): Tensor[] {
  if (!Array.isArray(v)) throw new TypeError(`${fn}(): argument '${name}' must be a list of Tensors, got ${describe(v)}`);
  return v.map((t, i) => tensorArg(fn, `${name}[${i}]`, t));
}

function opArg(fn: string, op: unknown, dtype: DType): ReduceOpName {
  const name = op === undefined || op === null ? "SUM" : op;
  if (typeof name !== "string" || !(name in ReduceOp))
    throw new TypeError(`${fn}(): argument 'op' must be a ReduceOp (dist.ReduceOp.SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR), got ${describe(op)}`);
  const why = reduceOpError(name as ReduceOpName, dtype);
  if (why) throw new DistError(`${fn}: ${why}`);
  return name as ReduceOpName;
}

/** The group rank of global rank `r` (src/dst arguments are global ranks, as in PyTorch). */
function memberArg(fn: string, name: string, r: unknown, g: ProcessGroup): number {
  const v = intArg(fn, name, r, 0);
  const i = g.ranks.indexOf(v);
  if (i < 0) throw new DistError(`${fn}: The global rank ${v} is not part of the group ${g.toString()}`);
  return i;
}

function sameShapes(fn: string, ts: Tensor[], like: Tensor, what: string): void {
  for (const t of ts)
    if (t.dtype !== like.dtype || t.numel() !== like.numel())
      throw new DistError(`${fn}: ${what} must all be ${shapeOf(like)}, got ${shapeOf(t)}`);
}

/** A (contiguous, see tensorArg) tensor's elements in place in its storage's host memory. */
function hostView(t: Tensor): HostArray {
  t._checkAlive();
  realize(t._storage);
  const all = t._storage.device.readSync!(t._storage.buf!, t._storage.dtype, t._storage.numel);
  return all.subarray(t._offset, t._offset + t.numel());
}

/** Whether the tensor's elements lie in shared memory (the wasm arena), where the thread can reach them. */
function inSharedMemory(t: Tensor): boolean {
  const v = hostView(t);
  return v.buffer instanceof SharedArrayBuffer && v.length > 0;
}

/**
 * A contiguous host copy of the tensors' elements, concatenated, in a staging buffer of its own
 * (the buffer goes to the communication thread and comes back with the result: comm.ts).
 */
function packed(ts: Tensor[]): HostArray {
  const parts = ts.map(hostView);
  const ctor = parts[0]!.constructor as { new (b: ArrayBuffer, o: number, n: number): HostArray; BYTES_PER_ELEMENT: number };
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new ctor(staging.take(total * ctor.BYTES_PER_ELEMENT), 0, total);
  let at = 0;
  for (const p of parts) {
    out.set(p as never, at);
    at += p.length;
  }
  return out;
}

/** Own the buffer outright (a host copy may be a view into a larger one): then it can be transferred. */
function ownBuffer(a: HostArray): ArrayBuffer {
  if (a.byteOffset === 0 && a.byteLength === a.buffer.byteLength && !(a.buffer instanceof SharedArrayBuffer)) return a.buffer as ArrayBuffer;
  return a.slice().buffer as ArrayBuffer;
}

interface Launch {
  fn: string;
  kind: OpKind;
  g: ProcessGroup;
  fp: string;
  dtype: DType;
  numel: number;
  input: Tensor[] | null;
  targets: Target[];
  collective: boolean;
  extra?: Partial<OpRequest>;
  timeoutMs?: number;
  /** The one input is the one output: work on it in place when its memory is shared (comm_protocol.ts). */
  inPlace?: boolean;
}

/** Submit one operation; returns its pending handle. */
function launch(l: Launch) {
  const s = current(l.fn);
  s.comm.drain(); // an error that already arrived raises here, at the call
  if (l.g.error) {
    s.comm.observe(l.g.error);
    throw freshError(l.g.error);
  }
  const inPlace = l.inPlace === true && inSharedMemory(l.input![0]!);
  const input = l.input && !inPlace ? packed(l.input) : null;
  prepareOutputs(l.targets);
  const req: Omit<OpRequest, "type" | "id"> = {
    kind: l.kind,
    gid: l.g.id,
    ranks: [...l.g.ranks],
    seq: l.collective ? l.g.seq++ : null,
    fp: l.fp,
    timeoutMs: l.timeoutMs ?? l.g.timeoutMs,
    dtype: l.dtype,
    input: null,
    numel: l.numel,
    ...l.extra,
  };
  const buf = input ? ownBuffer(input) : null;
  req.input = buf;
  if (inPlace) {
    const v = hostView(l.input![0]!); // after prepareOutputs, which may have given the storage new memory
    req.inPlace = { buffer: v.buffer as SharedArrayBuffer, byteOffset: v.byteOffset };
  }
  const op = s.comm.submit(req, l.g, buf ? [buf] : []);
  pendOutputs(s.comm, op, l.targets);
  return { op, comm: s.comm };
}

function finish(l: Launch, asyncOp: boolean): Work | undefined {
  const { op, comm } = launch(l);
  return asyncOp ? new Work(op, comm, l.targets.map((t) => t.t)) : undefined;
}

function skip(g: ProcessGroup, asyncOp: boolean): Work | undefined {
  // PyTorch: a process outside the group does nothing (and gets no Work)
  void g;
  void asyncOp;
  return undefined;
}

type G = ProcessGroup | null | undefined;

/** Reduce `tensor` over the group, in place on every rank. */
export function allReduce(tensor: Tensor, op?: ReduceOpName, group?: G, asyncOp?: boolean): Work | undefined;
export function allReduce(tensor: Tensor, opts: { op?: ReduceOpName; group?: G; asyncOp?: boolean }): Work | undefined;
export function allReduce(...args: unknown[]): Work | undefined {
  const fn = "allReduce";
  const a = bindArgs(fn, ["tensor", "op", "group", "asyncOp"], args);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  const op = opArg(fn, a.op, t.dtype);
  if (!g.isMember) return skip(g, asyncOp);
  return finish({ fn, kind: "allReduce", g, fp: `allReduce(${shapeOf(t)}, op=${op})`, dtype: t.dtype, numel: t.numel(), input: [t], targets: [{ t, from: 0 }], collective: true, extra: { op }, inPlace: true }, asyncOp);
}

/** Copy `src`'s tensor (a global rank) to every rank of the group. */
export function broadcast(tensor: Tensor, src: number, group?: G, asyncOp?: boolean): Work | undefined;
export function broadcast(tensor: Tensor, src: number, opts: { group?: G; asyncOp?: boolean }): Work | undefined;
export function broadcast(tensor: Tensor, opts: { src: number; group?: G; asyncOp?: boolean }): Work | undefined;
export function broadcast(...args: unknown[]): Work | undefined {
  const fn = "broadcast";
  const a = bindArgs(fn, ["tensor", "src", "group", "asyncOp"], args);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (a.src === undefined) throw new TypeError(`${fn}() missing required argument 'src'`);
  if (!g.isMember) return skip(g, asyncOp);
  const root = memberArg(fn, "src", a.src, g);
  const isRoot = root === g.rank();
  return finish({ fn, kind: "broadcast", g, fp: `broadcast(${shapeOf(t)}, src=${a.src as number})`, dtype: t.dtype, numel: t.numel(), input: isRoot ? [t] : null, targets: isRoot ? [] : [{ t, from: 0 }], collective: true, extra: { root } }, asyncOp);
}

/** Reduce `tensor` over the group into rank `dst`'s tensor (the others are unchanged). */
export function reduce(tensor: Tensor, dst: number, op?: ReduceOpName, group?: G, asyncOp?: boolean): Work | undefined;
export function reduce(tensor: Tensor, dst: number, opts: { op?: ReduceOpName; group?: G; asyncOp?: boolean }): Work | undefined;
export function reduce(tensor: Tensor, opts: { dst: number; op?: ReduceOpName; group?: G; asyncOp?: boolean }): Work | undefined;
export function reduce(...args: unknown[]): Work | undefined {
  const fn = "reduce";
  const a = bindArgs(fn, ["tensor", "dst", "op", "group", "asyncOp"], args);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  const op = opArg(fn, a.op, t.dtype);
  if (a.dst === undefined) throw new TypeError(`${fn}() missing required argument 'dst'`);
  if (!g.isMember) return skip(g, asyncOp);
  const root = memberArg(fn, "dst", a.dst, g);
  return finish({ fn, kind: "reduce", g, fp: `reduce(${shapeOf(t)}, dst=${a.dst as number}, op=${op})`, dtype: t.dtype, numel: t.numel(), input: [t], targets: root === g.rank() ? [{ t, from: 0 }] : [], collective: true, extra: { op, root } }, asyncOp);
}

/** tensorList[j] = rank j's `tensor`, on every rank. */
export function allGather(tensorList: Tensor[], tensor: Tensor, group?: G, asyncOp?: boolean): Work | undefined;
export function allGather(tensorList: Tensor[], tensor: Tensor, opts: { group?: G; asyncOp?: boolean }): Work | undefined;
export function allGather(...args: unknown[]): Work | undefined {
  const fn = "allGather";
  const a = bindArgs(fn, ["tensorList", "tensor", "group", "asyncOp"], args);
  const list = tensorListArg(fn, "tensorList", a.tensorList);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  if (list.length !== g.size()) throw new DistError(`${fn}: tensorList must have one tensor per rank (${g.size()}), got ${list.length}`);
  sameShapes(fn, list, t, "the tensors of tensorList");
  const m = t.numel();
  return finish({ fn, kind: "allGather", g, fp: `allGather(${shapeOf(t)})`, dtype: t.dtype, numel: m * g.size(), input: [t], targets: list.map((o, j) => ({ t: o, from: j * m })), collective: true }, asyncOp);
}

/** outputTensor = every rank's inputTensor concatenated in rank order (dim 0). */
export function allGatherIntoTensor(outputTensor: Tensor, inputTensor: Tensor, group?: G, asyncOp?: boolean): Work | undefined;
export function allGatherIntoTensor(outputTensor: Tensor, inputTensor: Tensor, opts: { group?: G; asyncOp?: boolean }): Work | undefined;
export function allGatherIntoTensor(...args: unknown[]): Work | undefined {
  const fn = "allGatherIntoTensor";
  const a = bindArgs(fn, ["outputTensor", "inputTensor", "group", "asyncOp"], args);
  const out = tensorArg(fn, "outputTensor", a.outputTensor);
  const t = tensorArg(fn, "inputTensor", a.inputTensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  if (out.dtype !== t.dtype || out.numel() !== t.numel() * g.size())
    throw new DistError(`${fn}: output tensor size must be equal to world_size times input tensor size: output ${shapeOf(out)}, input ${shapeOf(t)}, world size ${g.size()}`);
  return finish({ fn, kind: "allGather", g, fp: `allGather(${shapeOf(t)})`, dtype: t.dtype, numel: out.numel(), input: [t], targets: [{ t: out, from: 0 }], collective: true }, asyncOp);
}

/** output = the reduction over ranks of their inputList[rank of this process]. */
export function reduceScatter(output: Tensor, inputList: Tensor[], op?: ReduceOpName, group?: G, asyncOp?: boolean): Work | undefined;
export function reduceScatter(output: Tensor, inputList: Tensor[], opts: { op?: ReduceOpName; group?: G; asyncOp?: boolean }): Work | undefined;
export function reduceScatter(...args: unknown[]): Work | undefined {
  const fn = "reduceScatter";
  const a = bindArgs(fn, ["output", "inputList", "op", "group", "asyncOp"], args);
  const out = tensorArg(fn, "output", a.output);
  const list = tensorListArg(fn, "inputList", a.inputList);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  const op = opArg(fn, a.op, out.dtype);
  if (!g.isMember) return skip(g, asyncOp);
  if (list.length !== g.size()) throw new DistError(`${fn}: inputList must have one tensor per rank (${g.size()}), got ${list.length}`);
  sameShapes(fn, list, out, "the tensors of inputList");
  return finish({ fn, kind: "reduceScatter", g, fp: `reduceScatter(${out.dtype}[${out.numel() * g.size()}] -> [${out.shape.join(", ")}], op=${op})`, dtype: out.dtype, numel: out.numel(), input: list, targets: [{ t: out, from: 0 }], collective: true, extra: { op } }, asyncOp);
}

/** output = block `rank` (of worldSize equal blocks along dim 0) of the reduction of every rank's input. */
export function reduceScatterTensor(output: Tensor, input: Tensor, op?: ReduceOpName, group?: G, asyncOp?: boolean): Work | undefined;
export function reduceScatterTensor(output: Tensor, input: Tensor, opts: { op?: ReduceOpName; group?: G; asyncOp?: boolean }): Work | undefined;
export function reduceScatterTensor(...args: unknown[]): Work | undefined {
  const fn = "reduceScatterTensor";
  const a = bindArgs(fn, ["output", "input", "op", "group", "asyncOp"], args);
  const out = tensorArg(fn, "output", a.output);
  const t = tensorArg(fn, "input", a.input);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  const op = opArg(fn, a.op, t.dtype);
  if (!g.isMember) return skip(g, asyncOp);
  if (out.dtype !== t.dtype || t.numel() !== out.numel() * g.size())
    throw new DistError(`${fn}: input tensor must be the same size as output size times world size: input ${shapeOf(t)}, output ${shapeOf(out)}, world size ${g.size()}`);
  return finish({ fn, kind: "reduceScatter", g, fp: `reduceScatter(${t.dtype}[${t.numel()}] -> [${out.shape.join(", ")}], op=${op})`, dtype: t.dtype, numel: out.numel(), input: [t], targets: [{ t: out, from: 0 }], collective: true, extra: { op } }, asyncOp);
}

function splitsArg(fn: string, name: string, v: unknown, t: Tensor, n: number): number[] {
  const rows = t.shape.length ? t.shape[0]! : 1;
  const inner = rows ? t.numel() / rows : 0;
  if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) {
    if (rows % n !== 0) throw new DistError(`${fn}: ${name === "outputSplitSizes" ? "output" : "input"} dim 0 (${rows}) must be divisible by the world size ${n} when no split sizes are given`);
    return Array<number>(n).fill((rows / n) * inner);
  }
  if (!Array.isArray(v) || v.length !== n) throw new DistError(`${fn}: ${name} must have one entry per rank (${n}), got ${describe(v)}`);
  const s = (v as unknown[]).map((x) => intArg(fn, name, x, 0));
  if (s.reduce((p, q) => p + q, 0) !== rows) throw new DistError(`${fn}: ${name} [${s.join(", ")}] must sum to dim 0 (${rows})`);
  return s.map((x) => x * inner);
}

/** Split input along dim 0 (equally, or by inputSplitSizes), send block j to rank j, and concatenate what arrives into output. */
export function allToAllSingle(output: Tensor, input: Tensor, outputSplitSizes?: number[] | null, inputSplitSizes?: number[] | null, group?: G, asyncOp?: boolean): Work | undefined;
export function allToAllSingle(output: Tensor, input: Tensor, opts: { outputSplitSizes?: number[] | null; inputSplitSizes?: number[] | null; group?: G; asyncOp?: boolean }): Work | undefined;
export function allToAllSingle(...args: unknown[]): Work | undefined {
  const fn = "allToAllSingle";
  const a = bindArgs(fn, ["output", "input", "outputSplitSizes", "inputSplitSizes", "group", "asyncOp"], args);
  const out = tensorArg(fn, "output", a.output);
  const t = tensorArg(fn, "input", a.input);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  if (out.dtype !== t.dtype) throw new DistError(`${fn}: output and input must have the same dtype, got ${out.dtype} and ${t.dtype}`);
  const n = g.size();
  const inSplits = splitsArg(fn, "inputSplitSizes", a.inputSplitSizes, t, n);
  const outSplits = splitsArg(fn, "outputSplitSizes", a.outputSplitSizes, out, n);
  return finish({ fn, kind: "allToAll", g, fp: `allToAll(${t.dtype}, rows of [${t.shape.slice(1).join(", ")}])`, dtype: t.dtype, numel: out.numel(), input: [t], targets: [{ t: out, from: 0 }], collective: true, extra: { inSplits, outSplits } }, asyncOp);
}

/** outputTensorList[j] = rank j's inputTensorList[rank of this process]. */
export function allToAll(outputTensorList: Tensor[], inputTensorList: Tensor[], group?: G, asyncOp?: boolean): Work | undefined;
export function allToAll(outputTensorList: Tensor[], inputTensorList: Tensor[], opts: { group?: G; asyncOp?: boolean }): Work | undefined;
export function allToAll(...args: unknown[]): Work | undefined {
  const fn = "allToAll";
  const a = bindArgs(fn, ["outputTensorList", "inputTensorList", "group", "asyncOp"], args);
  const outs = tensorListArg(fn, "outputTensorList", a.outputTensorList);
  const ins = tensorListArg(fn, "inputTensorList", a.inputTensorList);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  const n = g.size();
  if (outs.length !== n || ins.length !== n) throw new DistError(`${fn}: both lists must have one tensor per rank (${n})`);
  const dtype = ins[0]!.dtype;
  for (const t of [...outs, ...ins]) if (t.dtype !== dtype) throw new DistError(`${fn}: every tensor must be ${dtype}, got ${t.dtype}`);
  const inSplits = ins.map((t) => t.numel());
  const outSplits = outs.map((t) => t.numel());
  const from: number[] = [];
  outSplits.reduce((at, k, j) => ((from[j] = at), at + k), 0);
  return finish({ fn, kind: "allToAll", g, fp: `allToAll(${dtype}, tensor lists)`, dtype, numel: outSplits.reduce((p, q) => p + q, 0), input: ins, targets: outs.map((t, j) => ({ t, from: from[j]! })), collective: true, extra: { inSplits, outSplits } }, asyncOp);
}

/** Rank `dst` gets every rank's tensor in gatherList (in rank order); gatherList is only given on dst. */
export function gather(tensor: Tensor, gatherList?: Tensor[] | null, dst?: number, group?: G, asyncOp?: boolean): Work | undefined;
export function gather(tensor: Tensor, opts: { gatherList?: Tensor[] | null; dst?: number; group?: G; asyncOp?: boolean }): Work | undefined;
export function gather(...args: unknown[]): Work | undefined {
  const fn = "gather";
  const a = bindArgs(fn, ["tensor", "gatherList", "dst", "group", "asyncOp"], args);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  const root = memberArg(fn, "dst", a.dst ?? g.ranks[0], g);
  const isRoot = root === g.rank();
  let targets: Target[] = [];
  if (isRoot) {
    const list = tensorListArg(fn, "gatherList", a.gatherList);
    if (list.length !== g.size()) throw new DistError(`${fn}: gatherList on the destination rank must have one tensor per rank (${g.size()}), got ${list.length}`);
    sameShapes(fn, list, t, "the tensors of gatherList");
    targets = list.map((o, j) => ({ t: o, from: j * t.numel() }));
  } else if (a.gatherList !== undefined && a.gatherList !== null && (a.gatherList as unknown[]).length)
    throw new DistError(`${fn}: Argument \`gatherList\` must NOT be specified on non-destination ranks.`);
  return finish({ fn, kind: "gather", g, fp: `gather(${shapeOf(t)}, dst=${g.ranks[root]!})`, dtype: t.dtype, numel: t.numel() * g.size(), input: [t], targets, collective: true, extra: { root } }, asyncOp);
}

/** Rank j gets scatterList[j] of rank `src` (scatterList is only given on src). */
export function scatter(tensor: Tensor, scatterList?: Tensor[] | null, src?: number, group?: G, asyncOp?: boolean): Work | undefined;
export function scatter(tensor: Tensor, opts: { scatterList?: Tensor[] | null; src?: number; group?: G; asyncOp?: boolean }): Work | undefined;
export function scatter(...args: unknown[]): Work | undefined {
  const fn = "scatter";
  const a = bindArgs(fn, ["tensor", "scatterList", "src", "group", "asyncOp"], args);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  const root = memberArg(fn, "src", a.src ?? g.ranks[0], g);
  const isRoot = root === g.rank();
  let input: Tensor[] | null = null;
  if (isRoot) {
    const list = tensorListArg(fn, "scatterList", a.scatterList);
    if (list.length !== g.size()) throw new DistError(`${fn}: scatterList on the source rank must have one tensor per rank (${g.size()}), got ${list.length}`);
    sameShapes(fn, list, t, "the tensors of scatterList");
    input = list;
  } else if (a.scatterList !== undefined && a.scatterList !== null && (a.scatterList as unknown[]).length)
    throw new DistError(`${fn}: Argument \`scatterList\` must NOT be specified on non-source ranks.`);
  return finish({ fn, kind: "scatter", g, fp: `scatter(${shapeOf(t)}, src=${g.ranks[root]!})`, dtype: t.dtype, numel: t.numel(), input, targets: [{ t, from: 0 }], collective: true, extra: { root } }, asyncOp);
}

function p2p(kind: "send" | "recv", args: unknown[], isAsync: boolean): Work | undefined {
  const fn = isAsync ? (kind === "send" ? "isend" : "irecv") : kind;
  const peerName = kind === "send" ? "dst" : "src";
  const a = bindArgs(fn, ["tensor", peerName, "group", "tag"], args);
  const t = tensorArg(fn, "tensor", a.tensor);
  const g = groupArg(fn, a.group);
  const tag = a.tag === undefined || a.tag === null ? 0 : intArg(fn, "tag", a.tag, 0);
  if (a[peerName] === undefined || a[peerName] === null)
    throw new TypeError(`${fn}() missing required argument '${peerName}' (receiving from any source is not supported)`);
  if (!g.isMember) return skip(g, isAsync);
  const peer = memberArg(fn, peerName, a[peerName], g);
  if (peer === g.rank()) throw new DistError(`${fn}: Invalid ${peerName} rank: ${String(a[peerName])}, ${peerName} must not be the same as rank of the current process`);
  return finish(
    { fn, kind, g, fp: `p2p(${shapeOf(t)}, tag=${tag})`, dtype: t.dtype, numel: t.numel(), input: kind === "send" ? [t] : null, targets: kind === "recv" ? [{ t, from: 0 }] : [], collective: false, extra: { peer, tag } },
    isAsync,
  );
}

/** Send `tensor` to global rank `dst` (the tensor is copied: it may change right after). */
export function send(tensor: Tensor, dst: number, group?: G, tag?: number): void;
export function send(tensor: Tensor, dst: number, opts: { group?: G; tag?: number }): void;
export function send(...args: unknown[]): void {
  p2p("send", args, false);
}

/** Receive into `tensor` from global rank `src`; returns src. The value arrives into the tensor. */
export function recv(tensor: Tensor, src: number, group?: G, tag?: number): number;
export function recv(tensor: Tensor, src: number, opts: { group?: G; tag?: number }): number;
export function recv(...args: unknown[]): number {
  p2p("recv", args, false);
  const a = bindArgs("recv", ["tensor", "src", "group", "tag"], args);
  return a.src as number;
}

export function isend(tensor: Tensor, dst: number, group?: G, tag?: number): Work | undefined;
export function isend(tensor: Tensor, dst: number, opts: { group?: G; tag?: number }): Work | undefined;
export function isend(...args: unknown[]): Work | undefined {
  return p2p("send", args, true);
}

export function irecv(tensor: Tensor, src: number, group?: G, tag?: number): Work | undefined;
export function irecv(tensor: Tensor, src: number, opts: { group?: G; tag?: number }): Work | undefined;
export function irecv(...args: unknown[]): Work | undefined {
  return p2p("recv", args, true);
}

function blockOn(l: Launch): void {
  const { op, comm } = launch(l);
  comm.waitFor(op);
  if (op.error) {
    comm.observe(op.error);
    throw freshError(op.error);
  }
}

/** Block until every rank of the group called barrier (asyncOp: return a Work instead). */
export function barrier(group?: G, asyncOp?: boolean): Work | undefined;
export function barrier(opts: { group?: G; asyncOp?: boolean; deviceIds?: number[] }): Work | undefined;
export function barrier(...args: unknown[]): Work | undefined {
  const fn = "barrier";
  const a = bindArgs(fn, ["group", "asyncOp", "deviceIds"], args);
  const g = groupArg(fn, a.group);
  const asyncOp = boolArg(fn, "asyncOp", a.asyncOp, false);
  if (!g.isMember) return skip(g, asyncOp);
  const l: Launch = { fn, kind: "barrier", g, fp: "barrier()", dtype: "uint8", numel: 0, input: null, targets: [], collective: true };
  if (asyncOp) return finish(l, true);
  blockOn(l);
  return undefined;
}

/**
 * A barrier that names who did not come: rank 0 of the group waits up to `timeout` ms (default:
 * the group's) for every other rank and raises "Rank k failed to pass monitoredBarrier in T ms"
 * (every missing rank with waitAllRanks); the ranks that came raise the same error.
 */
export function monitoredBarrier(group?: G, timeout?: number, waitAllRanks?: boolean): void;
export function monitoredBarrier(opts: { group?: G; timeout?: number; waitAllRanks?: boolean }): void;
export function monitoredBarrier(...args: unknown[]): void {
  const fn = "monitoredBarrier";
  const a = bindArgs(fn, ["group", "timeout", "waitAllRanks"], args);
  const g = groupArg(fn, a.group);
  const budget = timeoutArg(fn, a.timeout, g.timeoutMs);
  const waitAllRanks = boolArg(fn, "waitAllRanks", a.waitAllRanks, false);
  if (!g.isMember) return;
  blockOn({
    fn, kind: "monitoredBarrier", g, fp: "monitoredBarrier()", dtype: "uint8", numel: 0, input: null, targets: [], collective: true,
    // the other ranks wait for rank 0's verdict, which comes at `budget` at the latest
    timeoutMs: budget * 2 + 10_000,
    extra: { budgetMs: budget, waitAllRanks },
  });
}
