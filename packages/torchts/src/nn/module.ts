// nn.Module and nn.Parameter. Calling convention: `m.forward(x)` runs the layer alone;
// `m.call(x)` runs forward pre-hooks, forward, then forward hooks (PyTorch's `m(x)`).
// Assigning a Parameter, Module or registered buffer to a property registers it (PyTorch's
// __setattr__): the constructor returns a Proxy whose set/defineProperty traps do that, so
// `this.fc1 = new nn.Linear(2, 3)` and class-field initialisers both register.
import { moduleStructure } from "../utils/structure.js";
import { noGrad } from "../autograd/grad_mode.js";
import type { DType } from "../ir/dtype.js";
import { shapeStr } from "../ir/shape.js";
import { holdBeyondScopes, Tensor } from "../tensor.js";
import * as S from "../ops/shape_ops.js";
import { zerosLike } from "../ops/creation.js";

/** A Tensor that is a module parameter: requiresGrad defaults to true. Shares `data`'s storage. */
export class Parameter extends Tensor {
  constructor(data: Tensor, requiresGrad = true) {
    super(data._storage, data.shape, data._strides, data._offset, data.dtype);
    if (requiresGrad) this.requiresGrad = true;
  }
  override toString(): string {
    return `Parameter containing:\n${super.toString()}`;
  }
}

export interface RemovableHandle {
  remove(): void;
}
export type ForwardPreHook = (m: Module, args: unknown[]) => unknown[] | void;
export type ForwardHook = (m: Module, args: unknown[], output: unknown) => unknown;
export type StateDict = Map<string, Tensor>;
export interface LoadResult {
  missingKeys: string[];
  unexpectedKeys: string[];
}

const TENSOR_TYPES: Record<string, string> = {
  float32: "FloatTensor", float64: "DoubleTensor", float16: "HalfTensor", bfloat16: "BFloat16Tensor", int64: "LongTensor",
  int32: "IntTensor", int16: "ShortTensor", int8: "CharTensor", uint8: "ByteTensor", bool: "BoolTensor",
};
const typeName = (v: unknown): string =>
  v instanceof Tensor ? `torch.${TENSOR_TYPES[v.dtype] ?? "Tensor"}` : v === null ? "None" : typeof v === "object" ? (v as object).constructor.name : typeof v;

// Writing a tensor's new data into an existing Parameter/buffer keeps its identity (optimizers hold it).
function setData(t: Tensor, src: Tensor): void {
  moduleStructure.version++; // dtype/device/shape of a parameter may change (compile guards re-read them)
  const w = t as unknown as { _storage: unknown; _strides: number[]; _offset: number; dtype: DType; shape: number[] };
  holdBeyondScopes(src); // the parameter's new data: it lives as long as the parameter
  w._storage = src._storage;
  w._strides = [...src._strides];
  w._offset = src._offset;
  w.dtype = src.dtype;
  w.shape.splice(0, w.shape.length, ...src.shape);
}

export class Module {
  training = true;
  _parameters = new Map<string, Parameter | null>();
  _buffers = new Map<string, Tensor | null>();
  _nonPersistent = new Set<string>();
  _modules = new Map<string, Module | null>();
  _preHooks = new Map<number, ForwardPreHook>();
  _fwdHooks = new Map<number, ForwardHook>();
  _hookId = 0;

  constructor() {
    const handler: ProxyHandler<Module> = {
      set: (target, key, value) => {
        if (typeof key === "string" && target._interceptSet(key, value)) return true;
        return Reflect.set(target, key, value);
      },
      defineProperty: (target, key, desc) => {
        if (typeof key === "string" && "value" in desc) {
          // a subclass field declaration without initialiser must not wipe what the parent registered
          if (desc.value === undefined && target._isRegistered(key)) return true;
          if (target._interceptSet(key, desc.value)) return true;
        }
        return Reflect.defineProperty(target, key, desc);
      },
      deleteProperty: (target, key) => {
        if (typeof key === "string") {
          moduleStructure.version++;
          target._parameters.delete(key);
          target._buffers.delete(key);
          target._modules.delete(key);
        }
        return Reflect.deleteProperty(target, key);
      },
    };
    return new Proxy(this, handler);
  }

