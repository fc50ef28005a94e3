// Collectives of JSON-serializable objects (PyTorch's all_gather_object / broadcast_object_list,
// which pickle; these use JSON). Each is two collectives: the byte lengths, then the bytes padded to
// the longest. They are async: the results are read back on this thread.
import { tensor, zeros } from "../ops/creation.js";
import { allGather, broadcast } from "./collectives.js";
import { DistError } from "./errors.js";
import { groupArg, type ProcessGroup } from "./process_group.js";

const enc = new TextEncoder();
const dec = new TextDecoder();

function toBytes(fn: string, obj: unknown): Uint8Array {
  let s: string | undefined;
  try {
    s = JSON.stringify(obj);
  } catch (e) {
    throw new DistError(`${fn}: the object is not JSON-serializable: ${(e as Error).message}`);
  }
  return enc.encode(s ?? "null");
}

/** objectList[j] = rank j's `obj` (JSON round trip), on every rank of the group. */
export async function allGatherObject(objectList: unknown[], obj: unknown, group?: ProcessGroup | null): Promise<void> {
  const g = groupArg("allGatherObject", group);
  if (!g.isMember) return;
  const n = g.size();
  if (!Array.isArray(objectList) || objectList.length !== n) throw new DistError(`allGatherObject: objectList must have one entry per rank (${n})`);
  const bytes = toBytes("allGatherObject", obj);
  const mine = tensor([bytes.length], { dtype: "int64" });
  const lens = Array.from({ length: n }, () => zeros([1], { dtype: "int64" }));
  allGather(lens, mine, { group: g });
  const sizes = await Promise.all(lens.map(async (t) => (await t.tolist() as number[])[0]!));
  const max = Math.max(1, ...sizes);
  const padded = new Uint8Array(max);
  padded.set(bytes);
  const outs = Array.from({ length: n }, () => zeros([max], { dtype: "uint8" }));
  allGather(outs, tensor(padded, { dtype: "uint8" }), { group: g });
  for (let j = 0; j < n; j++) objectList[j] = JSON.parse(dec.decode((await outs[j]!.data()).subarray(0, sizes[j]!)));
}

/** Every rank's objectList becomes rank `src`'s (global rank; JSON round trip). */
export async function broadcastObjectList(objectList: unknown[], src = 0, group?: ProcessGroup | null): Promise<void> {
  const g = groupArg("broadcastObjectList", group);
  if (!g.isMember) return;
  if (!Array.isArray(objectList)) throw new TypeError("broadcastObjectList(): objectList must be a list");
  const isSrc = g.ranks[g.rank()] === src;
  const bytes = isSrc ? toBytes("broadcastObjectList", objectList) : new Uint8Array(0);
  const len = tensor([bytes.length], { dtype: "int64" });
  broadcast(len, src, { group: g });
  const size = (await len.tolist() as number[])[0]!;
  const buf = isSrc ? tensor(bytes, { dtype: "uint8" }) : zeros([size], { dtype: "uint8" });
  broadcast(buf, src, { group: g });
  const got = JSON.parse(dec.decode(await buf.data())) as unknown[];
  objectList.splice(0, objectList.length, ...got);
}
