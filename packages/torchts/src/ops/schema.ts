// Op schemas in PyTorch's native_functions.yaml syntax, with torchts's camelCase names:
//   "sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"
// A schema is parsed once, when its op is defined; the binder (binder.ts) then turns every call
// into the parameters below. Extensions to PyTorch's syntax, each used where PyTorch checks the
// same thing inside the op: `str{a,b}` (an enumeration), `Size` (an int[] of sizes, never
// negative), `TensorLike` (a Tensor or a JS number/boolean, as Python numbers for `Tensor other`),
// `Any` (validated by the op itself) and `Callable`.

export type Kind =
  | "Tensor"
  | "TensorLike"
  | "Tensor[]"
  | "int"
  | "int[]"
  | "Size"
  | "float"
  | "float[]"
  | "bool"
  | "bool[]"
  | "Scalar"
  | "Scalar[]"
  | "ScalarType"
  | "Device"
  | "MemoryFormat"
  | "str"
  | "Generator"
  | "Callable"
  | "Any";

export interface Param {
  /** keyword name (camelCase of PyTorch's) */
  readonly name: string;
  readonly kind: Kind;
  /** `T?`: accepts null / undefined (then the value is null) */
  readonly optional: boolean;
  /** `int[2]`: a single int is broadcast to this many */
  readonly size: number;
  readonly hasDefault: boolean;
  readonly default: unknown;
  /** after `*`: keyword-only (only in the options object) */
  readonly kwOnly: boolean;
  /** `str{mean,sum,none}` */
  readonly choices: readonly string[] | null;
  /** `Any... indices`: every remaining positional argument, as an array (x.index(0, ":", mask)) */
  readonly rest: boolean;
  readonly index: number;
}

export interface Schema {
  readonly name: string;
  readonly text: string;
  readonly params: readonly Param[];
  /** number of parameters that may be given positionally */
  readonly nPositional: number;
  /** number of leading parameters without defaults */
  readonly nRequired: number;
  /** PyTorch's varargs int list: `x.view(2, 3)` for `view(Tensor self, SymInt[] size)` */
  readonly varargsIndex: number;
  /** the rest parameter's index (`Any... name`), or -1 */
  readonly restIndex: number;
  readonly byName: ReadonlyMap<string, Param>;
  readonly returns: string;
}

const TYPE_ALIASES: Record<string, Kind> = {
  Tensor: "Tensor",
  TensorLike: "TensorLike",
  "Tensor[]": "Tensor[]",
  int: "int",
  SymInt: "int",
  "int[]": "int[]",
  "SymInt[]": "int[]",
  Size: "Size",
  float: "float",
  "float[]": "float[]",
  bool: "bool",
  "bool[]": "bool[]",
  Scalar: "Scalar",
  "Scalar[]": "Scalar[]",
  ScalarType: "ScalarType",
  Device: "Device",
  MemoryFormat: "MemoryFormat",
  str: "str",
  Generator: "Generator",
  Callable: "Callable",
  Any: "Any",
};

function splitTop(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let cur = "";
  for (const ch of s) {
    if (quote) {
      cur += ch;
      if (ch === quote) quote = null;
      continue;
    }
    if (ch === '"' || ch === "'") quote = ch;
    else if (ch === "[" || ch === "(" || ch === "{") depth++;
    else if (ch === "]" || ch === ")" || ch === "}") depth--;
    if (ch === "," && depth === 0) {
      out.push(cur.trim());
      cur = "";
    } else cur += ch;
  }
  if (cur.trim() !== "") out.push(cur.trim());
  return out;
}

function parseDefault(text: string, kind: Kind, size: number, schema: string): unknown {
  const t = text.trim();
  if (t === "None") return null;
  if (t === "True") return true;
  if (t === "False") return false;
  if (/^".*"$|^'.*'$/.test(t)) return t.slice(1, -1);
  if (t.startsWith("[")) {
    const inner = t.slice(1, -1).trim();
    return inner === "" ? [] : splitTop(inner).map((e) => parseDefault(e, "int", 0, schema));
  }
  if (t === "inf") return Infinity;
  if (t === "-inf") return -Infinity;
  const n = Number(t);
  if (!Number.isNaN(n)) {
    if ((kind === "int[]" || kind === "float[]" || kind === "bool[]") && size > 0) return new Array(size).fill(n);
    return n;
  }
  if (/^[a-z_]+$/i.test(t)) return t; // enum constants: contiguous_format, mean
  throw new Error(`schema ${schema}: cannot parse default '${text}'`);
}

