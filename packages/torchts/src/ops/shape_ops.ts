// Movement ops. Most are views (shared storage, no kernel); the rest are built from views,
// cat and pad so their gradients come for free.
import { isGradEnabled, noGrad } from "../autograd/grad_mode.js";
import { Node } from "../autograd/node.js";
import { getDevice } from "../device/plugin.js";
import { promoteTypes, type DType } from "../ir/dtype.js";
import { inferShape, normDim, normDims, shapeStr, type Shape } from "../ir/shape.js";
import { withOp } from "../runtime/mode.js";
import { op, type Sig } from "./registry.js";
import { Storage } from "../runtime/storage.js";
import { Tensor } from "../tensor.js";
import { affineView, attach, cast, catPrim, edgeOf, expand as expandView, padPrim, reshape as reshapeCore, unary } from "./core.js";
import { arange } from "./creation.js";
import * as M from "./math.js";

const eye = (n: number): number[][] => Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));
const zerosVec = (n: number) => new Array<number>(n).fill(0);
const unit = (n: number, k: number, v = 1) => {
  const r = zerosVec(n);
  r[k] = v;
  return r;
};

export function contiguous(x: Tensor): Tensor {
  if (x.isContiguous()) return x;
  return withOp("contiguous", () => unary("identity", x));
}
export function clone(x: Tensor): Tensor {
  return withOp("clone", () => unary("identity", x));
}
export function detach(x: Tensor): Tensor {
  const t = new Tensor(x._storage, x.shape, x._strides, x._offset, x.dtype);
  t._base = x._base ?? x;
  return t;
}

export function view(x: Tensor, ...shape: (number | number[])[]): Tensor {
  if (shape.length === 1 && typeof shape[0] === "string") return cast(x, shape[0] as DType);
  const s = inferShape(flatArgs(shape), x.numel(), "view");
  return reshapeCore(x, s, "view");
}
export function reshape(x: Tensor, ...shape: (number | number[])[]): Tensor {
  return reshapeCore(x, inferShape(flatArgs(shape), x.numel(), "reshape"), "reshape");
}
export function viewAs(x: Tensor, other: Tensor): Tensor {
  return view(x, other.shape);
}
export function reshapeAs(x: Tensor, other: Tensor): Tensor {
  return reshape(x, other.shape);
}

function flatArgs(a: (number | number[])[]): number[] {
  return a.length === 1 && Array.isArray(a[0]) ? [...a[0]] : (a as number[]);
}

export function permute(x: Tensor, ...dims: (number | number[])[]): Tensor {
  const d = flatArgs(dims).map((v) => normDim(v, x.ndim, "permute"));
  if (d.length !== x.ndim)
    throw new RangeError(`permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = ${x.ndim} is not equal to len(dims) = ${d.length}`);
  if (new Set(d).size !== d.length) throw new RangeError("permute: repeated dim");
  const id = eye(x.ndim);
  return affineView(x, "PermuteBackward0", d.map((k) => x.shape[k]!), d.map((k) => id[k]!), zerosVec(x.ndim));
}
export function transpose(x: Tensor, d0: number, d1: number): Tensor {
  if (x.ndim === 0) return x;
  const a = normDim(d0, x.ndim, "transpose");
  const b = normDim(d1, x.ndim, "transpose");
  const p = x.shape.map((_, i) => i);
  p[a] = b;
  p[b] = a;
  return permute(x, p);
}
export const swapaxes = transpose;
export const swapdims = transpose;
export function t(x: Tensor): Tensor {
  if (x.ndim > 2) throw new RangeError(`t() expects a tensor with <= 2 dimensions, but self is ${x.ndim}D`);
  return x.ndim < 2 ? x : transpose(x, 0, 1);
}
export function mT(x: Tensor): Tensor {
  return transpose(x, -2, -1);
}
export function movedim(x: Tensor, src: number | number[], dst: number | number[]): Tensor {
  const s = (Array.isArray(src) ? src : [src]).map((d) => normDim(d, x.ndim, "movedim"));
  const t_ = (Array.isArray(dst) ? dst : [dst]).map((d) => normDim(d, x.ndim, "movedim"));
  const order = new Array<number>(x.ndim).fill(-1);
  s.forEach((d, i) => (order[t_[i]!] = d));
  const rest = x.shape.map((_, i) => i).filter((i) => !s.includes(i));
  for (let i = 0, r = 0; i < x.ndim; i++) if (order[i] === -1) order[i] = rest[r++]!;
  return permute(x, order);
}

