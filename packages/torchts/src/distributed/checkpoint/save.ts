// distributed.checkpoint.save / asyncSave: every rank writes the pieces it holds to its own file,
// and the coordinator (rank 0) writes `.metadata`, which says where each piece of each tensor is.
//   plan:   every rank lists its pieces (a DTensor's local piece with its offsets; a plain tensor
//           is the whole tensor, replicated) and its plain values; the lists are all-gathered, and
//           a piece several ranks hold is written by one of them (the least loaded so far), the
//           same choice on every rank
//   write:  rank r writes `__r_<saveId>.distcp` (a safetensors file) atomically
//   commit: once every rank wrote, rank 0 replaces `.metadata` atomically (temporary file, fsync,
//           rename), then deletes the files of earlier saves and stray temporaries
// So a checkpoint is its `.metadata` and the files it names: a process killed during a save
// leaves the previous save's `.metadata` and files in place (torch.save's guarantee, per folder).
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { noGrad } from "../../autograd/grad_mode.js";
import { atomicWriteFile } from "../../io/atomic.js";
import { saveAsync as safetensorsBytes } from "../../io/safetensors.js";
import { Tensor } from "../../tensor.js";
import { barrier } from "../collectives.js";
import { DistError } from "../errors.js";
import { allGatherObject } from "../object_collectives.js";
import { groupArg, isInitialized, newGroup, type ProcessGroup } from "../process_group.js";
import { isDTensor } from "../tensor/dtensor.js";
import { encodeValue, flattenStateDict } from "./flatten.js";
import { DCP_FORMAT, METADATA_NAME, type ChunkMeta, type Metadata } from "./metadata.js";

export interface SaveOptions {
  /** The checkpoint's folder. */
  checkpointId: string;
  processGroup?: ProcessGroup | null;
  /** Save from this process alone, without a process group (default: when none is initialized). */
  noDist?: boolean;
}

interface Piece {
  fqn: string;
  offsets: number[];
  sizes: number[];
  dtype: string;
  shape: number[];
  tensor: Tensor;
}
interface LocalPlan {
  pieces: { fqn: string; offsets: number[]; sizes: number[]; dtype: string; shape: number[]; bytes: number }[];
  values: Record<string, unknown>;
  saveId?: string;
}

const keyOf = (p: { fqn: string; offsets: number[] }) => `${p.fqn}@${p.offsets.join(",")}`;

/** The pieces this rank holds and its plain values; `stage` copies the pieces (asyncSave). */
function collect(sd: unknown, fn: string, stage: boolean): { pieces: Piece[]; values: Record<string, unknown> } {
  const pieces: Piece[] = [];
  const values: Record<string, unknown> = {};
  for (const leaf of flattenStateDict(sd, fn)) {
    const v = leaf.value;
    if (v instanceof Tensor) {
      const local = isDTensor(v) ? v._local : v;
      if (!local._storage.device.readSync) throw new DistError(`${fn}: ${leaf.fqn} is on ${local.device}; checkpoints are written from cpu tensors`);
      const t = stage ? noGrad(() => local.detach().contiguous().clone()) : noGrad(() => local.detach());
      pieces.push({
        fqn: leaf.fqn,
        offsets: isDTensor(v) ? v.localOffsets() : v.shape.map(() => 0),
        sizes: [...local.shape],
        dtype: v.dtype,
        shape: [...v.shape],
        tensor: t,
      });
    } else values[leaf.fqn] = encodeValue(v);
  }
  return { pieces, values };
}

/** Which rank writes each piece: its holder, or the least loaded of its holders (the same on every rank). */
function assign(plans: LocalPlan[]): Map<string, number> {
  const holders = new Map<string, number[]>();
  const bytesOf = new Map<string, number>();
  plans.forEach((p, r) =>
    p.pieces.forEach((c) => {
      const k = keyOf(c);
      holders.set(k, [...(holders.get(k) ?? []), r]);
      bytesOf.set(k, c.bytes);
    }),
  );
  const load = plans.map(() => 0);
  const writer = new Map<string, number>();
  for (const k of [...holders.keys()].sort()) {
    const hs = holders.get(k)!;
    const r = hs.reduce((best, h) => (load[h]! < load[best]! ? h : best), hs[0]!);
    writer.set(k, r);
    load[r]! += bytesOf.get(k)!;
  }
  return writer;
}

function fileName(rank: number, saveId: string): string {
  return `__${rank}_${saveId}.distcp`;
}

