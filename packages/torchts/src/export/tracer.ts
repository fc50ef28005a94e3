// One trace of a forward: every public op the forward calls reaches the op table's hook
// (ops/registry.ts opHooks) with its bound arguments; capture.ts turns each into core ops, which
// run for real (so the forward sees concrete tensors and host code behaves as in eager) and are
// recorded as nodes. Tensors the forward did not get from a traced op become lifted constants;
// a host read, a random op or an op with no capture is an ExportError naming the op and the
// user's call site. symbolic.ts then merges several traces into one graph with dynamic dims.
import type { DType } from "../ir/dtype.js";
import { opHooks, type OpDef } from "../ops/registry.js";
import { noGrad } from "../autograd/grad_mode.js";
import { withEagerMode } from "../runtime/mode.js";
import { Tensor } from "../tensor.js";
import { CORE_OPS, type CoreOp } from "./core.js";
import { ExportError, callSite } from "./errors.js";
import { numArg, type Arg, type InputSpec, type Node } from "./graph.js";

export interface TraceValue {
  shape: number[];
  dtype: DType;
}

/** A tensor inside a value (arrays and plain objects), with its path. */
export interface Leaf {
  path: string;
  t: Tensor;
}

/** `x` with every tensor replaced by `{ [tag]: i }` (i: its index in `out`), as plain JSON. */
export function flatten(x: unknown, tag: string, out: Leaf[], path = "", depth = 0): unknown {
  if (x instanceof Tensor) {
    out.push({ path, t: x });
    return { [tag]: out.length - 1 };
  }
  if (x === undefined) return { $undefined: true };
  if (x === null || typeof x === "boolean" || typeof x === "string") return x;
  if (typeof x === "number") return Number.isFinite(x) ? x : { $num: String(x) };
  if (depth < 8 && Array.isArray(x)) return x.map((v, i) => flatten(v, tag, out, `${path}[${i}]`, depth + 1));
  if (depth < 8 && typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype) {
    const o: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x)) o[k] = flatten(v, tag, out, `${path}.${k}`, depth + 1);
    return o;
  }
  throw new ExportError(`torch.export: cannot export a value of type ${(x as object)?.constructor?.name ?? typeof x} at '${path || "<root>"}' (tensors, numbers, strings, booleans, arrays and plain objects only)`);
}

/** The inverse of flatten: the template with each `{ [tag]: i }` replaced by `leaf(i)`. */
export function unflatten(x: unknown, tag: string, leaf: (i: number) => unknown): unknown {
  if (x === null || typeof x !== "object") return x;
  if (Array.isArray(x)) return x.map((v) => unflatten(v, tag, leaf));
  const o = x as Record<string, unknown>;
  if (typeof o[tag] === "number" && Object.keys(o).length === 1) return leaf(o[tag] as number);
  if (o.$undefined === true) return undefined;
  if (typeof o.$num === "string") return Number(o.$num);
  const r: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) r[k] = unflatten(v, tag, leaf);
  return r;
}

export interface RawTrace {
  values: TraceValue[];
  inputs: InputSpec[];
  nodes: Node[];
  /** the concrete tensor of every placeholder (user inputs, state, constants) */
  placeholders: Map<number, Tensor>;
  /** where each lifted constant was first used */
  constantSites: Map<number, string>;
  outputs: { name: string; value: number }[];
  outputTemplate: unknown;
  inputTemplate: unknown;
  /** the forward's concrete result, for checks */
  result: unknown;
}

export type Capture = (a: Record<string, unknown>, vals: unknown[], overload: number, def: OpDef) => unknown;

/** Public ops that read tensor values on the host: a graph cannot contain them. */
const HOST_READS = new Set(["Tensor.item", "Tensor.tolist", "Tensor.data", "Tensor.backward", "sync", "nonzero", "argwhere", "maskedSelect", "Tensor.set"]);
const RANDOM = new Set(["rand", "randn", "randLike", "randnLike", "randint", "randperm", "normal", "bernoulli", "multinomial", "Tensor.uniform_", "Tensor.normal_"]);

