// Records what one traced call of a compiled step ran: every kernel in order, where each of its
// inputs came from (an earlier kernel, an argument, state that lives across calls, a scalar
// declared with hostScalars, or some other tensor) and the scalars it was run with. Two such
// traces of consecutive calls are compared by program.ts to build a replayable program.
import type { DeviceBuffer, Executable } from "../device/plugin.js";
import { castScalar, type DType } from "../ir/dtype.js";
import type { IRNode } from "../ir/prims.js";
import { recordHooks } from "../runtime/scheduler.js";
import type { Storage, ViewRef } from "../runtime/storage.js";
import { defaultGenerator } from "../ops/random.js";
import { Tensor } from "../tensor.js";
import { collectHostScalars, type HostDecl } from "./host_scalars.js";

export type InBind =
  | { kind: "val"; k: number; o: number; offset: number }
  | { kind: "arg"; a: number; delta: number }
  | { kind: "state"; st: Storage; offset: number }
  | { kind: "host"; d: number; i: number; st: Storage; offset: number }
  | { kind: "ext"; st: Storage; offset: number; data: number[] | null };

/** Where a prim scalar came from: a constant, or number i of host declaration d. */
export type ScalarBind = { d: number; i: number } | null;

export interface TraceKernel {
  exe: Executable;
  name: string;
  ins: InBind[];
  outs: Storage[];
  scalars: readonly number[];
  sbind: ScalarBind[];
  /** rand kernels drawing from the default generator: their counter offset minus the one at call start. */
  rng: number | null;
}

/** A tensor among the arguments (or the returned value), in traversal order. */
export interface Leaf {
  path: string;
  t: Tensor;
}

/** A leaf whose `.grad` the call may set (argument tensors, module parameters): before and after. */
export interface GradRecord {
  before: Tensor | null;
  after: Tensor | null;
}

export interface Trace {
  kernels: TraceKernel[];
  grads: GradRecord[];
  decls: HostDecl[];
  args: Leaf[];
  /** Counters the call took from the default generator. */
  rngAdvance: number;
  result: unknown;
  returned: Leaf[];
  /** Set when the trace cannot become a program (the reason). */
  broken: string | null;
}

/** Tensors inside a value (arrays and plain objects, 4 levels deep), as storagesIn in index.ts walks them. */
export function leavesOf(x: unknown, path = "", out: Leaf[] = [], depth = 0): Leaf[] {
  if (x instanceof Tensor) out.push({ path, t: x });
  else if (depth < 4 && Array.isArray(x)) x.forEach((v, i) => leavesOf(v, `${path}[${i}]`, out, depth + 1));
  else if (depth < 4 && x && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype)
    for (const [k, v] of Object.entries(x)) leavesOf(v, `${path}.${k}`, out, depth + 1);
  return out;
}

const DATA_LIMIT = 4096;

function readAll(st: Storage): number[] | null {
  const dev = st.device;
  if (!st.buf || !dev.readSync || st.numel > DATA_LIMIT) return null;
  return Array.from(dev.readSync(st.buf, st.dtype, st.numel));
}

/**
 * Trace `run` (the traced call, ending with its flush). `known` are storages that live across
 * calls (module parameters and buffers, state the previous trace wrote): an input read from
 * one of their buffers as they are now binds to the storage, not to whatever temporary storage
 * the old contents were moved into during the call.
 */
