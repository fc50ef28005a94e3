// Guards of a compiled function: what must stay the same for a compiled graph to be reused.
// Each guard is a labeled part ("arg0.shape") so a recompile can say exactly what changed.
import { Tensor } from "../tensor.js";
import { isGradEnabled } from "../autograd/grad_mode.js";
import { moduleStructure } from "../utils/structure.js";

export type GuardParts = Map<string, string>;

const ids = new WeakMap<object, number>();
let nextId = 1;
function idOf(o: object): number {
  let v = ids.get(o);
  if (v === undefined) ids.set(o, (v = nextId++));
  return v;
}

function describe(x: unknown, path: string, out: GuardParts, depth: number): void {
  if (x instanceof Tensor) {
    out.set(`${path}.shape`, `[${x.shape.join(",")}]`);
    out.set(`${path}.dtype`, x.dtype);
    out.set(`${path}.device`, x.device);
    out.set(`${path}.requiresGrad`, String(x.requiresGrad));
    return;
  }
  if (x === null || x === undefined || typeof x === "number" || typeof x === "string" || typeof x === "boolean") {
    out.set(path, `${typeof x}:${String(x)}`);
    return;
  }
  if (depth > 4) return;
  if (Array.isArray(x)) {
    out.set(`${path}.length`, String(x.length));
    x.forEach((v, i) => describe(v, `${path}[${i}]`, out, depth + 1));
    return;
  }
  if (typeof x === "object" && Object.getPrototypeOf(x) === Object.prototype)
    for (const [k, v] of Object.entries(x as Record<string, unknown>)) describe(v, `${path}.${k}`, out, depth + 1);
}

export interface GuardedModule {
  training: boolean;
  namedParameters(): Iterable<[string, Tensor]>;
}

export function isModule(x: unknown): x is GuardedModule & { forward: (...a: unknown[]) => unknown } {
  return typeof x === "object" && x !== null && typeof (x as { namedParameters?: unknown }).namedParameters === "function";
}

export function guardParts(args: readonly unknown[], modules: readonly GuardedModule[]): GuardParts {
  const out: GuardParts = new Map();
  out.set("gradEnabled", String(isGradEnabled())); // a replay recorded without autograd must not serve a call with it
  args.forEach((a, i) => describe(a, `arg${i}`, out, 0));
  modules.forEach((m, k) => {
    out.set(`module${k}.training`, String(m.training));
    out.set(`module${k}.parameters`, describeParameters(m));
  });
  return out;
}

interface ParamCache {
  version: number;
  params: [string, Tensor][];
  frozen: boolean[];
  desc: string;
}
const paramCache = new WeakMap<GuardedModule, ParamCache>();

function cachedParameters(m: GuardedModule): ParamCache {
  let c = paramCache.get(m);
  if (!c || c.version !== moduleStructure.version) {
    const params = [...m.namedParameters()];
    c = { version: moduleStructure.version, params, frozen: [], desc: "" };
    paramCache.set(m, c);
  }
  return c;
}

/** m's parameters, walked once per module structure version (a replayed call needs them, not a walk). */
export function moduleParameters(m: GuardedModule): readonly Tensor[] {
  return cachedParameters(m).params.map(([, p]) => p);
}

/** Names, identities, dtypes, shapes, devices and frozen flags of m's parameters (cached per module structure). */
function describeParameters(m: GuardedModule): string {
  const c = cachedParameters(m);
  // requiresGrad is the one parameter attribute that changes without a structure change
  let same = c.desc !== "" && c.frozen.length === c.params.length;
  for (let i = 0; same && i < c.params.length; i++) if (c.frozen[i] === c.params[i]![1].requiresGrad) same = false;
  if (!same) {
    c.frozen = c.params.map(([, p]) => !p.requiresGrad);
    c.desc = c.params.map(([name, p]) => `${name}#${idOf(p)}:${p.dtype}[${p.shape.join(",")}]@${p.device}${p.requiresGrad ? "" : "(frozen)"}`).join(" ");
  }
  return c.desc;
}

/**
 * Long parts (a module's parameter list: ~100 bytes a parameter) enter the key as a number: the
 * list's string is cached per module (describeParameters), V8 keeps a string's hash with it, so
 * finding its number is one lookup; joined in, every call would copy and hash the whole list.
 */
const longParts = new Map<string, number>();
let nextPart = 1;
function shortPart(v: string): string {
  if (v.length <= 64) return v;
  let id = longParts.get(v);
  if (id === undefined) {
    // bounded: past 1024 distinct lists start over with fresh numbers (at worst, one recompile)
    if (longParts.size >= 1024) longParts.clear();
    longParts.set(v, (id = nextPart++));
  }
  return `#${id}`;
}

export function guardKey(g: GuardParts): string {
  let key = "";
  for (const [k, v] of g) key += `${k}=${shortPart(v)};`;
  return key;
}

/** Why g failed the guards of `prev` (the closest earlier entry): the first differing parts. */
export function guardDiff(prev: GuardParts, g: GuardParts): string {
  const out: string[] = [];
  for (const [k, v] of g) if (prev.get(k) !== v) out.push(`${k} changed from ${prev.get(k) ?? "<absent>"} to ${v}`);
  for (const k of prev.keys()) if (!g.has(k)) out.push(`${k} is gone`);
  if (out.length > 3) return `${out.slice(0, 3).join("; ")} (+${out.length - 3} more)`;
  return out.join("; ");
}
