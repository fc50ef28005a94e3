// Pooling: max/avg pooling as padded sliding windows reduced over the window dims, and
// adaptive average pooling as products with constant averaging matrices.
import { shapeStr } from "../../ir/shape.js";
import type { Tensor } from "../../tensor.js";
import { gather } from "../../ops/core.js";
import { op, type Sig } from "../../ops/registry.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { arange } from "../../ops/creation.js";
import { matmul } from "../../ops/linalg.js";
import { constTensor, hostArray, ntuple, windows, type IntOrTuple } from "./util.js";

export interface MaxPoolOpts {
  kernelSize?: IntOrTuple;
  stride?: IntOrTuple | null;
  padding?: IntOrTuple;
  dilation?: IntOrTuple;
  ceilMode?: boolean;
  returnIndices?: boolean;
}
export interface AvgPoolOpts {
  kernelSize?: IntOrTuple;
  stride?: IntOrTuple | null;
  padding?: IntOrTuple;
  ceilMode?: boolean;
  countIncludePad?: boolean;
  divisorOverride?: number | null;
}

interface Geometry {
  k: number[];
  s: number[];
  p: number[];
  d: number[];
  out: number[];
  pads: [number, number][];
}

/** PyTorch's pooling output size (pooling_output_shape) and the padding that realizes it. */
function geometry(x: Tensor, nd: number, kernel: number[], stride: number[] | null, padding: number[], dilation: number[], ceil: boolean): Geometry {
  const k = ntuple(kernel, nd, "kernel_size");
  const s = stride === null || stride.length === 0 ? k : ntuple(stride, nd, "stride");
  const p = ntuple(padding, nd, "padding");
  const d = ntuple(dilation, nd, "dilation");
  const dims = nd === 1 ? ["W"] : nd === 2 ? ["H", "W"] : ["T", "H", "W"];
  const list = (v: number[], pre: string) => v.map((e, i) => `${pre}${dims[i]}: ${e}`).join(" ");
  if (s.some((v) => v === 0)) throw new Error("stride should not be zero");
  if (k.some((v) => v <= 0)) throw new Error(`kernel size should be greater than zero, but got ${list(k, "k")}`);
  if (s.some((v) => v < 0)) throw new Error(`stride should be greater than zero, but got ${list(s, "d")}`);
  if (d.some((v) => v <= 0)) throw new Error(`dilation should be greater than zero, but got ${list(d, "dilation")}`);
  if (p.some((v) => v < 0)) throw new Error(`pad must be non-negative, but got pad: ${p.find((v) => v < 0)}`);
  const sp = x.shape.slice(x.ndim - nd);
  const out: number[] = [];
  const pads: [number, number][] = [];
  for (let i = 0; i < nd; i++) {
    const eff = d[i]! * (k[i]! - 1) + 1;
    // PyTorch bounds the padding by half the kernel, not the dilated (effective) one
    if (p[i]! > Math.floor(k[i]! / 2)) throw new RangeError(`pad should be at most half of kernel size, but got pad=${p[i]} and kernel_size=${k[i]}`);
    const n = sp[i]!;
    let o = Math.floor((n + 2 * p[i]! - eff + (ceil ? s[i]! - 1 : 0)) / s[i]!) + 1;
    if (ceil && (o - 1) * s[i]! >= n + p[i]!) o--;
    out.push(o);
    const need = (o - 1) * s[i]! + eff;
    pads.push([p[i]!, Math.max(0, need - n - p[i]!)]);
  }
  if (out.some((o) => o < 1))
    throw new RangeError(
      `Given input size: (${x.shape.slice(x.ndim - nd - 1).join("x")}). Calculated output size: (${[x.shape[x.ndim - nd - 1], ...out].join("x")}). Output size is too small`,
    );
  return { k, s, p, d, out, pads };
}

