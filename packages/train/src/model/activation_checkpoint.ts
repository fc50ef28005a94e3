// torch.utils.checkpoint for torchts (which has none yet): run a function without keeping its
// activations for backward, and recompute them when backward reaches it. The recompute replays the
// forward's RNG state and autocast region, so the recomputed values are the forward's; the gradients of
// the parameters the function uses are accumulated by a nested backward (PyTorch's reentrant variant),
// so their post-accumulate-grad hooks (DDP's) fire as usual.
import * as torch from "torchts";
import type { Tensor } from "torchts";

type Fn = (...args: any[]) => Tensor;

interface Ctx {
  run: Fn;
  args: unknown[];
  rng: ReturnType<typeof torch.getRngState> | null;
  autocast: { device: string; dtype: torch.DType } | null;
}

class CheckpointFunction extends torch.autograd.Function {
  static override forward(ctx: torch.autograd.FunctionCtx, run: unknown, preserveRng: unknown, ...args: unknown[]): Tensor {
    const first = args.find((a): a is Tensor => a instanceof torch.Tensor);
    const device = first?.device ?? "cpu";
    const dtype = torch.amp.getAutocastDtype(device);
    const c: Ctx = { run: run as Fn, args, rng: preserveRng ? torch.getRngState() : null, autocast: dtype ? { device, dtype } : null };
    ctx.checkpoint = c;
    const out = (run as Fn)(...args);
    if (!(out instanceof torch.Tensor)) throw new TypeError("checkpoint: the checkpointed function must return one tensor");
    return out;
  }

  static override backward(ctx: torch.autograd.FunctionCtx, g: Tensor): (Tensor | null)[] {
    const c = ctx.checkpoint as Ctx;
    const inputs = c.args.map((a) => (a instanceof torch.Tensor ? a.detach().requiresGrad_(a.requiresGrad) : a));
    const outer = c.rng ? torch.getRngState() : null;
    if (c.rng) torch.setRngState(c.rng);
    let out: Tensor;
    try {
      const rerun = () => torch.enableGrad(() => c.run(...inputs));
      out = c.autocast ? torch.autocast(c.autocast.device, rerun, { dtype: c.autocast.dtype }) : rerun();
    } finally {
      if (outer) torch.setRngState(outer);
    }
    if (out.requiresGrad) torch.autograd.backward(out, g);
    // [run, preserveRng, ...args]: no gradient for the first two
    return [null, null, ...inputs.map((a) => (a instanceof torch.Tensor && a.requiresGrad ? a.grad : null))];
  }
}

/** torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=True, preserve_rng_state=True). */
export function checkpoint(fn: Fn, args: unknown[], opts: { preserveRngState?: boolean } = {}): Tensor {
  if (!torch.isGradEnabled() || !args.some((a) => a instanceof torch.Tensor && a.requiresGrad)) {
    // nothing to differentiate through an input: reentrant checkpoint would drop the parameters'
    // gradients (PyTorch warns), so run it plainly
    return fn(...args);
  }
  return CheckpointFunction.apply<Tensor>(fn, opts.preserveRngState ?? true, ...args);
}

interface Layered {
  model: { layers: { children(): Iterable<torch.nn.Module> } };
}

/**
 * Wrap the forward of every `every`-th decoder layer (1 = all: TorchTitan's "full"; N: its
 * layer-based "selective") in checkpoint(). Returns how many layers were wrapped.
 */
export function applyActivationCheckpointing(model: Layered, every: number): number {
  let n = 0;
  [...model.model.layers.children()].forEach((layer, i) => {
    if ((i + 1) % every !== 0) return; // TorchTitan's count: every=2 wraps the 2nd, 4th, ... layers
    const inner = layer.forward.bind(layer) as Fn;
    (layer as { forward: Fn }).forward = (...a: unknown[]) => checkpoint(inner, a);
    n++;
  });
  return n;
}
