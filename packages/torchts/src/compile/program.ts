// A replayable program: the flat list of kernels two consecutive traced calls of a compiled step
// ran identically, with every buffer bound to a slot. Replay runs the kernels in order on the
// device buffers: no Tensor objects, no autograd, no dispatch, no scheduling.
//   - arguments: read from the call's argument tensors (same shapes, dtypes, strides);
//   - state (parameters, optimizer state, module buffers): read from their storages; the new
//     values are written into spare buffers that are swapped into the storages after the last
//     kernel (the old buffers become the next call's spares);
//   - host numbers declared with hostScalars (bias corrections, the scheduler's lr): the
//     declarations' closures run again and their numbers are written into the slots;
//   - the default random generator: counter offsets relative to the call's start, and the
//     generator advances exactly as the traced call advanced it;
//   - intermediates: buffers allocated once, shared by values whose lifetimes do not overlap;
//   - returned tensors: fresh storages each call (the caller may keep them).
import type { DeviceBuffer, DevicePlugin, Executable, KernelArg } from "../device/plugin.js";
import { castScalar, type DType, type HostArray } from "../ir/dtype.js";
import { realize } from "../runtime/dispatch.js";
import { transferOwnership, type BufferOwner } from "../runtime/memory.js";
import { runKernel } from "../runtime/profiler.js";
import { Storage } from "../runtime/storage.js";
import { defaultGenerator } from "../ops/random.js";
import { Tensor } from "../tensor.js";
import type { HostDecl } from "./host_scalars.js";
import { leavesOf, type InBind, type Trace } from "./recorder.js";

type In =
  | { src: "val"; v: number; offset: number }
  | { src: "arg"; a: number; delta: number }
  | { src: "storage"; st: Storage; offset: number }
  | { src: "host"; h: number; offset: number };

interface Kernel {
  exe: Executable;
  name: string;
  ins: In[];
  outs: number[]; // value ids
  scalars: readonly number[];
  /** (scalar index, declaration, number) for scalars recomputed per call. */
  hostScalars: [number, number, number][];
  rng: number | null;
}

interface RetView {
  /** The value (a kernel output) it views, or -1 with `arg`/`st` set: a view of an argument or of a storage read in place. */
  v: number;
  arg?: { a: number; delta: number };
  st?: Storage;
  shape: number[];
  strides: number[];
  offset: number;
  dtype: DType;
}

interface Meta {
  device: DevicePlugin;
  dtype: DType;
  numel: number;
}

/** Stands for a returned tensor in the result's template (the traced call's tensors are not kept). */
const SLOT = Symbol("returned tensor");

type ValueKind = { kind: "inter"; buf: number } | { kind: "state"; st: Storage; spare: Storage } | { kind: "ret" };

interface HostSlot {
  d: number;
  i: number;
  st: Storage;
  arr: HostArray;
}

function hostArray(d: DType): HostArray {
  switch (d) {
    case "float64":
    case "int64":
      return new Float64Array(1);
    case "int32":
      return new Int32Array(1);
    case "int8":
      return new Int8Array(1);
    case "float32":
    case "float16":
    case "bfloat16":
      return new Float32Array(1);
    default:
      return new Uint8Array(1);
  }
}

const sameData = (a: number[] | null, b: number[] | null) =>
  a !== null && b !== null && a.length === b.length && a.every((x, i) => Object.is(x, b[i]));

export class Program {
  private readonly kernels: Kernel[] = [];
  private readonly values: ValueKind[] = [];
  private readonly valueMeta: Meta[] = [];
  private readonly pool: Storage[] = [];
  private readonly hostSlots: HostSlot[] = [];
  private readonly decls: HostDecl[];
  /** Per argument tensor: dtype, shape, strides and the first argument tensor sharing its storage. */
  private readonly argMeta: { dtype: DType; shape: string; strides: string; alias: number }[];
  private readonly retViews: RetView[];
  /** Per grad holder (argument tensors, module parameters): leave `.grad` alone, clear it, or set it to a value. */
  private readonly gradRules: ("keep" | "null" | RetView)[];
  private readonly result: unknown;
  private readonly rngAdvance: number;
  private readonly reads: Storage[] = []; // storages read by slot (state and fixed tensors)
  readonly kernelCount: number;

