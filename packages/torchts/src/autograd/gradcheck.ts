// torch.autograd.gradcheck: compare analytic vector-Jacobian products with central
// finite differences, in float64.
import { Tensor } from "../tensor.js";
import { grad } from "./engine.js";
import { noGrad } from "./grad_mode.js";
import { fromHostData } from "../ops/core.js";

export interface GradcheckOptions {
  eps?: number;
  atol?: number;
  rtol?: number;
  raiseException?: boolean;
}

function flatOut(r: Tensor | Tensor[]): Tensor[] {
  return Array.isArray(r) ? r : [r];
}

export function gradcheck(fn: (...xs: Tensor[]) => Tensor | Tensor[], inputs: Tensor[], opts: GradcheckOptions = {}): boolean {
  const eps = opts.eps ?? 1e-6;
  const atol = opts.atol ?? 1e-5;
  const rtol = opts.rtol ?? 1e-3;
  const raise = opts.raiseException ?? true;
  for (const x of inputs)
    if (x.requiresGrad && x.dtype !== "float64")
      console.warn(`gradcheck: input is ${x.dtype}, not float64; the check may fail from rounding`);
  const diffIdx = inputs.map((x, i) => (x.requiresGrad ? i : -1)).filter((i) => i >= 0);
  const outs0 = flatOut(fn(...inputs)).filter((o) => o.dtype.startsWith("float"));
  const hostIn = inputs.map((x) => Array.from(x._contiguousHost()));
  const mk = (vals: number[][]) =>
    inputs.map((x, i) => {
      const t = fromHostData(vals[i]!, x.shape, x.dtype, x.device);
      if (x.requiresGrad) t.requiresGrad = true;
      return t;
    });
  for (let oi = 0; oi < outs0.length; oi++) {
    const n = outs0[oi]!.numel();
    for (let k = 0; k < n; k++) {
      // analytic row k of the Jacobian of output oi: grad of (onehot . out)
      const ins = mk(hostIn);
      const out = flatOut(fn(...ins)).filter((o) => o.dtype.startsWith("float"))[oi]!;
      const onehot = new Array<number>(n).fill(0);
      onehot[k] = 1;
      const gOut = fromHostData(onehot, out.shape, out.dtype, out.device);
      const diffIns = diffIdx.map((i) => ins[i]!);
      const an = out.requiresGrad ? grad([out], diffIns, { gradOutputs: [gOut], allowUnused: true }) : diffIns.map(() => null);
      diffIdx.forEach((i, j) => {
        const a = an[j] ? Array.from(an[j]!._contiguousHost()) : new Array<number>(inputs[i]!.numel()).fill(0);
        for (let e = 0; e < inputs[i]!.numel(); e++) {
          const plus = hostIn.map((v) => [...v]);
          const minus = hostIn.map((v) => [...v]);
          plus[i]![e]! += eps;
          minus[i]![e]! -= eps;
          const fp = noGrad(() => flatOut(fn(...mk(plus))).filter((o) => o.dtype.startsWith("float"))[oi]!._contiguousHost()[k]!);
          const fm = noGrad(() => flatOut(fn(...mk(minus))).filter((o) => o.dtype.startsWith("float"))[oi]!._contiguousHost()[k]!);
          const num = (fp - fm) / (2 * eps);
          const ana = a[e]!;
          if (!(Math.abs(num - ana) <= atol + rtol * Math.abs(num)) && !(Number.isNaN(num) && Number.isNaN(ana))) {
            if (!raise) return false;
            throw new Error(
              `gradcheck: Jacobian mismatch for output ${oi} with respect to input ${i},\nnumerical:${num}\nanalytical:${ana}\n(at output element ${k}, input element ${e})`,
            );
          }
        }
      });
    }
  }
  return true;
}
