// The fused-mode scheduler: cuts the pending graph behind some targets into kernels.
// Elementwise chains fuse with each other and into the prologue/epilogue of a reduction;
// other primitives are their own kernels. A value is materialized only when it is a target
// or crosses a kernel boundary; the rest stay pending (recomputable if anyone reads them later).
// A flush whose graph has the same structure as an earlier one reuses its plan and executables.
import type { DevicePlugin, Executable, KernelArg } from "../device/plugin.js";
import { nodeKey, type IRNode } from "../ir/prims.js";
import { nodeId, nodeIdGeneration } from "../ir/node_id.js";
import { contiguousStrides, sameShape } from "../ir/shape.js";
import { dropDeviceExecutables, getExecutable } from "./cache.js";
import { fusionDevices, type FusedGraph, type FusedSrc } from "./fused_graph.js";
import { log, logOn } from "./logs.js";
import { runKernel } from "./profiler.js";
import { requestCollection } from "./memory.js";
import type { Pending, Storage, ViewRef } from "./storage.js";

interface KernelPlan {
  exe: Executable;
  /** External arguments: input i of node j (global topo index). */
  ext: [number, number][];
  /** Nodes written to memory (global indices), in output order. */
  outs: number[];
  /** A single unfused node runs through the eager path (with `exe`, its one-node executable). */
  single: number;
  name: string;
}
interface Plan {
  kernels: KernelPlan[];
  /** Per kernel: values only materialized for later kernels, whose buffers can go after it ran. */
  lastUses: number[][];
  /** The key sequence this plan was built for (see planKey). */
  seq: readonly number[];
}

/** torch.compile's recorder (src/compile/recorder.ts): sees every prim issued and every kernel run while it records. */
export const recordHooks: {
  prim: ((inputs: readonly ViewRef[], scalars: readonly number[]) => void) | null;
  kernel: ((exe: Executable, name: string, inputs: readonly ViewRef[], outputs: readonly Storage[], scalars: readonly number[], node: IRNode | null) => void) | null;
} = { prim: null, kernel: null };

const MAX_PLANS = 256;
const plans = new Map<string, Plan>();

/** A device was destroyed: its compiled kernels and the plans that hold them are dropped. */
export function forgetDevice(name: string): void {
  dropDeviceExecutables(name);
  plans.clear(); // plans of other devices rebuild from the executable cache at once
}
const stats = { flushes: 0, planHits: 0, planMisses: 0, kernels: 0 };

export function schedulerStats(): typeof stats & { plans: number } {
  return { ...stats, plans: plans.size };
}

const ELEMENTWISE = new Set(["unary", "binary", "where", "cast"]);
const MAX_GROUP = 48;

/** Pending nodes behind the targets, producers first. */
function collect(targets: Storage[]): { sts: Storage[]; pends: Pending[] } {
  const seen = new Set<Storage>();
  const sts: Storage[] = [];
  const stack: [Storage, number][] = [];
  for (const t of targets) {
    if (seen.has(t) || !t.pending || t.buf) continue;
    stack.push([t, 0]);
    seen.add(t);
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const ins = top[0].pending!.inputs;
      if (top[1] < ins.length) {
        const s = ins[top[1]++]!.storage;
        if (s.transfer) s.transfer.land(); // an input still arriving from a collective (distributed)
        if (!s.buf && s.pending && !seen.has(s)) {
          seen.add(s);
          stack.push([s, 0]);
        }
      } else {
        stack.pop();
        sts.push(top[0]);
      }
    }
  }
  return { sts, pends: sts.map((s) => s.pending!) };
}

function isIdentityEdge(v: ViewRef, producer: IRNode): boolean {
  if (v.offset !== 0 || !sameShape(v.shape, producer.out.shape)) return false;
  const cs = contiguousStrides(v.shape);
  return v.shape.every((d, k) => d === 1 || v.strides[k] === cs[k]);
}

interface Group {
  kind: "elementwise" | "reduction" | "matmul" | "single";
  members: number[];
  reduceAt: number; // position in members
}

