// Constant folding for the converters: a node whose tensor inputs are all state or constants
// and whose arguments involve no dynamic dim is computed once with torchts (the interpreter's
// core ops), so the files store batch-norm scales, transposed weights and static masks as data
// instead of ops. Values are folded on demand, so a converter that wants the unfolded form (the
// weight under a transpose, for a fully-connected op) simply asks for the input instead.
import type { Tensor } from "../tensor.js";
import { noGrad } from "../autograd/grad_mode.js";
import { withEagerMode } from "../runtime/mode.js";
import { CORE_OPS, type CoreOp } from "./core.js";
import { argNumber, type Arg, type Node } from "./graph.js";
import type { ExportedProgram } from "./program.js";

/** Folding must not blow a small constant up into a large one (an expand or a broadcast). */
const GROWTH = 4;
const SMALL = 1 << 16;

export class Folder {
  readonly producer = new Map<number, Node>();
  private readonly placeholder = new Map<number, Tensor>();
  private readonly memo = new Map<number, Tensor | null>();

  constructor(readonly ep: ExportedProgram) {
    for (const n of ep.graph.nodes) for (const o of n.outs) this.producer.set(o, n);
    for (const i of ep.graph.inputs) if (i.kind !== "user_input") this.placeholder.set(i.value, ep.tensorOf(i)!);
  }

  numel(v: number): number | null {
    let n = 1;
    for (const d of this.ep.graph.values[v]!.shape) {
      if (typeof d !== "number") return null;
      n *= d;
    }
    return n;
  }

  /** The value's contents if it is a constant (folding its producer), else null. */
  constant(v: number): Tensor | null {
    const p = this.placeholder.get(v);
    if (p) return p;
    if (this.memo.has(v)) return this.memo.get(v)!;
    this.memo.set(v, null); // a cycle cannot happen in a DAG, but do not recurse twice
    const n = this.producer.get(v);
    const r = n ? this.fold(n) : null;
    this.memo.set(v, r);
    return r;
  }

  isConstant(v: number): boolean {
    return this.constant(v) !== null;
  }

  private fold(n: Node): Tensor | null {
    const out = this.numel(n.outs[0]!);
    if (out === null) return null;
    let inSize = 0;
    const ins: Tensor[] = [];
    const dec = (a: Arg): unknown => {
      if ("v" in a) {
        const t = this.constant(a.v);
        if (!t) throw FOLD_FAIL;
        inSize += t.numel();
        ins.push(t);
        return t;
      }
      if ("vs" in a) return a.vs.map((v) => dec({ v }));
      if ("s" in a) throw FOLD_FAIL;
      if ("l" in a) return a.l.map(dec);
      if ("k" in a) return a.k;
      return argNumber(a);
    };
    let args: unknown[];
    try {
      args = n.args.map(dec);
    } catch (e) {
      if (e === FOLD_FAIL) return null;
      throw e;
    }
    if (out > SMALL && out > GROWTH * inSize) return null;
    return withEagerMode("strict", () => noGrad(() => (CORE_OPS[n.op as CoreOp] as (...a: unknown[]) => Tensor)(...args).contiguous()));
  }
}

const FOLD_FAIL = new Error("not constant");