  /** Route an attribute assignment; returns true if handled. */
  _interceptSet(key: string, value: unknown): boolean {
    // early field initialisers of Module itself run before the maps exist
    if (!(this._parameters instanceof Map) || !(this._modules instanceof Map) || !(this._buffers instanceof Map)) return false;
    if (value instanceof Parameter) {
      this.registerParameter(key, value);
      return true;
    }
    if (value instanceof Module) {
      this.addModule(key, value);
      return true;
    }
    if (this._parameters.has(key)) {
      if (value !== null && value !== undefined)
        throw new TypeError(`cannot assign '${typeName(value)}' as parameter '${key}' (torch.nn.Parameter or None expected)`);
      this._parameters.set(key, null);
      this._own(key, null);
      return true;
    }
    if (this._modules.has(key)) {
      if (value !== null && value !== undefined)
        throw new TypeError(`cannot assign '${typeName(value)}' as child module '${key}' (torch.nn.Module or None expected)`);
      this._modules.set(key, null);
      this._own(key, null);
      return true;
    }
    if (this._buffers.has(key)) {
      if (value !== null && value !== undefined && !(value instanceof Tensor))
        throw new TypeError(`cannot assign '${typeName(value)}' as buffer '${key}' (torch.Tensor or None expected)`);
      this._buffers.set(key, (value as Tensor | null) ?? null);
      this._own(key, value ?? null);
      return true;
    }
    if (value instanceof Tensor) holdBeyondScopes(value); // a plain tensor attribute lives as long as the module
    return false;
  }

  _isRegistered(key: string): boolean {
    return this._parameters.has(key) || this._buffers.has(key) || this._modules.has(key);
  }
  _own(key: string, value: unknown): void {
    if (value instanceof Tensor) holdBeyondScopes(value); // a module's tensors outlive any torch.scope
    moduleStructure.version++;
    Reflect.defineProperty(this, key, { value, writable: true, enumerable: true, configurable: true });
  }
  _checkName(kind: string, name: string): void {
    if (name.includes(".")) throw new Error(`${kind} name can't contain ".", got: ${name}`);
    if (name === "") throw new Error(`${kind} name can't be empty string ""`);
  }

  registerParameter(name: string, param: Parameter | null): void {
    this._checkName("parameter", name);
    if (param !== null && !(param instanceof Parameter))
      throw new TypeError(`cannot assign '${typeName(param)}' object to parameter '${name}' (torch.nn.Parameter or None required)`);
    if (this._modules.has(name) || this._buffers.has(name)) throw new Error(`attribute '${name}' already exists`);
    this._parameters.set(name, param);
    this._own(name, param);
  }
  registerBuffer(name: string, tensor: Tensor | null, opts: { persistent?: boolean } = {}): void {
    this._checkName("buffer", name);
    if (tensor !== null && !(tensor instanceof Tensor))
      throw new TypeError(`cannot assign '${typeName(tensor)}' object to buffer '${name}' (torch Tensor or None required)`);
    if (this._parameters.has(name) || this._modules.has(name)) throw new Error(`attribute '${name}' already exists`);
    this._buffers.set(name, tensor);
    if (opts.persistent === false) this._nonPersistent.add(name);
    else this._nonPersistent.delete(name);
    this._own(name, tensor);
  }
  addModule(name: string, module: Module | null): void {
    this._checkName("module", name);
    if (module !== null && !(module instanceof Module)) throw new TypeError(`${typeName(module)} is not a Module subclass`);
    if (this._parameters.has(name) || this._buffers.has(name)) throw new Error(`attribute '${name}' already exists`);
    this._modules.set(name, module);
    this._own(name, module);
  }
  registerModule(name: string, module: Module | null): void {
    this.addModule(name, module);
  }
  getSubmodule(target: string): Module {
    if (target === "") return this;
    let m: Module = this;
    for (const part of target.split(".")) {
      const c = m._modules.get(part);
      if (!c) throw new Error(`${m.constructor.name} has no attribute \`${part}\``);
      m = c;
    }
    return m;
  }
  getParameter(target: string): Parameter {
    const i = target.lastIndexOf(".");
    const m = this.getSubmodule(i < 0 ? "" : target.slice(0, i));
    const p = m._parameters.get(target.slice(i + 1));
    if (!p) throw new Error(`${m.constructor.name} has no parameter \`${target.slice(i + 1)}\``);
    return p;
  }

