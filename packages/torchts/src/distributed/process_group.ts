// The default process group and subgroups: initProcessGroup (env:// and tcp:// rendezvous through
// a TCPStore, like PyTorch's), getRank/getWorldSize, newGroup, destroyProcessGroup.
// Rendezvous: every rank starts its communication thread (listening on the address it reaches
// the store from), publishes host:port in the store, reads everyone's, and the thread connects
// to every peer. Under the torchts launcher (TORCHELASTIC_USE_AGENT_STORE=True, as torchrun sets
// it) the launcher hosts the store and keys live under the restart attempt, so a restarted group
// does not read the previous attempt's addresses.
import { randomBytes } from "node:crypto";
import { bindArgs, describe, intArg, timeoutArg } from "./args.js";
import { Comm } from "./comm.js";
import { DistError } from "./errors.js";
import { TCPStore } from "./tcp_store.js";

/** PyTorch's default_pg_timeout (30 minutes). */
export const DEFAULT_PG_TIMEOUT = 1_800_000;

export class ProcessGroup {
  /** Sticky error: a failed collective breaks its group, and every later call raises it. */
  error: Error | null = null;
  /** Collectives issued so far (the sequence number of the next one). */
  seq = 0;
  destroyed = false;
  /** @internal */
  constructor(
    readonly id: number,
    /** Global ranks of the members, in group-rank order. */
    readonly ranks: readonly number[],
    private readonly globalRank: number,
    readonly timeoutMs: number,
    readonly backend: string,
  ) {}
  /** This process's rank in the group (-1 when it is not a member). */
  rank(): number {
    return this.ranks.indexOf(this.globalRank);
  }
  size(): number {
    return this.ranks.length;
  }
  get isMember(): boolean {
    return this.rank() >= 0;
  }
  toString(): string {
    return `ProcessGroup(id=${this.id}, ranks=[${this.ranks.join(", ")}], backend=${this.backend})`;
  }
}

interface State {
  world: ProcessGroup;
  comm: Comm;
  store: TCPStore;
  ownsStore: boolean;
  groups: number;
}
let state: State | null = null;
let generation = 0;

/** @internal */
export function current(fn: string): State {
  if (!state) throw new DistError(`${fn}: Default process group has not been initialized, please make sure to call initProcessGroup.`);
  return state;
}

export function isInitialized(): boolean {
  return state !== null;
}
export function isAvailable(): boolean {
  return true;
}
/** Which backends can run here ("gloo" names torchts's TCP collectives, the cpu backend PyTorch users know). */
export function isGlooAvailable(): boolean {
  return true;
}
export function isNcclAvailable(): boolean {
  return false;
}

function env(name: string, why: string): string {
  const v = process.env[name];
  if (v === undefined || v === "")
    throw new DistError(`Error initializing torch.distributed using env:// rendezvous: environment variable ${name} expected, but not set (${why})`);
  return v;
}

function normalizeBackend(b: unknown): string {
  if (b === undefined || b === null) return "gloo";
  if (typeof b !== "string") throw new TypeError(`initProcessGroup(): argument 'backend' must be a string, got ${describe(b)}`);
  const name = b.toLowerCase();
  if (name === "gloo" || name === "tcp" || name === "cpu:gloo") return "gloo";
  if (name === "nccl" || name === "mpi" || name === "ucc" || name.includes("nccl"))
    throw new DistError(`initProcessGroup: backend '${b}' is not available in torchts; collectives run over TCP on the cpu: use backend 'gloo'`);
  throw new DistError(`initProcessGroup: unknown backend '${b}' (expected 'gloo' or 'tcp')`);
}

/**
 * Join the default process group. Blocks (asynchronously) until every rank joined.
 * `initMethod`: "env://" (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; the default) or
 * "tcp://host:port" (with rank and worldSize); or pass a `store` with rank and worldSize.
 * `timeout` (ms) bounds the rendezvous and every collective of the group (default 30 min).
 */
