// Pooling: max/avg pooling as padded sliding windows reduced over the window dims, and
// adaptive average pooling as products with constant averaging matrices.
import { shapeStr } from "../../ir/shape.js";
import { withOp } from "../../runtime/mode.js";
import type { Tensor } from "../../tensor.js";
import { gather } from "../../ops/core.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import * as R from "../../ops/reduce.js";
import { arange } from "../../ops/creation.js";
import { matmul } from "../../ops/linalg.js";
import { windows } from "./conv.js";
import { constTensor, ntuple, type IntOrTuple } from "./util.js";

export interface MaxPoolOpts {
  stride?: IntOrTuple | null;
  padding?: IntOrTuple;
  dilation?: IntOrTuple;
  ceilMode?: boolean;
  returnIndices?: boolean;
}
export interface AvgPoolOpts {
  stride?: IntOrTuple | null;
  padding?: IntOrTuple;
  ceilMode?: boolean;
  countIncludePad?: boolean;
  divisorOverride?: number | null;
}

/** Kernel size given positionally or as `{ kernelSize, ...opts }` (PyTorch's keyword form). */
export type KernelArg<O> = IntOrTuple | (O & { kernelSize: IntOrTuple });
function splitKernel<O extends object>(k: KernelArg<O>, opts: O, op: string): [IntOrTuple, O] {
  if (typeof k === "number" || Array.isArray(k)) return [k as IntOrTuple, opts];
  const o = k as O & { kernelSize?: IntOrTuple };
  if (o.kernelSize === undefined) throw new TypeError(`${op}: missing required argument 'kernelSize'`);
  return [o.kernelSize, { ...o, ...opts }];
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
function geometry(x: Tensor, nd: number, op: string, kernel: IntOrTuple, stride: IntOrTuple | null | undefined, padding: IntOrTuple, dilation: IntOrTuple, ceil: boolean): Geometry {
  const k = ntuple(kernel, nd, op, "kernel_size");
  const s = stride === null || stride === undefined || (Array.isArray(stride) && stride.length === 0) ? k : ntuple(stride, nd, op, "stride");
  const p = ntuple(padding, nd, op, "padding");
  const d = ntuple(dilation, nd, op, "dilation");
  const sp = x.shape.slice(x.ndim - nd);
  const out: number[] = [];
  const pads: [number, number][] = [];
  for (let i = 0; i < nd; i++) {
    const eff = d[i]! * (k[i]! - 1) + 1;
    if (p[i]! > Math.floor(eff / 2))
      throw new RangeError(`${op}: pad should be at most half of effective kernel size, but got pad=${p[i]}, kernel_size=${k[i]} and dilation=${d[i]}`);
    const n = sp[i]!;
    let o = Math.floor((n + 2 * p[i]! - eff + (ceil ? s[i]! - 1 : 0)) / s[i]!) + 1;
    if (ceil && (o - 1) * s[i]! >= n + p[i]!) o--;
    if (o < 1)
      throw new RangeError(`${op}: Given input size: (${sp.join("x")}). Calculated output size: (${o}). Output size is too small (input of size ${shapeStr(x.shape)})`);
    out.push(o);
    const need = (o - 1) * s[i]! + eff;
    pads.push([p[i]!, Math.max(0, need - n - p[i]!)]);
  }
  return { k, s, p, d, out, pads };
}

/** Bring [*, C, *sp] to [B, C, *sp] (B = 1 for unbatched) for the window helper. */
function asBatched(x: Tensor, nd: number, op: string): [Tensor, (y: Tensor) => Tensor] {
  if (x.ndim === nd + 2) return [x, (y) => y];
  if (x.ndim === nd + 1) return [S.unsqueeze(x, 0), (y) => S.squeeze(y, 0)];
  throw new RangeError(`${op}: Expected ${nd + 1}D or ${nd + 2}D input, but got input of size: ${shapeStr(x.shape)}`);
}

function maxPoolNd(nd: number, op: string, x0: Tensor, kernelSize: IntOrTuple, opts: MaxPoolOpts): Tensor | [Tensor, Tensor] {
  return withOp(op, () => {
    const [x, unb] = asBatched(x0, nd, op);
    const g = geometry(x, nd, op, kernelSize, opts.stride, opts.padding ?? 0, opts.dilation ?? 1, opts.ceilMode ?? false);
    const win = windows(x, g.k, g.s, g.d, g.pads, -Infinity); // [N, C, *o, *k]
    const lead = win.shape.slice(0, 2 + nd);
    const flat = S.reshape(win, [...lead, -1]);
    // gradient to the first maximum of each window only, as PyTorch
    const idx = R.argmax(flat, -1, true);
    const val = unb(S.squeeze(gather(flat, flat.ndim - 1, idx), -1));
    if (!opts.returnIndices) return val;
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
  });
}

export function maxPool1d(x: Tensor, kernelSize: KernelArg<MaxPoolOpts>, opts: MaxPoolOpts = {}): Tensor {
  const [k, o] = splitKernel(kernelSize, opts, "max_pool1d");
  return maxPoolNd(1, "max_pool1d", x, k, { ...o, returnIndices: false }) as Tensor;
}
export function maxPool2d(x: Tensor, kernelSize: KernelArg<MaxPoolOpts>, opts: MaxPoolOpts = {}): Tensor {
  const [k, o] = splitKernel(kernelSize, opts, "max_pool2d");
  return maxPoolNd(2, "max_pool2d", x, k, { ...o, returnIndices: false }) as Tensor;
}
export function maxPool3d(x: Tensor, kernelSize: KernelArg<MaxPoolOpts>, opts: MaxPoolOpts = {}): Tensor {
  const [k, o] = splitKernel(kernelSize, opts, "max_pool3d");
  return maxPoolNd(3, "max_pool3d", x, k, { ...o, returnIndices: false }) as Tensor;
}
/** F.max_pool2d(..., return_indices=True): [values, flat spatial indices (int64)]. */
export function maxPool2dWithIndices(x: Tensor, kernelSize: KernelArg<MaxPoolOpts>, opts: MaxPoolOpts = {}): [Tensor, Tensor] {
  const [k, o] = splitKernel(kernelSize, opts, "max_pool2d_with_indices");
  return maxPoolNd(2, "max_pool2d_with_indices", x, k, { ...o, returnIndices: true }) as [Tensor, Tensor];
}

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

function avgPoolNd(nd: number, op: string, x0: Tensor, kernelSize: IntOrTuple, opts: AvgPoolOpts): Tensor {
  return withOp(op, () => {
    const [x, unb] = asBatched(x0, nd, op);
    const g = geometry(x, nd, op, kernelSize, opts.stride, opts.padding ?? 0, 1, opts.ceilMode ?? false);
    const win = windows(x, g.k, g.s, g.d, g.pads, 0);
    const axes = g.k.map((_, i) => 2 + nd + i);
    const sum = R.sum(win, axes);
    if (opts.divisorOverride) return unb(M.div(sum, opts.divisorOverride));
    const include = opts.countIncludePad ?? true;
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
  });
}

export function avgPool1d(x: Tensor, kernelSize: KernelArg<AvgPoolOpts>, opts: AvgPoolOpts = {}): Tensor {
  const [k, o] = splitKernel(kernelSize, opts, "avg_pool1d");
  return avgPoolNd(1, "avg_pool1d", x, k, o);
}
export function avgPool2d(x: Tensor, kernelSize: KernelArg<AvgPoolOpts>, opts: AvgPoolOpts = {}): Tensor {
  const [k, o] = splitKernel(kernelSize, opts, "avg_pool2d");
  return avgPoolNd(2, "avg_pool2d", x, k, o);
}
export function avgPool3d(x: Tensor, kernelSize: KernelArg<AvgPoolOpts>, opts: AvgPoolOpts = {}): Tensor {
  const [k, o] = splitKernel(kernelSize, opts, "avg_pool3d");
  return avgPoolNd(3, "avg_pool3d", x, k, o);
}

/** [out, in] matrix averaging window i = [floor(i*in/out), ceil((i+1)*in/out)). */
function adaptiveMatrix(n: number, o: number): number[] {
  const a = new Array<number>(o * n).fill(0);
  for (let i = 0; i < o; i++) {
    const s = Math.floor((i * n) / o);
    const e = Math.ceil(((i + 1) * n) / o);
    for (let j = s; j < e; j++) a[i * n + j] = 1 / (e - s);
  }
  return a;
}

function adaptiveAvgNd(nd: number, op: string, x: Tensor, outputSize: number | readonly (number | null)[]): Tensor {
  return withOp(op, () => {
    if (x.ndim < nd + 1) throw new RangeError(`${op}: Expected ${nd + 1}D or ${nd + 2}D input, but got input of size: ${shapeStr(x.shape)}`);
    const sizes = typeof outputSize === "number" ? new Array<number>(nd).fill(outputSize) : [...outputSize];
    if (sizes.length !== nd) throw new RangeError(`${op}: output_size must have ${nd} elements, got [${sizes.join(", ")}]`);
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
  });
}

export function adaptiveAvgPool1d(x: Tensor, outputSize: number | readonly (number | null)[]): Tensor {
  return adaptiveAvgNd(1, "adaptive_avg_pool1d", x, outputSize);
}
export function adaptiveAvgPool2d(x: Tensor, outputSize: number | readonly (number | null)[]): Tensor {
  return adaptiveAvgNd(2, "adaptive_avg_pool2d", x, outputSize);
}