/** Bring [*, C, *sp] to [B, C, *sp] (B = 1 for unbatched) for the window helper. */
function asBatched(x: Tensor, nd: number): [Tensor, (y: Tensor) => Tensor] {
  if (x.ndim === nd + 2) return [x, (y) => y];
  if (x.ndim === nd + 1) return [S.unsqueeze(x, 0), (y) => S.squeeze(y, 0)];
  throw new RangeError(`Expected ${nd + 1}D or ${nd + 2}D (batch mode) tensor for input, but got input of size: ${shapeStr(x.shape)}`);
}

function maxPoolNd(
  nd: number, x0: Tensor, kernelSize: number[], stride: number[] | null, padding: number[], dilation: number[], ceilMode: boolean, returnIndices: boolean,
): Tensor | [Tensor, Tensor] {
  const [x, unb] = asBatched(x0, nd);
  const g = geometry(x, nd, kernelSize, stride, padding, dilation, ceilMode);
  const win = windows(x, g.k, g.s, g.d, g.pads, -Infinity); // [N, C, *o, *k]
  const lead = win.shape.slice(0, 2 + nd);
  const flat = S.reshape(win, [...lead, -1]);
  // gradient to the first maximum of each window only, as PyTorch
  const idx = R.argmax(flat, -1, true);
  const val = unb(S.squeeze(gather(flat, flat.ndim - 1, idx), -1));
  if (!returnIndices) return val;
  // flat input index of the chosen element: sum_i (o_i*s_i - p_i + kk_i*d_i) * stride_i
  let rem = S.squeeze(idx, -1);
  const coords: Tensor[] = new Array<Tensor>(nd);
  for (let i = nd - 1; i >= 0; i--) {
    coords[i] = M.remainder(rem, g.k[i]!);
    rem = M.floorDivide(rem, g.k[i]!);
  }
  const sp = x.shape.slice(2);
  let pos: Tensor | null = null;
  let mul = 1;
  for (let i = nd - 1; i >= 0; i--) {
    const oshape = g.out.map((o, j) => (j === i ? o : 1));
    const base = S.reshape(M.sub(M.mul(arange(g.out[i]!, { device: x.device }), g.s[i]!), g.p[i]!), oshape);
    const c = M.add(base, M.mul(coords[i]!, g.d[i]!));
    pos = pos ? M.add(pos, M.mul(c, mul)) : M.mul(c, mul);
    mul *= sp[i]!;
  }
  return [val, unb(pos!)];
}

type MaxPoolSig<R> = Sig<
  [input: Tensor, kernelSize: IntOrTuple, stride?: IntOrTuple | null, padding?: IntOrTuple, dilation?: IntOrTuple, ceilMode?: boolean, returnIndices?: boolean],
  MaxPoolOpts,
  R
>;
const maxPoolSchema = (name: string, nd: number) =>
  `${name}(Tensor input, int[${nd}] kernelSize, int[${nd}]? stride=None, int[${nd}] padding=0, int[${nd}] dilation=1, bool ceilMode=False, bool returnIndices=False) -> Tensor`;
type MaxPoolImpl = (x: Tensor, k: number[], s: number[] | null, p: number[], d: number[], ceil: boolean, ri: boolean) => Tensor | [Tensor, Tensor];
const maxPoolImpl = (nd: number): MaxPoolImpl => (x, k, s, p, d, ceil, ri) => maxPoolNd(nd, x, k, s, p, d, ceil, ri);
/**
 * F.max_pool1d/2d/3d. With returnIndices=true the result is [values, flat spatial indices] (PyTorch's
 * tuple); the TypeScript type says Tensor, so use maxPool2dWithIndices for the typed pair.
 */