export async function initProcessGroup(...args: unknown[]): Promise<void> {
  const a = bindArgs("initProcessGroup", ["backend", "initMethod", "timeout", "worldSize", "rank", "store", "groupName"], args);
  if (state) throw new DistError("trying to initialize the default process group twice!");
  const backend = normalizeBackend(a.backend);
  const timeout = timeoutArg("initProcessGroup", a.timeout, DEFAULT_PG_TIMEOUT);
  let rank = a.rank === undefined || a.rank === null || a.rank === -1 ? null : intArg("initProcessGroup", "rank", a.rank, 0);
  let world = a.worldSize === undefined || a.worldSize === null || a.worldSize === -1 ? null : intArg("initProcessGroup", "worldSize", a.worldSize, 1);
  let store: TCPStore;
  let ownsStore = true;
  let prefix = "";
  if (a.store !== undefined && a.store !== null) {
    if (!(a.store instanceof TCPStore)) throw new TypeError(`initProcessGroup(): argument 'store' must be a TCPStore, got ${describe(a.store)}`);
    if (a.initMethod !== undefined) throw new DistError("initProcessGroup: cannot specify both initMethod and store");
    if (rank === null || world === null) throw new DistError("initProcessGroup: rank and worldSize are required with a store");
    store = a.store;
    ownsStore = false;
  } else {
    const method = a.initMethod === undefined || a.initMethod === null ? "env://" : a.initMethod;
    if (typeof method !== "string") throw new TypeError(`initProcessGroup(): argument 'initMethod' must be a string, got ${describe(method)}`);
    let host: string;
    let port: number;
    if (method.startsWith("env://")) {
      host = env("MASTER_ADDR", "the address of the rank 0 host");
      port = Number(env("MASTER_PORT", "a free port on the rank 0 host"));
      rank ??= Number(env("RANK", "this process's rank"));
      world ??= Number(env("WORLD_SIZE", "the number of processes"));
    } else if (method.startsWith("tcp://")) {
      const u = new URL(method);
      host = u.hostname.replace(/^\[|\]$/g, "");
      port = Number(u.port);
      const q = (k: string) => (u.searchParams.has(k) ? Number(u.searchParams.get(k)) : null);
      rank ??= q("rank");
      world ??= q("world_size") ?? q("worldSize");
      if (rank === null || world === null) throw new DistError("initProcessGroup: tcp:// needs rank and worldSize");
    } else throw new DistError(`initProcessGroup: unsupported initMethod '${method}' (use env:// or tcp://host:port)`);
    if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new DistError(`initProcessGroup: invalid master port '${port}'`);
    if (!Number.isInteger(rank) || !Number.isInteger(world) || world < 1 || rank < 0 || rank >= world)
      throw new DistError(`initProcessGroup: invalid rank ${rank} for world size ${world}`);
    if (process.env.TORCHELASTIC_USE_AGENT_STORE === "True") {
      // the launcher hosts the store; this attempt's keys are its own (PyTorch's PrefixStore)
      store = new TCPStore(host, port, { timeout });
      prefix = process.env.TORCHTS_STORE_PREFIX ?? `worker/attempt_${process.env.TORCHELASTIC_RESTART_COUNT ?? "0"}/`;
    } else store = new TCPStore(host, port, { worldSize: world, isMaster: rank === 0, timeout, waitForWorkers: true });
  }
  const r = rank!;
  const n = world!;
  const p = `${prefix}tsdist/${generation++}/`;
  try {
    await store.ready();
    let host = await store.localAddress();
    if (host.startsWith("::ffff:")) host = host.slice(7);
    // the token keeps strangers off the listening sockets: only processes that read it from the store
    if (r === 0) await store.set(`${p}token`, randomBytes(16).toString("hex"));
    const token = (await store.get(`${p}token`)).toString();
    const { comm, port } = await Comm.start(r, host, token);
    try {
      await store.set(`${p}addr/${r}`, host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);
      const addrs = await Promise.all([...Array(n).keys()].map(async (j) => (await store.get(`${p}addr/${j}`)).toString()));
      await comm.connect(addrs, timeout);
    } catch (e) {
      await comm.close();
      throw e;
    }
    state = { world: new ProcessGroup(0, [...Array(n).keys()], r, timeout, backend), comm, store, ownsStore, groups: 0 };
  } catch (e) {
    if (ownsStore) await store.close();
    throw e;
  }
}

