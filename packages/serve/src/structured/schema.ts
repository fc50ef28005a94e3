// Compiles a JSON Schema (the subset structured output needs) into a grammar graph that
// automaton.ts runs byte by byte. We write this ourselves: the npm packages that turn a schema
// into a grammar (@mlc-ai/web-xgrammar, a WASM build for browsers) are thinly kept and know
// nothing of a token budget, and we need every grammar state's shortest completion to make a
// model that knows nothing still finish within max_tokens (constraint.ts).
//
// What is generated is a canonical subset of the schema's instances: properties in declared order,
// only declared ones (required always, optional maybe), numbers without leading zeros, at most
// MAX_WHITESPACE whitespace bytes at a time and only inside objects and arrays. Every output
// validates against the schema; the grammar does not accept every valid instance.

/** A schema the compiler refuses: the server answers 400 naming `keyword` (or the problem). */
export class SchemaError extends Error {
  constructor(
    message: string,
    readonly keyword: string | null,
    readonly path: string,
  ) {
    super(`${message}${path ? ` (at ${path})` : ""}`);
  }
}

export const enum Kind {
  Pending, // being compiled (a $ref cycle points here)
  Lit, // one of a set of fixed byte strings (enum, const, true/false/null)
  Str, // a JSON string with code-point length bounds
  Num, // a JSON number (integer: no fraction or exponent)
  Obj, // an object with declared properties, in order
  Map, // an object with any keys, every value of one grammar (json_object, additionalProperties)
  Arr, // an array of one item grammar with count bounds
  Alt, // any of several grammars (anyOf, oneOf, type arrays)
  End, // the end of the document (the root's parent in automaton.ts)
}

/** A byte trie of literals; `dist[n]` is the fewest bytes from node n to the end of a literal. */
export class LitTrie {
  readonly next: Map<number, number>[] = [new Map()];
  readonly end: boolean[] = [false];
  dist: number[] = [];

  add(bytes: Uint8Array): void {
    let n = 0;
    for (const b of bytes) {
      let c = this.next[n]!.get(b);
      if (c === undefined) {
        c = this.next.length;
        this.next.push(new Map());
        this.end.push(false);
        this.next[n]!.set(b, c);
      }
      n = c;
    }
    this.end[n] = true;
  }

  /** Children always have larger indices than their parent, so one backwards pass computes dist. */
  finish(): void {
    const d = new Array<number>(this.next.length).fill(Infinity);
    for (let n = this.next.length - 1; n >= 0; n--) {
      if (this.end[n]) d[n] = 0;
      for (const c of this.next[n]!.values()) d[n] = Math.min(d[n]!, d[c]! + 1);
    }
    this.dist = d;
  }
}

export interface Prop {
  name: string;
  /** The key as written: the JSON string with its quotes, in UTF-8. */
  key: Uint8Array;
  node: GNode;
  required: boolean;
}

/** The keys of an object as a byte trie; each node lists the property indices below it. */
export class KeyTrie {
  readonly next: Map<number, number>[] = [new Map()];
  readonly props: number[][] = [[]];
  readonly depth: number[] = [0];
  /** The property a key ends at, -1 inside a key (no key is a prefix of another: all end in '"'). */
  readonly leaf: number[] = [-1];

  add(bytes: Uint8Array, prop: number): void {
    let n = 0;
    this.props[0]!.push(prop);
    for (const b of bytes) {
      let c = this.next[n]!.get(b);
      if (c === undefined) {
        c = this.next.length;
        this.next.push(new Map());
        this.props.push([]);
        this.depth.push(this.depth[n]! + 1);
        this.leaf.push(-1);
        this.next[n]!.set(b, c);
      }
      n = c;
      this.props[n]!.push(prop);
    }
    this.leaf[n] = prop;
  }
}

