// `torchts serve --tensor-parallel-size N` (vLLM's multiprocess executor): the server process runs the
// engine as rank 0 and spawns ranks 1..N-1 itself (worker.ts). They meet through a TCPStore on
// 127.0.0.1 and join one process group; each rank keeps 1/N of the heads and MLP units (shard.ts) and
// a PagedKVCache of its own kv heads. Every engine step, rank 0 sends the step's sequences to the
// workers (channel.ts) and all ranks run forwardPaged; the row-parallel layers all-reduce, and rank 0,
// whose logits are whole, samples. A worker that exits makes this group fail: the step in flight
// fails (its all-reduce loses the peer), later calls throw, and onFailure's listeners hear of it.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as dist from "torchts/distributed";
import type { PagedKVCacheOptions, PagedSequence, PreTrainedModel } from "torchts/transformers";
import { sendCommand } from "./channel.js";
import { shardModel, tensorParallelError } from "./shard.js";
import type { WorkerArgs } from "./worker.js";

/** What the engine calls (LLMEngineOptions.tensorParallel). */
export interface TensorParallelHooks {
  readonly size: number;
  /** Before rank 0's forwardPaged of a step: the workers run the same one. Throws when the group failed. */
  step(seqs: readonly PagedSequence[]): void;
  /** The pool copied blocks (copy-on-write): the workers copy theirs. */
  copyBlocks(src: readonly number[], dst: readonly number[]): void;
}

export interface TensorParallelOptions {
  /** Ranks in all (>= 2). */
  size: number;
  /** The model folder every worker loads. */
  modelDir: string;
  dtype?: string;
  /** Timeout of the rendezvous and of each collective, in ms (default 30 min, PyTorch's). */
  timeoutMs?: number;
  /** Idle interval after which rank 0 sends a no-op, in ms (default 60 s; keeps the workers' receives under the timeout). */
  keepaliveMs?: number;
  /** The workers' environment additions (e.g. TORCHTS_NUM_THREADS). */
  env?: Record<string, string>;
  /** Progress lines (workers started, stopped). */
  log?: (line: string) => void;
}

const WORKER = fileURLToPath(new URL("./worker.ts", import.meta.url));
const SERVE_TSCONFIG = fileURLToPath(new URL("../../tsconfig.json", import.meta.url));
const TORCHTS_SOURCES = fileURLToPath(new URL("../../../torchts/src/index.ts", import.meta.url));

/** node flags that load worker.ts: tsx, with this package's tsconfig (torchts from its sources) in a checkout, as cli.ts does. */
function workerNode(): { args: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  if (existsSync(TORCHTS_SOURCES) && process.env.TORCHTS_CLI_DIST !== "1") env.TSX_TSCONFIG_PATH = SERVE_TSCONFIG;
  return { args: ["--import", import.meta.resolve("tsx")], env };
}

export class TensorParallelGroup implements TensorParallelHooks {
  readonly size: number;
  private readonly workers: ChildProcess[];
  private readonly store: dist.TCPStore;
  private readonly log: (line: string) => void;
  private readonly keepaliveMs: number;
  private error: Error | null = null;
  private stopping = false;
  private closed: Promise<void> | null = null;
  private readonly failureListeners: ((e: Error) => void)[] = [];
  private readonly exits: Promise<void>[];
  private keepalive: NodeJS.Timeout | null = null;
  private lastSent = Date.now();

  private constructor(size: number, workers: ChildProcess[], store: dist.TCPStore, o: TensorParallelOptions) {
    this.size = size;
    this.workers = workers;
    this.store = store;
    this.log = o.log ?? (() => {});
    this.keepaliveMs = o.keepaliveMs ?? 60_000;
    this.exits = workers.map((w, i) =>
      new Promise<void>((resolve) => {
        w.once("exit", (code, signal) => {
          resolve();
          if (!this.stopping) this.fail(new Error(`tensor parallel worker rank ${i + 1} (pid ${w.pid}) exited unexpectedly (${signal ? `signal ${signal}` : `exit code ${code}`})`));
        });
        // a process that could not be spawned emits no exit
        w.once("error", (e) => {
          if (w.pid === undefined) resolve();
          this.fail(new Error(`tensor parallel worker rank ${i + 1}: ${e.message}`));
        });
      }),
    );
  }