/** @internal The group a call names (default: the world). */
export function groupArg(fn: string, g: unknown): ProcessGroup {
  const s = current(fn);
  if (g === undefined || g === null) return s.world;
  if (!(g instanceof ProcessGroup)) throw new TypeError(`${fn}(): argument 'group' must be a ProcessGroup, got ${describe(g)}`);
  if (g.destroyed) throw new DistError(`${fn}: the process group has been destroyed`);
  return g;
}

/** This process's rank in `group` (default: the world); -1 when it is not a member. */
export function getRank(group?: ProcessGroup | null): number {
  return groupArg("getRank", group).rank();
}

/** Number of processes in `group` (default: the world); -1 when this process is not a member. */
export function getWorldSize(group?: ProcessGroup | null): number {
  const g = groupArg("getWorldSize", group);
  return g.isMember ? g.size() : -1;
}

export function getBackend(group?: ProcessGroup | null): string {
  return groupArg("getBackend", group).backend;
}

/** Global ranks of the members of `group`, in group-rank order. */
export function getProcessGroupRanks(group: ProcessGroup): number[] {
  return [...groupArg("getProcessGroupRanks", group).ranks];
}

/** The global rank of group rank `groupRank`. */
export function getGlobalRank(group: ProcessGroup, groupRank: number): number {
  const g = groupArg("getGlobalRank", group);
  const r = g.ranks[intArg("getGlobalRank", "groupRank", groupRank, 0)];
  if (r === undefined) throw new DistError(`getGlobalRank: group rank ${groupRank} is not part of the group (size ${g.size()})`);
  return r;
}

/** The rank in `group` of global rank `globalRank`. */
export function getGroupRank(group: ProcessGroup, globalRank: number): number {
  const g = groupArg("getGroupRank", group);
  const i = g.ranks.indexOf(intArg("getGroupRank", "globalRank", globalRank, 0));
  if (i < 0) throw new DistError(`getGroupRank: global rank ${globalRank} is not part of the group`);
  return i;
}

/**
 * A subgroup of the given global ranks (default: all). Like PyTorch's new_group every process must
 * call it, in the same order, members or not; the ranks are sorted. A non-member gets a group
 * whose rank() is -1; collectives on it do nothing.
 */
export function newGroup(...args: unknown[]): ProcessGroup {
  const a = bindArgs("newGroup", ["ranks", "timeout", "backend"], args);
  const s = current("newGroup");
  const n = s.world.size();
  let ranks: number[];
  if (a.ranks === undefined || a.ranks === null) ranks = [...Array(n).keys()];
  else {
    if (!Array.isArray(a.ranks)) throw new TypeError(`newGroup(): argument 'ranks' must be a list of ints, got ${describe(a.ranks)}`);
    ranks = (a.ranks as unknown[]).map((r) => intArg("newGroup", "ranks", r, 0));
    for (const r of ranks) if (r >= n) throw new DistError(`newGroup: rank ${r} is out of range for world size ${n}`);
    if (new Set(ranks).size !== ranks.length) throw new DistError(`newGroup: ranks must be unique, got [${ranks.join(", ")}]`);
    ranks.sort((x, y) => x - y);
  }
  const timeout = timeoutArg("newGroup", a.timeout, s.world.timeoutMs);
  const backend = a.backend === undefined || a.backend === null ? s.world.backend : normalizeBackend(a.backend);
  return new ProcessGroup(++s.groups, ranks, s.world.ranks[s.world.rank()]!, timeout, backend);
}

/**
 * Destroy `group`, or (by default) every group: waits for the operations in flight, stops the
 * communication thread and closes the store.
 */
export async function destroyProcessGroup(group?: ProcessGroup | null): Promise<void> {
  const s = current("destroyProcessGroup");
  if (group !== undefined && group !== null && group !== s.world) {
    groupArg("destroyProcessGroup", group).destroyed = true;
    return;
  }
  state = null;
  s.world.destroyed = true;
  await s.comm.close();
  if (s.ownsStore) await s.store.close();
}

/** The store of the default group (PyTorch's _get_default_store). */
export function getDefaultStore(): TCPStore {
  return current("getDefaultStore").store;
}

/** dist.group.WORLD */
export const group = {
  get WORLD(): ProcessGroup | null {
    return state?.world ?? null;
  },
};
