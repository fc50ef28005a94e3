// `torchts run`: torchrun for torchts scripts. One launcher per node starts --nproc-per-node
// workers with torchrun's environment, watches them, and on the first failure stops the others
// (SIGTERM, then SIGKILL after a grace period; each worker is its own process group, so its
// children go too) and prints torchelastic's failure report; with --max-restarts it restarts the
// group instead. Node 0 (static) or the endpoint's host (c10d) also serves the job's TCPStore,
// which the launchers rendezvous on and the workers' initProcessGroup uses
// (TORCHELASTIC_USE_AGENT_STORE=True), so Kubernetes (Kubeflow PyTorchJob, JobSet) or Ray can
// start it as they start torchrun.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync } from "node:fs";
import { isIP } from "node:net";
import { constants as osConstants, hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { StoreServer } from "../store_server.js";
import { TCPStore } from "../tcp_store.js";
import { parseRunArgs, RUN_USAGE, UsageError, type RunConfig } from "./args.js";
import { Rendezvous, type Membership, type RoundEvent } from "./rendezvous.js";
import { formatChildFailed, type ProcessFailure } from "./summary.js";

const STOP_GRACE_MS = 5000;
const EXIT_BARRIER_MS = 300_000;

function log(msg: string): void {
  process.stderr.write(`[torchts run] ${msg}\n`);
}

interface Worker {
  localRank: number;
  rank: number;
  proc: ChildProcess;
  errorFile: string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; time: number }>;
  exited: boolean;
}

function isLocal(host: string): boolean {
  return host === "localhost" || host === "::1" || host === hostname() || (isIP(host) === 4 && host.startsWith("127."));
}

/** The node flags a worker runs with: tsx for TypeScript, and the error-file recorder. */
function nodeArgs(script: string): string[] {
  const fromSource = import.meta.url.endsWith(".ts");
  const args: string[] = [];
  if (/\.(ts|mts|cts|tsx)$/.test(script) || fromSource) {
    let tsx: string;
    try {
      tsx = import.meta.resolve("tsx");
    } catch {
      throw new UsageError(`running ${script} needs tsx (npm install tsx), or run the compiled .js`);
    }
    args.push("--import", tsx);
  }
  args.push("--import", new URL(`../elastic_record.${fromSource ? "ts" : "js"}`, import.meta.url).href);
  return args;
}

class Agent {
  private workers: Worker[] = [];
  private stopping = false;
  private readonly runDir: string;
  private signalled: NodeJS.Signals | null = null;

  constructor(
    private readonly cfg: RunConfig,
    private readonly store: TCPStore,
    private readonly rdzv: Rendezvous,
    private readonly servesStore: boolean,
  ) {
    this.runDir = mkdtempSync(join(tmpdir(), "torchelastic_"));
  }