/** One grammar node; which fields matter depends on `kind`. */
export class GNode {
  kind: Kind = Kind.Pending;
  /** The shortest value in bytes (Infinity: none is finite). */
  min = Infinity;
  // Lit
  lit: LitTrie | null = null;
  litValues: unknown[] = [];
  /** Lit: the schema without enum/const; the values it rejects are dropped (resolved after compiling). */
  litFilter: GNode | null = null;
  // Str
  minLength = 0;
  maxLength = Infinity;
  // Num
  integer = false;
  // Obj
  props: Prop[] = [];
  keys: KeyTrie | null = null;
  /** Obj, for i in [0, props.length]: bytes to close the object once the properties before i are done. */
  after: number[] = [];
  /** Obj: the same, right after '{' (no comma before the first property). */
  open: number[] = [];
  /** Obj: the same, right after ',' (a property must follow). */
  comma: number[] = [];
  /** Obj: index of the first required property at or after i (props.length: none). */
  nextRequired: number[] = [];
  // Map, Arr: the value or item grammar
  child: GNode | null = null;
  minItems = 0;
  maxItems = Infinity;
  // Alt
  options: GNode[] = [];
  /** Alt: the options with nested Alts flattened (never an Alt or Pending). */
  flat: GNode[] = [];
}

export const END = new GNode();
END.kind = Kind.End;
END.min = 0;

const utf8 = new TextEncoder();
export const encodeJson = (v: unknown): Uint8Array => utf8.encode(JSON.stringify(v));

/** Keywords that only describe (ignored). Unknown non-standard keywords are ignored as well. */
const ANNOTATIONS = new Set([
  "$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "title", "description", "default", "examples",
  "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
]);
/** Standard keywords that restrict values and that this compiler cannot enforce. */
const UNSUPPORTED = new Set([
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern", "format",
  "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
  "minProperties", "maxProperties", "uniqueItems", "contains", "minContains", "maxContains", "prefixItems",
  "additionalItems", "unevaluatedItems", "unevaluatedProperties", "if", "then", "else", "not",
  "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "contentSchema",
]);
const TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);
const OBJECT_KW = ["properties", "required", "additionalProperties"];
const ARRAY_KW = ["items", "minItems", "maxItems"];
const STRING_KW = ["minLength", "maxLength"];
/** Deeper schemas are refused (the compiler recurses). */
const MAX_DEPTH = 128;

type Schema = Record<string, unknown>;
const isObj = (v: unknown): v is Schema => typeof v === "object" && v !== null && !Array.isArray(v);
const has = (s: Schema, k: string) => Object.prototype.hasOwnProperty.call(s, k);
/** Keywords of `s` other than annotations and unknown ones. */
const constraining = (s: Schema) => Object.keys(s).filter((k) => !ANNOTATIONS.has(k) && (UNSUPPORTED.has(k) || KNOWN.has(k)));
const KNOWN = new Set(["type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", ...OBJECT_KW, ...ARRAY_KW, ...STRING_KW]);

function decodePointer(root: unknown, ref: string, path: string): unknown {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) throw new SchemaError(`$ref '${ref}': only local references ('#', '#/$defs/NAME', '#/definitions/NAME', ...) are supported`, "$ref", path);
  let cur: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    let part: string;
    try {
      part = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    } catch {
      throw new SchemaError(`$ref '${ref}' is not a valid JSON pointer`, "$ref", path);
    }
    if (Array.isArray(cur) && /^(0|[1-9][0-9]*)$/.test(part)) cur = cur[Number(part)];
    else if (isObj(cur) && has(cur, part)) cur = cur[part];
    else throw new SchemaError(`$ref '${ref}' points to nothing in this schema`, "$ref", path);
  }
  return cur;
}

function count(s: Schema, k: string, path: string): number | undefined {
  if (!has(s, k)) return undefined;
  const v = s[k];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new SchemaError(`'${k}' must be a non-negative integer`, k, path);
  return v;
}

class Compiler {
  readonly nodes: GNode[] = [];
  private readonly memo = new Map<Schema, GNode>();
  private any: GNode | null = null;

  /** The document '#' refers to (each tool's parameters are their own document). */
  constructor(public root: unknown) {}

  private node(kind: Kind): GNode {
    const n = new GNode();
    n.kind = kind;
    this.nodes.push(n);
    return n;
  }