/** The write and commit once the pieces are collected (what asyncSave runs in the background). */
async function write(dir: string, local: { pieces: Piece[]; values: Record<string, unknown> }, group: ProcessGroup | null, fn: string): Promise<Metadata> {
  const rank = group ? group.rank() : 0;
  const n = group ? group.size() : 1;
  const mine: LocalPlan = {
    pieces: local.pieces.map((p) => ({ fqn: p.fqn, offsets: p.offsets, sizes: p.sizes, dtype: p.dtype, shape: p.shape, bytes: p.tensor.numel() })),
    values: rank === 0 ? local.values : {},
    saveId: rank === 0 ? `${Date.now().toString(36)}${randomBytes(4).toString("hex")}` : undefined,
  };
  const plans: LocalPlan[] = new Array(n);
  if (group) await allGatherObject(plans, mine, group);
  else plans[0] = mine;
  const saveId = plans[0]!.saveId!;
  for (const [r, p] of plans.entries()) {
    const dup = new Set<string>();
    for (const c of p.pieces) {
      if (dup.has(c.fqn)) throw new DistError(`${fn}: rank ${r} holds two pieces of ${c.fqn}`);
      dup.add(c.fqn);
    }
  }
  const writer = assign(plans);
  // write this rank's pieces
  let error: string | null = null;
  try {
    await mkdir(dir, { recursive: true });
    const entries: Record<string, Tensor> = {};
    for (const p of local.pieces) if (writer.get(keyOf(p)) === rank) entries[keyOf(p)] = p.tensor;
    if (Object.keys(entries).length) await atomicWriteFile(join(dir, fileName(rank, saveId)), await safetensorsBytes(entries, { format: DCP_FORMAT }));
  } catch (e) {
    error = `rank ${rank}: ${(e as Error).message}`;
  }
  const outcomes: (string | null)[] = new Array(n);
  if (group) await allGatherObject(outcomes, error, group);
  else outcomes[0] = error;
  const failed = outcomes.filter((o) => o !== null);
  if (failed.length) throw new DistError(`${fn}: writing the checkpoint ${dir} failed (the previous one, if any, is intact): ${failed.join("; ")}`);
  // the metadata every rank can compute; rank 0 commits it
  const meta: Metadata = { format: DCP_FORMAT, saveId, worldSize: n, tensors: {}, values: plans[0]!.values };
  for (const [r, p] of plans.entries())
    for (const c of p.pieces) {
      const k = keyOf(c);
      const t = (meta.tensors[c.fqn] ??= { dtype: c.dtype, shape: c.shape, chunks: [] });
      if (t.dtype !== c.dtype || t.shape.join() !== c.shape.join())
        throw new DistError(`${fn}: ranks disagree about ${c.fqn}: ${t.dtype}[${t.shape}] vs ${c.dtype}[${c.shape}]`);
      if (writer.get(k) !== r || t.chunks.some((x) => x.offsets.join() === c.offsets.join())) continue;
      t.chunks.push({ offsets: c.offsets, sizes: c.sizes, file: fileName(r, saveId), key: k } satisfies ChunkMeta);
    }
  for (const t of Object.values(meta.tensors)) t.chunks.sort((a, b) => (a.offsets.join() < b.offsets.join() ? -1 : 1));
  if (rank === 0) {
    await atomicWriteFile(join(dir, METADATA_NAME), new TextEncoder().encode(JSON.stringify(meta)));
    // the previous saves' files are unreferenced now
    for (const f of await readdir(dir))
      if ((/^__\d+_.*\.distcp$/.test(f) && !f.endsWith(`_${saveId}.distcp`)) || f.includes(".tmp-")) await rm(join(dir, f), { force: true });
  }
  if (group) await barrier(group, true)!.wait(); // nobody returns before the commit
  return meta;
}

function resolveGroup(fn: string, opts: SaveOptions, dedicated: boolean): ProcessGroup | null {
  if (opts.noDist || (!isInitialized() && !opts.processGroup)) return null;
  const g = groupArg(fn, opts.processGroup);
  if (!dedicated) return g;
  // a background save talks on its own group, so it can interleave with the training's collectives
  let d = asyncGroups.get(g);
  if (!d) asyncGroups.set(g, (d = newGroup([...g.ranks])));
  return d;
}
const asyncGroups = new WeakMap<ProcessGroup, ProcessGroup>();

function checkOpts(fn: string, opts: SaveOptions): string {
  if (!opts || typeof opts.checkpointId !== "string" || !opts.checkpointId) throw new TypeError(`${fn}(): checkpointId (the checkpoint's folder) is required`);
  return opts.checkpointId;
}

/**
 * Save `stateDict` (nested Maps / objects / arrays of tensors, DTensors and plain values) to the
 * folder `checkpointId`. Every rank of the group must call it; each writes what it holds.
 */
export async function save(stateDict: unknown, opts: SaveOptions): Promise<Metadata> {
  const dir = checkOpts("save", opts);
  const group = resolveGroup("save", opts, false);
  return write(dir, collect(stateDict, "save", false), group, "save");
}

/**
 * Like save, but returns once the state is staged (copied): the tensors may change right after.
 * The returned promise settles when the checkpoint is committed. It communicates on a group of its
 * own (made at the first call, by every rank), so training collectives may run meanwhile.
 */
export function asyncSave(stateDict: unknown, opts: SaveOptions): Promise<Metadata> {
  const dir = checkOpts("asyncSave", opts);
  const group = resolveGroup("asyncSave", opts, true);
  const staged = collect(stateDict, "asyncSave", true);
  const p = write(dir, staged, group, "asyncSave");
  p.catch(() => {});
  return p;
}
