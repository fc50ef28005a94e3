// Training checkpoints in job.dump_folder/<checkpoint.folder>/step-N/. Two backends:
//   dcp:  torchts.distributed.checkpoint (every rank writes its pieces, rank 0 commits `.metadata`
//         atomically; loads reshard): model and optimizer state keyed by parameter name
//         (getStateDict), plus the scheduler, data loader, RNG and step as plain values;
//   file: for a torchts without DCP: torch.save of the whole state to rank<R>.pt (atomic), then a
//         `.complete` marker once every rank's file is in place.
// Either way a step folder is loaded only when its commit marker exists: a run killed mid-save
// never resumes from a partial checkpoint. Async mode stages a copy of the state and writes it while
// training continues; the next save, and wait(), wait for the write.
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "torchts";
import type { Tensor } from "torchts";
import { ConfigError } from "./config/parse.js";

// torch.distributed, not the "torchts/distributed" entry: the repository CLI maps only "torchts" and
// "torchts/transformers" to the sources (@torchts/serve/cli's tsconfig), so another entry could load a
// second copy of torchts (its built dist/) whose Tensor class is not this one
const dist = torch.distributed;

export type CheckpointBackend = "dcp" | "file";

export interface CheckpointOptions {
  folder: string;
  keepLatestK: number;
  async: boolean;
  backend: CheckpointBackend;
  rank: number;
  /** file backend: whether this rank writes (data-parallel replicas hold the same state: rank 0 does). */
  writes: boolean;
  /** file backend: every rank's files are written before the marker (a barrier with several ranks). */
  barrier?: () => Promise<void>;
}

/** What a training checkpoint holds; tensors live in the model and optimizer entries. */
export interface TrainState {
  step: number;
  model: Map<string, Tensor> | Record<string, Tensor>;
  optimizer: unknown;
  lr_scheduler: Record<string, unknown>;
  dataloader: unknown;
  rng: unknown;
}

const MARKERS: Record<CheckpointBackend, string> = { dcp: ".metadata", file: ".complete" };

interface Dcp {
  save(sd: unknown, o: { checkpointId: string }): Promise<unknown>;
  asyncSave(sd: unknown, o: { checkpointId: string }): Promise<unknown>;
  load(sd: unknown, o: { checkpointId: string }): Promise<void>;
}
const dcp = (dist as unknown as { checkpoint?: Dcp }).checkpoint;

/** Copies of every tensor in a state tree (what an async file save writes while training changes the originals). */
function stage(x: unknown): unknown {
  if (x instanceof torch.Tensor) return (x as Tensor).detach().clone();
  if (x instanceof Map) return new Map([...x].map(([k, v]) => [k, stage(v)]));
  if (Array.isArray(x)) return x.map(stage);
  if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, stage(v)]));
  return x;
}

export class CheckpointManager {
  private pending: Promise<unknown> | null = null;
  constructor(readonly o: CheckpointOptions) {
    if (o.backend === "dcp" && !dcp) throw new Error("CheckpointManager: this torchts has no distributed.checkpoint (use the file backend)");
  }

  dirFor(step: number): string {
    return join(this.o.folder, `step-${step}`);
  }

  /** Steps with a committed checkpoint, ascending. */
  steps(): number[] {
    if (!existsSync(this.o.folder)) return [];
    return readdirSync(this.o.folder)
      .map((d) => /^step-(\d+)$/.exec(d))
      .filter((m): m is RegExpExecArray => m !== null && existsSync(join(this.o.folder, m[0], MARKERS[this.o.backend])))
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

  /** Save (returns once the state is staged in async mode, once committed otherwise). Collective with dcp. */
  async save(step: number, state: TrainState): Promise<void> {
    await this.wait(); // one write at a time, in step order
    const dir = this.dirFor(step);
    let write: () => Promise<unknown>;
    if (this.o.backend === "dcp") {
      const p = this.o.async ? dcp!.asyncSave(state, { checkpointId: dir }) : null; // asyncSave stages before returning
      write = async () => {
        await (p ?? dcp!.save(state, { checkpointId: dir }));
        if (this.o.rank === 0) this.prune();
      };
    } else {
      const staged = this.o.async ? (stage(state) as TrainState) : state;
      write = async () => {
        if (this.o.writes) {
          mkdirSync(dir, { recursive: true });
          await torch.save(staged, join(dir, `rank${this.o.rank}.pt`));
        }
        await this.o.barrier?.();
        if (this.o.rank === 0) {
          writeFileSync(join(dir, MARKERS.file), `${JSON.stringify({ step, time: new Date().toISOString() })}\n`);
          this.prune();
        }
      };
    }
    if (this.o.async) this.pending = write();
    else await write();
  }

  /** Wait for an async write (its errors surface here). */
  async wait(): Promise<void> {
    const p = this.pending;
    this.pending = null;
    if (p) await p;
  }

  /**
   * Fill `into` (the live state: the model's and optimizer's tensors are loaded in place with dcp) from
   * the checkpoint of `step`; returns the loaded state. The file backend returns rank 0's saved tree.
   */
  async load(step: number, into: TrainState): Promise<TrainState> {
    const dir = this.dirFor(step);
    if (this.o.backend === "dcp") {
      await dcp!.load(into, { checkpointId: dir });
      return into;
    }
    const own = join(dir, `rank${this.o.rank}.pt`);
    return (await torch.load(existsSync(own) ? own : join(dir, "rank0.pt"))) as TrainState;
  }

  private prune(): void {
    const k = this.o.keepLatestK;
    if (k <= 0) return;
    const have = this.steps();
    for (const s of have.slice(0, Math.max(0, have.length - k))) rmSync(this.dirFor(s), { recursive: true, force: true });
  }
}
