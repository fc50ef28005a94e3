// The op table: every public op (torch.x, tensor.x, torch.nn.functional.x) is defined here by its
// schema(s) and implementation, in the spirit of PyTorch's native_functions.yaml + its Python
// argument parser. `op(schema, impl)` returns the public function: it binds any calling form
// (positional / options object / mixed) with the one binder, names the op in every error it lets
// through, and rolls back what a failed call recorded (fused eager's pending nodes), so a bad
// call cannot leave state behind. Implementations receive clean arguments in schema order.
import { freeOpTemporaries, Tensor } from "../tensor.js";
import { enterOp, exitOp, getEagerMode } from "../runtime/mode.js";
import { opTemporaries } from "../runtime/storage.js";
import { opCheckpoint, opRollback } from "../runtime/dispatch.js";
import { bindArgs, describeCall, isRuntimeBindError, signatureText } from "./binder.js";
import { parseSchema, type Schema } from "./schema.js";

type Impl = (...a: never[]) => unknown;

export interface OpDef {
  /** the name errors use: what the user called (camelCase) */
  readonly name: string;
  /** the table key: the name, or "F.name" / "Tensor.name" where the same name means another op */
  readonly key: string;
  readonly schemas: readonly Schema[];
  readonly impls: readonly Impl[];
  /** the public function (arguments in schema order, the first being the input) */
  readonly fn: (...a: unknown[]) => unknown;
  /** the same op as a Tensor method (`this` is parameter 0) */
  readonly method: (this: Tensor, ...a: unknown[]) => unknown;
  readonly transparent: boolean;
}

/** The table: key -> op. A test enumerates the public exports and checks each is here. */
export const OP_TABLE = new Map<string, OpDef>();
const byFunction = new WeakMap<object, OpDef>();

/** The table entry of a public function or Tensor method (undefined if it is not an op). */
export function opOf(f: unknown): OpDef | undefined {
  return typeof f === "function" ? byFunction.get(f) : undefined;
}

/** Prefix an error that escaped an op with the op's name, keeping its class and stack. */
function nameError(e: unknown, name: string): Error {
  if (!(e instanceof Error)) return new Error(`${name}(): ${String(e)}`);
  // "index 5 is out of bounds" does not name the op `index`: only "name(" / "name:" do
  const m = e.message;
  if (!(m.startsWith(name) && (m[name.length] === "(" || m[name.length] === ":"))) {
    e.message = `${name}(): ${e.message}`;
    if (e.stack) e.stack = `${e.name}: ${e.message}\n${e.stack.split("\n").slice(1).join("\n")}`;
  }
  return e;
}

/** An argument error: a TypeError, except the value checks PyTorch raises as RuntimeError (sizes). */
function bindError(msg: string): Error {
  return isRuntimeBindError(msg) ? new Error(msg) : new TypeError(msg);
}

/** Outside the op scope, but errors (and async rejections) still name the op. */
function transparentCall(name: string, impl: (...a: unknown[]) => unknown, vals: unknown[]): unknown {
  let r: unknown;
  const token = opCheckpoint();
  try {
    r = impl(...vals);
  } catch (e) {
    opRollback(token);
    throw nameError(e, name);
  }
  if (r instanceof Promise) return r.catch((e: unknown) => Promise.reject(nameError(e, name)));
  return r;
}

function invoke(def: OpDef, args: ArrayLike<unknown>, self: Tensor | undefined): unknown {
  const schemas = def.schemas;
  let vals = bindArgs(schemas[0]!, args, self);
  let k = 0;
  if (typeof vals === "string") {
    if (schemas.length === 1) throw bindError(vals);
    const first = vals;
    for (k = 1; k < schemas.length; k++) {
      vals = bindArgs(schemas[k]!, args, self);
      if (typeof vals !== "string") break;
    }
    if (typeof vals === "string") {
      // one reason is clearer than the list when every overload fails the same way
      if (first.includes("unexpected keyword argument") && vals === first) throw bindError(first);
      throw new TypeError(
        `${def.name}() received an invalid combination of arguments - got ${describeCall(args, self)}, but expected one of:\n` +
          schemas.map((s) => ` * ${signatureText(s)}`).join("\n"),
      );
    }
  }
  const impl = def.impls[k] as (...a: unknown[]) => unknown;
  if (subclassDispatch.handler && hasSubclassArg(vals)) return subclassDispatch.handler(def, k, vals, () => runBound(def, impl, vals));
  if (opHooks.call) return opHooks.call(def, k, vals, () => runBound(def, impl, vals));
  return runBound(def, impl, vals);
}

/**
 * Set by torch.export while it traces a module: sees every public op call (nested ones too) with
 * its bound arguments and the overload picked, and decides whether and how `run` executes it.
 */
export const opHooks: { call: ((def: OpDef, overload: number, vals: unknown[], run: () => unknown) => unknown) | null } = { call: null };

/**
 * A tensor subclass that computes ops its own way (PyTorch's __torch_function__): DTensor
 * (distributed/tensor) runs each op on its local shard with sharding propagation. Ops with such a
 * tensor among their arguments (or in a list argument) go to `handler` instead of the kernel.
 */
