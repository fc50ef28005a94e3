// PyTorch's calling convention for the distributed functions: positional arguments in
// PyTorch's order, or a trailing options object with the same (camelCase) names, or a mix.
// (The op table's binder, ops/binder.ts, does this for tensor ops; distributed functions are not
// tensor ops, so they are kept out of that table and its per-op samples and fuzzing.)

function isOptions(x: unknown): x is Record<string, unknown> {
  if (typeof x !== "object" || x === null || Array.isArray(x)) return false;
  const p = Object.getPrototypeOf(x) as unknown;
  return p === Object.prototype || p === null;
}

/** Bind `args` to `names`; keys absent from both stay undefined. */
export function bindArgs(fn: string, names: readonly string[], args: readonly unknown[]): Record<string, unknown> {
  const pos = args.length && isOptions(args[args.length - 1]) ? args.slice(0, -1) : args;
  const opts = pos === args ? {} : (args[args.length - 1] as Record<string, unknown>);
  if (pos.length > names.length)
    throw new TypeError(`${fn}() takes at most ${names.length} positional arguments but ${pos.length} were given`);
  const out: Record<string, unknown> = {};
  pos.forEach((v, i) => (out[names[i]!] = v));
  for (const [k, v] of Object.entries(opts)) {
    if (!names.includes(k)) {
      const near = names.find((n) => n.toLowerCase() === k.toLowerCase());
      throw new TypeError(`${fn}() got an unexpected keyword argument '${k}'${near ? ` (did you mean '${near}'?)` : ""}`);
    }
    if (names.indexOf(k) < pos.length && pos[names.indexOf(k)] !== undefined)
      throw new TypeError(`${fn}() got multiple values for argument '${k}'`);
    out[k] = v;
  }
  return out;
}

export function intArg(fn: string, name: string, v: unknown, min = -Infinity): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min)
    throw new TypeError(`${fn}(): argument '${name}' must be an integer${min > -Infinity ? ` >= ${min}` : ""}, got ${describe(v)}`);
  return v;
}

/** A timeout in milliseconds (a finite positive number). */
export function timeoutArg(fn: string, v: unknown, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v))
    throw new TypeError(`${fn}(): argument 'timeout' must be a positive number of milliseconds, got ${describe(v)}`);
  return v;
}

export function boolArg(fn: string, name: string, v: unknown, dflt: boolean): boolean {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "boolean") throw new TypeError(`${fn}(): argument '${name}' must be bool, got ${describe(v)}`);
  return v;
}

export function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "object") return (v as object).constructor?.name ?? "object";
  if (typeof v === "string") return `'${v.slice(0, 40)}'`;
  return String(v);
}