  private spawnWorkers(m: Membership, restartCount: number, masterPort: number): void {
    const { cfg } = this;
    const base = join(this.runDir, `${cfg.rdzvId}_${randomBytes(4).toString("hex")}`, `attempt_${restartCount}`);
    const threads = process.env.OMP_NUM_THREADS;
    if (threads === undefined && cfg.nprocPerNode > 1 && m.round === 0)
      log("Setting OMP_NUM_THREADS (and TORCHTS_NUM_THREADS) to 1 for each worker so that the system is not overloaded; tune it for your application as needed");
    this.workers = [...Array(cfg.nprocPerNode).keys()].map((localRank) => {
      const rank = m.rankOffset + localRank;
      const dir = join(base, String(localRank));
      mkdirSync(dir, { recursive: true });
      const errorFile = join(dir, "error.json");
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        LOCAL_RANK: String(localRank),
        RANK: String(rank),
        GROUP_RANK: String(m.groupRank),
        ROLE_RANK: String(rank),
        ROLE_NAME: cfg.role,
        LOCAL_WORLD_SIZE: String(cfg.nprocPerNode),
        WORLD_SIZE: String(m.worldSize),
        ROLE_WORLD_SIZE: String(m.worldSize),
        GROUP_WORLD_SIZE: String(m.nnodes),
        MASTER_ADDR: cfg.masterAddr,
        MASTER_PORT: String(masterPort),
        TORCHELASTIC_RESTART_COUNT: String(restartCount),
        TORCHELASTIC_MAX_RESTARTS: String(cfg.maxRestarts),
        TORCHELASTIC_RUN_ID: cfg.rdzvId,
        TORCHELASTIC_USE_AGENT_STORE: "True",
        TORCHELASTIC_ERROR_FILE: errorFile,
        // the workers' keys for this round (a restart or membership change must not read the last one's)
        TORCHTS_STORE_PREFIX: `worker/round_${m.round}/`,
        OMP_NUM_THREADS: threads ?? (cfg.nprocPerNode > 1 ? "1" : undefined),
        TORCHTS_NUM_THREADS: process.env.TORCHTS_NUM_THREADS ?? threads ?? (cfg.nprocPerNode > 1 ? "1" : undefined),
      };
      for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
      const [cmd, args] = cfg.noPython ? [cfg.script, cfg.scriptArgs] : [process.execPath, [...nodeArgs(cfg.script), cfg.script, ...cfg.scriptArgs]];
      const proc = spawn(cmd, args, { env, stdio: "inherit", detached: true });
      const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; time: number }>((resolve) => {
        proc.once("exit", (code, signal) => resolve({ code, signal, time: Date.now() }));
        proc.once("error", (e) => {
          log(`could not start ${cmd}: ${e.message}`);
          resolve({ code: 127, signal: null, time: Date.now() });
        });
      });
      const w: Worker = { localRank, rank, proc, errorFile, exit, exited: false };
      void exit.then(() => (w.exited = true));
      return w;
    });
  }

  /** torchelastic's exit code: the code, or minus the signal number. */
  private static exitcode(e: { code: number | null; signal: NodeJS.Signals | null }): number {
    if (e.signal) return -(osConstants.signals[e.signal] ?? 1);
    return e.code ?? 1;
  }

  /** Until every worker exited 0 (null), one failed (the failures, first observed first), or another node reported. */
  private async monitor(m: Membership): Promise<ProcessFailure[] | RoundEvent> {
    const failed: ProcessFailure[] = [];
    let resolveFirst!: () => void;
    const first = new Promise<void>((r) => (resolveFirst = r));
    const all = Promise.all(
      this.workers.map(async (w) => {
        const e = await w.exit;
        if (this.stopping) return;
        if (e.code === 0 && !e.signal) return;
        failed.push({ rank: w.rank, localRank: w.localRank, pid: w.proc.pid ?? -1, exitcode: Agent.exitcode(e), errorFile: w.errorFile, time: e.time });
        log(`failed (exitcode: ${Agent.exitcode(e)}) local_rank: ${w.localRank} (pid: ${w.proc.pid}) of ${this.cfg.script}`);
        resolveFirst();
      }),
    );
    let stopPolling = false;
    const remote = (async (): Promise<RoundEvent> => {
      for (;;) {
        await new Promise((r) => setTimeout(r, this.cfg.monitorIntervalMs));
        if (stopPolling) return null;
        if (this.signalled) return { kind: "failure", report: `the launcher received ${this.signalled}` };
        try {
          const ev = await this.rdzv.poll(m.round, m.nnodes);
          if (ev) return ev;
        } catch (e) {
          return { kind: "failure", report: `lost the rendezvous store: ${(e as Error).message}` };
        }
      }
    })();
    const winner = await Promise.race([all.then(() => "done" as const), first.then(() => "failed" as const), remote]);
    stopPolling = true;
    if (winner === "done") return failed.length ? failed : null;
    if (winner === "failed") {
      // failures observed together (within one monitor interval) are reported together, first one first
      await new Promise((r) => setTimeout(r, Math.min(100, this.cfg.monitorIntervalMs)));
      return [...failed].sort((a, b) => a.time - b.time);
    }
    return winner;
  }

  /** Stop every worker still running: SIGTERM, then SIGKILL after the grace period. */
  async stopWorkers(): Promise<void> {
    this.stopping = true;
    const live = this.workers.filter((w) => !w.exited);
    for (const w of live) {
      log(`Sending process ${w.proc.pid} closing signal SIGTERM`);
      killGroup(w.proc, "SIGTERM");
    }
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(live.map((w) => w.exit)), new Promise((r) => (grace = setTimeout(r, STOP_GRACE_MS)))]);
    clearTimeout(grace);
    for (const w of live)
      if (!w.exited) {
        log(`Sending process ${w.proc.pid} closing signal SIGKILL`);
        killGroup(w.proc, "SIGKILL");
      }
    await Promise.all(live.map((w) => w.exit));
    // the workers' own children (their process groups) go too
    for (const w of this.workers) killGroup(w.proc, "SIGKILL");
    this.stopping = false;
  }

  onSignal(sig: NodeJS.Signals): void {
    this.signalled = sig;
    for (const w of this.workers) if (!w.exited) killGroup(w.proc, sig);
  }

  async run(masterPort: number): Promise<number> {
    const { cfg } = this;
    let restarts = 0;
    for (let round = 0; ; ) {
      const m = await this.rdzv.join(round);
      if (m === "done") {
        log("the job finished before this node was admitted");
        return 0;
      }
      round = m.round;
      log(`round ${round}: node ${m.groupRank} of ${m.nnodes}, ranks ${m.rankOffset}..${m.rankOffset + cfg.nprocPerNode - 1} of ${m.worldSize}${restarts ? `, restart ${restarts}` : ""}`);
      this.spawnWorkers(m, restarts, masterPort);
      const result = await this.monitor(m);
      if (result === null) {
        if (m.nnodes === 1) {
          await this.rdzv.end(round, "done");
          return 0;
        }
        const ev = await this.rdzv.exitBarrier(round, m.nnodes, EXIT_BARRIER_MS, this.servesStore);
        if (!ev || ev.kind === "done") return 0;
        log(`another node failed after this node's workers finished:\n${ev.kind === "failure" ? ev.report : ev.kind}`);
        return 1;
      }
      let report: string | null = null;
      if (Array.isArray(result)) {
        report = formatChildFailed(cfg.script, result);
        await this.stopWorkers();
        await this.rdzv.reportFailure(round, report).catch(() => {});
      } else {
        await this.stopWorkers();
        if (result.kind === "membership") {
          log("a node is waiting to join: restarting the worker group with it");
          await this.rdzv.requestMembershipChange(round).catch(() => {});
          round++;
          continue;
        }
        if (result.kind === "failure") report = result.report;
      }
      if (this.signalled) {
        process.stderr.write(`${report ?? ""}\n`);
        return 1;
      }
      if (restarts < cfg.maxRestarts) {
        restarts++;
        log(`worker group failed; restarting (${restarts}/${cfg.maxRestarts})${Array.isArray(result) ? "" : ` (reported by another node)`}`);
        round++;
        continue;
      }
      process.stderr.write(`torchts.distributed.elastic.ChildFailedError: ${report ?? ""}\n`);
      return 1;
    }
  }
}