  // ---- forward ----
  forward(..._args: any[]): any {
    throw new Error(`Module [${this.constructor.name}] is missing the required "forward" function`);
  }
  /** PyTorch's `module(...)`: pre-hooks, forward, hooks. */
  call(...args: Parameters<this["forward"]>): ReturnType<this["forward"]> {
    let a: unknown[] = args;
    for (const h of this._preHooks.values()) {
      const r = h(this, a);
      if (r !== undefined) a = Array.isArray(r) ? r : [r];
    }
    let out = (this.forward as (...x: unknown[]) => unknown)(...a);
    for (const h of this._fwdHooks.values()) {
      const r = h(this, a, out);
      if (r !== undefined) out = r;
    }
    return out as ReturnType<this["forward"]>;
  }
  registerForwardPreHook(hook: ForwardPreHook): RemovableHandle {
    const id = this._hookId++;
    this._preHooks.set(id, hook);
    return { remove: () => this._preHooks.delete(id) };
  }
  registerForwardHook(hook: ForwardHook): RemovableHandle {
    const id = this._hookId++;
    this._fwdHooks.set(id, hook);
    return { remove: () => this._fwdHooks.delete(id) };
  }

  // ---- traversal ----
  *namedModules(prefix = "", memo = new Set<Module>()): Generator<[string, Module]> {
    if (memo.has(this)) return;
    memo.add(this);
    yield [prefix, this];
    for (const [n, m] of this._modules) if (m) yield* m.namedModules(prefix ? `${prefix}.${n}` : n, memo);
  }
  *modules(): Generator<Module> {
    for (const [, m] of this.namedModules()) yield m;
  }
  *namedChildren(): Generator<[string, Module]> {
    const seen = new Set<Module>();
    for (const [n, m] of this._modules)
      if (m && !seen.has(m)) {
        seen.add(m);
        yield [n, m];
      }
  }
  *children(): Generator<Module> {
    for (const [, m] of this.namedChildren()) yield m;
  }
  *namedParameters(prefix = "", recurse = true): Generator<[string, Parameter]> {
    const seen = new Set<Tensor>();
    const mods: [string, Module][] = recurse ? [...this.namedModules(prefix)] : [[prefix, this]];
    for (const [mp, m] of mods)
      for (const [n, p] of m._parameters)
        if (p && !seen.has(p)) {
          seen.add(p);
          yield [mp ? `${mp}.${n}` : n, p];
        }
  }
  *parameters(recurse = true): Generator<Parameter> {
    for (const [, p] of this.namedParameters("", recurse)) yield p;
  }
  *namedBuffers(prefix = "", recurse = true): Generator<[string, Tensor]> {
    const seen = new Set<Tensor>();
    const mods: [string, Module][] = recurse ? [...this.namedModules(prefix)] : [[prefix, this]];
    for (const [mp, m] of mods)
      for (const [n, b] of m._buffers)
        if (b && !seen.has(b)) {
          seen.add(b);
          yield [mp ? `${mp}.${n}` : n, b];
        }
  }
  *buffers(recurse = true): Generator<Tensor> {
    for (const [, b] of this.namedBuffers("", recurse)) yield b;
  }

  // ---- state ----
  /** Ordered map name -> detached tensor sharing storage with the parameter/buffer. */
  stateDict(opts: { prefix?: string; keepVars?: boolean } = {}): StateDict {
    const out: StateDict = new Map();
    const walk = (m: Module, prefix: string): void => {
      for (const [n, p] of m._parameters) if (p) out.set(prefix + n, opts.keepVars ? p : S.detach(p));
      for (const [n, b] of m._buffers)
        if (b && !m._nonPersistent.has(n)) out.set(prefix + n, opts.keepVars ? b : S.detach(b));
      for (const [n, c] of m._modules) if (c) walk(c, `${prefix}${n}.`);
    };
    walk(this, opts.prefix ?? "");
    return out;
  }