let active: Tracer | null = null;

export function tracer(): Tracer {
  if (!active) throw new Error("torch.export: core ops are emitted only while a forward is traced");
  return active;
}

export class Tracer {
  readonly ids = new Map<Tensor, number>();
  /** the tensor holding each value's current contents (in-place ops rebind a tensor to a new value) */
  readonly concrete: Tensor[] = [];
  readonly values: TraceValue[] = [];
  readonly nodes: Node[] = [];
  readonly inputs: InputSpec[] = [];
  readonly placeholders = new Map<number, Tensor>();
  readonly constantSites = new Map<number, string>();
  private inside = 0;
  private constants = 0;
  /** the public op being captured and where the user called it */
  op = "";
  site = "";

  constructor(private readonly captures: Record<string, Capture>) {}

  private newValue(t: Tensor): number {
    const id = this.values.length;
    this.values.push({ shape: [...t.shape], dtype: t.dtype });
    this.concrete.push(t);
    this.ids.set(t, id);
    return id;
  }

  placeholder(kind: InputSpec["kind"], name: string, t: Tensor): number {
    const known = this.ids.get(t);
    if (known !== undefined) return known; // a tensor passed twice (or tied state) is one placeholder
    const id = this.newValue(t);
    this.inputs.push({ kind, name, value: id });
    this.placeholders.set(id, t);
    return id;
  }

  /** The value of a tensor the forward passes to an op; unknown tensors are lifted constants. */
  ref(t: Tensor): number {
    const id = this.ids.get(t);
    if (id !== undefined) return id;
    if (t.requiresGrad && t.gradFn) throw new ExportError(`torch.export: ${this.op} at ${this.site} reads a tensor computed outside the traced forward that requires grad`);
    const c = this.placeholder("constant", `c${this.constants++}`, t);
    this.constantSites.set(c, `${this.op} at ${this.site}`);
    return c;
  }

  isKnown(t: Tensor): boolean {
    return this.ids.has(t);
  }

  /** The tensor to compute with for a tensor the forward holds (its value's current contents). */
  current(t: Tensor): Tensor {
    return this.concrete[this.ref(t)]!;
  }

  /** Rebind the forward's tensor `t` to the value of `to` (an in-place op, functionalized). */
  rebind(t: Tensor, to: Tensor): void {
    const from = this.ref(t);
    if (this.inputs.some((i) => i.value === from))
      throw new ExportError(`torch.export: ${this.op} at ${this.site} writes in place into an input, parameter, buffer or constant; exported programs are functional`);
    for (const [other, id] of this.ids)
      if (other !== t && id === from) throw new ExportError(`torch.export: ${this.op} at ${this.site} writes in place into a tensor another tensor aliases`);
    for (const other of this.ids.keys())
      if (other !== t && other._storage === t._storage) throw new ExportError(`torch.export: ${this.op} at ${this.site} writes in place into a tensor that has views`);
    this.ids.set(t, this.ref(to));
  }

  private encode(a: unknown): Arg {
    if (a instanceof Tensor) return { v: this.ref(a) };
    if (Array.isArray(a)) {
      if (a.length && a.every((x) => x instanceof Tensor)) return { vs: a.map((x) => this.ref(x as Tensor)) };
      return { l: a.map((x) => this.encode(x)) };
    }
    if (typeof a === "number") return numArg(a);
    if (a === undefined || a === null || typeof a === "string" || typeof a === "boolean") return { k: a ?? null };
    throw new ExportError(`torch.export: ${this.op} at ${this.site}: cannot record an argument of type ${typeof a}`);
  }

  private concretize(a: unknown): unknown {
    if (a instanceof Tensor) return this.current(a);
    if (Array.isArray(a)) return a.map((x) => this.concretize(x));
    return a;
  }