  lit(values: unknown[]): GNode {
    const n = this.node(Kind.Lit);
    n.litValues = values;
    return n;
  }

  str(minLength = 0, maxLength = Infinity): GNode {
    const n = this.node(Kind.Str);
    n.minLength = minLength;
    n.maxLength = maxLength;
    return n;
  }

  /** Any JSON value (json_object's values, `{}`, `true`, a missing `items`). */
  anyValue(): GNode {
    if (this.any) return this.any;
    const a = (this.any = this.node(Kind.Alt));
    const map = this.node(Kind.Map);
    map.child = a;
    const arr = this.node(Kind.Arr);
    arr.child = a;
    a.options = [map, arr, this.str(), this.node(Kind.Num), this.lit([true, false, null])];
    return a;
  }

  /** Any JSON object. */
  anyObject(): GNode {
    const m = this.node(Kind.Map);
    m.child = this.anyValue();
    return m;
  }

  compile(schema: unknown, path: string, depth: number): GNode {
    if (depth > MAX_DEPTH) throw new SchemaError(`the schema is nested deeper than ${MAX_DEPTH} levels`, null, path);
    if (schema === true) return this.anyValue();
    if (schema === false) throw new SchemaError("the schema 'false' allows no value", null, path);
    if (!isObj(schema)) throw new SchemaError("a schema must be an object or a boolean", null, path);
    // follow $ref chains to a schema that is not only a $ref (a cycle of bare $refs has no value)
    const seen = new Set<Schema>();
    let s: Schema = schema;
    while (has(s, "$ref")) {
      const others = constraining(s).filter((k) => k !== "$ref");
      if (others.length) throw new SchemaError(`'$ref' beside other keywords (${others.join(", ")}) is not supported`, others[0]!, path);
      if (typeof s.$ref !== "string") throw new SchemaError("'$ref' must be a string", "$ref", path);
      if (seen.has(s)) throw new SchemaError(`$ref '${s.$ref}' refers to itself without an object or array in between`, "$ref", path);
      seen.add(s);
      const target = decodePointer(this.root, s.$ref, path);
      path = s.$ref;
      if (target === true || target === false) return this.compile(target, path, depth + 1);
      if (!isObj(target)) throw new SchemaError(`$ref '${s.$ref}' does not point to a schema`, "$ref", path);
      s = target;
    }
    const done = this.memo.get(s);
    if (done) return done;
    const n = new GNode();
    this.nodes.push(n);
    this.memo.set(s, n);
    Object.assign(n, this.build(s, path, depth));
    return n;
  }

