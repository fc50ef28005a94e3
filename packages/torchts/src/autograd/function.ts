// torch.autograd.Function: user-defined forward/backward.
import { Tensor } from "../tensor.js";
import { isGradEnabled, noGrad } from "./grad_mode.js";
import { Node } from "./node.js";
import { edgeOf } from "../ops/core.js";
import { _detach as detach } from "../ops/shape_ops.js";

export class FunctionCtx {
  _saved: Tensor[] = [];
  [k: string]: unknown;
  saveForBackward(...ts: Tensor[]): void {
    this._saved = ts;
  }
  savedTensors: Tensor[] = [];
  needsInputGrad: boolean[] = [];
}

/**
 * class MyExp extends torch.autograd.Function {
 *   static forward(ctx, x) { const y = x.exp(); ctx.saveForBackward(y); return y; }
 *   static backward(ctx, g) { const [y] = ctx.savedTensors; return g.mul(y); }
 * }
 * MyExp.apply(x)
 */
export class Function {
  static forward(_ctx: FunctionCtx, ..._args: unknown[]): Tensor | Tensor[] {
    throw new Error("autograd.Function subclasses must implement static forward(ctx, ...args)");
  }
  static backward(_ctx: FunctionCtx, ..._grads: Tensor[]): (Tensor | null | undefined) | (Tensor | null | undefined)[] {
    throw new Error("autograd.Function subclasses must implement static backward(ctx, ...grads)");
  }
  static apply<T extends Tensor | Tensor[]>(this: typeof Function, ...args: unknown[]): T {
    const ctx = new FunctionCtx();
    const tensorArgs = args.map((a) => (a instanceof Tensor ? a : null));
    ctx.needsInputGrad = tensorArgs.map((t) => !!t?.requiresGrad);
    const raw = noGrad(() => this.forward(ctx, ...args));
    const outs = (Array.isArray(raw) ? raw : [raw]).map((o) => (tensorArgs.includes(o) ? detach(o) : o));
    if (!isGradEnabled() || !tensorArgs.some((t) => t?.requiresGrad)) return (Array.isArray(raw) ? outs : outs[0]) as T;
    const cls = this;
    const node = new Node(
      `${cls.name}Backward`,
      tensorArgs.map((t) => (t && t.requiresGrad ? edgeOf(t) : null)),
      ctx._saved,
      (grads, saved) => {
        ctx.savedTensors = saved;
        const r = cls.backward(ctx, ...(grads as Tensor[]));
        const arr = Array.isArray(r) ? r : [r];
        return tensorArgs.map((_, i) => arr[i] ?? null);
      },
      outs.map((o) => ({ shape: [...o.shape], dtype: o.dtype, device: o.device })),
    );
    node.userCode = true;
    outs.forEach((o, i) => {
      o.gradFn = node;
      o._outputNr = i;
    });
    return (Array.isArray(raw) ? outs : outs[0]) as T;
  }
}