  private constructor(b: Trace, valueIds: number[][], kinds: ("inter" | "state" | "ret")[], lastUse: number[]) {
    this.decls = b.decls;
    this.rngAdvance = b.rngAdvance;
    this.result = rebuild(b.result, () => SLOT);
    const diesAt = new Map<number, number[]>();
    lastUse.forEach((k, v) => (diesAt.get(k) ?? diesAt.set(k, []).get(k)!).push(v));
    this.argMeta = b.args.map(({ t }) => ({
      dtype: t.dtype,
      shape: t.shape.join(","),
      strides: t._strides.join(","),
      alias: b.args.findIndex((l) => l.t._storage === t._storage),
    }));
    const hostOf = new Map<Storage, number>();
    const readSet = new Set<Storage>();
    // static memory plan: a buffer freed after a value's last reader serves a later value of the same size
    const free = new Map<string, number[]>();
    b.kernels.forEach((tk, k) => {
      for (const [o, st] of tk.outs.entries()) {
        const v = valueIds[k]![o]!;
        this.valueMeta[v] = { device: st.device, dtype: st.dtype, numel: st.numel };
        if (kinds[v] === "state") this.values[v] = { kind: "state", st, spare: new Storage(st.device, st.dtype, st.numel) };
        else if (kinds[v] === "ret") this.values[v] = { kind: "ret" };
        else {
          const key = `${st.device.name}:${st.dtype}:${st.numel}`;
          let buf = free.get(key)?.pop();
          if (buf === undefined) {
            buf = this.pool.length;
            this.pool.push(new Storage(st.device, st.dtype, st.numel));
          }
          this.values[v] = { kind: "inter", buf };
        }
      }
      const ins: In[] = tk.ins.map((x) => {
        switch (x.kind) {
          case "val":
            return { src: "val", v: valueIds[x.k]![x.o]!, offset: x.offset };
          case "arg":
            return { src: "arg", a: x.a, delta: x.delta };
          case "host": {
            let h = hostOf.get(x.st);
            if (h === undefined) {
              hostOf.set(x.st, (h = this.hostSlots.length));
              const st = new Storage(x.st.device, x.st.dtype, x.st.numel);
              this.hostSlots.push({ d: x.d, i: x.i, st, arr: hostArray(x.st.dtype) });
            }
            return { src: "host", h, offset: x.offset };
          }
          default:
            readSet.add(x.st);
            return { src: "storage", st: x.st, offset: x.offset };
        }
      });
      const hostScalars: [number, number, number][] = [];
      tk.sbind.forEach((s, i) => s && hostScalars.push([i, s.d, s.i]));
      this.kernels.push({ exe: tk.exe, name: tk.name, ins, outs: valueIds[k]!, scalars: tk.scalars, hostScalars, rng: tk.rng });
      // buffers whose values die here go back to the pool (after this kernel's outputs were placed)
      for (const v of diesAt.get(k) ?? []) {
        const val = this.values[v];
        if (val?.kind !== "inter") continue;
        const st = this.valueMeta[v]!;
        const key = `${st.device.name}:${st.dtype}:${st.numel}`;
        (free.get(key) ?? free.set(key, []).get(key)!).push(val.buf);
      }
    });
    for (const s of this.pool) s.allocate();
    for (const h of this.hostSlots) h.st.allocate();
    this.reads = [...readSet];
    this.kernelCount = this.kernels.length;
    const viewOf = (t: Tensor): RetView => {
      const st = t._storage;
      let v = -1;
      b.kernels.forEach((tk, k) => tk.outs.forEach((s, o) => s === st && (v = valueIds[k]![o]!)));
      const r: RetView = { v, shape: [...t.shape], strides: [...t._strides], offset: t._offset, dtype: t.dtype };
      if (v >= 0) return r;
      const a = b.args.findIndex((l) => l.t._storage === st);
      if (a >= 0) r.arg = { a, delta: t._offset - b.args[a]!.t._offset };
      else r.st = st;
      return r;
    };
    this.retViews = b.returned.map(({ t }) => viewOf(t));
    this.gradRules = b.grads.map((g) => (g.after === g.before ? "keep" : g.after === null ? "null" : viewOf(g.after)));
  }