export function expand(x: Tensor, ...shape: (number | number[])[]): Tensor {
  return expandView(x, flatArgs(shape));
}
export function expandAs(x: Tensor, o: Tensor): Tensor {
  return expandView(x, o.shape);
}
export function broadcastTo(x: Tensor, shape: number[]): Tensor {
  return expandView(x, shape);
}

/** Strided slice along one dim: x[..., start:end:step, ...] with Python clamping rules. */
export function slice(x: Tensor, dim: number, start: number | null = null, end: number | null = null, step = 1): Tensor {
  const d = normDim(dim, x.ndim, "slice");
  if (step <= 0) throw new RangeError("slice step must be positive");
  const n = x.shape[d]!;
  let s = start ?? 0;
  let e = end ?? n;
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = Math.min(Math.max(s, 0), n);
  e = Math.min(Math.max(e, s), n);
  const len = Math.ceil((e - s) / step);
  const id = eye(x.ndim);
  const coef = id.map((r, i) => (i === d ? r.map((v) => v * step) : r));
  return affineView(x, "SliceBackward0", x.shape.map((v, i) => (i === d ? len : v)), coef, unit(x.ndim, d, s));
}

export function narrow(x: Tensor, dim: number, start: number, length: number): Tensor {
  const d = normDim(dim, x.ndim, "narrow");
  const n = x.shape[d]!;
  const s = start < 0 ? start + n : start;
  if (s < 0 || s + length > n || length < 0)
    throw new RangeError(`narrow: start (${start}) + length (${length}) exceeds dimension size (${n}).`);
  return slice(x, d, s, s + length, 1);
}

export function select(x: Tensor, dim: number, index: number): Tensor {
  const d = normDim(dim, x.ndim, "select");
  const n = x.shape[d]!;
  if (index < -n || index >= n)
    throw new RangeError(`select(): index ${index} out of range for tensor of size ${shapeStr(x.shape)} at dimension ${d}`);
  const i = index < 0 ? index + n : index;
  const id = eye(x.ndim);
  const keep = x.shape.map((_, k) => k).filter((k) => k !== d);
  return affineView(x, "SelectBackward0", keep.map((k) => x.shape[k]!), keep.map((k) => id[k]!), unit(x.ndim, d, i));
}

export function unsqueeze(x: Tensor, dim: number): Tensor {
  const d = normDim(dim, x.ndim + 1, "unsqueeze");
  const shape = [...x.shape];
  shape.splice(d, 0, 1);
  return reshapeCore(x, shape, "view");
}
export function squeeze(x: Tensor, dim?: number | number[]): Tensor {
  const dims = dim === undefined ? x.shape.map((_, i) => i) : normDims(dim, x.ndim, "squeeze");
  const shape = x.shape.filter((s, i) => !(s === 1 && dims.includes(i)));
  if (shape.length === x.ndim) return x;
  return reshapeCore(x, shape, "view");
}
export function flatten(x: Tensor, startDim = 0, endDim = -1): Tensor {
  if (x.ndim === 0) return reshapeCore(x, [1]);
  const s = normDim(startDim, x.ndim, "flatten");
  const e = normDim(endDim, x.ndim, "flatten");
  if (s > e) throw new RangeError("flatten() has invalid args: start_dim cannot come after end_dim");
  const shape = [...x.shape.slice(0, s), x.shape.slice(s, e + 1).reduce((a, b) => a * b, 1), ...x.shape.slice(e + 1)];
  return reshapeCore(x, shape);
}
export function ravel(x: Tensor): Tensor {
  return reshapeCore(x, [x.numel()]);
}
export function unflatten(x: Tensor, dim: number, sizes: number[]): Tensor {
  const d = normDim(dim, x.ndim, "unflatten");
  const s = inferShape(sizes, x.shape[d]!, "unflatten");
  return reshapeCore(x, [...x.shape.slice(0, d), ...s, ...x.shape.slice(d + 1)], "view");
}

