// Shared by the parallelism workers (ddp, checkpoint, fsdp, dtensor): each rank runs the same named
// checks in the same order (a failed assertion must not leave a rank behind in a collective), then
// prints one `RESULT <rank> [{ name, ok, detail }]` line for run_checks.ts to read.
import type { Tensor } from "../../../src/index.js";

interface Trainable {
  forward(x: Tensor, y: Tensor): { loss?: Tensor | null };
  namedParameters(): Iterable<[string, Tensor]>;
}

/**
 * The single-process reference the parallel runs must equal: one forward/backward per batch on
 * the whole batch, then `step` (the optimizer step and zeroGrad, plus whatever the run does
 * around it). Returns the losses and the final parameters by name.
 */
export async function referenceRun<M extends Trainable>(model: M, batches: Tensor[], xy: (d: Tensor) => [Tensor, Tensor], step: () => void): Promise<{ losses: number[]; params: Map<string, Tensor> }> {
  const losses: number[] = [];
  for (const d of batches) {
    const loss = model.forward(...xy(d)).loss!;
    loss.backward();
    step();
    losses.push(await loss.item());
  }
  return { losses, params: new Map(model.namedParameters()) };
}

const results: { name: string; ok: boolean; detail?: string }[] = [];

export async function check(name: string, fn: () => unknown): Promise<void> {
  try {
    await fn();
    results.push({ name, ok: true });
  } catch (e) {
    results.push({ name, ok: false, detail: (e as Error).stack ?? String(e) });
  }
}

export function report(rank: number): void {
  console.log(`RESULT ${rank} ${JSON.stringify(results)}`);
}

/** Elementwise |a - b| <= atol + rtol |b| (torch.allclose); throws naming the worst element. */
export async function assertClose(a: Tensor, b: Tensor, what: string, rtol = 1e-5, atol = 0): Promise<void> {
  if (a.shape.join() !== b.shape.join()) throw new Error(`${what}: shape [${a.shape}] vs [${b.shape}]`);
  const x = await a.data();
  const y = await b.data();
  let worst = -1;
  let excess = 0;
  for (let i = 0; i < x.length; i++) {
    const e = Math.abs(x[i]! - y[i]!) - (atol + rtol * Math.abs(y[i]!));
    if (!(e <= excess)) {
      excess = Number.isNaN(e) ? Infinity : e;
      worst = i;
    }
  }
  if (worst >= 0) throw new Error(`${what}: element ${worst} is ${x[worst]} vs ${y[worst]} (beyond rtol ${rtol}, atol ${atol})`);
}