  /** Bytes of intermediates this program keeps allocated between calls. */
  get poolBytes(): number {
    return this.pool.reduce((n, s) => n + (s.buf?.bytes ?? 0), 0);
  }

  /**
   * Build a program from two traces of consecutive calls with the same guards, or say why not.
   * Whatever differs between them must be explained by a slot: an argument, state, a declared
   * host number or the random generator. Anything else differing (a number that changes with no
   * declared source, a tensor created outside the call) keeps the function on the re-run path.
   */
  static build(a: Trace, b: Trace): Program | string {
    if (a.broken) return a.broken;
    if (b.broken) return b.broken;
    if (a.kernels.length !== b.kernels.length) return `the calls ran different kernels (${a.kernels.length} vs ${b.kernels.length})`;
    if (!b.kernels.length) return "the call ran no kernels";
    if (a.decls.length !== b.decls.length || a.decls.some((d, i) => d.values.length !== b.decls[i]!.values.length))
      return "the calls declared different host numbers";
    if (a.rngAdvance !== b.rngAdvance) return "the calls drew different amounts of random numbers";
    if (a.returned.length !== b.returned.length) return "the calls returned different structures";
    const dev = b.kernels[0]!.outs[0]?.device;
    const argStorages = new Set(b.args.map((l) => l.t._storage));
    // values handed out (returned tensors, gradients left on leaves) get fresh storage each call
    if (a.grads.length !== b.grads.length) return "the calls have different gradient holders";
    const retA = new Map<Storage, string>(a.returned.map((l, i) => [l.t._storage, `r${i}`]));
    const retB = new Map<Storage, string>(b.returned.map((l, i) => [l.t._storage, `r${i}`]));
    for (let j = 0; j < b.grads.length; j++) {
      const ga = a.grads[j]!;
      const gb = b.grads[j]!;
      const kind = (g: typeof ga) => (g.after === g.before ? "keep" : g.after === null ? "null" : "set");
      if (kind(ga) !== kind(gb)) return "the calls leave gradients differently";
      if (kind(gb) !== "set") continue;
      if (!b.kernels.some((k) => k.outs.includes(gb.after!._storage))) return "it leaves a gradient the traced kernels did not compute";
      if (!retA.has(ga.after!._storage)) retA.set(ga.after!._storage, `g${j}`);
      if (!retB.has(gb.after!._storage)) retB.set(gb.after!._storage, `g${j}`);
    }
    const valueIds: number[][] = [];
    const kinds: ("inter" | "state" | "ret")[] = [];
    const stateWritten = new Set<Storage>();
    for (let k = 0; k < b.kernels.length; k++) {
      const ka = a.kernels[k]!;
      const kb = b.kernels[k]!;
      const where = `kernel ${k} (${kb.name})`;
      if (ka.exe !== kb.exe || ka.ins.length !== kb.ins.length || ka.outs.length !== kb.outs.length) return `${where} differs between the calls`;
      if (kb.outs.some((s) => s.device !== dev)) return `${where} runs on another device`;
      for (let i = 0; i < kb.ins.length; i++) {
        const why = sameInput(ka.ins[i]!, kb.ins[i]!);
        if (why) return `${where} input ${i}: ${why}`;
      }
      if ((ka.rng === null) !== (kb.rng === null) || ka.rng !== kb.rng) return `${where} draws random numbers at a different place`;
      if (kb.rng === null)
        for (let i = 0; i < kb.scalars.length; i++) {
          const sa = ka.sbind[i];
          const sb = kb.sbind[i];
          if (sa && sb && sa.d === sb.d && sa.i === sb.i) continue;
          if (!sa && !sb && Object.is(ka.scalars[i], kb.scalars[i])) continue;
          return `${where} scalar ${i} changed from ${ka.scalars[i]} to ${kb.scalars[i]} with no declared source (torch.compiler.hostScalars)`;
        }
      const ids: number[] = [];
      for (let o = 0; o < kb.outs.length; o++) {
        const sa = ka.outs[o]!;
        const sb = kb.outs[o]!;
        const v = kinds.length;
        ids.push(v);
        if (argStorages.has(sb)) return `${where} writes an argument in place`;
        const ra = retA.get(sa);
        const rb = retB.get(sb);
        if (sa === sb) {
          if (rb !== undefined) return `${where}: the function returns state it updates in place`;
          if (stateWritten.has(sb)) return `${where} writes the same state twice`;
          stateWritten.add(sb);
          kinds.push("state");
        } else if (rb !== undefined || ra !== undefined) {
          if (ra !== rb) return "the calls returned different tensors";
          kinds.push("ret");
        } else kinds.push("inter");
      }
      valueIds.push(ids);
    }
    // a returned tensor the kernels did not compute must be a view of an argument or of the same storage in both calls
    for (const [i, l] of b.returned.entries()) {
      const st = l.t._storage;
      if (b.kernels.some((k) => k.outs.includes(st))) continue;
      const la = a.returned[i]!;
      const ab = b.args.findIndex((x) => x.t._storage === st);
      const aa = a.args.findIndex((x) => x.t._storage === la.t._storage);
      const same = ab >= 0 ? aa === ab && l.t._offset - b.args[ab]!.t._offset === la.t._offset - a.args[aa]!.t._offset : la.t._storage === st && la.t._offset === l.t._offset;
      if (!same) return `it returns a tensor the traced kernels did not compute (${l.path || "the result"})`;
    }
    const lastUse: number[] = [];
    valueIds.forEach((ids, k) => ids.forEach((v) => (lastUse[v] = k)));
    b.kernels.forEach((tk, k) => tk.ins.forEach((x) => x.kind === "val" && (lastUse[valueIds[x.k]![x.o]!] = k)));
    return new Program(b, valueIds, kinds, lastUse);
  }

