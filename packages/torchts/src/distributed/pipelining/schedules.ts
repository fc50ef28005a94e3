// Pipeline schedules (torch.distributed.pipelining): split the batch into micro-batches (dim 0) and
// run them through the stages.
//   ScheduleGPipe: every micro-batch's forward, then every backward
//   Schedule1F1B:  (numStages - stage - 1) warm-up forwards, then one forward and one backward in
//                  turn, then the remaining backwards: at most numStages micro-batches in flight
// Every rank calls schedule.step(): the first stage with the inputs, the last with `target` (and
// `losses`, which receives each micro-batch's loss), the others with nothing. With scaleGrads (the
// default) each micro-batch's loss is divided by their number, so the gradients are those of the
// whole batch's mean loss.
import { DistError } from "../errors.js";
import { Tensor } from "../../tensor.js";
import type { PipelineStage } from "./stage.js";

export type LossFn = (output: Tensor, target: Tensor) => Tensor;

function split(t: unknown, n: number, what: string): unknown[] {
  if (!(t instanceof Tensor)) return Array<unknown>(n).fill(t);
  const rows = t.shape[0]!;
  if (rows < n) throw new DistError(`pipeline: ${what} has ${rows} rows, fewer than ${n} micro-batches`);
  const out: unknown[] = [];
  const c = Math.ceil(rows / n);
  for (let i = 0; i < n; i++) out.push(t.narrow(0, Math.min(rows, i * c), Math.max(0, Math.min(rows, (i + 1) * c) - i * c)));
  return out;
}

abstract class PipelineSchedule {
  constructor(
    readonly stage: PipelineStage,
    readonly nMicrobatches: number,
    readonly lossFn: LossFn | null = null,
    readonly scaleGrads = true,
  ) {
    if (!Number.isInteger(nMicrobatches) || nMicrobatches < 1) throw new TypeError("pipeline schedule: nMicrobatches must be a positive integer");
    if (stage.isLast && !lossFn) throw new DistError("pipeline schedule: the last stage needs a lossFn");
  }

  protected abstract order(): ("F" | "B")[];

  /** Run one step; `target` and `losses` on the last stage. Returns the last stage's output micro-batches. */
  step(...args: unknown[]): Tensor[] {
    const last = args.length ? args[args.length - 1] : undefined;
    const opts = last && typeof last === "object" && !(last instanceof Tensor) && !Array.isArray(last) ? (args.pop() as { target?: Tensor; losses?: Tensor[] }) : {};
    const { stage } = this;
    const M = this.nMicrobatches;
    if (stage.isFirst && !args.length) throw new DistError("pipeline schedule: the first stage's step() needs the inputs");
    const inputs = stage.isFirst ? args.map((a) => split(a, M, "an input")) : [];
    const targets = stage.isLast ? (opts.target ? split(opts.target, M, "target") : null) : null;
    if (stage.isLast && !targets) throw new DistError("pipeline schedule: the last stage's step() needs { target }");
    const outputs: Tensor[] = [];
    const losses: Tensor[] = [];
    let f = 0;
    let b = 0;
    for (const op of this.order()) {
      if (op === "F") {
        const out = stage.forwardOne(f, inputs.map((xs) => xs[f]));
        if (stage.isLast) {
          outputs.push(out);
          let loss = this.lossFn!(out, targets![f] as Tensor);
          losses.push(loss.detach());
          if (this.scaleGrads) loss = loss.div(M);
          this.pending.set(f, loss);
        }
        f++;
      } else {
        stage.backwardOne(b, this.pending.get(b));
        this.pending.delete(b);
        b++;
      }
    }
    if (opts.losses) opts.losses.push(...losses);
    return outputs;
  }
  private readonly pending = new Map<number, Tensor>();
}

export class ScheduleGPipe extends PipelineSchedule {
  protected order(): ("F" | "B")[] {
    return [...Array<"F">(this.nMicrobatches).fill("F"), ...Array<"B">(this.nMicrobatches).fill("B")];
  }
}

export class Schedule1F1B extends PipelineSchedule {
  protected order(): ("F" | "B")[] {
    const M = this.nMicrobatches;
    const warm = Math.min(this.stage.numStages - this.stage.stageIndex - 1, M);
    const out: ("F" | "B")[] = Array<"F">(warm).fill("F");
    for (let i = 0; i < M - warm; i++) out.push("F", "B");
    for (let i = 0; i < warm; i++) out.push("B");
    return out;
  }
}
