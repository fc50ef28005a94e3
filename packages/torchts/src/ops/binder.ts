// The binder: one function turns any call of a public op (positional arguments in PyTorch's
// order, a trailing options object with PyTorch's keyword names in camelCase, or a mix) into the
// op's parameters in schema order, typed and validated, with PyTorch's argument-parser messages.
// It returns a string (the error message) instead of throwing so that overload resolution is a
// loop over schemas without exceptions.
import { DTYPES, type DType } from "../ir/dtype.js";
import { Tensor } from "../tensor.js";
import type { Kind, Param, Schema } from "./schema.js";

const DTYPE_SET: ReadonlySet<string> = new Set<string>(DTYPES);

/** Extra kinds registered by the layers that own them (Generator by ops/random). */
const customChecks: Partial<Record<Kind, (v: unknown) => boolean>> = {};
export function registerKindCheck(kind: Kind, check: (v: unknown) => boolean): void {
  customChecks[kind] = check;
}

/**
 * Device strings: `cpu`, `webgpu`, `cpu:0`. Only the form is checked here; whether the device is
 * registered is the op's check (as torch.device("cuda") is valid without CUDA).
 */
function deviceCheck(v: string): boolean {
  return /^[a-z][a-z0-9_]*(:\d+)?$/.test(v);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/** Python's name for a JS value's type, as PyTorch's messages say it ("not str", "not NoneType"). */
export function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return "NoneType";
  switch (typeof v) {
    case "string":
      return "str";
    case "boolean":
      return "bool";
    case "number":
      return Number.isInteger(v) ? "int" : "float";
    case "function":
      return "function";
    case "bigint":
      return "bigint";
    case "symbol":
      return "symbol";
  }
  if (v instanceof Tensor) return "Tensor";
  if (Array.isArray(v)) return "list";
  if (isPlainObject(v)) return "dict";
  return (v as object).constructor?.name ?? "object";
}

const EXPECTED: Record<Kind, string> = {
  Tensor: "Tensor",
  TensorLike: "Tensor",
  "Tensor[]": "tuple of Tensors",
  int: "int",
  "int[]": "tuple of ints",
  Size: "tuple of ints",
  float: "float",
  "float[]": "tuple of floats",
  bool: "bool",
  "bool[]": "tuple of bools",
  Scalar: "Number",
  "Scalar[]": "tuple of Numbers",
  ScalarType: "torch.dtype",
  Device: "torch.device",
  MemoryFormat: "torch.memory_format",
  str: "str",
  Generator: "torch.Generator",
  Callable: "callable",
  Any: "any",
};

export function expectedName(p: Param): string {
  if (p.choices) return `one of ${p.choices.map((c) => `'${c}'`).join(", ")}`;
  return EXPECTED[p.kind];
}

function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}
function isNum(v: unknown): v is number {
  return typeof v === "number";
}
function isScalar(v: unknown): v is number | boolean {
  return typeof v === "number" || typeof v === "boolean";
}