function partition(pends: Pending[], pos: Map<Storage, number>, fusion: boolean): { groups: Group[]; groupOf: number[] } {
  const groups: Group[] = [];
  const groupOf: number[] = [];
  const single = (j: number) => {
    groupOf[j] = groups.length;
    groups.push({ kind: "single", members: [j], reduceAt: -1 });
  };
  for (let j = 0; j < pends.length; j++) {
    const p = pends[j]!;
    const n = p.node;
    if (fusion && n.prim === "matmul") {
      groupOf[j] = groups.length;
      groups.push({ kind: "matmul", members: [j], reduceAt: 0 });
      continue;
    }
    if (!fusion || !(ELEMENTWISE.has(n.prim) || n.prim === "reduce")) {
      single(j);
      continue;
    }
    let gmax = -1;
    const prods: [number, ViewRef][] = [];
    for (const v of p.inputs) {
      const q = pos.get(v.storage);
      if (q === undefined) continue;
      prods.push([q, v]);
      gmax = Math.max(gmax, groupOf[q]!);
    }
    const G = gmax >= 0 ? groups[gmax]! : null;
    const inG = prods.filter(([q]) => groupOf[q] === gmax);
    const edgesOk = inG.every(([q, v]) => isIdentityEdge(v, pends[q]!.node));
    if (G && G.kind !== "single" && edgesOk && G.members.length < MAX_GROUP) {
      if (ELEMENTWISE.has(n.prim)) {
        if (G.kind === "elementwise" && sameShape(pends[G.members[0]!]!.node.out.shape, n.out.shape)) {
          groupOf[j] = gmax;
          G.members.push(j);
          continue;
        }
        const red = G.kind === "reduction" || G.kind === "matmul" ? pends[G.members[G.reduceAt]!]!.node : null;
        if (red && sameShape(red.out.shape, n.out.shape) && inG.every(([q]) => G.members.indexOf(q) >= G.reduceAt)) {
          groupOf[j] = gmax;
          G.members.push(j);
          continue;
        }
      } else if (G.kind === "elementwise" && inG.length === 1 && sameShape(pends[G.members[0]!]!.node.out.shape, n.inputs[0]!.shape)) {
        G.kind = "reduction";
        G.reduceAt = G.members.length;
        G.members.push(j);
        groupOf[j] = gmax;
        continue;
      }
    }
    groupOf[j] = groups.length;
    if (ELEMENTWISE.has(n.prim)) groups.push({ kind: "elementwise", members: [j], reduceAt: -1 });
    else groups.push({ kind: "reduction", members: [j], reduceAt: 0 });
  }
  return { groups, groupOf };
}

/**
 * Values a flush materializes and keeps even when no kernel of it needs them: state written in
 * place, tensors saved for backward (else the backward's flush recomputes the forward, matmuls
 * included), and scalars (a loss read after torch.sync() would otherwise recompute the forward).
 */
function keep(s: Storage): boolean {
  return s.persistent || s.savedBy > 0 || s.numel === 1;
}

function buildPlan(dev: DevicePlugin, sts: Storage[], pends: Pending[], pos: Map<Storage, number>, targets: Set<Storage>): Omit<Plan, "seq"> {
  const { groups, groupOf } = partition(pends, pos, fusionDevices.has(dev));
  // a value is materialized when it is a target or read by another kernel
  const needed = sts.map((s) => targets.has(s) || keep(s));
  pends.forEach((p, j) => {
    for (const v of p.inputs) {
      const q = pos.get(v.storage);
      if (q !== undefined && groupOf[q] !== groupOf[j]) needed[q] = true;
    }
  });
  const kernels: KernelPlan[] = [];
  for (const G of groups) {
    // a matmul with no epilogue, like any lone node, runs the device's own kernel
    const fusedKind = G.kind !== "single" && G.members.length > 1 ? G.kind : null;
    if (!fusedKind) {
      // its executable is looked up once, with the plan (not by the eager path at every flush)
      for (const j of G.members) kernels.push({ exe: getExecutable(dev, { nodes: [pends[j]!.node] }), ext: [], outs: [j], single: j, name: pends[j]!.node.prim });
      continue;
    }
    const local = new Map(G.members.map((j, k) => [j, k]));
    const ext: [number, number][] = [];
    const srcs: FusedSrc[][] = G.members.map((j) =>
      pends[j]!.inputs.map((v, i) => {
        const q = pos.get(v.storage);
        if (q !== undefined && local.has(q)) return { node: local.get(q)! };
        ext.push([j, i]);
        return { ext: ext.length - 1 };
      }),
    );
    const outs = G.members.filter((j) => needed[j]);
    const g: FusedGraph = {
      nodes: G.members.map((j) => pends[j]!.node),
      kind: fusedKind,
      srcs,
      outputs: outs.map((j) => local.get(j)!),
      reduceAt: G.reduceAt,
    };
    const name = `fused_${fusedKind}[${g.nodes.map((n) => (n.params as { op?: string }).op ?? n.prim).join(",")}]`;
    kernels.push({ exe: getExecutable(dev, g), ext, outs, single: -1, name });
  }
  // a value materialized only because a later kernel reads it dies after its last reader
  const last = new Map<number, number>();
  kernels.forEach((k, ki) => {
    const reads = k.single >= 0 ? pends[k.single]!.inputs.map((v) => pos.get(v.storage)) : k.ext.map(([j, i]) => pos.get(pends[j]!.inputs[i]!.storage));
    for (const q of reads) if (q !== undefined) last.set(q, ki);
  });
  const lastUses: number[][] = kernels.map(() => []);
  for (const [q, ki] of last) if (!targets.has(sts[q]!) && !keep(sts[q]!)) lastUses[ki]!.push(q);
  log("schedule", () => `${pends.length} nodes -> ${kernels.length} kernels: ${kernels.map((k) => k.name).join(" | ")}`);
  log("schedule", () => groups.map((G, i) => `  group ${i} (${G.kind}): ${G.members.map((j) => `%${j}${needed[j] ? "*" : ""}`).join(" ")}`).join("\n") + "\n  (* = materialized)");
  return { kernels, lastUses };
}

