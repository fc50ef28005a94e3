// Convolutions by im2col: pad, take sliding-window views with `unfold` (dilation = wider
// window sliced with a step), then one batched matmul per group. Transposed convolution
// is the adjoint: matmul to columns, then `stridedScatter` sums overlapping windows.
// Float32 conv1d/conv2d go to the device's `conv2d` composite when it has one (the cpu's gathers
// windows straight into its GEMM panels); its gradients are written with the ops below.
import { shapeStr } from "../../ir/shape.js";
import type { Tensor } from "../../tensor.js";
import { attach, compositePrim, stridedScatter } from "../../ops/core.js";
import { op, type Sig } from "../../ops/registry.js";
import { sum } from "../../ops/reduce.js";
import * as M from "../../ops/math.js";
import * as S from "../../ops/shape_ops.js";
import { matmul } from "../../ops/linalg.js";
import { autocastInputs } from "../../amp/autocast.js";
import { ntuple, requireFloat, windows, type IntOrTuple } from "./util.js";

export interface ConvOpts {
  bias?: Tensor | null;
  stride?: IntOrTuple;
  padding?: IntOrTuple | "same" | "valid";
  dilation?: IntOrTuple;
  groups?: number;
}
export interface ConvTransposeOpts {
  bias?: Tensor | null;
  stride?: IntOrTuple;
  padding?: IntOrTuple;
  outputPadding?: IntOrTuple;
  groups?: number;
  dilation?: IntOrTuple;
}

const prod = (a: readonly number[]) => a.reduce((p, q) => p * q, 1);

/** Add the batch dim to unbatched input; returns the input and a function undoing it. */
function batchify(x: Tensor, nd: number, op: string): [Tensor, (y: Tensor) => Tensor] {
  if (x.ndim === nd + 2) return [x, (y) => y];
  if (x.ndim === nd + 1) return [S.unsqueeze(x, 0), (y) => S.squeeze(y, 0)];
  throw new RangeError(`Expected ${nd + 1}D (unbatched) or ${nd + 2}D (batched) input to ${op}, but got input of size: ${shapeStr(x.shape)}`);
}

/** What convNd and convTransposeNd check first: the inputs autocast, a float input given the batch
 * dim, a weight of nd + 2 dims, and the stride as nd ints. */
function convInputs(nd: number, op: string, x0: Tensor, w: Tensor, b: Tensor | null, strideArg: number[]) {
  [x0, w, b] = autocastInputs(x0, w, b);
  requireFloat(x0);
  const [x, unbatch] = batchify(x0, nd, op);
  if (w.ndim !== nd + 2) throw new RangeError(`Expected ${nd + 2}-dimensional weight, but got weight of size ${shapeStr(w.shape)}`);
  return { x, unbatch, w, b, stride: ntuple(strideArg, nd, "stride") };
}