  /**
   * Run the program for these arguments, or return the reason it cannot (then nothing was
   * changed: all checks come before the first side effect).
   */
  replay(args: readonly unknown[], holders: readonly Tensor[]): { result: unknown } | string {
    if (holders.length !== this.gradRules.length) return "the gradient holders changed";
    const leaves = leavesOf(args);
    if (leaves.length !== this.argMeta.length) return "the arguments hold a different number of tensors";
    const argBufs: DeviceBuffer[] = [];
    const argOffs: number[] = [];
    for (let a = 0; a < leaves.length; a++) {
      const t = leaves[a]!.t;
      const m = this.argMeta[a]!;
      if (t.dtype !== m.dtype || t.shape.join(",") !== m.shape || t._strides.join(",") !== m.strides) return `argument tensor ${a} has other strides`;
      if (leaves.findIndex((l) => l.t._storage === t._storage) !== m.alias) return `argument tensor ${a} shares memory with other arguments than when recorded`;
      const st = t._storage;
      if (st.disposed) return `argument tensor ${a} is disposed`;
      if (!st.buf) realize(st);
      if (!st.buf) return `argument tensor ${a} has no value`;
      argBufs.push(st.buf);
      argOffs.push(t._offset);
    }
    for (const st of this.reads) {
      if (st.disposed) return "a tensor the step reads was disposed";
      if (!st.buf) realize(st);
      if (!st.buf) return "a tensor the step reads has no value";
    }
    // from here on: side effects, exactly those of the traced call
    const nums = this.decls.map((d) => d.compute());
    for (const h of this.hostSlots) {
      h.arr[0] = castScalar(nums[h.d]![h.i]!, h.st.dtype);
      h.st.device.write(h.st.buf!, h.arr);
    }
    const off0 = defaultGenerator.offset;
    const seed = defaultGenerator.seed;
    defaultGenerator.offset = off0 + this.rngAdvance;
    const bufs: DeviceBuffer[] = new Array(this.values.length);
    const rets = new Map<number, Storage>();
    for (let v = 0; v < this.values.length; v++) {
      const val = this.values[v]!;
      if (val.kind === "inter") bufs[v] = this.pool[val.buf]!.buf!;
      else if (val.kind === "state") bufs[v] = val.spare.buf ?? val.spare.allocate();
      else {
        const m = this.valueMeta[v]!;
        const st = new Storage(m.device, m.dtype, m.numel);
        bufs[v] = st.allocate();
        rets.set(v, st);
      }
    }
    for (const k of this.kernels) {
      const ins: KernelArg[] = k.ins.map((x) => {
        switch (x.src) {
          case "val":
            return { buf: bufs[x.v]!, offset: x.offset };
          case "arg":
            return { buf: argBufs[x.a]!, offset: argOffs[x.a]! + x.delta };
          case "storage":
            return { buf: x.st.buf!, offset: x.offset };
          default:
            return { buf: this.hostSlots[x.h]!.st.buf!, offset: x.offset };
        }
      });
      const outs = k.outs.map((v) => bufs[v]!);
      let scalars = k.scalars;
      if (k.rng !== null) {
        const off = off0 + k.rng;
        scalars = [seed[0], seed[1], off >>> 0, Math.floor(off / 4294967296)];
      } else if (k.hostScalars.length) {
        const s = [...scalars];
        for (const [i, d, j] of k.hostScalars) s[i] = nums[d]![j]!;
        scalars = s;
      }
      runKernel(k.name, k.exe, ins, outs, scalars);
    }
    for (const val of this.values) if (val.kind === "state") swapIn(val.st, val.spare);
    const wrap = (r: RetView) => {
      if (r.arg) return new Tensor(leaves[r.arg.a]!.t._storage, r.shape, r.strides, argOffs[r.arg.a]! + r.arg.delta, r.dtype);
      return new Tensor(r.st ?? rets.get(r.v)!, r.shape, r.strides, r.offset, r.dtype);
    };
    const retTensors = this.retViews.map(wrap);
    this.gradRules.forEach((g, j) => {
      if (g === "null") holders[j]!.grad = null;
      else if (g !== "keep") holders[j]!.grad = wrap(g);
    });
    let n = 0;
    return { result: rebuild(this.result, () => retTensors[n++]!, SLOT) };
  }
}