// The plan key of a flush is a sequence of small integers (interned node keys, input positions,
// offsets, output flags) hashed to a short string; the sequence is kept with the plan and
// compared on a hit. Building one long string per flush cost ~1 MB of garbage per training step.
const nodeIds = new Map<string, number>(); // device names
let planGeneration = nodeIdGeneration;
// seq[0, seqLen) is the current key; the array only grows (setting an array's length to 0 frees
// its backing store in V8, and the pushes then reallocated it, ~65 KB a small training step)
let seq: number[] = new Array<number>(1024).fill(0);
let seqLen = 0;

function seqPush(x: number): void {
  if (seqLen === seq.length) seq = seq.concat(new Array<number>(seq.length).fill(0));
  seq[seqLen++] = x;
}

function planKey(dev: DevicePlugin, pends: Pending[], pos: Map<Storage, number>, targets: Set<Storage>, sts: Storage[]): string {
  if (nodeIds.size > 1 << 10 || planGeneration !== nodeIdGeneration) {
    // bounded; ids are reused after this, so the plans keyed on old ids go too
    nodeIds.clear();
    plans.clear();
    planGeneration = nodeIdGeneration;
  }
  seqLen = 0;
  seqPush(internNode(dev.name));
  for (let j = 0; j < pends.length; j++) {
    const p = pends[j]!;
    seqPush(nodeId(p.node));
    seqPush(p.inputs.length);
    for (const v of p.inputs) {
      const q = pos.get(v.storage);
      seqPush(q === undefined ? -1 : q);
      seqPush(q === undefined ? 0 : v.offset);
    }
    seqPush(targets.has(sts[j]!) || sts[j]!.persistent ? 1 : keep(sts[j]!) ? 2 : 0);
  }
  let h1 = 0x811c9dc5 | 0, h2 = 0x9e3779b9 | 0;
  for (let i = 0; i < seqLen; i++) {
    const x = seq[i]!;
    h1 = Math.imul(h1 ^ x, 0x01000193);
    h2 = Math.imul(h2 ^ (x + i), 0x5bd1e995);
    h2 ^= h2 >>> 15;
  }
  return `${h1 >>> 0}.${h2 >>> 0}.${seqLen}`;
}

function internNode(k: string): number {
  let id = nodeIds.get(k);
  if (id === undefined) nodeIds.set(k, (id = nodeIds.size));
  return id;
}

function sameSeq(a: readonly number[]): boolean {
  if (a.length !== seqLen) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== seq[i]) return false;
  return true;
}

/**
 * Run the pending graph that produces `targets`. `single` runs one unfused node. `lend`: the
 * nodes it leaves pending read through stand-ins (false for a region whose leftovers are all
 * discarded at once, runtime/dispatch.ts runFusedRegion: a stand-in would only delay the frees).
 */
