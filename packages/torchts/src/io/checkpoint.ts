// torch.save / torch.load: arbitrary nests of tensors, Maps (module state dicts), arrays, plain
// objects, numbers (NaN/±Infinity/-0 kept), bigints, strings, booleans, null and undefined —
// what model.stateDict(), optimizer.stateDict(), scheduler.stateDict() and torch.getRngState()
// return.
//
// Container format ("torchts.checkpoint/1"): a plain safetensors file, so any safetensors
// reader can list and read the tensors. Tensors are stored as entries "0", "1", ... (a tensor
// object reachable twice is stored once and comes back as one tensor). `__metadata__` holds
//   "format": "torchts.checkpoint/1"
//   "tree":   JSON of the object, where {"$t": "3"} is tensor "3", {"$map": [[k, v], ...]} a Map,
//             {"$n": "NaN" | "Infinity" | "-Infinity" | "-0"} a number JSON cannot hold,
//             {"$big": "123"} a bigint, {"$u": 1} undefined, {"$o": {...}} an object whose own
//             keys start with "$" (escaped so it cannot be mistaken for a marker).
// Files are written atomically (temporary file, fsync, rename, fsync of the folder): a process
// killed mid-write leaves the previous checkpoint intact.
import { Tensor } from "../tensor.js";
import { load as stLoad, saveAsync as stSaveAsync, SafetensorsFile } from "./safetensors.js";
import { atomicWriteFile } from "./atomic.js";

export const CHECKPOINT_FORMAT = "torchts.checkpoint/1";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function encodeTree(obj: unknown, tensors: Map<Tensor, string>, path: string, seen: Set<object>): Json {
  if (obj instanceof Tensor) {
    let id = tensors.get(obj);
    if (id === undefined) tensors.set(obj, (id = String(tensors.size)));
    return { $t: id };
  }
  if (obj === null) return null;
  switch (typeof obj) {
    case "undefined":
      return { $u: 1 };
    case "boolean":
    case "string":
      return obj;
    case "number":
      if (Number.isNaN(obj)) return { $n: "NaN" };
      if (obj === Infinity) return { $n: "Infinity" };
      if (obj === -Infinity) return { $n: "-Infinity" };
      if (Object.is(obj, -0)) return { $n: "-0" };
      return obj;
    case "bigint":
      return { $big: obj.toString() };
    case "object":
      break;
    default:
      throw new TypeError(`torch.save: cannot save a ${typeof obj} at ${path || "<root>"}`);
  }
  const o = obj as object;
  if (seen.has(o)) throw new TypeError(`torch.save: circular reference at ${path || "<root>"}`);
  seen.add(o);
  try {
    if (Array.isArray(o)) return o.map((v, i) => encodeTree(v, tensors, `${path}[${i}]`, seen));
    if (o instanceof Map)
      return { $map: [...o].map(([k, v]) => [encodeTree(k, tensors, `${path}<key>`, seen), encodeTree(v, tensors, `${path}.get(${String(k)})`, seen)]) };
    const proto = Object.getPrototypeOf(o);
    if (proto !== Object.prototype && proto !== null)
      throw new TypeError(`torch.save: cannot save a ${o.constructor?.name ?? "object"} at ${path || "<root>"} (only tensors, Maps, arrays and plain objects)`);
    const out: { [k: string]: Json } = {};
    let escaped = false;
    for (const [k, v] of Object.entries(o)) {
      if (k.startsWith("$")) escaped = true;
      out[k] = encodeTree(v, tensors, path ? `${path}.${k}` : k, seen);
    }
    return escaped ? { $o: out } : out;
  } finally {
    seen.delete(o);
  }
}

function decodeTree(j: Json, tensors: Record<string, Tensor>, source: string): unknown {
  if (j === null || typeof j !== "object") return j;
  if (Array.isArray(j)) return j.map((v) => decodeTree(v, tensors, source));
  const keys = Object.keys(j);
  if (keys.length === 1 && keys[0]!.startsWith("$")) {
    const v = j[keys[0]!]!;
    switch (keys[0]) {
      case "$t": {
        const t = tensors[String(v)];
        if (!t) throw new Error(`torch.load: ${source}: the tree refers to tensor '${String(v)}', which the file lacks`);
        return t;
      }
      case "$map":
        if (!Array.isArray(v)) break;
        return new Map(v.map((kv) => {
          if (!Array.isArray(kv) || kv.length !== 2) throw new Error(`torch.load: ${source}: bad Map entry ${JSON.stringify(kv)}`);
          return [decodeTree(kv[0]!, tensors, source), decodeTree(kv[1]!, tensors, source)];
        }));
      case "$n":
        return v === "-0" ? -0 : Number(v);
      case "$big":
        return BigInt(String(v));
      case "$u":
        return undefined;
      case "$o":
        if (v === null || typeof v !== "object" || Array.isArray(v)) break;
        return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decodeTree(x, tensors, source)]));
    }
    throw new Error(`torch.load: ${source}: bad marker ${JSON.stringify(j).slice(0, 80)}`);
  }
  return Object.fromEntries(Object.entries(j).map(([k, x]) => [k, decodeTree(x, tensors, source)]));
}

/** Serialize an object to checkpoint bytes (tensors are read with `await t.data()`). */
export async function serialize(obj: unknown): Promise<Uint8Array> {
  const ids = new Map<Tensor, string>();
  const tree = encodeTree(obj, ids, "", new Set());
  const named: Record<string, Tensor> = {};
  for (const [t, id] of ids) named[id] = t;
  return stSaveAsync(named, { format: CHECKPOINT_FORMAT, tree: JSON.stringify(tree) });
}

function rebuild(tensors: Record<string, Tensor>, meta: Record<string, string>, source: string): unknown {
  if (meta.format !== CHECKPOINT_FORMAT || typeof meta.tree !== "string")
    throw new Error(
      `torch.load: ${source}: not a torchts checkpoint (metadata format is ${JSON.stringify(meta.format)}, expected "${CHECKPOINT_FORMAT}"); ` +
        "use torch.safetensors.loadFile for plain safetensors files",
    );
  let tree: Json;
  try {
    tree = JSON.parse(meta.tree) as Json;
  } catch (e) {
    throw new Error(`torch.load: ${source}: bad object tree: ${(e as Error).message}`, { cause: e });
  }
  return decodeTree(tree, tensors, source);
}

/** Rebuild an object from checkpoint bytes. */
export function deserialize(bytes: Uint8Array, source = "<bytes>"): unknown {
  const tensors = stLoad(bytes, source);
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as { __metadata__?: Record<string, string> };
  return rebuild(tensors, header.__metadata__ ?? {}, source);
}

/** torch.save(obj, path): write a checkpoint atomically. */
export async function save(obj: unknown, path: string): Promise<void> {
  await atomicWriteFile(path, await serialize(obj));
}

/**
 * torch.load(path, {mapLocation}): read a checkpoint written by torch.save. Tensors come back
 * on cpu unless `mapLocation` names another device.
 */
export async function load(path: string, opts: { mapLocation?: string } = {}): Promise<any> {
  const f = await SafetensorsFile.open(path);
  try {
    const meta = f.metadata();
    const tensors: Record<string, Tensor> = {};
    for (const k of f.keys()) {
      const t = await f.getTensor(k);
      tensors[k] = opts.mapLocation && opts.mapLocation !== "cpu" ? t.to(opts.mapLocation) : t;
    }
    return rebuild(tensors, meta, path);
  } finally {
    await f.close();
  }
}