  /**
   * Spawn the workers, join them in a process group (this process is rank 0) and shard `model` (its
   * checkpoint already loaded here; every worker loads its own). Rejects, leaving no worker behind,
   * when a worker exits first or the rendezvous times out.
   */
  static async start(model: PreTrainedModel, o: TensorParallelOptions): Promise<TensorParallelGroup> {
    const n = o.size;
    if (!Number.isInteger(n) || n < 2) throw new RangeError(`TensorParallelGroup: size must be an integer >= 2, got ${n}`);
    const why = tensorParallelError(model.config, n);
    if (why) throw new RangeError(`TensorParallelGroup: ${why}`);
    if (model.device !== "cpu") throw new RangeError(`TensorParallelGroup: tensor parallel ranks communicate host memory; the model must be on the cpu, got '${model.device}'`);
    if (dist.isInitialized()) throw new Error("TensorParallelGroup: this process already has a default process group");
    const timeoutMs = o.timeoutMs ?? dist.DEFAULT_PG_TIMEOUT;
    const store = new dist.TCPStore("127.0.0.1", 0, { worldSize: n, isMaster: true, timeout: timeoutMs, waitForWorkers: true });
    const node = workerNode();
    const workers: ChildProcess[] = [];
    for (let r = 1; r < n; r++) {
      const a: WorkerArgs = { rank: r, size: n, storeHost: "127.0.0.1", storePort: store.port, model: o.modelDir, dtype: o.dtype, timeoutMs };
      const w = spawn(process.execPath, [...node.args, WORKER, JSON.stringify(a)], {
        stdio: ["ignore", "inherit", "inherit", "ipc"],
        env: { ...process.env, ...node.env, ...o.env },
      });
      workers.push(w);
      o.log?.(`tensor parallel worker rank ${r} started (pid ${w.pid})`);
    }
    const group = new TensorParallelGroup(n, workers, store, o);
    try {
      const failed = new Promise<never>((_, reject) => group.onFailure(reject));
      await Promise.race([dist.initProcessGroup({ backend: "gloo", store, rank: 0, worldSize: n, timeout: timeoutMs }), failed]);
      shardModel(model);
      return group;
    } catch (e) {
      await group.shutdown();
      throw e;
    }
  }

  /** Listen for the group's failure (a worker exited unexpectedly); called at most once. */
  onFailure(fn: (e: Error) => void): void {
    if (this.error) fn(this.error);
    else this.failureListeners.push(fn);
  }

  /** The failure, or null while every rank is alive. */
  get failure(): Error | null {
    return this.error;
  }

  /** The workers' process ids (rank 1 first). */
  get pids(): number[] {
    return this.workers.map((w) => w.pid!);
  }

  /** The workers allocate their KV pools like rank 0's (engine.kvCache.opts, kv heads already this rank's share). */
  initCache(cache: PagedKVCacheOptions): void {
    this.send({ op: "init", cache: { ...cache, device: "cpu" } });
    this.keepalive = setInterval(() => {
      if (!this.error && !this.stopping && Date.now() - this.lastSent >= this.keepaliveMs) this.send({ op: "noop" });
    }, this.keepaliveMs);
    this.keepalive.unref();
  }

  step(seqs: readonly PagedSequence[]): void {
    this.send({ op: "step", seqs: seqs.map((s) => ({ tokens: [...s.tokens], cached: s.cached, blocks: [...s.blocks], wantLogits: false })) });
  }

  copyBlocks(src: readonly number[], dst: readonly number[]): void {
    this.send({ op: "copy", src: [...src], dst: [...dst] });
  }

  private send(cmd: Parameters<typeof sendCommand>[0]): void {
    if (this.error) throw this.error;
    if (this.stopping) throw new Error("the tensor parallel group is shut down");
    sendCommand(cmd);
    this.lastSent = Date.now();
  }

  private fail(e: Error): void {
    if (this.error) return;
    this.error = e;
    for (const f of this.failureListeners.splice(0)) f(e);
  }

  /**
   * Stop the workers (a stop command, then SIGKILL for any still there after `graceMs`), leave the
   * process group and close the store. Idempotent; safe after a failure.
   */
  shutdown(graceMs = 10_000): Promise<void> {
    return (this.closed ??= this.close(graceMs));
  }

  private async close(graceMs: number): Promise<void> {
    const healthy = !this.error && dist.isInitialized();
    this.stopping = true;
    if (this.keepalive) clearInterval(this.keepalive);
    if (healthy) {
      try {
        sendCommand({ op: "stop" });
      } catch {
        /* the group broke meanwhile: the workers are killed below */
      }
    }
    const all = Promise.all(this.exits);
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((r) => (timer = setTimeout(r, healthy ? graceMs : 0)));
    await Promise.race([all, grace]);
    clearTimeout(timer);
    for (const w of this.workers) if (w.exitCode === null && w.signalCode === null) w.kill("SIGKILL");
    await all;
    if (dist.isInitialized()) {
      // a group whose peer is gone may not close cleanly: bounded
      await Promise.race([dist.destroyProcessGroup().catch(() => {}), new Promise<void>((r) => setTimeout(r, 3000).unref())]);
    }
    await this.store.close().catch(() => {});
    this.log(`tensor parallel workers stopped`);
  }
}