function killGroup(p: ChildProcess, sig: NodeJS.Signals): void {
  if (p.pid === undefined) return;
  try {
    process.kill(-p.pid, sig);
  } catch {
    try {
      p.kill(sig);
    } catch {
      /* already gone */
    }
  }
}

/** Serve the job's store when this node hosts it; resolves with the port (0 asks for a free one). */
async function maybeServe(cfg: RunConfig): Promise<{ server: StoreServer | null; port: number }> {
  const hostsStatic = cfg.rdzvBackend === "static" && cfg.nodeRank === 0;
  const hostsC10d = cfg.rdzvBackend === "c10d" && isLocal(cfg.rdzvHost);
  if (!hostsStatic && !hostsC10d) return { server: null, port: cfg.rdzvPort };
  const server = new StoreServer();
  const bind = isLocal(cfg.rdzvHost) && cfg.rdzvHost !== hostname() ? cfg.rdzvHost : "::";
  try {
    return { server, port: await server.listen(bind, cfg.rdzvPort) };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    // c10d: another launcher on this host got there first and serves it
    if (hostsC10d && err.code === "EADDRINUSE") return { server: null, port: cfg.rdzvPort };
    throw new Error(`could not serve the rendezvous store on ${cfg.rdzvHost}:${cfg.rdzvPort}: ${err.code ?? err.message}`, { cause: e });
  }
}

export async function main(argv: string[]): Promise<number> {
  let cfg: RunConfig | "help";
  try {
    cfg = parseRunArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`torchts run: ${e.message}\n${RUN_USAGE}\n`);
    return 2;
  }
  if (cfg === "help") {
    process.stdout.write(`${RUN_USAGE}\n`);
    return 0;
  }
  let server: StoreServer | null = null;
  let store: TCPStore | null = null;
  try {
    const served = await maybeServe(cfg);
    server = served.server;
    const port = served.port;
    store = new TCPStore(cfg.rdzvHost === "::" ? "127.0.0.1" : cfg.rdzvHost, port, { timeout: cfg.joinTimeoutMs });
    const rdzv = new Rendezvous(store, cfg, { nproc: cfg.nprocPerNode, host: hostname() });
    const agent = new Agent(cfg, store, rdzv, server !== null);
    const onSig = (s: NodeJS.Signals) => agent.onSignal(s);
    process.on("SIGINT", onSig);
    process.on("SIGTERM", onSig);
    try {
      return await agent.run(cfg.rdzvBackend === "static" ? port : cfg.masterPort || port);
    } finally {
      process.off("SIGINT", onSig);
      process.off("SIGTERM", onSig);
    }
  } catch (e) {
    process.stderr.write(`torchts run: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await store?.close();
    await server?.close();
  }
}