function convNd(
  nd: number, op: string, x0: Tensor, w0: Tensor, b0: Tensor | null, strideArg: number[], padArg: number[] | string, dilArg: number[], groups: number,
): Tensor {
  const { x, unbatch, w, b, stride } = convInputs(nd, op, x0, w0, b0, strideArg);
  const dil = ntuple(dilArg, nd, "dilation");
  if (typeof padArg === "string" && padArg !== "same" && padArg !== "valid") throw new Error(`Invalid padding string: '${padArg}'`);
  const padList = typeof padArg === "string" ? null : ntuple(padArg, nd, "padding");
  if (stride.some((v) => v <= 0)) throw new Error("non-positive stride is not supported");
  if (padList?.some((v) => v < 0)) throw new Error("negative padding is not supported");
  if (dil.some((v) => v <= 0)) throw new Error("non-positive dilation is not supported");
  if (groups <= 0) throw new Error("non-positive groups is not supported");
  const [N, Cin] = x.shape as [number, number];
  const [Cout, Cg] = w.shape as [number, number];
  const k = w.shape.slice(2);
  if (Cin % groups !== 0 || Cout % groups !== 0 || Cg * groups !== Cin)
    throw new RangeError(
      `Given groups=${groups}, weight of size ${shapeStr(w.shape)}, expected input${shapeStr(x.shape)} to have ${Cg * groups} channels, but got ${Cin} channels instead`,
    );
  const bias = b;
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== Cout)) throw new RangeError(`expected bias of shape [${Cout}], but got ${shapeStr(bias.shape)}`);
  let pads: [number, number][];
  if (padArg === "valid") pads = k.map(() => [0, 0]);
  else if (padArg === "same") {
    if (stride.some((s) => s !== 1)) throw new RangeError("padding='same' is not supported for strided convolutions");
    pads = k.map((kk, i) => {
      const total = dil[i]! * (kk - 1);
      return [Math.floor(total / 2), total - Math.floor(total / 2)];
    });
  } else pads = padList!.map((v) => [v, v]);
  const sp = x.shape.slice(2);
  sp.forEach((s, i) => {
    const eff = dil[i]! * (k[i]! - 1) + 1;
    if (s + pads[i]![0] + pads[i]![1] < eff)
      throw new RangeError(
        `Calculated padded input size per channel: (${sp.map((v, j) => v + pads[j]![0] + pads[j]![1]).join(" x ")}). Kernel size: (${k.map((v, j) => dil[j]! * (v - 1) + 1).join(" x ")}). Kernel size can't be greater than actual input size`,
      );
  });
  if (nd === 2) {
    const fast = conv2dComposite(x, w, bias, stride, dil, pads, groups);
    if (fast) return unbatch(fast);
  } else if (nd === 1) {
    // a 1-d convolution is a 2-d one over a height of 1
    const fast = conv2dComposite(S.unsqueeze(x, 2), S.unsqueeze(w, 2), bias, [1, stride[0]!], [1, dil[0]!], [[0, 0], pads[0]!], groups);
    if (fast) return unbatch(S.squeeze(fast, 2));
  }
  const [cols, o] = im2col(x, k, stride, dil, pads, groups); // [N, g, O, Cg*K]
  const g = groups;
  const wm = S.transpose(S.reshape(w, [g, Cout / g, Cg * prod(k)]), 1, 2); // [g, Cg*K, Cout/g]
  const y = matmul(cols, wm); // [N, g, O, Cout/g]
  let out = S.reshape(S.transpose(y, 2, 3), [N, Cout, ...o]);
  if (bias) out = M.add(out, S.reshape(bias, [Cout, ...o.map(() => 1)]));
  return unbatch(out);
}

/** The windows of x as a matrix per group: [N, g, O, Cg*K] (O output positions), and the output size. */
function im2col(x: Tensor, k: number[], stride: number[], dil: number[], pads: [number, number][], g: number): [Tensor, number[]] {
  const nd = k.length;
  const [N, Cin] = x.shape as [number, number];
  const Cg = Cin / g;
  const win = windows(x, k, stride, dil, pads); // [N, Cin, *o, *k]
  const o = win.shape.slice(2, 2 + nd);
  // [N, g, Cg, *o, *k] -> [N, g, *o, Cg, *k] -> [N, g, O, Cg*K]
  const w5 = S.reshape(win, [N, g, Cg, ...o, ...k]);
  const perm = [0, 1, ...o.map((_, i) => 3 + i), 2, ...k.map((_, i) => 3 + nd + i)];
  return [S.reshape(S.permute(w5, perm), [N, g, prod(o), Cg * prod(k)]), o];
}

