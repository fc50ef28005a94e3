// A state dict's leaves by fully qualified name ("model.layers.0.weight", "optim.state.3.expAvg"):
// nested Maps, plain objects and arrays are walked, and every tensor or plain value is a leaf that
// load() can also write back into its container.
import { Tensor } from "../../tensor.js";
import { DistError } from "../errors.js";

export interface Leaf {
  fqn: string;
  value: unknown;
  set(v: unknown): void;
}

export function flattenStateDict(sd: unknown, fn: string): Leaf[] {
  const out: Leaf[] = [];
  const seen = new Set<object>();
  const walk = (v: unknown, path: string, set: (x: unknown) => void): void => {
    if (v instanceof Tensor || v === null || typeof v !== "object") {
      if (!path) throw new DistError(`${fn}: the state dict must be a Map, an object or an array`);
      if (typeof v === "function" || typeof v === "symbol" || typeof v === "bigint") throw new DistError(`${fn}: cannot checkpoint a ${typeof v} at ${path}`);
      out.push({ fqn: path, value: v, set });
      return;
    }
    if (seen.has(v)) throw new DistError(`${fn}: the state dict contains itself (at ${path || "<root>"})`);
    seen.add(v); // (the containers above this one: a container shared by two keys is fine, a cycle is not)
    const key = (k: string | number) => (path ? `${path}.${k}` : String(k));
    if (v instanceof Map) {
      for (const [k, x] of v) {
        if (typeof k !== "string" && typeof k !== "number") throw new DistError(`${fn}: Map keys must be strings or numbers (at ${path || "<root>"})`);
        walk(x, key(k), (y) => v.set(k, y));
      }
    } else if (Array.isArray(v)) v.forEach((x, i) => walk(x, key(i), (y) => (v[i] = y)));
    else {
      const proto = Object.getPrototypeOf(v) as unknown;
      if (proto !== Object.prototype && proto !== null) throw new DistError(`${fn}: cannot checkpoint a ${(v as object).constructor?.name ?? "object"} at ${path || "<root>"}`);
      for (const [k, x] of Object.entries(v)) walk(x, key(k), (y) => ((v as Record<string, unknown>)[k] = y));
    }
    seen.delete(v);
  };
  walk(sd, "", () => {});
  return out;
}

/** Plain values in JSON (numbers JSON cannot hold are tagged). */
export function encodeValue(v: unknown): unknown {
  if (typeof v === "number" && !Number.isFinite(v)) return { $n: String(v) };
  if (typeof v === "number" && Object.is(v, -0)) return { $n: "-0" };
  if (v === undefined) return { $u: 1 };
  return v;
}
export function decodeValue(v: unknown): unknown {
  if (v && typeof v === "object" && "$n" in v) return Number((v as { $n: string }).$n);
  if (v && typeof v === "object" && "$u" in v) return undefined;
  return v;
}