export const subclassDispatch: { handler: ((def: OpDef, overload: number, vals: unknown[], run: () => unknown) => unknown) | null; is: (v: Tensor) => boolean } = {
  handler: null,
  is: () => false,
};

function hasSubclassArg(vals: unknown[]): boolean {
  for (const v of vals) {
    if (v instanceof Tensor) {
      if (subclassDispatch.is(v)) return true;
    } else if (Array.isArray(v)) for (const x of v) if (x instanceof Tensor && subclassDispatch.is(x)) return true;
  }
  return false;
}

function runBound(def: OpDef, impl: (...a: unknown[]) => unknown, vals: unknown[]): unknown {
  if (def.transparent) return transparentCall(def.name, impl, vals);
  if (!enterOp(def.name)) return impl(...vals);
  const token = opCheckpoint();
  const made = listsTemporaries(vals) ? (opTemporaries.made = []) : null;
  try {
    const r = impl(...vals);
    if (made && !(r instanceof Promise)) {
      opTemporaries.made = null;
      freeOpTemporaries(made, r);
    }
    return r;
  } catch (e) {
    opRollback(token);
    throw nameError(e, def.name);
  } finally {
    opTemporaries.made = null;
    exitOp();
  }
}

/**
 * Whether this call frees its intermediates when it returns (freeOpTemporaries): strict and
 * debug eager only (fused eager and compile keep values lazy and plan them), never around user
 * code (a callback argument may keep what it makes) or a tracer (torch.export) that may.
 */
function listsTemporaries(vals: unknown[]): boolean {
  if (getEagerMode() === "fused" || opHooks.call) return false;
  for (const v of vals) if (typeof v === "function") return false;
  return true;
}

export interface OpOptions {
  /** table key when the name alone is taken by another op (e.g. "F.relu") */
  key?: string;
  /**
   * Bind and validate, then run the implementation outside the op scope (the ops it runs are
   * each their own op), for entries that run other ops on the user's behalf (backward, host
   * reads, runtime switches); its errors are still named and its pending nodes rolled back.
   */
  transparent?: boolean;
}

/**
 * Define a public op. `schema` is one schema or a list of overloads (tried in order, like
 * PyTorch's parser); `impl` is one implementation or one per overload, called with the bound
 * arguments in schema order. `F` is the public TypeScript signature (a test type-checks calls
 * generated from the schema against it).
 */
export function op<F extends Impl>(schema: string | readonly string[], impl: Impl | readonly Impl[], opts: OpOptions = {}): F {
  const schemas = (typeof schema === "string" ? [schema] : schema).map(parseSchema);
  const impls = typeof impl === "function" ? schemas.map(() => impl) : impl;
  if (impls.length !== schemas.length) throw new Error(`op ${schemas[0]!.name}: ${schemas.length} schemas, ${impls.length} implementations`);
  const name = schemas[0]!.name;
  for (const s of schemas) if (s.name !== name) throw new Error(`op ${name}: overload named ${s.name}`);
  const key = opts.key ?? name;
  if (OP_TABLE.has(key)) throw new Error(`op table: '${key}' is defined twice`);
  const def = {
    name,
    key,
    schemas,
    impls,
    transparent: opts.transparent ?? false,
    fn: null as unknown as OpDef["fn"],
    method: null as unknown as OpDef["method"],
  };
  def.fn = function (...args: unknown[]) {
    return invoke(def, args, undefined);
  };
  def.method = function (this: Tensor, ...args: unknown[]) {
    return invoke(def, args, this);
  };
  Object.defineProperty(def.fn, "name", { value: name });
  Object.defineProperty(def.method, "name", { value: name });
  OP_TABLE.set(key, def);
  byFunction.set(def.fn, def);
  byFunction.set(def.method, def);
  return def.fn as unknown as F;
}

/** Attach ops as Tensor methods: `tensor.name(...)` binds `this` as the op's first parameter. */
export function installMethods(methods: Record<string, unknown>): void {
  const P = Tensor.prototype as unknown as Record<string, unknown>;
  for (const [name, f] of Object.entries(methods)) {
    const def = opOf(f);
    if (!def) throw new Error(`installMethods: '${name}' is not an op of the table`);
    P[name] = def.method;
  }
}

/** Define an op that exists only as a Tensor method (x.where(cond, other), x.float()). */
export function method(name: string, schema: string | readonly string[], impl: Impl | readonly Impl[], opts: OpOptions = {}): void {
  const f = op(schema, impl, { key: `Tensor.${name}`, ...opts });
  installMethods({ [name]: f });
}

/**
 * A public signature from PyTorch's calling convention: the positional parameters `P` (labels
 * kept for editors), any of which may instead be the trailing options object `O` of keyword
 * arguments (camelCase), which may also follow the positional ones.
 */
export type Sig<P extends unknown[], O, R> = (...args: [...{ [K in keyof P]: P[K] | O }, opts?: O]) => R;
/** The Tensor-method form of a public function: its first parameter is `this`. */
export type Method<F> = F extends (self: never, ...rest: infer A) => infer R ? (...args: A) => R : never;