/** conv2d through the device's composite (float32 only), or null to decompose. */
function conv2dComposite(
  x: Tensor, w: Tensor, bias: Tensor | null, stride: number[], dil: number[], pads: [number, number][], groups: number,
): Tensor | null {
  if (x.dtype !== "float32" || w.dtype !== "float32" || (bias && bias.dtype !== "float32") || x.shape[1] === 0) return null;
  const [N, , H, W] = x.shape as [number, number, number, number];
  const [Cout, , KH, KW] = w.shape as [number, number, number, number];
  const OH = Math.floor((H + pads[0]![0] + pads[0]![1] - dil[0]! * (KH - 1) - 1) / stride[0]!) + 1;
  const OW = Math.floor((W + pads[1]![0] + pads[1]![1] - dil[1]! * (KW - 1) - 1) / stride[1]!) + 1;
  const attrs = { stride, padding: [pads[0]![0], pads[1]![0]], dilation: dil, groups, bias: bias !== null };
  const out = compositePrim("conv2d", attrs, bias ? [x, w, bias] : [x, w], [N, Cout, OH, OW], "float32");
  if (!out) return null;
  return attach(out, "ConvolutionBackward0", [x, w, bias], [x, w], ([g], [xs, ws]) => [
    x.requiresGrad ? conv2dInputGrad(g!, ws!, [H, W], stride, dil, pads, groups) : null,
    w.requiresGrad ? conv2dWeightGrad(g!, xs!, ws!.shape, stride, dil, pads, groups) : null,
    bias?.requiresGrad ? sum(g!, [0, 2, 3]) : null,
  ]);
}

/** dL/dx: the transposed convolution of the output gradient, cut to the unpadded input. */
function conv2dInputGrad(g: Tensor, w: Tensor, sp: number[], stride: number[], dil: number[], pads: [number, number][], groups: number): Tensor {
  let gx = convTransposeNd(2, "convTranspose2d", g, w, null, stride, [0, 0], [0, 0], groups, dil);
  for (let i = 0; i < 2; i++) {
    const need = pads[i]![0] + sp[i]! - gx.shape[2 + i]!; // padded rows no window reached
    if (need > 0) gx = S._constantPad(gx, i === 0 ? [0, 0, 0, need] : [0, need]);
    gx = S.narrow(gx, 2 + i, pads[i]![0], sp[i]!);
  }
  return gx;
}

/** dL/dw: output gradient times the input windows, summed over the batch. */
function conv2dWeightGrad(g: Tensor, x: Tensor, wShape: readonly number[], stride: number[], dil: number[], pads: [number, number][], groups: number): Tensor {
  const [N, Cout] = g.shape as [number, number];
  const k = wShape.slice(2);
  const [cols] = im2col(x, k, stride, dil, pads, groups); // [N, g, O, Cg*K]
  const gm = S.reshape(g, [N, groups, Cout / groups, cols.shape[2]!]); // [N, g, Cog, O]
  return S.reshape(sum(matmul(gm, cols), 0), [...wShape]);
}

type ConvSig = Sig<
  [input: Tensor, weight: Tensor, bias?: Tensor | null, stride?: IntOrTuple, padding?: IntOrTuple | "same" | "valid", dilation?: IntOrTuple, groups?: number],
  ConvOpts,
  Tensor
>;
/** PyTorch's two overloads: padding as ints, or as 'valid' / 'same'. */
function convOp(nd: 1 | 2 | 3): ConvSig {
  const name = `conv${nd}d`;
  const sig = (padding: string) =>
    `${name}(Tensor input, Tensor weight, Tensor? bias=None, int[${nd}] stride=1, ${padding}, int[${nd}] dilation=1, int groups=1) -> Tensor`;
  const impl = (x: Tensor, w: Tensor, b: Tensor | null, stride: number[], padding: number[] | string, dilation: number[], groups: number) =>
    convNd(nd, name, x, w, b, stride, padding, dilation, groups);
  return op<ConvSig>([sig(`int[${nd}] padding=0`), sig('str padding="valid"')], [impl, impl]);
}
export const conv1d = convOp(1);
export const conv2d = convOp(2);
export const conv3d = convOp(3);