export function split(x: Tensor, sizes: number | number[], dim = 0): Tensor[] {
  const d = normDim(dim, x.ndim, "split");
  const n = x.shape[d]!;
  let parts: number[];
  if (typeof sizes === "number") {
    if (sizes <= 0) throw new RangeError(`split expects split_size be non-negative, but got split_size=${sizes}`);
    parts = [];
    for (let s = 0; s < n; s += sizes) parts.push(Math.min(sizes, n - s));
    if (n === 0) parts = [0];
  } else {
    parts = sizes;
    const tot = parts.reduce((a, b) => a + b, 0);
    if (tot !== n)
      throw new RangeError(`split_with_sizes expects split_sizes to sum exactly to ${n} (input tensor's size at dimension ${d}), but got split_sizes=[${parts.join(", ")}]`);
  }
  let s = 0;
  const views = noGrad(() =>
    parts.map((p) => {
      const r = narrow(x, d, s, p);
      s += p;
      return r;
    }),
  );
  if (!isGradEnabled() || !x.requiresGrad) return views;
  // one node for all parts, as PyTorch's SplitBackward0: the gradient is the parts' gradients
  // concatenated (the engine passes zeros for unused parts), one cat instead of a zero-filled
  // scatter per part plus the adds that sum them
  const node = new Node("SplitBackward0", [edgeOf(x)], [], (gs) => [cat(gs as Tensor[], d)],
    views.map((v) => ({ shape: [...v.shape], dtype: v.dtype, device: v.device })));
  views.forEach((v, i) => {
    v.gradFn = node;
    v._outputNr = i;
  });
  return views;
}
export function chunk(x: Tensor, chunks: number, dim = 0): Tensor[] {
  const d = normDim(dim, x.ndim, "chunk");
  if (chunks <= 0) throw new RangeError("chunk expects `chunks` to be greater than 0");
  const size = Math.ceil(x.shape[d]! / chunks);
  return split(x, Math.max(size, 1), d);
}
export function unbind(x: Tensor, dim = 0): Tensor[] {
  const d = normDim(dim, x.ndim, "unbind");
  return Array.from({ length: x.shape[d]! }, (_, i) => select(x, d, i));
}

export function diagonal(x: Tensor, offset = 0, dim1 = 0, dim2 = 1): Tensor {
  const a = normDim(dim1, x.ndim, "diagonal");
  const b = normDim(dim2, x.ndim, "diagonal");
  if (a === b) throw new RangeError(`diagonal dimensions cannot be identical ${dim1}, ${dim2}`);
  const start = zerosVec(x.ndim);
  let len: number;
  if (offset >= 0) {
    start[b] = offset;
    len = Math.max(0, Math.min(x.shape[a]!, x.shape[b]! - offset));
  } else {
    start[a] = -offset;
    len = Math.max(0, Math.min(x.shape[a]! + offset, x.shape[b]!));
  }
  if (len === 0) start[a] = start[b] = 0;
  const id = eye(x.ndim);
  const keep = x.shape.map((_, k) => k).filter((k) => k !== a && k !== b);
  const diag = id[a]!.map((v, k) => v + id[b]![k]!);
  return affineView(x, "DiagonalBackward0", [...keep.map((k) => x.shape[k]!), len], [...keep.map((k) => id[k]!), diag], start);
}

export function flip(x: Tensor, dims: number | number[]): Tensor {
  const ds = normDims(dims, x.ndim, "flip");
  const id = eye(x.ndim);
  const coef = id.map((r, i) => (ds.includes(i) ? r.map((v) => -v) : r));
  const start = x.shape.map((n, i) => (ds.includes(i) && n > 0 ? n - 1 : 0));
  return affineView(x, "FlipBackward0", x.shape, coef, start);
}

export const roll = op<Sig<[input: Tensor, shifts: number | number[], dims?: number | number[]], { shifts?: number | number[]; dims?: number | number[] }, Tensor>>(
  "roll(Tensor input, int[1] shifts, int[1] dims=[]) -> Tensor",
  (x: Tensor, sh: number[], ds: number[]): Tensor => {
    if (ds.length === 0) {
      if (sh.length !== 1) throw new RangeError(`roll(): shifts and dimensions must align. shifts: ${sh.length}, dims: 0`);
      return reshapeCore(roll(flatten(x), sh, 0), x.shape);
    }
    if (sh.length !== ds.length) throw new RangeError(`roll(): shifts and dimensions must align. shifts: ${sh.length}, dims: ${ds.length}`);
    let r = x;
    sh.forEach((s, i) => {
      const d = normDim(ds[i]!, x.ndim, "roll");
      const n = x.shape[d]!;
      if (n === 0) return;
      const k = ((s % n) + n) % n;
      if (k === 0) return;
      r = cat([narrow(r, d, n - k, k), narrow(r, d, 0, n - k)], d);
    });
    return r;
  },
);

