// options.dynamic: a dim may vary within declared bounds; inputs are padded up to a bucket so
// every length in a bucket shares one compiled graph. The pad value is the caller's to choose
// so the padding is inert (e.g. ignore_index for targets: causal models never look ahead).
import { Tensor } from "../tensor.js";
import { pad } from "../nn/functional/misc.js";

export interface DynamicDim {
  /** Which positional argument (a tensor). */
  arg: number;
  dim: number;
  min: number;
  max: number;
  /** Sizes to pad up to (ascending, the last >= max); default powers of two from min up to max. */
  buckets?: number[];
  /** Value written into the padding (default 0). */
  padValue?: number;
}

export function bucketsOf(d: DynamicDim): number[] {
  if (d.buckets?.length) return [...d.buckets].sort((a, b) => a - b);
  const out: number[] = [];
  let b = 1;
  while (b < d.min) b *= 2;
  for (; b < d.max; b *= 2) out.push(b);
  out.push(d.max);
  return out;
}

export function padToBuckets(args: unknown[], dyn: readonly DynamicDim[], fnName: string): unknown[] {
  const out = [...args];
  for (const d of dyn) {
    const t = out[d.arg];
    if (!(t instanceof Tensor)) throw new TypeError(`torch.compile(${fnName}): dynamic arg ${d.arg} is not a tensor`);
    const dim = d.dim < 0 ? d.dim + t.ndim : d.dim;
    const n = t.shape[dim]!;
    if (n < d.min || n > d.max)
      throw new RangeError(`torch.compile(${fnName}): arg ${d.arg} dim ${d.dim} has size ${n}, outside the declared bounds [${d.min}, ${d.max}]`);
    const b = bucketsOf(d).find((x) => x >= n)!;
    if (b === n) continue;
    const pads: number[] = [];
    for (let k = t.ndim - 1; k >= 0; k--) pads.push(0, k === dim ? b - n : 0);
    out[d.arg] = pad(t, pads, { value: d.padValue ?? 0 });
  }
  return out;
}