function convTransposeNd(
  nd: number, op: string, x0: Tensor, w0: Tensor, b0: Tensor | null, strideArg: number[], padArg: number[], opadArg: number[], g: number, dilArg: number[],
): Tensor {
  const { x, unbatch, w, b, stride } = convInputs(nd, op, x0, w0, b0, strideArg);
  const pad = ntuple(padArg, nd, "padding");
  const opad = ntuple(opadArg, nd, "output_padding");
  const dil = ntuple(dilArg, nd, "dilation");
  if (stride.some((v) => v <= 0)) throw new Error("non-positive stride is not supported");
  if (pad.some((v) => v < 0)) throw new Error("negative padding is not supported");
  if (opad.some((v) => v < 0)) throw new Error("negative output_padding is not supported");
  if (dil.some((v) => v <= 0)) throw new Error("non-positive dilation is not supported");
  if (g <= 0) throw new Error("non-positive groups is not supported");
  const [N, Cin] = x.shape as [number, number];
  const [wIn, Cog] = w.shape as [number, number];
  if (wIn !== Cin || Cin % g !== 0)
    throw new RangeError(`Given transposed=1, weight of size ${shapeStr(w.shape)}, expected input${shapeStr(x.shape)} to have ${wIn} channels, but got ${Cin} channels instead`);
  opad.forEach((v, i) => {
    if (v >= Math.max(stride[i]!, dil[i]!))
      throw new RangeError(`output padding must be smaller than either stride or dilation, but got output_padding=${v}, stride=${stride[i]}, dilation=${dil[i]}`);
  });
  const Cout = Cog * g;
  const bias = b;
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== Cout)) throw new RangeError(`expected bias of shape [${Cout}], but got ${shapeStr(bias.shape)}`);
  const sp = x.shape.slice(2);
  const k = w.shape.slice(2);
  const K = prod(k);
  const Ci = Cin / g;
  // columns: [N, g, L, Ci] @ [g, Ci, Cog*K] -> [N, g, L, Cog*K]
  const xs = S.transpose(S.reshape(x, [N, g, Ci, prod(sp)]), 2, 3);
  const wm = S.reshape(w, [g, Ci, Cog * K]);
  const cols = S.reshape(matmul(xs, wm), [N, g, ...sp, Cog, ...k]);
  const full = sp.map((s, i) => (s - 1) * stride[i]! + dil[i]! * (k[i]! - 1) + 1 + opad[i]!);
  const outSp = full.map((f, i) => f - 2 * pad[i]!);
  outSp.forEach((v, i) => {
    if (v <= 0) throw new RangeError(`Given input size per channel: (${sp.join(" x ")}). Calculated output size per channel is too small (dim ${i}: ${v})`);
  });
  // fold: element (n, g, *i, co, *kk) lands at out[n, g*Cog + co, *(i*s + kk*d)]
  const fs: number[] = new Array<number>(nd);
  let acc = 1;
  for (let i = nd - 1; i >= 0; i--) {
    fs[i] = acc;
    acc *= full[i]!;
  }
  const plane = acc;
  const strides = [Cout * plane, Cog * plane, ...sp.map((_, i) => stride[i]! * fs[i]!), plane, ...k.map((_, i) => dil[i]! * fs[i]!)];
  let out = stridedScatter(cols, [N, Cout, ...full], cols.shape, strides, 0);
  for (let i = 0; i < nd; i++) out = S.narrow(out, 2 + i, pad[i]!, outSp[i]!);
  if (bias) out = M.add(out, S.reshape(bias, [Cout, ...outSp.map(() => 1)]));
  return unbatch(out);
}

type ConvTransposeSig = Sig<
  [
    input: Tensor, weight: Tensor, bias?: Tensor | null, stride?: IntOrTuple, padding?: IntOrTuple, outputPadding?: IntOrTuple, groups?: number,
    dilation?: IntOrTuple,
  ],
  ConvTransposeOpts,
  Tensor
>;
function convTransposeOp(nd: 1 | 2): ConvTransposeSig {
  const name = `convTranspose${nd}d`;
  return op<ConvTransposeSig>(
    `${name}(Tensor input, Tensor weight, Tensor? bias=None, int[${nd}] stride=1, int[${nd}] padding=0, int[${nd}] outputPadding=0, int groups=1, int[${nd}] dilation=1) -> Tensor`,
    (x: Tensor, w: Tensor, b: Tensor | null, stride: number[], padding: number[], outputPadding: number[], groups: number, dilation: number[]) =>
      convTransposeNd(nd, name, x, w, b, stride, padding, outputPadding, groups, dilation),
  );
}
export const convTranspose1d = convTransposeOp(1);
export const convTranspose2d = convTransposeOp(2);