function triMask(x: Tensor, diagonal: number, upper: boolean): Tensor {
  if (x.ndim < 2) throw new RangeError(`${upper ? "triu" : "tril"}: input tensor must have at least 2 dimensions`);
  const [r, c] = x.shape.slice(-2) as [number, number];
  const i = reshapeCore(arange(r, { device: x.device }), [r, 1]);
  const j = reshapeCore(arange(c, { device: x.device }), [1, c]);
  const diff = M.sub(j, i);
  return upper ? M.ge(diff, diagonal) : M.le(diff, diagonal);
}
export function tril(x: Tensor, diagonal = 0): Tensor {
  return withOp("tril", () => M.where(triMask(x, diagonal, false), x, M._zerosLike(x).detach()));
}
export function triu(x: Tensor, diagonal = 0): Tensor {
  return withOp("triu", () => M.where(triMask(x, diagonal, true), x, M._zerosLike(x).detach()));
}

export function cat(ts: Tensor[], dim = 0): Tensor {
  return withOp("cat", () => {
    if (!ts.length) throw new RangeError("cat(): expected a non-empty list of Tensors");
    // legacy behaviour: 1-D empty tensors are skipped
    const used = ts.filter((t) => !(t.ndim === 1 && t.shape[0] === 0));
    if (!used.length) return ts[0]!;
    const ref = used[0]!;
    const d = normDim(dim, ref.ndim, "cat");
    let dtype = ref.dtype;
    for (const t of used) {
      dtype = promoteTypes(dtype, t.dtype);
      if (t.ndim !== ref.ndim)
        throw new RangeError(`cat(): Tensors must have same number of dimensions: got ${ref.ndim} and ${t.ndim}`);
      if (t.device !== ref.device)
        throw new Error(`cat: Expected all tensors to be on the same device, but found at least two devices, ${ref.device} and ${t.device}!`);
      for (let i = 0; i < t.ndim; i++)
        if (i !== d && t.shape[i] !== ref.shape[i])
          throw new RangeError(
            `cat(): Sizes of tensors must match except in dimension ${d}. Expected size ${ref.shape[i]} but got size ${t.shape[i]} for tensor number ${ts.indexOf(t)} in the list (shapes ${shapeStr(ref.shape)} and ${shapeStr(t.shape)}).`,
          );
    }
    return catPrim(used.map((t) => cast(t, dtype)), d);
  });
}
export const concat = cat;
export const concatenate = cat;

export function stack(ts: Tensor[], dim = 0): Tensor {
  if (!ts.length) throw new RangeError("stack expects a non-empty TensorList");
  const d = normDim(dim, ts[0]!.ndim + 1, "stack");
  for (const t of ts)
    if (t.shape.length !== ts[0]!.shape.length || t.shape.some((v, i) => v !== ts[0]!.shape[i]))
      throw new RangeError(`stack expects each tensor to be equal size, but got ${shapeStr(ts[0]!.shape)} at entry 0 and ${shapeStr(t.shape)} at entry ${ts.indexOf(t)}`);
  return withOp("stack", () => cat(ts.map((t) => unsqueeze(t, d)), d));
}
export function hstack(ts: Tensor[]): Tensor {
  return cat(ts, ts[0]!.ndim === 1 ? 0 : 1);
}
export function vstack(ts: Tensor[]): Tensor {
  return cat(ts.map((t) => (t.ndim === 1 ? unsqueeze(t, 0) : t)), 0);
}