export function record(
  args: readonly unknown[],
  known: Iterable<Storage>,
  holders: readonly Tensor[],
  run: () => unknown,
): { trace: Trace; result: unknown } {
  const gradsBefore = holders.map((h) => h.grad);
  const argLeaves = leavesOf(args);
  const argBufs = new Map<DeviceBuffer, number>();
  argLeaves.forEach((l, a) => {
    const b = l.t._storage.buf;
    if (b && !argBufs.has(b)) argBufs.set(b, a);
  });
  const startMap = new Map<DeviceBuffer, Storage>();
  for (const s of known) if (s.buf && !argBufs.has(s.buf)) startMap.set(s.buf, s);
  const seed0 = [...defaultGenerator.seed];
  const off0 = defaultGenerator.offset;

  const decls: HostDecl[] = [];
  const hostStorage = new Map<Storage, { d: number; i: number }>();
  const hostScalarsOf = new WeakMap<readonly number[], ScalarBind[]>();
  const checked = new WeakSet<Storage>();
  const kernels: TraceKernel[] = [];
  const prod = new Map<DeviceBuffer, { k: number; o: number }>();
  let broken: string | null = null;

  // attribution of declared host numbers to what uses them: right after a declaration the
  // optimizer turns its numbers into scalar operands (1-element host-written tensors) or prim
  // scalars, so the first use of such a value while that declaration is the latest binds them
  const matchLatest = (v: number, dtype: DType | null): ScalarBind => {
    const d = decls.length - 1;
    if (d < 0) return null;
    const vs = decls[d]!.values;
    for (let i = 0; i < vs.length; i++) {
      if ((dtype ? castScalar(vs[i]!, dtype) : vs[i]) !== v) continue;
      // zero is every other constant too (a learning rate of 0 would be taken for them): no program from this call
      if (v === 0) broken = "a declared host number is 0, which cannot be told apart from constants";
      return { d, i };
    }
    return null;
  };
  const onPrim = (inputs: readonly ViewRef[], scalars: readonly number[]): void => {
    if (!decls.length) return;
    for (const v of inputs) {
      const s = v.storage;
      if (checked.has(s)) continue;
      checked.add(s);
      if (s.numel !== 1 || !s.buf || !s.device.readSync) continue;
      const b = matchLatest(s.device.readSync(s.buf, s.dtype, 1)[0]!, s.dtype);
      if (b) hostStorage.set(s, b);
    }
    if (scalars.length) {
      const binds = scalars.map((v) => matchLatest(v, null));
      if (binds.some((b) => b)) hostScalarsOf.set(scalars, binds);
    }
  };
  const onKernel = (exe: Executable, name: string, inputs: readonly ViewRef[], outputs: readonly Storage[], scalars: readonly number[], node: IRNode | null): void => {
    const k = kernels.length;
    const ins: InBind[] = inputs.map((v) => {
      const buf = v.storage.buf!;
      const p = prod.get(buf);
      if (p) return { kind: "val", k: p.k, o: p.o, offset: v.offset };
      const a = argBufs.get(buf);
      if (a !== undefined) return { kind: "arg", a, delta: v.offset - argLeaves[a]!.t._offset };
      const st = startMap.get(buf);
      if (st) return { kind: "state", st, offset: v.offset };
      const h = hostStorage.get(v.storage);
      if (h) return { kind: "host", d: h.d, i: h.i, st: v.storage, offset: v.offset };
      return { kind: "ext", st: v.storage, offset: v.offset, data: readAll(v.storage) };
    });
    outputs.forEach((s, o) => prod.set(s.buf!, { k, o }));
    let rng: number | null = null;
    let sbind: ScalarBind[] = scalars.map(() => null);
    if (node?.prim === "rand" && scalars[0] === seed0[0] && scalars[1] === seed0[1]) rng = scalars[2]! + scalars[3]! * 4294967296 - off0;
    else if (scalars.length) sbind = hostScalarsOf.get(scalars) ?? sbind;
    kernels.push({ exe, name, ins, outs: [...outputs], scalars: [...scalars], sbind, rng });
  };

  const prevPrim = recordHooks.prim;
  const prevKernel = recordHooks.kernel;
  recordHooks.prim = onPrim;
  recordHooks.kernel = onKernel;
  const stop = collectHostScalars(decls);
  let result: unknown;
  try {
    result = run();
  } finally {
    stop();
    recordHooks.prim = prevPrim;
    recordHooks.kernel = prevKernel;
  }
  const rngAdvance = defaultGenerator.offset - off0;
  if (defaultGenerator.seed[0] !== seed0[0] || defaultGenerator.seed[1] !== seed0[1]) broken = "the function reseeds the random generator";
  for (const k of kernels) if (k.rng !== null && (k.rng < 0 || k.rng >= rngAdvance)) broken = `${k.name} draws random numbers the call did not reserve`;
  const grads = holders.map((h, i) => ({ before: gradsBefore[i]!, after: h.grad }));
  for (const l of leavesOf(result)) {
    const n = l.t.gradFn;
    if (n && !n.released) broken = `it returns a tensor whose autograd graph is still alive (${l.path || "the result"}); a replay has no graph to run backward() through`;
  }
  return { trace: { kernels, grads, decls, args: argLeaves, rngAdvance, result, returned: leavesOf(result), broken }, result };
}
