// A small integer per distinct node structure: two nodes get the same id exactly when their
// nodeKey strings are equal (prim, params, input dtypes/shapes/strides, output dtype/shape). The
// per-op paths (strict eager's executable lookup, fused eager's plan key) intern every node they
// see; building and hashing nodeKey's string cost ~1 us a node, this numeric hash with a
// structural check ~0.1-0.2 us.
import type { IRNode } from "./prims.js";

interface Entry {
  node: IRNode;
  id: number;
  next: Entry | null;
}

const buckets = new Map<number, Entry>();
let count = 0;
/** Bumped when the table is cleared (its size is bounded): caches keyed by ids must drop them. */
export let nodeIdGeneration = 0;
const MAX_IDS = 1 << 20;

function mixStr(h: number, s: string): number {
  h = Math.imul(h ^ s.length, 0x01000193);
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h;
}

function mixNum(h: number, x: number): number {
  // integers (shapes, strides, axes) mix exactly; other numbers (a param such as eps) by their bits
  if ((x | 0) === x) return Math.imul(h ^ x, 0x01000193);
  return mixStr(h, String(x));
}

/** Params are small JSON-like values: numbers, strings, booleans, null, arrays and plain objects. */
function mixValue(h: number, v: unknown, depth: number): number {
  if (typeof v === "number") return mixNum(Math.imul(h ^ 1, 0x01000193), v);
  if (typeof v === "string") return mixStr(Math.imul(h ^ 2, 0x01000193), v);
  if (typeof v === "boolean") return Math.imul(h ^ (v ? 3 : 4), 0x01000193);
  if (v === null || v === undefined) return Math.imul(h ^ 5, 0x01000193);
  if (depth > 8) return mixStr(h, JSON.stringify(v) ?? "");
  if (Array.isArray(v)) {
    h = Math.imul(h ^ (6 + v.length * 8), 0x01000193);
    for (let i = 0; i < v.length; i++) h = mixValue(h, v[i], depth + 1);
    return h;
  }
  h = Math.imul(h ^ 7, 0x01000193);
  for (const k in v as Record<string, unknown>) {
    const x = (v as Record<string, unknown>)[k];
    if (x === undefined) continue; // JSON drops undefined fields: so does nodeKey
    h = mixValue(mixStr(h, k), x, depth + 1);
  }
  return h;
}

function sameValue(a: unknown, b: unknown, depth: number): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "number") return a !== a && b !== b; // NaN params are equal too
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (depth > 8) return JSON.stringify(a) === JSON.stringify(b);
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameValue(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  // every node's params are compared on each lookup (fused eager's plan key looks up every
  // pending node at every flush): walked in place, no key arrays (they were ~8% of the bytes a
  // small training step allocates). The same defined keys in the same order (key order is part of
  // nodeKey's string), with equal values
  const ra = a as Record<string, unknown>, rb = b as Record<string, unknown>;
  let i = 0;
  for (const k in ra) {
    if (ra[k] === undefined) continue;
    if (definedKeyAt(rb, i++) !== k || !sameValue(ra[k], rb[k], depth + 1)) return false;
  }
  return definedKeyAt(rb, i) === undefined;
}

/** The i-th key of o whose value is defined (params have a few keys: a walk, no array). */
function definedKeyAt(o: Record<string, unknown>, i: number): string | undefined {
  for (const k in o) if (o[k] !== undefined && i-- === 0) return k;
  return undefined;
}

function sameInts(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function hashNode(n: IRNode): number {
  let h = mixStr(0x811c9dc5 | 0, n.prim);
  h = mixValue(h, n.params, 0);
  h = Math.imul(h ^ n.inputs.length, 0x01000193);
  for (const v of n.inputs) {
    h = mixStr(h, v.dtype);
    h = Math.imul(h ^ v.shape.length, 0x01000193);
    for (let i = 0; i < v.shape.length; i++) h = Math.imul(Math.imul(h ^ v.shape[i]!, 0x01000193) ^ v.strides[i]!, 0x01000193);
  }
  h = mixStr(h, n.out.dtype);
  for (let i = 0; i < n.out.shape.length; i++) h = Math.imul(h ^ n.out.shape[i]!, 0x01000193);
  return Math.imul(h ^ n.out.shape.length, 0x5bd1e995);
}

function sameNode(a: IRNode, b: IRNode): boolean {
  if (a.prim !== b.prim || a.out.dtype !== b.out.dtype || !sameInts(a.out.shape, b.out.shape) || a.inputs.length !== b.inputs.length) return false;
  for (let i = 0; i < a.inputs.length; i++) {
    const x = a.inputs[i]!, y = b.inputs[i]!;
    if (x.dtype !== y.dtype || !sameInts(x.shape, y.shape) || !sameInts(x.strides, y.strides)) return false;
  }
  return sameValue(a.params, b.params, 0);
}

/** A copy that later changes to the caller's node (or its arrays) cannot reach. */
function snapshot(n: IRNode): IRNode {
  return {
    prim: n.prim,
    params: structuredClone(n.params),
    inputs: n.inputs.map((v) => ({ shape: [...v.shape], strides: [...v.strides], dtype: v.dtype })),
    out: { shape: [...n.out.shape], dtype: n.out.dtype },
  } as IRNode;
}

/** The id of n's structure (equal ids: equal nodeKey strings). */
export function nodeId(n: IRNode): number {
  const h = hashNode(n);
  const first = buckets.get(h);
  for (let e: Entry | null | undefined = first; e; e = e.next) if (sameNode(e.node, n)) return e.id;
  if (count >= MAX_IDS) {
    buckets.clear();
    count = 0;
    nodeIdGeneration++;
    return nodeId(n);
  }
  const id = count++;
  buckets.set(h, { node: snapshot(n), id, next: buckets.get(h) ?? null });
  return id;
}

/** Params equality as nodeId decides it (for the tests: a hash collision is what reaches it). */
export function _sameParams(a: unknown, b: unknown): boolean {
  return sameValue(a, b, 0);
}