  /** A fresh node for schema s (the caller copies it into the memoized placeholder). */
  private build(s: Schema, path: string, depth: number): GNode {
    for (const k of Object.keys(s)) if (UNSUPPORTED.has(k)) throw new SchemaError(`the JSON Schema keyword '${k}' is not supported`, k, path);
    const kws = constraining(s);
    const sub = (v: unknown, p: string) => this.compile(v, `${path}/${p}`, depth + 1);
    if (has(s, "allOf")) {
      const all = s.allOf;
      if (!Array.isArray(all) || all.length !== 1 || kws.length > 1) throw new SchemaError("'allOf' is supported only with exactly one schema and no other keywords", "allOf", path);
      return this.alias(sub(all[0], "allOf/0"));
    }
    for (const k of ["anyOf", "oneOf"]) {
      if (!has(s, k)) continue;
      const list = s[k];
      if (!Array.isArray(list) || list.length === 0) throw new SchemaError(`'${k}' must be a non-empty array of schemas`, k, path);
      if (kws.length > 1) throw new SchemaError(`'${k}' beside other keywords (${kws.filter((x) => x !== k).join(", ")}) is not supported`, k, path);
      const a = new GNode();
      a.kind = Kind.Alt;
      // oneOf is generated as anyOf: the output matches one option, and options that overlap are the schema's to avoid
      a.options = list.map((x, i) => sub(x, `${k}/${i}`));
      return a;
    }
    if (has(s, "enum") || has(s, "const")) {
      let values: unknown[];
      if (has(s, "const")) values = [s.const];
      else if (!Array.isArray(s.enum) || s.enum.length === 0) throw new SchemaError("'enum' must be a non-empty array", "enum", path);
      else values = s.enum;
      if (has(s, "const") && has(s, "enum")) values = values.filter((v) => (s.enum as unknown[]).some((e) => JSON.stringify(e) === JSON.stringify(v)));
      const n = new GNode();
      n.kind = Kind.Lit;
      n.litValues = values;
      const rest: Schema = {};
      for (const k of kws) if (k !== "enum" && k !== "const") rest[k] = s[k];
      if (Object.keys(rest).length) n.litFilter = this.compile(rest, path, depth + 1);
      return n;
    }
    let types: string[];
    if (has(s, "type")) {
      const t = s.type;
      types = typeof t === "string" ? [t] : Array.isArray(t) ? (t as string[]) : [];
      if (!types.length || types.some((x) => typeof x !== "string" || !TYPES.has(x)))
        throw new SchemaError(`'type' must be one of ${[...TYPES].join(", ")} or a non-empty array of them`, "type", path);
      types = [...new Set(types)];
    } else {
      // no type: the keywords present say which kinds of value are restricted; none at all means any value
      types = [];
      if (OBJECT_KW.some((k) => has(s, k))) types.push("object");
      if (ARRAY_KW.some((k) => has(s, k))) types.push("array");
      if (STRING_KW.some((k) => has(s, k))) types.push("string");
      if (!types.length) return this.alias(this.anyValue());
      // the kinds the keywords do not restrict stay allowed
      for (const t of ["number", "boolean", "null"]) types.push(t);
    }
    const variants = types.map((t) => this.typed(t, s, path, depth));
    if (variants.length === 1) return variants[0]!;
    const a = new GNode();
    a.kind = Kind.Alt;
    a.options = variants;
    return a;
  }

  /** A node that behaves as `target` (an Alt of one option, flattened away at run time). */
  private alias(target: GNode): GNode {
    const a = new GNode();
    a.kind = Kind.Alt;
    a.options = [target];
    return a;
  }

  private typed(t: string, s: Schema, path: string, depth: number): GNode {
    const sub = (v: unknown, p: string) => this.compile(v, `${path}/${p}`, depth + 1);
    switch (t) {
      case "string": {
        const lo = count(s, "minLength", path) ?? 0;
        const hi = count(s, "maxLength", path) ?? Infinity;
        if (lo > hi) throw new SchemaError("'minLength' is larger than 'maxLength'", "minLength", path);
        return this.str(lo, hi);
      }
      case "number":
      case "integer": {
        const n = this.node(Kind.Num);
        n.integer = t === "integer";
        return n;
      }
      case "boolean":
        return this.lit([true, false]);
      case "null":
        return this.lit([null]);
      case "array": {
        const n = this.node(Kind.Arr);
        n.minItems = count(s, "minItems", path) ?? 0;
        n.maxItems = count(s, "maxItems", path) ?? Infinity;
        if (n.minItems > n.maxItems) throw new SchemaError("'minItems' is larger than 'maxItems'", "minItems", path);
        const items = s.items;
        if (Array.isArray(items)) throw new SchemaError("'items' as an array (tuple form) is not supported; use one schema", "items", path);
        if (items === false) {
          if (n.minItems > 0) throw new SchemaError("'items: false' with 'minItems' > 0 allows no value", "items", path);
          n.maxItems = 0;
          n.child = this.anyValue();
        } else n.child = items === undefined ? this.anyValue() : sub(items, "items");
        return n;
      }
      default:
        return this.object(s, path, depth);
    }
  }

