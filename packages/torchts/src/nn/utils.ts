// torch.nn.utils: gradient clipping and parameter/vector conversion.
import { noGrad } from "../autograd/grad_mode.js";
import { Tensor } from "../tensor.js";
import * as M from "../ops/math.js";
import * as R from "../ops/reduce.js";
import * as S from "../ops/shape_ops.js";
import { tensor } from "../ops/creation.js";

type Params = Tensor | Iterable<Tensor>;
const list = (p: Params): Tensor[] => (p instanceof Tensor ? [p] : [...p]);

/** Scale gradients in place so their joint norm is at most maxNorm; returns the total norm (before clipping). */
export function clipGradNorm_(
  parameters: Params,
  maxNorm: number,
  o: { normType?: number | "inf"; errorIfNonfinite?: boolean } = {},
): Tensor {
  const grads = list(parameters).map((p) => p.grad).filter((g): g is Tensor => g !== null);
  const normType = o.normType === "inf" ? Infinity : (o.normType ?? 2);
  return noGrad(() => {
    if (!grads.length) return tensor(0);
    const total =
      normType === Infinity
        ? R.amax(S.stack(grads.map((g) => R.amax(M.abs(g)))))
        : R.norm(S.stack(grads.map((g) => R.norm(g, normType))), normType);
    if (o.errorIfNonfinite) {
      const v = Number(total._contiguousHost()[0]);
      if (!Number.isFinite(v))
        throw new Error(
          `The total norm of order ${normType} for gradients from \`parameters\` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set \`error_if_nonfinite=False\``,
        );
    }
    const coef = M.clamp(M.div(maxNorm, M.add(total, 1e-6)), null, 1);
    // new tensors instead of g.mul_(): the engine may store expanded or shared (aliased) gradients
    for (const p of list(parameters)) if (p.grad) p.grad = M.mul(p.grad, coef.to(p.grad.dtype));
    return total;
  });
}

export function clipGradValue_(parameters: Params, clipValue: number): void {
  noGrad(() => {
    for (const p of list(parameters)) if (p.grad) p.grad = M.clamp(p.grad, -clipValue, clipValue);
  });
}

export function parametersToVector(parameters: Iterable<Tensor>): Tensor {
  return S.cat([...parameters].map((p) => S.reshape(p, [-1])));
}

export function vectorToParameters(vec: Tensor, parameters: Iterable<Tensor>): void {
  let off = 0;
  noGrad(() => {
    for (const p of parameters) {
      const n = p.numel();
      p.copy_(S.reshape(S.narrow(vec, 0, off, n), p.shape));
      off += n;
    }
  });
}