export function flushGraph(targets: Storage[], single: (st: Storage, p: Pending, exe: Executable) => void, freeIntermediates = false, lend = true): void {
  const { sts, pends } = collect(targets);
  if (!sts.length) return;
  stats.flushes++;
  const dev = sts[0]!.device;
  const pos = new Map<Storage, number>(sts.map((s, i) => [s, i]));
  const tset = new Set(targets);
  const key = planKey(dev, pends, pos, tset, sts);
  let plan = plans.get(key);
  if (plan && !sameSeq(plan.seq)) plan = undefined; // a hash collision: rebuild under this key
  const reused = plan !== undefined;
  if (plan) {
    stats.planHits++;
    plans.delete(key);
    plans.set(key, plan);
  } else {
    stats.planMisses++;
    if (logOn("graph")) log("graph", pends.map((p, j) => `%${j} = ${nodeKey(p.node)}(${p.inputs.map((v) => (pos.has(v.storage) ? `%${pos.get(v.storage)}` : "ext")).join(", ")})`).join("\n"));
    plan = { ...buildPlan(dev, sts, pends, pos, tset), seq: seq.slice(0, seqLen) };
    plans.set(key, plan);
    if (plans.size > MAX_PLANS) plans.delete(plans.keys().next().value!);
  }
  log("cache", () => `flush of ${pends.length} nodes: plan ${reused ? "reused" : "built"} (${plan!.kernels.length} kernels)`);
  for (let ki = 0; ki < plan.kernels.length; ki++) {
    const k = plan.kernels[ki]!;
    stats.kernels++;
    if (k.single >= 0) {
      const st = sts[k.single]!;
      if (st.device !== dev) throw new Error("internal: one flush spans two devices");
      single(st, pends[k.single]!, k.exe); // the eager path records its own profile event
      st.dropPending();
    } else {
      const args: KernelArg[] = k.ext.map(([j, i]) => {
        const v = pends[j]!.inputs[i]!;
        return { buf: v.storage.buf!, offset: v.offset };
      });
      const outs = k.outs.map((j) => sts[j]!.allocate());
      if (recordHooks.kernel) recordHooks.kernel(k.exe, k.name, k.ext.map(([j, i]) => pends[j]!.inputs[i]!), k.outs.map((j) => sts[j]!), [], null);
      runKernel(k.name, k.exe, args, outs, []);
      for (const j of k.outs) sts[j]!.dropPending();
    }
    if (freeIntermediates) for (const q of plan.lastUses[ki]!) sts[q]!.release(pends[q]!);
  }
  // old values moved aside for pending readers (Storage.moveOut) go once those readers ran;
  // consumers first, so an orphan read only by a dropped orphan goes too
  for (let j = sts.length - 1; j >= 0; j--) sts[j]!.dropIfUnread();
  const orphansLeft = new Set<Storage>();
  for (const p of pends)
    for (const v of p.inputs) {
      v.storage.dropIfUnread();
      if (v.storage.orphan && v.storage.buf) orphansLeft.add(v.storage);
    }
  // the nodes still left pending read what they need through stand-ins (Storage.lentView); not
  // while torch.compile records, whose recorder identifies a kernel's inputs by their storages
  standIns(sts, pends, pos, lend && recordHooks.kernel === null && recordHooks.prim === null);
  let orphanBytes = 0;
  for (const st of orphansLeft) orphanBytes += st.buf!.bytes;
  // the rest are read by nodes left pending (recomputable intermediates), which only a
  // collection can tell dead from alive: ask for one when that holds much memory
  if (orphanBytes > ORPHAN_COLLECT_BYTES) requestCollection();
}

const ORPHAN_COLLECT_BYTES = 64 * 1024 * 1024;

/** The number of the last flush's pruning pass (standIns): a storage is pruned once per flush. */
let pruneEpoch = 0;

/**
 * After a flush: the nodes it left pending (values recomputable if read later) read the
 * materialized storages they need through stand-ins, and the storages the flush touched forget
 * the readers that no longer read them (those it ran, those now pointed at a stand-in). See
 * Storage.lentView for why.
 */
function standIns(sts: Storage[], pends: Pending[], pos: Map<Storage, number>, lend: boolean): void {
  const epoch = ++pruneEpoch;
  const ext: Storage[] = [];
  for (let j = 0; j < pends.length; j++) {
    const p = pends[j]!;
    const ins = p.inputs;
    const left = lend && sts[j]!.pending === p && !sts[j]!.disposed;
    for (let i = 0; i < ins.length; i++) {
      const v = ins[i]!;
      const s = v.storage;
      if (s.readers !== null && s.pruneEpoch !== epoch) {
        s.pruneEpoch = epoch; // each storage is pruned once (this one after the re-pointing below)
        ext.push(s);
      }
      // only what the flush read from outside (what it made itself goes with its own nodes; an
      // orphan is read by pending nodes alone: it goes with them; a stand-in is never written)
      if (!left || !s.buf || s.orphan || s.standIn || s.transfer || pos.has(s)) continue;
      const a = s.lentView();
      a.uses++;
      ins[i] = { storage: a, shape: v.shape, strides: v.strides, offset: v.offset, dtype: v.dtype };
    }
  }
  for (const s of ext) s.pruneReaders();
  // of the flush's own values, those it kept (materialized) may live on; the ones it left
  // pending go with the nodes that read them
  for (const s of sts) if (s.buf !== null && s.readers !== null && s.pruneEpoch !== epoch) s.pruneReaders();
}