function sameInput(x: InBind, y: InBind): string | null {
  if (x.kind !== y.kind) {
    if (x.kind === "ext" && y.kind === "ext") return null;
    return `read from ${x.kind} in one call and ${y.kind} in the other`;
  }
  switch (y.kind) {
    case "val": {
      const p = x as typeof y;
      return p.k === y.k && p.o === y.o && p.offset === y.offset ? null : "wired differently";
    }
    case "arg": {
      const p = x as typeof y;
      return p.a === y.a && p.delta === y.delta ? null : "reads another part of the arguments";
    }
    case "state": {
      const p = x as typeof y;
      return p.st === y.st && p.offset === y.offset ? null : "reads other state";
    }
    case "host": {
      const p = x as typeof y;
      return p.d === y.d && p.i === y.i && p.offset === y.offset ? null : "reads another declared host number";
    }
    case "ext": {
      const p = x as typeof y;
      if (p.offset !== y.offset) return "reads a view at an offset that changes between calls";
      if (p.st === y.st) return null;
      if (sameData(p.data, y.data)) return null;
      return "reads a tensor created outside the traced kernels whose value changes between calls (pass it as an argument, or declare host numbers with torch.compiler.hostScalars)";
    }
  }
}

/** The new value (in `spare`) becomes the storage's contents; its old buffer is the next spare. */
function swapIn(st: Storage, spare: Storage): void {
  const nb = spare.buf!;
  const dev: DevicePlugin = st.device;
  const tmp: BufferOwner = { _held: null, _gcToken: null };
  transferOwnership(spare, tmp, dev, nb);
  spare.buf = null;
  // pending work that still reads the old value (an unmaterialized value someone holds) keeps it
  if (!st.moveOut() && st.buf) {
    transferOwnership(st, spare, dev, st.buf);
    spare.buf = st.buf;
  }
  transferOwnership(tmp, st, dev, nb);
  st.buf = nb;
  st.dropPending();
  st.version++;
}

/** The traced call's result with each tensor (in leavesOf order) replaced. */
function rebuild(x: unknown, next: () => unknown, slot: unknown = null, depth = 0): unknown {
  if (x instanceof Tensor || (slot !== null && x === slot)) return next();
  if (depth < 4 && Array.isArray(x)) return x.map((v) => rebuild(v, next, slot, depth + 1));
  if (depth < 4 && x && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype)
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, rebuild(v, next, slot, depth + 1)]));
  return x;
}
