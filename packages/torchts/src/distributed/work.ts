// dist.Work: what an asyncOp collective returns. `await work.wait()` resolves when the operation
// finished (the output tensors hold the result); an output read before that waits for it anyway.
import type { Tensor } from "../tensor.js";
import type { Comm, PendingOp } from "./comm.js";
import { freshError } from "./errors.js";

export class Work {
  /** @internal */
  constructor(
    private readonly op: PendingOp | null,
    private readonly comm: Comm | null,
    private readonly outputs: Tensor[],
  ) {}

  /** Resolves true once the operation finished; rejects with its error. */
  async wait(_opts?: { timeout?: number }): Promise<true> {
    if (!this.op) return true;
    try {
      await this.op.promise;
    } catch (e) {
      this.comm!.observe(e as Error);
      throw freshError(e as Error);
    }
    return true;
  }

  isCompleted(): boolean {
    if (!this.op) return true;
    this.comm!.drain();
    return this.op.done;
  }

  isSuccess(): boolean {
    return this.isCompleted() && !this.op?.error;
  }

  /** The error the operation failed with, or null. */
  exception(): Error | null {
    this.isCompleted();
    return this.op?.error ?? null;
  }

  /** The output tensors once the operation finished. */
  async getFuture(): Promise<Tensor[]> {
    await this.wait();
    return this.outputs;
  }

  /** The output tensors (their values arrive with the operation). */
  result(): Tensor[] {
    return this.outputs;
  }

  /** Block this thread until the operation finished (wait() without giving up the event loop); throws its error. */
  synchronize(): void {
    if (!this.op) return;
    this.comm!.waitFor(this.op);
    if (this.op.error) {
      this.comm!.observe(this.op.error);
      throw freshError(this.op.error);
    }
  }
}