export function repeat(x: Tensor, ...reps: (number | number[])[]): Tensor {
  const r = flatArgs(reps);
  if (r.length < x.ndim)
    throw new RangeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  return withOp("repeat", () => {
    const pad = r.length - x.ndim;
    const xs = [...new Array<number>(pad).fill(1), ...x.shape];
    const inter: number[] = [];
    const big: number[] = [];
    xs.forEach((s, i) => {
      inter.push(1, s);
      big.push(r[i]!, s);
    });
    const v = reshapeCore(x, inter);
    return reshapeCore(contiguous(expandView(v, big)), xs.map((s, i) => s * r[i]!));
  });
}
export function tile(x: Tensor, reps: number[]): Tensor {
  const r = reps.length < x.ndim ? [...new Array<number>(x.ndim - reps.length).fill(1), ...reps] : reps;
  return repeat(x, r);
}
export function repeatInterleave(x: Tensor, repeats: number, dim?: number): Tensor {
  if (dim === undefined) return repeatInterleave(flatten(x), repeats, 0);
  const d = normDim(dim, x.ndim, "repeat_interleave");
  return withOp("repeat_interleave", () => {
    const u = unsqueeze(x, d + 1);
    const sh = [...u.shape];
    sh[d + 1] = repeats;
    const e = contiguous(expandView(u, sh));
    const out = [...x.shape];
    out[d] = x.shape[d]! * repeats;
    return reshapeCore(e, out);
  });
}

/** Sliding windows along dim (Tensor.unfold): a view with a new last dim of `size`. */
export function unfold(x: Tensor, dim: number, size: number, step: number): Tensor {
  const d = normDim(dim, x.ndim, "unfold");
  const n = x.shape[d]!;
  if (size > n) throw new RangeError(`maximum size for tensor at dimension ${d} is ${n} but size is ${size}`);
  const count = Math.floor((n - size) / step) + 1;
  const id = eye(x.ndim);
  const coef = id.map((r, i) => (i === d ? r.map((v) => v * step) : r));
  return affineView(x, "UnfoldBackward0", [...x.shape.map((v, i) => (i === d ? count : v)), size], [...coef, id[d]!], zerosVec(x.ndim));
}

/** Constant padding; negative pads crop (PyTorch's F.pad semantics, last dim first). */
export function constantPad(x: Tensor, pad: number[], value = 0): Tensor {
  if (pad.length % 2 !== 0) throw new RangeError("Padding length must be divisible by 2");
  if (pad.length / 2 > x.ndim)
    throw new RangeError(`Padding length should be less than or equal to two times the input dimension but got padding length ${pad.length} and input of dimension ${x.ndim}`);
  return withOp("constant_pad_nd", () => {
    let r = x;
    const pads = new Array<number>(2 * x.ndim).fill(0);
    for (let i = 0; i < pad.length / 2; i++) {
      const d = x.ndim - 1 - i;
      let lo = pad[2 * i]!;
      let hi = pad[2 * i + 1]!;
      if (lo < 0 || hi < 0) {
        const n = r.shape[d]!;
        const s = lo < 0 ? -lo : 0;
        const e = hi < 0 ? n + hi : n;
        if (e - s < 0) throw new RangeError(`constant_pad_nd: the input size ${n} at dimension ${d} is too small for padding (${lo}, ${hi})`);
        r = narrow(r, d, s, e - s);
        lo = Math.max(lo, 0);
        hi = Math.max(hi, 0);
      }
      pads[2 * d] = lo;
      pads[2 * d + 1] = hi;
    }
    return pads.some((p) => p > 0) ? padPrim(r, pads, value) : r;
  });
}

/** Move a tensor to another device (synchronous for host-visible sources). */
export function toDevice(x: Tensor, device: string): Tensor {
  if (x.device === device.split(":")[0]) return x;
  const dst = getDevice(device);
  const host = x._contiguousHost();
  const st = Storage.fromHost(dst, x.dtype, host);
  const out = new Tensor(st, x.shape);
  const src = x.device;
  return attach(out, "ToCopyBackward0", [x], [], ([g]) => [toDevice(g!, src)]);
}

export function to(x: Tensor, a: string | { dtype?: DType; device?: string }, b?: DType): Tensor {
  let dtype: DType | undefined;
  let device: string | undefined;
  if (typeof a === "string") {
    if (isDtype(a)) dtype = a as DType;
    else {
      device = a;
      dtype = b;
    }
  } else {
    dtype = a.dtype;
    device = a.device;
  }
  let r = x;
  if (device) r = toDevice(r, device);
  if (dtype) r = cast(r, dtype);
  return r;
}
function isDtype(s: string): boolean {
  return ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"].includes(s);
}

export type { Shape };