  private object(s: Schema, path: string, depth: number): GNode {
    const sub = (v: unknown, p: string) => this.compile(v, `${path}/${p}`, depth + 1);
    const props = s.properties;
    if (props !== undefined && !isObj(props)) throw new SchemaError("'properties' must be an object", "properties", path);
    const req = s.required ?? [];
    if (!Array.isArray(req) || req.some((r) => typeof r !== "string")) throw new SchemaError("'required' must be an array of strings", "required", path);
    const required = new Set(req as string[]);
    const extra = s.additionalProperties;
    if (extra !== undefined && typeof extra !== "boolean" && !isObj(extra)) throw new SchemaError("'additionalProperties' must be a boolean or a schema", "additionalProperties", path);
    if (props === undefined && !required.size && extra !== false) {
      // no declared keys: any keys, every value of the additionalProperties schema (any value by default)
      const m = this.node(Kind.Map);
      m.child = extra === undefined || extra === true ? this.anyValue() : sub(extra, "additionalProperties");
      return m;
    }
    const n = this.node(Kind.Obj);
    for (const [name, ps] of Object.entries(props ?? {})) n.props.push({ name, key: encodeJson(name), node: sub(ps, `properties/${name}`), required: required.has(name) });
    for (const name of required) {
      if (props && has(props, name)) continue;
      if (extra === false) throw new SchemaError(`required property '${name}' is not in 'properties' and additionalProperties is false`, "required", path);
      const value = extra === undefined || extra === true ? this.anyValue() : sub(extra, "additionalProperties");
      n.props.push({ name, key: encodeJson(name), node: value, required: true });
    }
    n.keys = new KeyTrie();
    n.props.forEach((p, i) => n.keys!.add(p.key, i));
    return n;
  }
}

/** Flatten an Alt's options (nested Alts inlined); an Alt that contains itself has no value. */
function flatten(a: GNode, path: Set<GNode>): GNode[] {
  if (a.flat.length) return a.flat;
  if (path.has(a)) throw new SchemaError("a $ref or anyOf refers to itself without an object or array in between", "$ref", "");
  path.add(a);
  const out: GNode[] = [];
  for (const o of a.options) {
    if (o.kind === Kind.Alt) out.push(...flatten(o, path));
    else out.push(o);
  }
  path.delete(a);
  a.flat = [...new Set(out)];
  return a.flat;
}

const mul = (k: number, x: number) => (k === 0 ? 0 : k * x);

/** The bytes of a whole property "key":value (without a comma). */
const propLen = (p: Prop) => p.key.length + 1 + p.node.min;

function objectTables(n: GNode): void {
  const P = n.props.length;
  n.after = new Array(P + 1);
  n.open = new Array(P + 1);
  n.comma = new Array(P + 1);
  n.nextRequired = new Array(P + 1);
  let sum = 0; // bytes of the required properties from i on, each with its comma
  let req = 0;
  let optMin = Infinity; // the shortest single property from i on
  let next = P;
  n.after[P] = 1;
  n.open[P] = 1;
  n.comma[P] = Infinity;
  n.nextRequired[P] = P;
  for (let i = P - 1; i >= 0; i--) {
    const p = n.props[i]!;
    optMin = Math.min(optMin, propLen(p));
    if (p.required) {
      sum += 1 + propLen(p);
      req++;
      next = i;
    }
    n.nextRequired[i] = next;
    n.after[i] = sum + 1;
    n.open[i] = req ? sum - 1 + 1 : 1;
    n.comma[i] = req ? sum - 1 + 1 : optMin + 1;
  }
}

function minOf(n: GNode): number {
  switch (n.kind) {
    case Kind.Lit:
      return n.lit!.dist[0]!;
    case Kind.Str:
      return 2 + n.minLength;
    case Kind.Num:
      return 1;
    case Kind.Map:
      return 2;
    case Kind.Arr:
      return 2 + mul(n.minItems, n.child!.min) + Math.max(0, n.minItems - 1);
    case Kind.Alt: {
      let m = Infinity;
      for (const o of n.flat) m = Math.min(m, o.min);
      return m;
    }
    case Kind.Obj: {
      let sum = 0;
      let req = 0;
      for (const p of n.props)
        if (p.required) {
          sum += propLen(p);
          req++;
        }
      return 2 + sum + Math.max(0, req - 1);
    }
    default:
      return Infinity;
  }
}

/** A compiled grammar: the root node, ready for automaton.ts. */
export interface Grammar {
  root: GNode;
}