export const maxPool1d = op<MaxPoolSig<Tensor>>(maxPoolSchema("maxPool1d", 1), maxPoolImpl(1));
export const maxPool2d = op<MaxPoolSig<Tensor>>(maxPoolSchema("maxPool2d", 2), maxPoolImpl(2));
export const maxPool3d = op<MaxPoolSig<Tensor>>(maxPoolSchema("maxPool3d", 3), maxPoolImpl(3));
/** F.max_pool2d_with_indices: [values, flat spatial indices (int64)] whatever returnIndices says, as PyTorch. */
export const maxPool2dWithIndices = op<MaxPoolSig<[Tensor, Tensor]>>(
  maxPoolSchema("maxPool2dWithIndices", 2).replace("-> Tensor", "-> (Tensor, Tensor)"),
  (x: Tensor, k: number[], s: number[] | null, p: number[], d: number[], ceil: boolean) => maxPoolNd(2, x, k, s, p, d, ceil, true),
);

/** Per-dim window sizes used as the divisor (PyTorch's avg_pool divide_factor). */
function divisorAlong(n: number, o: number, k: number, s: number, p: number, includePad: boolean): number[] {
  const r: number[] = [];
  for (let i = 0; i < o; i++) {
    let a = i * s - p;
    let b = Math.min(a + k, n + p);
    const withPad = b - a;
    a = Math.max(a, 0);
    b = Math.min(b, n);
    r.push(includePad ? withPad : b - a);
  }
  return r;
}

function avgPoolNd(
  nd: number, x0: Tensor, kernelSize: number[], stride: number[] | null, padding: number[], ceilMode: boolean, countIncludePad: boolean,
  divisorOverride: number | null,
): Tensor {
  if (divisorOverride === 0) throw new Error("divisor must be not zero");
  const [x, unb] = asBatched(x0, nd);
  const g = geometry(x, nd, kernelSize, stride, padding, [1], ceilMode);
  const win = windows(x, g.k, g.s, g.d, g.pads, 0);
  const axes = g.k.map((_, i) => 2 + nd + i);
  const sum = R.sum(win, axes);
  if (divisorOverride !== null) return unb(M.div(sum, divisorOverride));
  const include = countIncludePad;
  const per = g.out.map((o, i) => divisorAlong(x.shape[2 + i]!, o, g.k[i]!, g.s[i]!, g.p[i]!, include));
  const n = per.reduce((a, b) => a * b.length, 1);
  const div = new Array<number>(n);
  for (let f = 0; f < n; f++) {
    let rem = f;
    let v = 1;
    for (let i = nd - 1; i >= 0; i--) {
      v *= per[i]![rem % per[i]!.length]!;
      rem = Math.floor(rem / per[i]!.length);
    }
    div[f] = v;
  }
  return unb(M.div(sum, constTensor(div, g.out, x.dtype, x.device)));
}

type AvgPool1dSig = Sig<
  [input: Tensor, kernelSize: IntOrTuple, stride?: IntOrTuple | null, padding?: IntOrTuple, ceilMode?: boolean, countIncludePad?: boolean],
  Omit<AvgPoolOpts, "divisorOverride">,
  Tensor
>;
type AvgPoolSig = Sig<
  [
    input: Tensor, kernelSize: IntOrTuple, stride?: IntOrTuple | null, padding?: IntOrTuple, ceilMode?: boolean, countIncludePad?: boolean,
    divisorOverride?: number | null,
  ],
  AvgPoolOpts,
  Tensor
>;
export const avgPool1d = op<AvgPool1dSig>(
  "avgPool1d(Tensor input, int[1] kernelSize, int[1]? stride=None, int[1] padding=0, bool ceilMode=False, bool countIncludePad=True) -> Tensor",
  (x: Tensor, k: number[], s: number[] | null, p: number[], ceil: boolean, include: boolean) => avgPoolNd(1, x, k, s, p, ceil, include, null),
);
const avgPoolSchema = (nd: number) =>
  `avgPool${nd}d(Tensor input, int[${nd}] kernelSize, int[${nd}]? stride=None, int[${nd}] padding=0, bool ceilMode=False, bool countIncludePad=True, int? divisorOverride=None) -> Tensor`;
const avgPoolImpl = (nd: number) => (x: Tensor, k: number[], s: number[] | null, p: number[], ceil: boolean, include: boolean, div: number | null) =>
  avgPoolNd(nd, x, k, s, p, ceil, include, div);