  loadStateDict(sd: StateDict | Record<string, Tensor>, opts: { strict?: boolean } = {}): LoadResult {
    const strict = opts.strict ?? true;
    const src = sd instanceof Map ? sd : new Map(Object.entries(sd));
    const missing: string[] = [];
    const errors: string[] = [];
    const expected = new Set<string>();
    const walk = (m: Module, prefix: string): void => {
      const local: [string, Tensor][] = [];
      for (const [n, p] of m._parameters) if (p) local.push([n, p]);
      for (const [n, b] of m._buffers) if (b && !m._nonPersistent.has(n)) local.push([n, b]);
      for (const [n, t] of local) {
        const key = prefix + n;
        expected.add(key);
        const v = src.get(key);
        if (v === undefined) {
          missing.push(key);
          continue;
        }
        if (!(v instanceof Tensor)) {
          errors.push(`While copying the parameter named "${key}", expected torch.Tensor or Tensor-like object from checkpoint but received ${typeName(v)}`);
          continue;
        }
        if (v.shape.length !== t.shape.length || v.shape.some((d, i) => d !== t.shape[i])) {
          errors.push(
            `size mismatch for ${key}: copying a param with shape torch.Size(${shapeStr(v.shape)}) from checkpoint, the shape in current model is torch.Size(${shapeStr(t.shape)}).`,
          );
          continue;
        }
        noGrad(() => t.copy_(v));
      }
      for (const [n, c] of m._modules) if (c) walk(c, `${prefix}${n}.`);
    };
    walk(this, "");
    const unexpected = [...src.keys()].filter((k) => !expected.has(k));
    if (strict) {
      if (unexpected.length) errors.unshift(`Unexpected key(s) in state_dict: ${unexpected.map((k) => `"${k}"`).join(", ")}. `);
      if (missing.length) errors.unshift(`Missing key(s) in state_dict: ${missing.map((k) => `"${k}"`).join(", ")}. `);
    }
    if (errors.length)
      throw new Error(`Error(s) in loading state_dict for ${this.constructor.name}:\n\t${errors.join("\n\t")}`);
    return { missingKeys: missing, unexpectedKeys: unexpected };
  }

  // ---- modes and conversion ----
  train(mode = true): this {
    if (typeof mode !== "boolean") throw new TypeError("training mode is expected to be boolean");
    this.training = mode;
    for (const c of this.children()) c.train(mode);
    return this;
  }
  eval(): this {
    return this.train(false);
  }
  requiresGrad_(requiresGrad = true): this {
    for (const p of this.parameters()) p.requiresGrad_(requiresGrad);
    return this;
  }
  zeroGrad(opts: { setToNone?: boolean } = {}): void {
    const setToNone = opts.setToNone ?? true;
    for (const p of this.parameters()) {
      if (!p.grad) continue;
      if (setToNone) p.grad = null;
      // a fresh zero tensor, not zero_(): the engine may store an expanded or shared gradient
      else p.grad = zerosLike(p.grad);
    }
  }
  apply(fn: (m: Module) => void): this {
    for (const c of this.children()) c.apply(fn);
    fn(this);
    return this;
  }
  /** Apply fn to every parameter and buffer, keeping the Parameter objects (their data is replaced). */
  _applyTensors(fn: (t: Tensor) => Tensor): this {
    noGrad(() => {
      for (const m of this.modules()) {
        for (const p of m._parameters.values()) {
          if (!p) continue;
          const r = fn(p);
          if (r !== p) setData(p, S.detach(r));
          if (p.grad) {
            const g = fn(p.grad);
            if (g !== p.grad) p.grad = g;
          }
        }
        for (const [n, b] of m._buffers) if (b) m._buffers.set(n, fn(b)), m._own(n, m._buffers.get(n));
      }
    });
    return this;
  }
  /** module.to(device | dtype | {device, dtype}): floating parameters/buffers only change dtype. */
  to(a: string | { dtype?: DType; device?: string }): this {
    const o = typeof a === "string" ? (isDtypeName(a) ? { dtype: a as DType } : { device: a }) : a;
    return this._applyTensors((t) => {
      let r = t;
      if (o.device && r.device !== o.device) r = S.to(r, o.device);
      if (o.dtype && isFloatLike(r.dtype) && r.dtype !== o.dtype) r = S.to(r, o.dtype);
      return r;
    });
  }
  float(): this {
    return this.to({ dtype: "float32" });
  }
  double(): this {
    return this.to({ dtype: "float64" });
  }
  half(): this {
    return this.to({ dtype: "float16" });
  }
  cpu(): this {
    return this.to({ device: "cpu" });
  }

  extraRepr(): string {
    return "";
  }
  toString(): string {
    const lines: string[] = [];
    for (const [n, m] of this._modules) lines.push(`(${n}): ${String(m).split("\n").join("\n  ")}`);
    const extra = this.extraRepr();
    if (!lines.length) return `${this.constructor.name}(${extra})`;
    return `${this.constructor.name}(${extra ? `\n  ${extra}` : ""}\n  ${lines.join("\n  ")}\n)`;
  }
}

function isDtypeName(s: string): boolean {
  return /^(float|bfloat|int|uint|bool|double|half|long)/.test(s);
}
function isFloatLike(d: DType): boolean {
  return d.startsWith("float") || d === "bfloat16";
}
