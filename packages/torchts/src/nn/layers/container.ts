// Containers: Sequential, ModuleList, ModuleDict. Children are registered under "0", "1", ...
// so `seq[0]` reads them like PyTorch's indexing.
import { Module } from "../module.js";

function idx(i: number, n: number, what: string): number {
  const j = i < 0 ? i + n : i;
  if (!Number.isInteger(j) || j < 0 || j >= n) throw new RangeError(`index ${i} is out of range (${what} of length ${n})`);
  return j;
}

export class ModuleList extends Module {
  [i: number]: Module;
  constructor(modules: Iterable<Module> = []) {
    super();
    for (const m of modules) this.append(m);
  }
  get length(): number {
    return this._modules.size;
  }
  append(m: Module): this {
    this.addModule(String(this._modules.size), m);
    return this;
  }
  extend(ms: Iterable<Module>): this {
    for (const m of ms) this.append(m);
    return this;
  }
  insert(index: number, m: Module): void {
    const list = [...this._modules.values()] as Module[];
    list.splice(index < 0 ? index + list.length : index, 0, m);
    this._reset(list);
  }
  get(i: number): Module {
    return [...this._modules.values()][idx(i, this._modules.size, "ModuleList")]!;
  }
  _reset(list: Module[]): void {
    for (const k of [...this._modules.keys()]) delete (this as unknown as Record<string, unknown>)[k];
    this._modules.clear();
    list.forEach((m, i) => this.addModule(String(i), m));
  }
  [Symbol.iterator](): Iterator<Module> {
    return ([...this._modules.values()] as Module[])[Symbol.iterator]();
  }
}

export class Sequential extends ModuleList {
  constructor(...modules: Module[]) {
    super(modules);
  }
  override forward(input: unknown): any {
    let x = input;
    for (const m of this) x = m.call(x);
    return x;
  }
}

export class ModuleDict extends Module {
  constructor(modules: Record<string, Module> | Iterable<[string, Module]> = {}) {
    super();
    this.update(modules);
  }
  update(modules: Record<string, Module> | Iterable<[string, Module]>): void {
    const it = Symbol.iterator in Object(modules) ? (modules as Iterable<[string, Module]>) : Object.entries(modules);
    for (const [k, m] of it) this.set(k, m);
  }
  set(key: string, m: Module): void {
    this.addModule(key, m);
  }
  get(key: string): Module {
    const m = this._modules.get(key);
    if (!m) throw new Error(`KeyError: '${key}'`);
    return m;
  }
  has(key: string): boolean {
    return this._modules.has(key);
  }
  delete(key: string): void {
    delete (this as unknown as Record<string, unknown>)[key];
  }
  keys(): string[] {
    return [...this._modules.keys()];
  }
  values(): Module[] {
    return [...this._modules.values()] as Module[];
  }
  items(): [string, Module][] {
    return [...this._modules.entries()] as [string, Module][];
  }
  get size(): number {
    return this._modules.size;
  }
}
