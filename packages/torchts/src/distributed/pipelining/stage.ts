// PipelineStage (torch.distributed.pipelining): one stage of a model split across ranks (stage i
// runs on group rank i; ranks run different code: MPMD). A stage runs its submodule on each
// micro-batch: the first stage on the schedule's input, the others on activations received from
// the previous stage; backward sends the gradient of its input back. Tensors travel point to point
// as a small header (dims and dtype) and then the data; sends return at once (the communication
// thread holds the copy), receives are pending until read, so a schedule never waits on a send.
import { isGradEnabled } from "../../autograd/grad_mode.js";
import { DTYPES, type DType } from "../../ir/dtype.js";
import { Module } from "../../nn/module.js";
import { tensor, zeros } from "../../ops/creation.js";
import { Tensor } from "../../tensor.js";
import { isend, recv } from "../collectives.js";
import { DistError } from "../errors.js";
import { groupArg, type ProcessGroup } from "../process_group.js";

const HEADER = 10; // ndim, up to 8 dims, dtype index
const TAG_FWD = 0;
const TAG_BWD = 1;

interface MicroBatch {
  input: Tensor | null;
  output: Tensor;
}

export class PipelineStage {
  readonly group: ProcessGroup;
  private readonly cache = new Map<number, MicroBatch>();

  constructor(
    readonly submod: Module,
    readonly stageIndex: number,
    readonly numStages: number,
    readonly device = "cpu",
    opts: { group?: ProcessGroup | null } = {},
  ) {
    if (!(submod instanceof Module)) throw new TypeError("PipelineStage(): submodule must be an nn.Module");
    this.group = groupArg("PipelineStage", opts.group);
    if (!Number.isInteger(numStages) || numStages < 1 || numStages !== this.group.size())
      throw new DistError(`PipelineStage: numStages (${numStages}) must equal the group's size (${this.group.size()}): one stage per rank`);
    if (stageIndex !== this.group.rank()) throw new DistError(`PipelineStage: stage ${stageIndex} runs on group rank ${stageIndex}, but this is rank ${this.group.rank()}`);
    if (device !== "cpu") throw new DistError("PipelineStage: only the cpu device is supported");
  }

  get isFirst(): boolean {
    return this.stageIndex === 0;
  }
  get isLast(): boolean {
    return this.stageIndex === this.numStages - 1;
  }
  private peer(delta: number): number {
    return this.group.ranks[this.stageIndex + delta]!;
  }

  private send(t: Tensor, dst: number, tag: number): void {
    if (t.ndim > HEADER - 2) throw new DistError(`PipelineStage: a ${t.ndim}-d tensor cannot be sent (at most ${HEADER - 2} dims)`);
    const h = new Array<number>(HEADER).fill(0);
    h[0] = t.ndim;
    t.shape.forEach((s, i) => (h[i + 1] = s));
    h[HEADER - 1] = DTYPES.indexOf(t.dtype);
    isend(tensor(h, { dtype: "int64" }), dst, { group: this.group, tag });
    isend(t.detach().contiguous(), dst, { group: this.group, tag });
  }

  private receive(src: number, tag: number): Tensor {
    const h = zeros([HEADER], { dtype: "int64" });
    recv(h, src, { group: this.group, tag });
    const v = h._tolistSync() as number[];
    const shape = v.slice(1, 1 + v[0]!);
    const out = zeros(shape, { dtype: DTYPES[v[HEADER - 1]!] as DType });
    recv(out, src, { group: this.group, tag });
    return out;
  }

  /** @internal forward of micro-batch `mb`: `args` on the first stage; the output goes to the next stage. */
  forwardOne(mb: number, args: unknown[]): Tensor {
    let input: Tensor | null = null;
    if (!this.isFirst) {
      input = this.receive(this.peer(-1), TAG_FWD);
      if (isGradEnabled() && input.dtype.startsWith("float")) input.requiresGrad_();
      args = [input];
    }
    const output = (this.submod.forward as (...a: unknown[]) => unknown)(...args);
    if (!(output instanceof Tensor)) throw new DistError(`PipelineStage ${this.stageIndex}: the submodule must return one tensor`);
    if (!this.isLast) this.send(output, this.peer(1), TAG_FWD);
    this.cache.set(mb, { input, output });
    return output;
  }

  /** @internal backward of micro-batch `mb` (from `loss` on the last stage, else from the next stage's gradient). */
  backwardOne(mb: number, loss?: Tensor): void {
    const c = this.cache.get(mb);
    if (!c) throw new DistError(`PipelineStage ${this.stageIndex}: backward of micro-batch ${mb} before its forward`);
    this.cache.delete(mb);
    if (this.isLast) loss!.backward();
    else c.output.backward(this.receive(this.peer(1), TAG_BWD));
    if (!this.isFirst) {
      const g = c.input!.grad;
      this.send(g ?? zeros(c.input!.shape, { dtype: c.input!.dtype }), this.peer(-1), TAG_BWD);
    }
  }
}
