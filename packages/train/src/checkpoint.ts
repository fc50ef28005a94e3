// Training checkpoints: job.dump_folder/<checkpoint.folder>/step-N/ holds each writing rank's state
// (model, optimizer, lr scheduler, data loader, RNG, step) as rank<R>.pt, written atomically by
// torch.save, and a `.complete` marker written after every file is in place: a folder without it (a
// run killed mid-save) is never loaded. Async mode stages a copy of the state (clones of the tensors)
// and writes it while training goes on; the next save, and close(), wait for the write.
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "torchts";
import type { Tensor } from "torchts";
import { ConfigError } from "./config/parse.js";

export interface CheckpointOptions {
  folder: string;
  keepLatestK: number;
  async: boolean;
  rank: number;
  /** Whether this rank writes a file (data-parallel replicas hold the same state: only rank 0 does). */
  writes: boolean;
  /** Every rank's files of a step are written before the marker (a barrier with several ranks). */
  barrier?: () => Promise<void>;
}

/** Copies of every tensor in a state tree (what an async save writes while training changes the originals). */
function stage(x: unknown): unknown {
  if (x instanceof torch.Tensor) return (x as Tensor).detach().clone();
  if (x instanceof Map) return new Map([...x].map(([k, v]) => [k, stage(v)]));
  if (Array.isArray(x)) return x.map(stage);
  if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, stage(v)]));
  return x;
}

export class CheckpointManager {
  private pending: Promise<void> | null = null;
  constructor(readonly o: CheckpointOptions) {}

  dirFor(step: number): string {
    return join(this.o.folder, `step-${step}`);
  }

  /** Steps with a complete checkpoint, ascending. */
  steps(): number[] {
    if (!existsSync(this.o.folder)) return [];
    return readdirSync(this.o.folder)
      .map((d) => /^step-(\d+)$/.exec(d))
      .filter((m): m is RegExpExecArray => m !== null && existsSync(join(this.o.folder, m[0], ".complete")))
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  /** Which step to resume from: loadStep > 0 that one (an error naming the ones there are if absent), -1 the latest, 0 none. */
  resolveLoadStep(loadStep: number): number | null {
    const have = this.steps();
    if (loadStep === 0) return null;
    if (loadStep === -1) return have.length ? have[have.length - 1]! : null;
    if (!have.includes(loadStep))
      throw new ConfigError(`checkpoint.load_step = ${loadStep}: no complete checkpoint ${this.dirFor(loadStep)} (complete steps: ${have.length ? have.join(", ") : "none"})`);
    return loadStep;
  }

  /** Save `state` (returns once the state is staged in async mode, once written otherwise). */
  async save(step: number, state: Record<string, unknown>): Promise<void> {
    await this.wait(); // one write at a time, in step order
    const dir = this.dirFor(step);
    const staged = this.o.async ? (stage(state) as Record<string, unknown>) : state;
    const write = async () => {
      if (this.o.writes) {
        mkdirSync(dir, { recursive: true });
        await torch.save(staged, join(dir, `rank${this.o.rank}.pt`));
      }
      await this.o.barrier?.();
      if (this.o.rank === 0) {
        writeFileSync(join(dir, ".complete"), `${JSON.stringify({ step, time: new Date().toISOString() })}\n`);
        this.prune();
      }
    };
    if (this.o.async) this.pending = write();
    else await write();
  }

  /** Wait for an async write (errors surface here). */
  async wait(): Promise<void> {
    const p = this.pending;
    this.pending = null;
    if (p) await p;
  }

  /** The state saved by `rank` (or rank 0, whose state every replica shares) at `step`. */
  async load(step: number, rank: number): Promise<Record<string, unknown>> {
    const dir = this.dirFor(step);
    const own = join(dir, `rank${rank}.pt`);
    const path = existsSync(own) ? own : join(dir, "rank0.pt");
    return (await torch.load(path)) as Record<string, unknown>;
  }

  private prune(): void {
    const k = this.o.keepLatestK;
    if (k <= 0) return;
    const have = this.steps();
    for (const s of have.slice(0, Math.max(0, have.length - k))) rmSync(this.dirFor(s), { recursive: true, force: true });
  }
}