  /** Record one core op and compute it on the concrete tensors. */
  emit(op: CoreOp, args: unknown[]): Tensor {
    const enc = args.map((a) => this.encode(a));
    const conc = args.map((a) => this.concretize(a));
    this.inside++;
    let out: Tensor;
    try {
      out = (CORE_OPS[op] as (...a: unknown[]) => Tensor)(...conc);
    } finally {
      this.inside--;
    }
    this.nodes.push({ op, args: enc, outs: [this.newValue(out)], site: this.site });
    return out;
  }

  /** Run an op outside the graph (its result becomes a lifted constant, or is host data). */
  runOpaque<T>(run: () => T): T {
    this.inside++;
    try {
      return run();
    } finally {
      this.inside--;
    }
  }

  hook(def: OpDef, overload: number, vals: unknown[], run: () => unknown): unknown {
    if (this.inside) return run();
    const key = def.key;
    const outer = [this.op, this.site] as const;
    const site = callSite();
    this.op = def.name;
    this.site = site;
    try {
      if (HOST_READS.has(key))
        throw new ExportError(
          `torch.export: the forward reads a tensor on the host (${def.name}) at ${site}; an exported program is one graph with no host reads (return the tensor instead, or compute the value outside the model)`,
        );
      if (RANDOM.has(key)) throw new ExportError(`torch.export: ${def.name} at ${site} draws random numbers, which exported programs cannot contain`);
      const cap = this.captures[key];
      if (cap) return cap(named(def, overload, vals), vals, overload, def);
      const inplace = inplaceBase(key);
      if (inplace && this.captures[inplace]) {
        const self = vals[0];
        if (!(self instanceof Tensor)) throw new ExportError(`torch.export: ${def.name} at ${site}: expected a tensor to write into`);
        const r = this.captures[inplace]!(named(def, overload, vals), vals, overload, { ...def, name: inplace }) as Tensor;
        this.rebind(self, r);
        return self;
      }
      // ops with no tensor arguments (torch.tensor(data), eye, linspace) make constants
      if (!vals.some(hasTensor)) return this.runOpaque(run);
      // everything else runs with the hook on: what it calls is traced; what it returns must be
      const r = run();
      const leaves: Leaf[] = [];
      try {
        flatten(r, "$t", leaves);
      } catch {
        return r;
      }
      const bad = leaves.find((l) => !this.ids.has(l.t));
      if (bad) throw new ExportError(`torch.export: ${def.name} (called at ${site}) has no export mapping: it is not a core op and has no decomposition`);
      return r;
    } finally {
      [this.op, this.site] = outer;
    }
  }

  /** Run `fn` with this tracer active on the op table (strict eager, no grad). */
  run<T>(fn: () => T): T {
    if (active) throw new ExportError("torch.export: export() was called while another export is tracing");
    if (opHooks.call) throw new ExportError("torch.export: the op table hook is already taken");
    active = this;
    opHooks.call = (def, k, vals, run) => this.hook(def, k, vals, run);
    try {
      return withEagerMode("strict", () => noGrad(fn));
    } finally {
      opHooks.call = null;
      active = null;
    }
  }
}

function hasTensor(v: unknown): boolean {
  if (v instanceof Tensor) return true;
  if (Array.isArray(v)) return v.some(hasTensor);
  return false;
}

/** "Tensor.add_" -> "add", "maskedFill_" -> "maskedFill"; null when not an in-place op. */
function inplaceBase(key: string): string | null {
  const k = key.startsWith("Tensor.") ? key.slice(7) : key;
  return k.endsWith("_") && k.length > 1 ? k.slice(0, -1) : null;
}

/** Bound arguments by parameter name (`self` is called `input`, as in the functional forms). */
function named(def: OpDef, overload: number, vals: unknown[]): Record<string, unknown> {
  const s = def.schemas[overload]!;
  const o: Record<string, unknown> = {};
  s.params.forEach((p, i) => (o[p.name === "self" ? "input" : p.name] = vals[i]));
  return o;
}
