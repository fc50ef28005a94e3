// Packed sequences from a token stream, TorchTitan's way: the stream is cut into windows of
// seq_len + 1 tokens (input = window[:-1], labels = window[1:]), no padding and no document masking.
// The order is a seeded permutation of the windows, a new one per epoch (seed + epoch). One optimizer
// step takes global_batch_size windows; micro-batch m of data-parallel rank r reads the slice
// (m * dp + r) * local .. + local of them, so any dp x accumulation split of the same global batch sees
// the same windows. The state (epoch, cursor) is all a checkpoint needs to resume the exact order.
import * as torch from "torchts";
import type { Tensor } from "torchts";

export interface LoaderOptions {
  seqLen: number;
  /** Sequences per rank per micro-batch. */
  localBatchSize: number;
  /** Micro-batches per optimizer step (gradient accumulation). */
  accumulation: number;
  dpRank: number;
  dpDegree: number;
  seed: number;
  device?: string;
}

export interface LoaderState {
  epoch: number;
  /** Windows of this epoch's order consumed by earlier steps. */
  cursor: number;
}

export interface Batch {
  /** [local, seqLen] int64 per micro-batch */
  inputs: Tensor[];
  labels: Tensor[];
  /** Tokens this rank trains on in the step. */
  tokens: number;
}

export class PackedLoader {
  readonly windows: number;
  readonly globalBatch: number;
  private order: Int32Array | null = null;
  state: LoaderState = { epoch: 0, cursor: 0 };

  constructor(readonly tokens: Uint32Array, readonly o: LoaderOptions) {
    this.windows = Math.floor(tokens.length / (o.seqLen + 1));
    this.globalBatch = o.localBatchSize * o.dpDegree * o.accumulation;
    if (o.dpRank < 0 || o.dpRank >= o.dpDegree) throw new RangeError(`PackedLoader: dpRank ${o.dpRank} is outside [0, ${o.dpDegree})`);
    if (this.windows < this.globalBatch)
      throw new RangeError(
        `the dataset has ${tokens.length} tokens: ${this.windows} sequences of ${o.seqLen + 1}, fewer than one global batch of ${this.globalBatch} (lower training.seq_len or the batch size)`,
      );
  }

  /** Steps per pass over the data. */
  get stepsPerEpoch(): number {
    return Math.floor(this.windows / this.globalBatch);
  }

  private async orderFor(epoch: number): Promise<Int32Array> {
    const g = new torch.Generator().manualSeed(this.o.seed * 1000003 + epoch);
    const perm = (await torch.randperm(this.windows, { generator: g, dtype: "int64" }).tolist()) as number[];
    return Int32Array.from(perm);
  }

  loadState(s: LoaderState): void {
    if (!Number.isSafeInteger(s.epoch) || !Number.isSafeInteger(s.cursor) || s.epoch < 0 || s.cursor < 0 || s.cursor > this.windows)
      throw new RangeError(`PackedLoader.loadState: invalid state ${JSON.stringify(s)}`);
    this.state = { ...s };
    this.order = null;
  }

  /** The next step's micro-batches for this rank. */
  async next(): Promise<Batch> {
    if (this.state.cursor + this.globalBatch > this.windows) this.state = { epoch: this.state.epoch + 1, cursor: 0 };
    if (!this.order || this.state.cursor === 0) this.order = await this.orderFor(this.state.epoch);
    const { seqLen: T, localBatchSize: B, dpDegree: dp, dpRank: r, accumulation } = this.o;
    const inputs: Tensor[] = [];
    const labels: Tensor[] = [];
    for (let m = 0; m < accumulation; m++) {
      const x = new Int32Array(B * T);
      const y = new Int32Array(B * T);
      const first = this.state.cursor + (m * dp + r) * B;
      for (let b = 0; b < B; b++) {
        const start = this.order[first + b]! * (T + 1);
        for (let t = 0; t < T; t++) {
          x[b * T + t] = this.tokens[start + t]!;
          y[b * T + t] = this.tokens[start + t + 1]!;
        }
      }
      const dev = this.o.device ?? "cpu";
      inputs.push(torch.tensor(x, { dtype: "int32" }).to("int64").reshape(B, T).to(dev));
      labels.push(torch.tensor(y, { dtype: "int32" }).to("int64").reshape(B, T).to(dev));
    }
    this.state = { epoch: this.state.epoch, cursor: this.state.cursor + this.globalBatch };
    return { inputs, labels, tokens: accumulation * B * T };
  }
}