export const avgPool2d = op<AvgPoolSig>(avgPoolSchema(2), avgPoolImpl(2));
export const avgPool3d = op<AvgPoolSig>(avgPoolSchema(3), avgPoolImpl(3));

/** [out, in] matrix averaging window i = [floor(i*in/out), ceil((i+1)*in/out)). */
function adaptiveMatrix(n: number, o: number): Float64Array {
  const a = hostArray(o * n, "the [out, in] averaging matrix");
  for (let i = 0; i < o; i++) {
    const s = Math.floor((i * n) / o);
    const e = Math.ceil(((i + 1) * n) / o);
    for (let j = s; j < e; j++) a[i * n + j] = 1 / (e - s);
  }
  return a;
}

/** Adaptive average pooling over the last nd dims of a [C, *sp] or [N, C, *sp] input; a null size keeps that dim. */
export function adaptiveAvgNd(nd: number, op: string, x: Tensor, sizes: readonly (number | null)[]): Tensor {
  if (x.ndim !== nd + 1 && x.ndim !== nd + 2) throw new RangeError(`${op}(): Expected ${nd + 1}D or ${nd + 2}D tensor, but got ${shapeStr(x.shape)}`);
  if (sizes.length !== nd) throw new RangeError(`${op}(): output_size must have ${nd} elements, got [${sizes.join(", ")}]`);
  if (sizes.some((v) => v !== null && v < 0))
    throw new RangeError(`${op}: elements of output_size must be greater than or equal to 0 but received {${sizes.map((v) => v ?? "None").join(", ")}}`);
  for (let d = 1; d < x.ndim; d++)
    if (x.shape[d] === 0)
      throw new RangeError(
        `${op}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes ${shapeStr(x.shape)} with dimension ${d} being empty`,
      );
  let y = x;
  for (let i = 0; i < nd; i++) {
    const d = x.ndim - nd + i;
    const n = x.shape[d]!;
    const o = sizes[i] ?? n;
    if (o === n) continue;
    const A = constTensor(adaptiveMatrix(n, o), [o, n], x.dtype, x.device);
    // contract dim d with A^T: move d last, multiply, move back
    y = S.movedim(matmul(S.movedim(y, d, -1), S.t(A)), -1, d);
  }
  return y;
}

export const adaptiveAvgPool1d = op<Sig<[input: Tensor, outputSize: IntOrTuple], { outputSize?: IntOrTuple }, Tensor>>(
  "adaptiveAvgPool1d(Tensor input, int[1] outputSize) -> Tensor",
  (x: Tensor, outputSize: number[]) => {
    if (outputSize.length !== 1) throw new RangeError(`adaptiveAvgPool1d() argument 'output_size' should contain one int (got ${outputSize.length})`);
    return adaptiveAvgNd(1, "adaptiveAvgPool1d", x, outputSize);
  },
);

type AdaptiveSize2 = number | readonly (number | null)[];
/** F.adaptive_avg_pool2d: output_size an int or two ints, either of which may be null (keep that size). */
export const adaptiveAvgPool2d = op<Sig<[input: Tensor, outputSize: AdaptiveSize2], { outputSize?: AdaptiveSize2 }, Tensor>>(
  "adaptiveAvgPool2d(Tensor input, Any outputSize) -> Tensor",
  (x: Tensor, outputSize: unknown) => {
    const ok = (v: unknown) => v === null || (typeof v === "number" && Number.isInteger(v));
    let sizes: (number | null)[];
    if (typeof outputSize === "number" && Number.isInteger(outputSize)) sizes = [outputSize, outputSize];
    else if (Array.isArray(outputSize) && outputSize.every(ok)) sizes = outputSize as (number | null)[];
    else throw new TypeError("adaptiveAvgPool2d(): argument 'outputSize' must be an int or a tuple of two ints (or None)");
    return adaptiveAvgNd(2, "adaptiveAvgPool2d", x, sizes);
  },
);