/** [whole, name, parameter list, returns] — the parameter list ends at the paren matching the first. */
function matchSchema(text: string): [string, string, string, string | undefined] | null {
  const h = /^\s*([A-Za-z_][\w.]*)\s*\(/.exec(text);
  if (!h) return null;
  let depth = 1;
  let i = h[0].length;
  for (; i < text.length && depth > 0; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")") depth--;
  }
  if (depth !== 0) return null;
  const rest = text.slice(i).trim();
  if (rest !== "" && !rest.startsWith("->")) return null;
  return [text, h[1]!, text.slice(h[0].length, i - 1), rest === "" ? undefined : rest.slice(2).trim()];
}

const cache = new Map<string, Schema>();

/** Parse a schema string (cached: the same text gives the same object). */
export function parseSchema(text: string): Schema {
  const hit = cache.get(text);
  if (hit) return hit;
  const m = matchSchema(text);
  if (!m) throw new Error(`cannot parse op schema: ${text}`);
  const name = m[1]!;
  const params: Param[] = [];
  let kwOnly = false;
  for (const part of splitTop(m[2]!)) {
    if (part === "*") {
      kwOnly = true;
      continue;
    }
    const pm = /^([A-Za-z][\w]*(?:\[\d*\])?)(\{[^}]*\})?(\?|\.\.\.)?\s+([A-Za-z_]\w*)\s*(?:=\s*(.+))?$/s.exec(part);
    if (!pm) throw new Error(`schema ${text}: cannot parse parameter '${part}'`);
    const rawType = pm[1]!;
    const sm = /^(\w+)\[(\d*)\]$/.exec(rawType);
    const baseType = sm ? `${sm[1]}[]` : rawType;
    const kind = TYPE_ALIASES[baseType];
    if (!kind) throw new Error(`schema ${text}: unknown type '${rawType}'`);
    const size = sm && sm[2] ? Number(sm[2]) : 0;
    const choices = pm[2] ? pm[2].slice(1, -1).split(",").map((c) => c.trim()) : null;
    const hasDefault = pm[5] !== undefined;
    params.push({
      name: pm[4]!,
      kind,
      optional: pm[3] === "?",
      rest: pm[3] === "...",
      size,
      hasDefault,
      default: hasDefault ? parseDefault(pm[5]!, kind, size, text) : undefined,
      kwOnly,
      choices,
      index: params.length,
    });
  }
  const restIndex = params.findIndex((p) => p.rest);
  if (restIndex >= 0 && (params[restIndex]!.kwOnly || params.slice(restIndex + 1).some((p) => !p.kwOnly) || params[restIndex]!.hasDefault))
    throw new Error(`schema ${text}: a rest parameter (T... name) is the last positional one and has no default`);
  const nPositional = params.filter((p) => !p.kwOnly).length;
  let nRequired = 0;
  while (nRequired < nPositional && !params[nRequired]!.hasDefault && !params[nRequired]!.rest) nRequired++;
  for (const p of params)
    if (!p.hasDefault && p.index >= nRequired && !p.kwOnly && !p.rest)
      throw new Error(`schema ${text}: parameter '${p.name}' without a default follows one with a default`);
  // PyTorch accepts `x.view(2, 3)` for an int list that is the only positional argument after self
  // (or the only one of a function such as zeros(*size)).
  const positional = params.slice(0, nPositional);
  const lists = positional.filter((p) => p.kind === "int[]" || p.kind === "Size");
  let varargsIndex = -1;
  if (lists.length === 1) {
    const p = lists[0]!;
    const others = positional.filter((q) => q !== p);
    // (the binder takes varargs only when the list comes first after a method's self)
    if (others.every((q) => q.index < p.index && (q.kind === "Tensor" || q.kind === "TensorLike")) && others.length <= 1)
      varargsIndex = p.index;
  }
  const s: Schema = {
    name,
    text,
    params,
    nPositional,
    nRequired,
    varargsIndex,
    restIndex,
    byName: new Map(params.map((p) => [p.name, p])),
    returns: (m[3] ?? "Tensor").trim(),
  };
  cache.set(text, s);
  return s;
}