const MEMORY_FORMATS = new Set(["contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]);

function where(s: Schema, p: Param, pos: number, method: boolean): string {
  // PyTorch counts a function's input as position 1 and leaves a method's self out
  return pos < 0 ? `${s.name}(): argument '${p.name}'` : `${s.name}(): argument '${p.name}' (position ${pos + (method ? 0 : 1)})`;
}

function disposedArg(s: Schema, p: Param, pos: number, method: boolean, err: { msg: string | null }): undefined {
  err.msg = `${where(s, p, pos, method)} is a Tensor that has been disposed (by dispose(), \`using\` or torch.scope) and can no longer be used`;
  return undefined;
}

function listElems(
  s: Schema,
  p: Param,
  v: unknown,
  pos: number,
  method: boolean,
  ok: (e: unknown) => boolean,
  elem: string,
): unknown[] | string {
  if (!Array.isArray(v)) return `${where(s, p, pos, method)} must be ${expectedName(p)}, not ${pyTypeName(v)}`;
  for (let i = 0; i < v.length; i++)
    if (!ok(v[i]))
      return `${where(s, p, pos, method)} must be ${expectedName(p)}, but found element of type ${pyTypeName(v[i])} at pos ${i}`;
  if (p.size > 0 && v.length !== p.size && !(p.size === 1 && elem === "int"))
    return `${where(s, p, pos, method)} must be ${expectedName(p)} of length ${p.size}, not of length ${v.length}`;
  return v as unknown[];
}

/** Check (and normalize) one value; returns the value to pass on, or an error string in `err`. */
function checkValue(s: Schema, p: Param, v: unknown, pos: number, method: boolean, err: { msg: string | null }): unknown {
  // as the fast path: undefined is "not given" (the default), null is None (only for T?)
  if (v === undefined && p.hasDefault) return p.default;
  if (v === undefined || v === null) {
    if (p.optional) return null;
    err.msg = `${where(s, p, pos, method)} must be ${expectedName(p)}, not NoneType`;
    return undefined;
  }
  const bad = (): undefined => {
    err.msg = `${where(s, p, pos, method)} must be ${expectedName(p)}, not ${pyTypeName(v)}`;
    return undefined;
  };
  switch (p.kind) {
    case "Tensor":
      if (!(v instanceof Tensor)) return bad();
      if (v.isDisposed) return disposedArg(s, p, pos, method, err);
      return v;
    case "TensorLike":
      if (!(v instanceof Tensor) && !isScalar(v)) return bad();
      if (v instanceof Tensor && v.isDisposed) return disposedArg(s, p, pos, method, err);
      return v;
    case "int":
      if (!isInt(v)) return bad();
      return v;
    case "float":
      if (!isNum(v)) return bad();
      return v;
    case "bool":
      if (typeof v !== "boolean") return bad();
      return v;
    case "Scalar":
      if (!isScalar(v)) return bad();
      return v;
    case "str":
      if (typeof v !== "string") return bad();
      if (p.choices && !p.choices.includes(v)) {
        err.msg = `${where(s, p, pos, method)} must be ${expectedName(p)}, not '${v}'`;
        return undefined;
      }
      return v;
    case "ScalarType":
      if (typeof v !== "string" || !DTYPE_SET.has(v)) {
        err.msg =
          typeof v === "string"
            ? `${where(s, p, pos, method)} must be torch.dtype (one of ${DTYPES.join(", ")}), not '${v}'`
            : `${where(s, p, pos, method)} must be torch.dtype, not ${pyTypeName(v)}`;
        return undefined;
      }
      return v as DType;
    case "Device":
      if (typeof v !== "string" || !deviceCheck(v)) {
        err.msg =
          typeof v === "string"
            ? `${where(s, p, pos, method)} must be torch.device, not '${v}' (not a device string such as 'cpu' or 'webgpu:0')`
            : `${where(s, p, pos, method)} must be torch.device, not ${pyTypeName(v)}`;
        return undefined;
      }
      return v;
    case "MemoryFormat":
      if (typeof v !== "string" || !MEMORY_FORMATS.has(v)) return bad();
      return v;
    case "int[]":
    case "Size": {
      if (isInt(v) && p.size > 0) return p.size > 1 ? new Array(p.size).fill(v) : [v];
      const r = listElems(s, p, v, pos, method, isInt, "int");
      if (typeof r === "string") {
        err.msg = r;
        return undefined;
      }
      if (p.kind === "Size")
        for (const d of r as number[])
          if (d < 0) {
            err.msg = `${s.name}(): ${NEGATIVE_DIMENSION} ${d}: [${(r as number[]).join(", ")}]`;
            return undefined;
          }
      return r;
    }
    case "float[]": {
      if (isNum(v)) return p.size > 1 ? new Array(p.size).fill(v) : [v];
      const r = listElems(s, p, v, pos, method, isNum, "float");
      if (typeof r === "string") return (err.msg = r), undefined;
      return r;
    }
    case "bool[]": {
      const r = listElems(s, p, v, pos, method, (e) => typeof e === "boolean", "bool");
      if (typeof r === "string") return (err.msg = r), undefined;
      return r;
    }
    case "Scalar[]": {
      if (isScalar(v)) return [v];
      const r = listElems(s, p, v, pos, method, isScalar, "Scalar");
      if (typeof r === "string") return (err.msg = r), undefined;
      return r;
    }
    case "Tensor[]": {
      const r = listElems(s, p, v, pos, method, (e) => e instanceof Tensor, "Tensor");
      if (typeof r === "string") return (err.msg = r), undefined;
      for (const t of r as Tensor[]) if (t.isDisposed) return disposedArg(s, p, pos, method, err);
      return r;
    }
    case "Generator": {
      const c = customChecks.Generator;
      if (c ? !c(v) : typeof v !== "object") return bad();
      return v;
    }
    case "Callable":
      if (typeof v !== "function") return bad();
      return v;
    case "Any":
      return v;
  }
}

function closest(name: string, s: Schema): string | null {
  const low = name.toLowerCase().replace(/_/g, "");
  for (const p of s.params) if (p.name.toLowerCase() === low) return p.name;
  return null;
}

const err = { msg: null as string | null };

// ---- the fast path: positional calls whose every value is of its parameter's plain kind ----

const FAIL = Symbol("fail");

/** PyTorch checks sizes as values (a RuntimeError); every other binding failure is its TypeError. */
const NEGATIVE_DIMENSION = "Trying to create tensor with negative dimension";
export function isRuntimeBindError(msg: string): boolean {
  return msg.includes(NEGATIVE_DIMENSION);
}
type Fast = (v: unknown) => unknown;

function fastChecker(p: Param): Fast {
  const dflt = p.default;
  const hasDefault = p.hasDefault;
  const optional = p.optional;
  // undefined -> the default, null -> null if optional; anything else unusual goes the slow way
  const none = (v: unknown): unknown =>
    v === undefined ? (optional ? (hasDefault ? dflt : null) : hasDefault ? dflt : FAIL) : optional ? null : FAIL;
  switch (p.kind) {
    case "Tensor":
      return (v) => (v instanceof Tensor ? (v.isDisposed ? FAIL : v) : v == null ? none(v) : FAIL);
    case "TensorLike":
      return (v) =>
        v instanceof Tensor ? (v.isDisposed ? FAIL : v) : typeof v === "number" || typeof v === "boolean" ? v : v == null ? none(v) : FAIL;
    case "int":
      return (v) => (typeof v === "number" && Number.isInteger(v) ? v : v == null ? none(v) : FAIL);
    case "float":
      return (v) => (typeof v === "number" ? v : v == null ? none(v) : FAIL);
    case "bool":
      return (v) => (typeof v === "boolean" ? v : v == null ? none(v) : FAIL);
    case "Scalar":
      return (v) => (typeof v === "number" || typeof v === "boolean" ? v : v == null ? none(v) : FAIL);
    case "ScalarType":
      return (v) => (typeof v === "string" && DTYPE_SET.has(v) ? v : v == null ? none(v) : FAIL);
    case "int[]": {
      const size = p.size;
      return (v) => {
        // PyTorch takes a single int only for a sized list (int[2]; varargs are the slow path's)
        if (typeof v === "number") return Number.isInteger(v) && size > 0 ? (size > 1 ? new Array(size).fill(v) : [v]) : FAIL;
        if (Array.isArray(v)) {
          if (size > 1 && v.length !== size) return FAIL;
          for (let i = 0; i < v.length; i++) {
            const e = v[i];
            if (typeof e !== "number" || !Number.isInteger(e)) return FAIL;
          }
          return v;
        }
        return v == null ? none(v) : FAIL;
      };
    }
    case "Tensor[]":
      return (v) => {
        if (!Array.isArray(v)) return v == null ? none(v) : FAIL;
        for (let i = 0; i < v.length; i++) {
          const e = v[i];
          if (!(e instanceof Tensor) || e.isDisposed) return FAIL;
        }
        return v;
      };
    case "Any":
      return (v) => (v == null ? none(v) : v);
    default:
      return () => FAIL; // the slow path checks the rest (messages, choices, devices)
  }
}

interface Compiled {
  fast: Fast[];
  /** defaults in parameter order (FAIL for required ones) */
  template: unknown[];
}
const compiled = new WeakMap<Schema, Compiled>();
function compile(s: Schema): Compiled {
  let c = compiled.get(s);
  if (c) return c;
  for (const p of s.params) if (Array.isArray(p.default)) Object.freeze(p.default); // shared by every call
  c = {
    fast: s.params.map(fastChecker),
    template: s.params.map((p) => (p.hasDefault ? p.default : p.optional && p.kwOnly ? null : FAIL)),
  };
  compiled.set(s, c);
  return c;
}

/**
 * Bind `args` to the schema. `self` (for a method call) fills parameter 0. Returns the values in
 * parameter order, or the error message.
 */
export function bindArgs(s: Schema, args: ArrayLike<unknown>, self?: Tensor): unknown[] | string {
  const n = args.length;
  const off = self === undefined ? 0 : 1;
  const last = n > 0 ? args[n - 1] : undefined;
  // positional calls of plain values (almost every internal call) bind without building messages
  if (s.restIndex >= 0) return bindRest(s, args, self);
  const va = s.varargsIndex;
  if (
    n + off <= s.nPositional &&
    (va < 0 || typeof args[va - off] !== "number") &&
    (typeof last !== "object" || last === null || last instanceof Tensor || Array.isArray(last))
  ) {
    const c = s.params.length === 0 ? null : compile(s);
    const out = c ? c.template.slice() : [];
    if (off) out[0] = self;
    let ok = true;
    for (let i = 0; i < n; i++) {
      const v = c!.fast[i + off]!(args[i]);
      if (v === FAIL) {
        ok = false;
        break;
      }
      out[i + off] = v;
    }
    if (ok) {
      for (let i = n + off; i < out.length; i++) if (out[i] === FAIL) ok = false;
      if (ok) return out;
    }
  }
  return bindSlow(s, args, self);
}

/**
 * A schema with a rest parameter (`index(Tensor input, Any... indices)`): the parameters before it
 * positionally, the rest as one array. A trailing plain object is an options object only when all
 * its keys are keyword-only parameters (a Slice object {start, stop, step} is an index).
 */
function bindRest(s: Schema, args: ArrayLike<unknown>, self?: Tensor): unknown[] | string {
  const r = s.restIndex;
  const off = self === undefined ? 0 : 1;
  let n = args.length;
  const last = n > 0 ? args[n - 1] : undefined;
  const kwNames = s.params.filter((p) => p.kwOnly).map((p) => p.name);
  let kw: Record<string, unknown> | null = null;
  if (isPlainObject(last) && kwNames.length > 0 && Object.keys(last).every((k) => kwNames.includes(k))) {
    kw = last;
    n--;
  }
  const head = Array.prototype.slice.call(args, 0, Math.min(n, r - off));
  const rest = Array.prototype.slice.call(args, Math.min(n, r - off), n);
  const res = bindSlow(s, kw ? [...head, kw] : head, self, true);
  if (typeof res === "string") return res;
  res[r] = rest;
  return res;
}

function bindSlow(s: Schema, args: ArrayLike<unknown>, self?: Tensor, restBound = false): unknown[] | string {
  const method = self !== undefined;
  const params = s.params;
  const c = compile(s);
  // out starts as the defaults; `given` marks what the call set (a bit per parameter)
  const out = c.template.slice();
  let given = 0n;
  let n = args.length;
  let kw: Record<string, unknown> | null = null;
  if (n > 0 && isPlainObject(args[n - 1])) {
    kw = args[n - 1] as Record<string, unknown>;
    n--;
  }
  let pi = 0;
  if (method) {
    out[0] = self;
    given |= 1n;
    pi = 1;
  }
  // varargs int list: x.view(2, 3) / torch.zeros(2, 3)
  const va = s.varargsIndex;
  let positional: ArrayLike<unknown> = args;
  // x.view(2, 3), torch.zeros(2, 3); also torch.permute(x, 1, 0) (PyTorch takes varargs only for
  // methods and leading lists; the function form is kept for internal callers and Tensor-first code)
  if (va >= 0 && n > va - pi && isInt(args[va - pi])) {
    const head = Array.prototype.slice.call(args, 0, va - pi);
    head.push(Array.prototype.slice.call(args, va - pi, n));
    positional = head;
    n = head.length;
  }
  const maxPos = s.nPositional - pi;
  if (n > maxPos) {
    const lo = s.nRequired - pi;
    const range = lo === maxPos ? `${maxPos}` : `from ${lo} to ${maxPos}`;
    return `${s.name}() takes ${range} positional argument${maxPos === 1 ? "" : "s"} but ${n} ${n === 1 ? "was" : "were"} given`;
  }
  err.msg = null;
  for (let i = 0; i < n; i++, pi++) {
    const p = params[pi]!;
    const v = positional[i];
    let r = c.fast[pi]!(v);
    if (r === FAIL) {
      r = checkValue(s, p, v, i + (method ? 1 : 0), method, err);
      if (err.msg !== null) return err.msg;
    }
    out[pi] = r;
    given |= 1n << BigInt(pi);
  }
  if (kw !== null) {
    for (const key in kw) {
      const v = kw[key];
      const p = s.byName.get(key);
      if (p === undefined || (method && p.index === 0)) {
        const hint = closest(key, s);
        return `${s.name}() got an unexpected keyword argument '${key}'${hint ? ` (did you mean '${hint}'?)` : ""}`;
      }
      if (v === undefined) continue;
      const bit = 1n << BigInt(p.index);
      if (given & bit) return `${s.name}() got multiple values for argument '${key}'`;
      let r = c.fast[p.index]!(v);
      if (r === FAIL) {
        r = checkValue(s, p, v, -1, method, err);
        if (err.msg !== null) return err.msg;
      }
      out[p.index] = r;
      given |= bit;
    }
  }
  let missing: string[] | null = null;
  for (let i = 0; i < params.length; i++) if (out[i] === FAIL && !(restBound && i === s.restIndex)) (missing ??= []).push(params[i]!.name);
  if (missing !== null)
    return `${s.name}() missing ${missing.length} required positional argument${missing.length === 1 ? "" : "s"}: ${missing.map((m) => `"${m}"`).join(", ")}`;
  return out;
}

/** PyTorch's "got (Tensor, str)" description of a call, for overload errors. */
export function describeCall(args: ArrayLike<unknown>, self?: Tensor): string {
  const parts: string[] = [];
  if (self !== undefined) parts.push("Tensor");
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (i === args.length - 1 && isPlainObject(a)) for (const [k, v] of Object.entries(a)) parts.push(`${k}=${pyTypeName(v)}`);
    else parts.push(pyTypeName(a));
  }
  return `(${parts.join(", ")})`;
}

export function signatureText(s: Schema): string {
  const parts: string[] = [];
  let kw = false;
  for (const p of s.params) {
    if (p.kwOnly && !kw) {
      parts.push("*");
      kw = true;
    }
    parts.push(`${p.kind}${p.optional ? "?" : p.rest ? "..." : ""} ${p.name}`);
  }
  return `(${parts.join(", ")})`;
}