function buildLits(c: Compiler, filter: ((n: GNode, v: unknown) => boolean) | null): void {
  for (const n of c.nodes) {
    if (n.kind !== Kind.Lit) continue;
    if (filter && n.litFilter) n.litValues = n.litValues.filter((v) => filter(n.litFilter!, v));
    if (!n.litValues.length) throw new SchemaError("no value of 'enum'/'const' satisfies the schema's other keywords", "enum", "");
    n.lit = new LitTrie();
    for (const v of n.litValues) n.lit.add(encodeJson(v));
    n.lit.finish();
  }
}

/** Shortest values: a fixpoint over the graph (a recursive schema converges down from Infinity); then the object tables. */
function measure(c: Compiler): void {
  for (const n of c.nodes) n.min = Infinity;
  // children are created after their parents: going backwards, a tree settles in one pass
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = c.nodes.length - 1; k >= 0; k--) {
      const n = c.nodes[k]!;
      const m = minOf(n);
      if (m < n.min) {
        n.min = m;
        changed = true;
      }
    }
  }
  for (const n of c.nodes) if (n.kind === Kind.Obj) objectTables(n);
}

function finalize(c: Compiler, root: GNode, acceptsValue: (node: GNode, bytes: Uint8Array) => boolean): Grammar {
  for (const n of c.nodes) if (n.kind === Kind.Alt) flatten(n, new Set());
  // enum/const values the schema's other keywords reject are dropped; running the automaton for that
  // needs a measured graph, so measure with every value, filter, and measure again
  buildLits(c, null);
  measure(c);
  if (c.nodes.some((n) => n.kind === Kind.Lit && n.litFilter)) {
    buildLits(c, (f, v) => acceptsValue(f, encodeJson(v)));
    measure(c);
  }
  if (!Number.isFinite(root.min)) throw new SchemaError("the schema has no finite value (a required property refers back to its own object)", "$ref", "");
  return { root };
}

type Accepts = (node: GNode, bytes: Uint8Array) => boolean;

/**
 * The grammar of a schema; `acceptsValue` (automaton.ts) filters enum values. Throws SchemaError.
 * `schema` undefined or `true`: any JSON value; opts.anyObject: any JSON object (json_object).
 */
export function compileSchema(schema: unknown, acceptsValue: Accepts, opts: { anyObject?: boolean } = {}): Grammar {
  const c = new Compiler(schema);
  const root = opts.anyObject ? c.anyObject() : c.compile(schema ?? true, "#", 0);
  return finalize(c, root, acceptsValue);
}

/**
 * The grammar of one call of any of `tools`: {"name": NAME, "arguments": ARGS} where ARGS follows
 * that tool's parameters schema (its own document for $ref). Throws SchemaError with `tool` set to
 * the tool's index.
 */
export function compileToolCall(tools: { name: string; parameters: unknown }[], acceptsValue: Accepts): Grammar {
  const c = new Compiler(null);
  const alt = new GNode();
  alt.kind = Kind.Alt;
  c.nodes.push(alt);
  tools.forEach((t, i) => {
    c.root = t.parameters;
    let args: GNode;
    try {
      args = c.compile(t.parameters, "#", 0);
    } catch (e) {
      if (e instanceof SchemaError) throw new ToolSchemaError(e, i);
      throw e;
    }
    const o = new GNode();
    o.kind = Kind.Obj;
    o.props = [
      { name: "name", key: encodeJson("name"), node: c.lit([t.name]), required: true },
      { name: "arguments", key: encodeJson("arguments"), node: args, required: true },
    ];
    o.keys = new KeyTrie();
    o.props.forEach((p, k) => o.keys!.add(p.key, k));
    c.nodes.push(o);
    alt.options.push(o);
  });
  return finalize(c, alt, acceptsValue);
}

/** A SchemaError in the parameters of tools[tool]. */
export class ToolSchemaError extends SchemaError {
  constructor(
    inner: SchemaError,
    readonly tool: number,
  ) {
    super(inner.message, inner.keyword, "");
  }
}
