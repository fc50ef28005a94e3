// Movement ops. Most are views (shared storage, no kernel); the rest are built from views,
// cat and pad so their gradients come for free.
//
// Every public op is an op-table entry (registry.ts) with PyTorch's schema. The implementations
// below (`*I`) take the bound arguments and call each other directly; the ones other modules
// call on hot paths are exported with a leading underscore (`_narrow`, `_transpose`, ...), so
// an internal view costs no argument binding. One is kept only where the bound op costs more
// than ~0.1 us a call over it (measured: narrow, transpose, t, permute, expand, flip, unfold
// 0.1-1 us; squeeze and unsqueeze less, so callers use the public ops). `_contiguous` measured
// ~0.05 us but is still called per op by core.ts and inplace.ts.
import { isGradEnabled, noGrad } from "../autograd/grad_mode.js";
import { Node } from "../autograd/node.js";
import { getDevice, registeredDevices } from "../device/plugin.js";
import { DTYPES, hostArrayCtor, promoteTypes, type DType } from "../ir/dtype.js";
import { isContiguous, normDim, shapeStr, type Shape } from "../ir/shape.js";
import { installMethods, op, type Sig } from "./registry.js";
import { outOfMemory } from "../runtime/errors.js";
import { Storage } from "../runtime/storage.js";
import { Tensor } from "../tensor.js";
import { affineView, attach, permuteView, sliceView, cast, catPrim, edgeOf, expand as expandView, padPrim, reshape as reshapeCore, unary } from "./core.js";
import { arange } from "./creation.js";
import * as M from "./math.js";

type T = Tensor;
type Dims = number | number[];
export type MemoryFormat = "contiguous_format" | "preserve_format" | "channels_last" | "channels_last_3d";

const eye = (n: number): number[][] => Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));
const zerosVec = (n: number) => new Array<number>(n).fill(0);
const unit = (n: number, k: number, v = 1) => {
  const r = zerosVec(n);
  r[k] = v;
  return r;
};
const listStr = (xs: readonly number[]) => `[${xs.join(", ")}]`;

/** PyTorch's sizes are int64; ours must stay exact doubles (numel <= 2^53 - 1). */
function checkNumel(shape: readonly number[]): void {
  let n = 1;
  for (const d of shape) n *= d;
  if (!(n <= Number.MAX_SAFE_INTEGER))
    throw new Error(`numel: integer multiplication overflow (a tensor of shape ${shapeStr(shape)} has more than 2^53 - 1 elements)`);
}

/**
 * A result the op allocates, refused where the op runs when no device can hold it (2^32
 * elements is the most a host array holds; webgpu buffers hold less), instead of at a later
 * fused-mode flush.
 */
function checkAlloc(shape: readonly number[], dtype: DType): void {
  let n = 1;
  for (const d of shape) n *= d;
  if (n > 2 ** 32) throw outOfMemory(n * hostArrayCtor(dtype).BYTES_PER_ELEMENT, `a tensor of shape ${shapeStr(shape)} has more than 2^32 elements`);
}

// ---------------------------------------------------------------- contiguous, clone, detach

const contig = (x: T): boolean => isContiguous(x.shape, x._strides);

function channelsLastPerm(x: T, fmt: "channels_last" | "channels_last_3d"): number[] {
  const rank = fmt === "channels_last" ? 4 : 5;
  if (x.ndim !== rank) throw new Error(`required rank ${rank} tensor to use ${fmt} format`);
  return rank === 4 ? [0, 2, 3, 1] : [0, 2, 3, 4, 1];
}
const invPerm = (p: readonly number[]) => p.map((_, k) => p.indexOf(k));

/** x laid out channels-last (a copy unless it already is and `copy` is false). */
function channelsLastI(x: T, fmt: "channels_last" | "channels_last_3d", copy: boolean): T {
  const perm = channelsLastPerm(x, fmt);
  if (!copy && isContiguous(perm.map((k) => x.shape[k]!), perm.map((k) => x._strides[k]!))) return x;
  return permuteI(unary("identity", permuteI(x, perm)), invPerm(perm));
}

function contiguousI(x: T, fmt: MemoryFormat = "contiguous_format"): T {
  if (fmt === "channels_last" || fmt === "channels_last_3d") return channelsLastI(x, fmt, false);
  if (contig(x)) return x;
  if (fmt === "preserve_format") throw new Error("preserve memory format is unsupported by the contiguous operator");
  return unary("identity", x);
}
/** x.contiguous() without argument binding (internal callers). */
export const _contiguous = (x: T): T => (contig(x) ? x : unary("identity", x));

function cloneI(x: T, fmt: MemoryFormat | null): T {
  if (fmt === "channels_last" || fmt === "channels_last_3d") return channelsLastI(x, fmt, true);
  return unary("identity", x);
}
export const _clone = (x: T): T => unary("identity", x);

function detachI(x: T): T {
  const t = new Tensor(x._storage, x.shape, x._strides, x._offset, x.dtype);
  t._base = x._base ?? x;
  return t;
}
export const _detach = detachI;

type FmtOpts = { memoryFormat?: MemoryFormat };
export const contiguous = op<Sig<[input: T], FmtOpts, T>>(
  "contiguous(Tensor input, *, MemoryFormat memoryFormat=contiguous_format) -> Tensor",
  contiguousI,
);
export const clone = op<Sig<[input: T], { memoryFormat?: MemoryFormat | null }, T>>(
  "clone(Tensor input, *, MemoryFormat? memoryFormat=None) -> Tensor",
  cloneI,
);
export const detach = op<Sig<[input: T], Record<never, never>, T>>("detach(Tensor input) -> Tensor", detachI);

// ---------------------------------------------------------------- view, reshape

/** PyTorch's infer_size: one -1 is inferred, the product must be `n`. */
function inferSizes(shape: readonly number[], n: number): number[] {
  let infer = -1;
  let prod = 1;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    if (d === -1) {
      if (infer >= 0) throw new Error("only one dimension can be inferred");
      infer = i;
    } else if (d < 0) throw new Error(`invalid shape dimension ${d}`);
    else prod *= d;
  }
  const out = [...shape];
  if (infer >= 0) {
    if (prod === 0)
      throw new Error(
        `cannot reshape tensor of ${n} elements into shape ${listStr(shape)} because the unspecified dimension size -1 can be any value and is ambiguous`,
      );
    if (n % prod !== 0) throw new Error(`shape '${listStr(shape)}' is invalid for input of size ${n}`);
    out[infer] = n / prod;
  } else if (prod !== n) throw new Error(`shape '${listStr(shape)}' is invalid for input of size ${n}`);
  return out;
}

function viewI(x: T, size: readonly number[]): T {
  return reshapeCore(x, inferSizes(size, x.numel()), "view");
}
function viewDtypeI(x: T, dtype: DType): T {
  if (dtype === x.dtype) return reshapeCore(x, x.shape, "view");
  throw new Error(
    `viewing a ${x.dtype} tensor as ${dtype} reinterprets its bytes, which torchts does not support; use x.to("${dtype}") to convert the values`,
  );
}
function reshapeI(x: T, shape: readonly number[]): T {
  return reshapeCore(x, inferSizes(shape, x.numel()), "reshape");
}

type SizeArgs<O> = (number | number[] | O)[];
export const view = op<(input: T, ...size: SizeArgs<{ size?: Dims; dtype?: DType } | DType>) => T>(
  ["view(Tensor input, ScalarType dtype) -> Tensor", "view(Tensor input, SymInt[] size) -> Tensor"],
  [viewDtypeI, viewI],
);
export const viewAs = op<Sig<[input: T, other?: T], { other?: T }, T>>(
  "viewAs(Tensor input, Tensor other) -> Tensor",
  (x: T, o: T) => viewI(x, o.shape),
);
export const reshape = op<(input: T, ...shape: SizeArgs<{ shape?: Dims }>) => T>(
  "reshape(Tensor input, SymInt[] shape) -> Tensor",
  reshapeI,
);
export const reshapeAs = op<Sig<[input: T, other?: T], { other?: T }, T>>(
  "reshapeAs(Tensor input, Tensor other) -> Tensor",
  (x: T, o: T) => reshapeI(x, o.shape),
);

// ---------------------------------------------------------------- permutations

function permuteI(x: T, dims: readonly number[]): T {
  const nd = x.ndim;
  if (dims.length !== nd)
    throw new Error(
      `permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = ${nd} is not equal to len(dims) = ${dims.length}`,
    );
  const d = dims.map((v) => normDim(v, nd));
  if (new Set(d).size !== d.length) throw new Error("permute(): duplicate dims are not allowed.");
  return permuteView(x, "PermuteBackward0", d);
}
export const _permute = permuteI;

function transposeI(x: T, d0: number, d1: number): T {
  const nd = x.ndim;
  const a = normDim(d0, nd);
  const b = normDim(d1, nd);
  if (nd === 0) return x;
  const p = x.shape.map((_, i) => i);
  p[a] = b;
  p[b] = a;
  return permuteI(x, p);
}
export const _transpose = transposeI;

function tI(x: T): T {
  if (x.ndim > 2) throw new Error(`t() expects a tensor with <= 2 dimensions, but self is ${x.ndim}D`);
  return x.ndim < 2 ? x : transposeI(x, 0, 1);
}
export const _t = tI;

function movedimI(x: T, src: number | readonly number[], dst: number | readonly number[]): T {
  const nd = x.ndim;
  const sl = typeof src === "number" ? [src] : src;
  const dl = typeof dst === "number" ? [dst] : dst;
  if (sl.length !== dl.length)
    throw new Error(
      `movedim: Invalid source or destination dims: source (${listStr(sl)} dims) should contain the same number of dims as destination (${listStr(dl)} dims)`,
    );
  const s = sl.map((d) => normDim(d, nd));
  const t = dl.map((d) => normDim(d, nd));
  if (new Set(s).size !== s.length) throw new Error(`movedim: repeated dim in \`source\` (${listStr(sl)})`);
  if (new Set(t).size !== t.length) throw new Error(`movedim: repeated dim in \`destination\` (${listStr(dl)})`);
  if (nd === 0) return x;
  const order = new Array<number>(nd).fill(-1);
  s.forEach((d, i) => (order[t[i]!] = d));
  const rest = x.shape.map((_, i) => i).filter((i) => !s.includes(i));
  for (let i = 0, r = 0; i < nd; i++) if (order[i] === -1) order[i] = rest[r++]!;
  return permuteI(x, order);
}

export const permute = op<(input: T, ...dims: SizeArgs<{ dims?: Dims }>) => T>("permute(Tensor input, int[] dims) -> Tensor", permuteI);
export const transpose = op<Sig<[input: T, dim0?: number, dim1?: number], { dim0?: number; dim1?: number }, T>>(
  "transpose(Tensor input, int dim0, int dim1) -> Tensor",
  transposeI,
);
export const swapaxes = op<Sig<[input: T, axis0?: number, axis1?: number], { axis0?: number; axis1?: number }, T>>(
  "swapaxes(Tensor input, int axis0, int axis1) -> Tensor",
  transposeI,
);
export const swapdims = op<Sig<[input: T, dim0?: number, dim1?: number], { dim0?: number; dim1?: number }, T>>(
  "swapdims(Tensor input, int dim0, int dim1) -> Tensor",
  transposeI,
);
export const t = op<Sig<[input: T], Record<never, never>, T>>("t(Tensor input) -> Tensor", tI);
export const movedim = op<Sig<[input: T, source?: Dims, destination?: Dims], { source?: Dims; destination?: Dims }, T>>(
  ["movedim(Tensor input, int source, int destination) -> Tensor", "movedim(Tensor input, int[] source, int[] destination) -> Tensor"],
  movedimI,
);

// ---------------------------------------------------------------- expand

function expandI(x: T, size: readonly number[]): T {
  for (const s of size) if (s < -1) throw new Error(`Trying to create tensor with negative dimension ${s}: ${listStr(size)}`);
  const out = expandView(x, [...size]);
  checkNumel(out.shape);
  return out;
}
export const _expand = (x: T, shape: Shape): T => expandView(x, shape);

export const expand = op<(input: T, ...size: SizeArgs<{ size?: Dims; implicit?: boolean }>) => T>(
  "expand(Tensor input, SymInt[] size, *, bool implicit=False) -> Tensor",
  (x: T, size: number[]) => expandI(x, size),
);
export const expandAs = op<Sig<[input: T, other?: T], { other?: T }, T>>(
  "expandAs(Tensor input, Tensor other) -> Tensor",
  (x: T, o: T) => expandI(x, o.shape),
);
export const broadcastTo = op<(input: T, ...size: SizeArgs<{ size?: Dims }>) => T>(
  "broadcastTo(Tensor input, int[] size) -> Tensor",
  expandI,
);

// ---------------------------------------------------------------- slicing

/** Strided slice along one dim: x[..., start:end:step, ...] with Python clamping rules. */
function sliceI(x: T, dim: number, start: number | null, end: number | null, step: number): T {
  if (x.ndim === 0) throw new Error("slice() cannot be applied to a 0-dim tensor.");
  const d = normDim(dim, x.ndim);
  if (step <= 0) throw new Error("slice step must be positive");
  const n = x.shape[d]!;
  let s = start ?? 0;
  let e = end ?? n;
  if (s < 0) s += n;
  if (e < 0) e += n;
  s = Math.min(Math.max(s, 0), n);
  e = Math.min(Math.max(e, s), n);
  const len = Math.ceil((e - s) / step);
  return sliceView(x, "SliceBackward0", d, s, len, step);
}

function narrowI(x: T, dim: number, start: number, length: number): T {
  if (x.ndim === 0) throw new Error("narrow() cannot be applied to a 0-dim tensor.");
  const d = normDim(dim, x.ndim);
  const n = x.shape[d]!;
  let s = start;
  if (s !== n) {
    // PyTorch wraps start like a dim (start == size is allowed for an empty narrow)
    if (s < -n || s >= n)
      throw new RangeError(`Dimension out of range (expected to be in range of [${-n}, ${n - 1}], but got ${start})`);
    if (s < 0) s += n;
  }
  if (length < 0 || s > n - length) throw new Error(`start (${s}) + length (${length}) exceeds dimension size (${n}).`);
  return sliceI(x, d, s, s + length, 1);
}
export const _narrow = narrowI;

function selectI(x: T, dim: number, index: number): T {
  if (x.ndim === 0) throw new RangeError("select() cannot be applied to a 0-dim tensor.");
  const d = normDim(dim, x.ndim);
  const n = x.shape[d]!;
  if (index < -n || index >= n)
    throw new RangeError(`select(): index ${index} out of range for tensor of size ${shapeStr(x.shape)} at dimension ${d}`);
  const i = index < 0 ? index + n : index;
  const id = eye(x.ndim);
  const keep = x.shape.map((_, k) => k).filter((k) => k !== d);
  return affineView(x, "SelectBackward0", keep.map((k) => x.shape[k]!), keep.map((k) => id[k]!), unit(x.ndim, d, i));
}

export const slice = op<
  Sig<[input: T, dim?: number, start?: number | null, end?: number | null, step?: number], { dim?: number; start?: number | null; end?: number | null; step?: number }, T>
>("slice(Tensor input, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor", sliceI);
export const narrow = op<Sig<[input: T, dim?: number, start?: number, length?: number], { dim?: number; start?: number; length?: number }, T>>(
  "narrow(Tensor input, int dim, int start, int length) -> Tensor",
  narrowI,
);
export const select = op<Sig<[input: T, dim?: number, index?: number], { dim?: number; index?: number }, T>>(
  "select(Tensor input, int dim, int index) -> Tensor",
  selectI,
);

// ---------------------------------------------------------------- squeeze, unsqueeze, flatten

function unsqueezeI(x: T, dim: number): T {
  const d = normDim(dim, x.ndim + 1);
  const shape = [...x.shape];
  shape.splice(d, 0, 1);
  return reshapeCore(x, shape, "view");
}

function squeezeI(x: T, dim: number | null): T {
  let shape: number[];
  if (dim === null) shape = x.shape.filter((s) => s !== 1);
  else {
    const d = normDim(dim, x.ndim);
    shape = x.shape.filter((s, i) => !(s === 1 && i === d));
  }
  if (shape.length === x.ndim) return x;
  return reshapeCore(x, shape, "view");
}

function flattenI(x: T, startDim: number, endDim: number): T {
  const s = normDim(startDim, x.ndim);
  const e = normDim(endDim, x.ndim);
  if (x.ndim === 0) return reshapeCore(x, [1]);
  if (s > e) throw new Error("flatten() has invalid args: start_dim cannot come after end_dim");
  const shape = [...x.shape.slice(0, s), x.shape.slice(s, e + 1).reduce((a, b) => a * b, 1), ...x.shape.slice(e + 1)];
  return reshapeCore(x, shape);
}

function unflattenI(x: T, dim: number, sizes: readonly number[]): T {
  if (x.ndim === 0) throw new RangeError("Dimension specified as 0 but tensor has no dimensions");
  const d = normDim(dim, x.ndim);
  if (sizes.length === 0) throw new Error("unflatten: sizes must be non-empty");
  const n = x.shape[d]!;
  let infer = -1;
  let prod = 1;
  sizes.forEach((s, i) => {
    if (s === -1) {
      if (infer >= 0) throw new Error("unflatten: only one dimension can be inferred");
      infer = i;
    } else if (s < 0) throw new Error(`unflatten: invalid shape dimension ${s}`);
    else prod *= s;
  });
  const out = [...sizes];
  if (infer >= 0 ? prod === 0 || n % prod !== 0 : prod !== n)
    throw new Error(`unflatten: Provided sizes ${listStr(sizes)} don't multiply up to the size of dim ${dim} (${n}) in the input tensor`);
  if (infer >= 0) out[infer] = n / prod;
  return reshapeCore(x, [...x.shape.slice(0, d), ...out, ...x.shape.slice(d + 1)], "view");
}

export const unsqueeze = op<Sig<[input: T, dim?: number], { dim?: number }, T>>("unsqueeze(Tensor input, int dim) -> Tensor", unsqueezeI);
export const squeeze = op<Sig<[input: T, dim?: number | null], { dim?: number | null }, T>>(
  "squeeze(Tensor input, int? dim=None) -> Tensor",
  squeezeI,
);
export const flatten = op<Sig<[input: T, startDim?: number, endDim?: number], { startDim?: number; endDim?: number }, T>>(
  "flatten(Tensor input, int startDim=0, int endDim=-1) -> Tensor",
  flattenI,
);
export const unflatten = op<Sig<[input: T, dim?: number, sizes?: Dims], { dim?: number; sizes?: Dims }, T>>(
  "unflatten(Tensor input, int dim, int[] sizes) -> Tensor",
  unflattenI,
);
export const ravel = op<Sig<[input: T], Record<never, never>, T>>("ravel(Tensor input) -> Tensor", (x: T) => reshapeCore(x, [x.numel()]));

// ---------------------------------------------------------------- split, chunk, unbind

function splitI(x: T, sizes: number | readonly number[], dim: number): T[] {
  if (x.ndim === 0) throw new Error("split expects at least a 1-dimensional tensor");
  const d = normDim(dim, x.ndim);
  const n = x.shape[d]!;
  let parts: number[];
  if (typeof sizes === "number") {
    if (sizes < 0) throw new Error(`split expects split_size be non-negative, but got split_size=${sizes}`);
    if (sizes === 0 && n !== 0) throw new Error(`split_size can only be 0 if dimension size is 0, but got dimension size of ${n}`);
    parts = [];
    for (let s = 0; s < n; s += sizes) parts.push(Math.min(sizes, n - s));
    if (n === 0) parts = [0];
  } else {
    if (sizes.some((p) => p < 0))
      throw new Error(`split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=${listStr(sizes)}`);
    parts = [...sizes];
    const tot = parts.reduce((a, b) => a + b, 0);
    if (tot !== n)
      throw new Error(
        `split_with_sizes expects split_sizes to sum exactly to ${n} (input tensor's size at dimension ${d}), but got split_sizes=${listStr(parts)}`,
      );
  }
  let s = 0;
  const views = noGrad(() =>
    parts.map((p) => {
      const r = sliceI(x, d, s, s + p, 1);
      s += p;
      return r;
    }),
  );
  if (!isGradEnabled() || !x.requiresGrad || views.length === 0) return views;
  // one node for all parts, as PyTorch's SplitBackward0: the gradient is the parts' gradients
  // concatenated (the engine passes zeros for unused parts), one cat instead of a zero-filled
  // scatter per part plus the adds that sum them
  const node = new Node("SplitBackward0", [edgeOf(x)], [], (gs) => [catI("cat", gs as T[], d)],
    views.map((v) => ({ shape: [...v.shape], dtype: v.dtype, device: v.device })));
  views.forEach((v, i) => {
    v.gradFn = node;
    v._outputNr = i;
  });
  return views;
}

function chunkI(x: T, chunks: number, dim: number): T[] {
  if (x.ndim === 0) throw new Error("chunk expects at least a 1-dimensional tensor");
  if (chunks <= 0) throw new Error(`chunk expects \`chunks\` to be greater than 0, got: ${chunks}`);
  const d = normDim(dim, x.ndim);
  const n = x.shape[d]!;
  // PyTorch: an empty dim gives `chunks` empty parts (split would give one)
  if (n === 0) return splitI(x, new Array<number>(chunks).fill(0), d);
  return splitI(x, Math.ceil(n / chunks), d);
}

function unbindI(x: T, dim: number): T[] {
  if (x.ndim === 0) throw new RangeError("Dimension specified as 0 but tensor has no dimensions");
  const d = normDim(dim, x.ndim);
  return Array.from({ length: x.shape[d]! }, (_, i) => selectI(x, d, i));
}

type SplitArgs = [input: T, splitSizeOrSections?: Dims, dim?: number];
export const split = op<Sig<SplitArgs, { splitSizeOrSections?: Dims; dim?: number }, T[]>>(
  [
    "split(Tensor input, int splitSizeOrSections, int dim=0) -> Tensor[]",
    "split(Tensor input, int[] splitSizeOrSections, int dim=0) -> Tensor[]",
  ],
  splitI,
);
/** Tensor.split(split_size, dim=0): PyTorch's method names the size `split_size`. */
export type SplitMethodSig = Sig<[input: T, splitSize?: Dims, dim?: number], { splitSize?: Dims; dim?: number }, T[]>;
const splitMethod = op<SplitMethodSig>(
  ["split(Tensor self, int splitSize, int dim=0) -> Tensor[]", "split(Tensor self, int[] splitSize, int dim=0) -> Tensor[]"],
  splitI,
  { key: "Tensor.split" },
);
export const chunk = op<Sig<[input: T, chunks?: number, dim?: number], { chunks?: number; dim?: number }, T[]>>(
  "chunk(Tensor input, int chunks, int dim=0) -> Tensor[]",
  chunkI,
);
export const unbind = op<Sig<[input: T, dim?: number], { dim?: number }, T[]>>("unbind(Tensor input, int dim=0) -> Tensor[]", unbindI);

// ---------------------------------------------------------------- diagonal, flip, roll, tril

function diagonalI(x: T, offset: number, dim1: number, dim2: number): T {
  const a = normDim(dim1, x.ndim);
  const b = normDim(dim2, x.ndim);
  if (a === b) throw new Error(`diagonal dimensions cannot be identical ${dim1}, ${dim2}`);
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

function flipI(x: T, dims: number | readonly number[]): T {
  const ds = (typeof dims === "number" ? [dims] : dims).map((d) => normDim(d, x.ndim));
  for (let i = 0; i < ds.length; i++)
    if (ds.indexOf(ds[i]!) !== i) throw new Error(`dim ${ds[i]} appears multiple times in the list of dims`);
  const id = eye(x.ndim);
  const coef = id.map((r, i) => (ds.includes(i) ? r.map((v) => -v) : r));
  const start = x.shape.map((n, i) => (ds.includes(i) && n > 0 ? n - 1 : 0));
  return affineView(x, "FlipBackward0", x.shape, coef, start);
}
export const _flip = flipI;

function rollI(x: T, sh: readonly number[], ds: readonly number[]): T {
  if (ds.length === 0) {
    if (sh.length !== 1) throw new Error(`shifts and dimensions must align. shifts: ${sh.length}, dims:0`);
    return reshapeCore(rollI(flattenI(x, 0, -1), sh, [0]), x.shape);
  }
  if (sh.length !== ds.length) throw new Error(`shifts and dimensions must align. shifts: ${sh.length}, dims:${ds.length}`);
  if (x.ndim === 0) throw new RangeError("Dimension specified as 0 but tensor has no dimensions");
  let r = x;
  sh.forEach((s, i) => {
    const d = normDim(ds[i]!, x.ndim);
    const n = x.shape[d]!;
    if (n === 0) return;
    const k = ((s % n) + n) % n;
    if (k === 0) return;
    r = catI("roll", [narrowI(r, d, n - k, k), narrowI(r, d, 0, n - k)], d);
  });
  return r;
}

function triMask(x: T, diagonal: number, upper: boolean): T {
  if (x.ndim < 2) normDim(-2, x.ndim); // PyTorch's IndexError for a 0-d / 1-d input
  const [r, c] = x.shape.slice(-2) as [number, number];
  const i = reshapeCore(arange(r, { device: x.device }), [r, 1]);
  const j = reshapeCore(arange(c, { device: x.device }), [1, c]);
  const diff = M.sub(j, i);
  return upper ? M.ge(diff, diagonal) : M.le(diff, diagonal);
}
const trilI = (x: T, diagonal: number): T => M.where(triMask(x, diagonal, false), x, M._zerosLike(x).detach());
const triuI = (x: T, diagonal: number): T => M.where(triMask(x, diagonal, true), x, M._zerosLike(x).detach());

export const diagonal = op<Sig<[input: T, offset?: number, dim1?: number, dim2?: number], { offset?: number; dim1?: number; dim2?: number }, T>>(
  "diagonal(Tensor input, int offset=0, int dim1=0, int dim2=1) -> Tensor",
  diagonalI,
);
export const flip = op<(input: T, ...dims: SizeArgs<{ dims?: Dims }>) => T>("flip(Tensor input, int[] dims) -> Tensor", flipI);
export const roll = op<Sig<[input: T, shifts?: Dims, dims?: Dims], { shifts?: Dims; dims?: Dims }, T>>(
  "roll(Tensor input, int[1] shifts, int[1] dims=[]) -> Tensor",
  rollI,
);
export const tril = op<Sig<[input: T, diagonal?: number], { diagonal?: number }, T>>("tril(Tensor input, int diagonal=0) -> Tensor", trilI);
export const triu = op<Sig<[input: T, diagonal?: number], { diagonal?: number }, T>>("triu(Tensor input, int diagonal=0) -> Tensor", triuI);

// ---------------------------------------------------------------- cat, stack

function catI(name: string, ts: readonly T[], dim: number): T {
  if (!ts.length) throw new Error(`${name}(): expected a non-empty list of Tensors`);
  // legacy behaviour: 1-D empty tensors are skipped
  const used = ts.filter((t) => !(t.ndim === 1 && t.shape[0] === 0));
  if (!used.length) return ts[0]!;
  const ref = used[0]!;
  if (ref.ndim === 0) throw new Error("zero-dimensional tensor (at position 0) cannot be concatenated");
  const d = normDim(dim, ref.ndim);
  let dtype = ref.dtype;
  for (const t of used) {
    dtype = promoteTypes(dtype, t.dtype);
    if (t.ndim !== ref.ndim) {
      if (t.ndim === 0) throw new Error(`zero-dimensional tensor (at position ${ts.indexOf(t)}) cannot be concatenated`);
      throw new Error(`Tensors must have same number of dimensions: got ${ref.ndim} and ${t.ndim}`);
    }
    if (t.device !== ref.device)
      throw new Error(`Expected all tensors to be on the same device, but found at least two devices, ${ref.device} and ${t.device}!`);
    for (let i = 0; i < t.ndim; i++)
      if (i !== d && t.shape[i] !== ref.shape[i])
        throw new Error(
          `Sizes of tensors must match except in dimension ${d}. Expected size ${ref.shape[i]} but got size ${t.shape[i]} for tensor number ${ts.indexOf(t)} in the list (shapes ${shapeStr(ref.shape)} and ${shapeStr(t.shape)}).`,
        );
  }
  return catPrim(used.map((t) => cast(t, dtype)), d);
}
/** torch.cat without argument binding (internal callers). */

function stackI(name: string, ts: readonly T[], dim: number): T {
  if (!ts.length) throw new Error(`${name} expects a non-empty TensorList`);
  const d = normDim(dim, ts[0]!.ndim + 1);
  for (const t of ts)
    if (t.shape.length !== ts[0]!.shape.length || t.shape.some((v, i) => v !== ts[0]!.shape[i]))
      throw new Error(`${name} expects each tensor to be equal size, but got ${shapeStr(ts[0]!.shape)} at entry 0 and ${shapeStr(t.shape)} at entry ${ts.indexOf(t)}`);
  return catI(name, ts.map((t) => unsqueezeI(t, d)), d);
}

const atleast1d = (t: T): T => (t.ndim === 0 ? reshapeCore(t, [1]) : t);
const atleast2d = (t: T): T => (t.ndim === 0 ? reshapeCore(t, [1, 1]) : t.ndim === 1 ? unsqueezeI(t, 0) : t);

type CatSig = Sig<[tensors: T[], dim?: number], { tensors?: T[]; dim?: number }, T>;
const catSchema = (name: string) => `${name}(Tensor[] tensors, int dim=0) -> Tensor`;
export const cat = op<CatSig>(catSchema("cat"), (ts: T[], dim: number) => catI("cat", ts, dim));
export const concat = op<CatSig>(catSchema("concat"), (ts: T[], dim: number) => catI("concat", ts, dim));
export const concatenate = op<CatSig>(catSchema("concatenate"), (ts: T[], dim: number) => catI("concatenate", ts, dim));
export const stack = op<CatSig>("stack(Tensor[] tensors, int dim=0) -> Tensor", (ts: T[], dim: number) => stackI("stack", ts, dim));
export const hstack = op<Sig<[tensors: T[]], { tensors?: T[] }, T>>("hstack(Tensor[] tensors) -> Tensor", (ts: T[]) => {
  if (!ts.length) throw new Error("hstack expects a non-empty TensorList");
  const at = ts.map(atleast1d);
  return catI("hstack", at, at[0]!.ndim === 1 ? 0 : 1);
});
export const vstack = op<Sig<[tensors: T[]], { tensors?: T[] }, T>>("vstack(Tensor[] tensors) -> Tensor", (ts: T[]) => {
  if (!ts.length) throw new Error("vstack expects a non-empty TensorList");
  return catI("vstack", ts.map(atleast2d), 0);
});

// ---------------------------------------------------------------- repeat, tile, repeat_interleave, unfold

function repeatI(x: T, r: readonly number[]): T {
  if (r.length < x.ndim)
    throw new Error("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  const pad = r.length - x.ndim;
  const xs = [...new Array<number>(pad).fill(1), ...x.shape];
  const outShape = xs.map((s, i) => s * r[i]!);
  const neg = r.findIndex((v) => v < 0);
  if (neg >= 0) throw new Error(`Trying to create tensor with negative dimension ${Math.min(outShape[neg]!, r[neg]!)}: ${listStr(outShape)}`);
  checkNumel(outShape);
  checkAlloc(outShape, x.dtype);
  const inter: number[] = [];
  const big: number[] = [];
  xs.forEach((s, i) => {
    inter.push(1, s);
    big.push(r[i]!, s);
  });
  const v = reshapeCore(x, inter);
  return reshapeCore(_contiguous(expandView(v, big)), outShape);
}

function tileI(x: T, reps: readonly number[]): T {
  const r = reps.length < x.ndim ? [...new Array<number>(x.ndim - reps.length).fill(1), ...reps] : reps;
  return repeatI(x, r);
}

/** The host values of a repeats tensor (an integer tensor of 0 or 1 dims). */
function repeatsOf(rep: T): number[] {
  if (rep.ndim > 1) throw new Error("repeats must be 0-dim or 1-dim tensor");
  if (rep.dtype !== "int64" && rep.dtype !== "int32")
    throw new Error(`repeats must be an integer tensor (int64 or int32), got ${rep.dtype}`);
  return Array.from(rep._contiguousHost() as ArrayLike<number>, Number);
}

function repeatInterleaveIntI(x: T, repeats: number, dim: number | null, outputSize: number | null): T {
  if (repeats < 0) throw new Error("repeats can not be negative");
  if (dim === null) return repeatInterleaveIntI(flattenI(x, 0, -1), repeats, 0, outputSize);
  if (x.ndim === 0) return repeatInterleaveIntI(reshapeCore(x, [1]), repeats, 0, outputSize);
  const d = normDim(dim, x.ndim);
  const out = [...x.shape];
  out[d] = x.shape[d]! * repeats;
  if (outputSize !== null && outputSize !== out[d]) throw new Error("allocated size does not match required size");
  checkNumel(out);
  checkAlloc(out, x.dtype);
  const u = unsqueezeI(x, d + 1);
  const sh = [...u.shape];
  sh[d + 1] = repeats;
  const e = _contiguous(expandView(u, sh));
  return reshapeCore(e, out);
}

function repeatInterleaveTensorI(x: T, repeats: T, dim: number | null, outputSize: number | null): T {
  const reps = repeatsOf(repeats);
  if (reps.some((r) => r < 0)) throw new Error("repeats can not be negative");
  if (dim === null) return repeatInterleaveTensorI(flattenI(x, 0, -1), repeats, 0, outputSize);
  if (x.ndim === 0) return repeatInterleaveTensorI(reshapeCore(x, [1]), repeats, 0, outputSize);
  const d = normDim(dim, x.ndim);
  const n = x.shape[d]!;
  if (reps.length === 1 && repeats.ndim === 0) return repeatInterleaveIntI(x, reps[0]!, d, outputSize);
  if (reps.length === 1 && n !== 1) return repeatInterleaveIntI(x, reps[0]!, d, outputSize);
  if (reps.length !== n) throw new Error("repeats must have the same size as input along dim");
  const total = reps.reduce((a, b) => a + b, 0);
  if (outputSize !== null && outputSize !== total) throw new Error("allocated size does not match required size");
  const outShape = [...x.shape];
  outShape[d] = total;
  checkNumel(outShape);
  checkAlloc(outShape, x.dtype);
  // runs of slices, each broadcast along a new dim `r` times, concatenated
  const parts: T[] = [];
  reps.forEach((r, i) => {
    if (r === 0) return;
    const s = unsqueezeI(narrowI(x, d, i, 1), d + 1);
    const sh = [...s.shape];
    sh[d + 1] = r;
    const sz = [...x.shape];
    sz[d] = r;
    parts.push(reshapeCore(_contiguous(expandView(s, sh)), sz));
  });
  if (parts.length === 0) return _contiguous(narrowI(x, d, 0, 0));
  return parts.length === 1 ? parts[0]! : catI("repeatInterleave", parts, d);
}

function repeatsOnlyI(repeats: T, outputSize: number | null): T {
  const reps = repeatsOf(repeats);
  if (repeats.ndim === 0) throw new Error("repeats must be 1-dim tensor");
  const idx = arange(reps.length, { dtype: repeats.dtype, device: repeats.device });
  return repeatInterleaveTensorI(idx, repeats, 0, outputSize);
}

function unfoldI(x: T, dimension: number, size: number, step: number): T {
  const d = normDim(dimension, x.ndim);
  const n = x.ndim === 0 ? 1 : x.shape[d]!;
  if (size > n) throw new Error(`maximum size for tensor at dimension ${d} is ${n} but size is ${size}`);
  if (size < 0) throw new Error(`size is ${size} but must be >= 0`);
  if (step <= 0) throw new Error(`step is ${step} but must be > 0`);
  if (x.ndim === 0) return sliceI(reshapeCore(x, [1]), 0, 0, size, 1);
  const count = Math.floor((n - size) / step) + 1;
  const id = eye(x.ndim);
  const coef = id.map((r, i) => (i === d ? r.map((v) => v * step) : r));
  return affineView(x, "UnfoldBackward0", [...x.shape.map((v, i) => (i === d ? count : v)), size], [...coef, id[d]!], zerosVec(x.ndim));
}
export const _unfold = unfoldI;

export const repeat = op<(input: T, ...repeats: SizeArgs<{ repeats?: Dims }>) => T>("repeat(Tensor input, SymInt[] repeats) -> Tensor", repeatI);
export const tile = op<(input: T, ...dims: SizeArgs<{ dims?: Dims }>) => T>("tile(Tensor input, int[] dims) -> Tensor", tileI);
type RepeatInterleaveOpts = { repeats?: number | T; dim?: number | null; outputSize?: number | null };
export const repeatInterleave = op<Sig<[input: T, repeats?: number | T, dim?: number | null], RepeatInterleaveOpts, T>>(
  [
    "repeatInterleave(Tensor input, int repeats, int? dim=None, *, int? outputSize=None) -> Tensor",
    "repeatInterleave(Tensor input, Tensor repeats, int? dim=None, *, int? outputSize=None) -> Tensor",
    "repeatInterleave(Tensor repeats, *, int? outputSize=None) -> Tensor",
  ],
  [repeatInterleaveIntI, repeatInterleaveTensorI, repeatsOnlyI],
);
export const unfold = op<Sig<[input: T, dimension?: number, size?: number, step?: number], { dimension?: number; size?: number; step?: number }, T>>(
  "unfold(Tensor input, int dimension, int size, int step) -> Tensor",
  unfoldI,
);

// ---------------------------------------------------------------- constant padding

/** Constant padding; negative pads crop (PyTorch's F.pad semantics, last dim first). */
function constantPadI(x: T, pad: readonly number[], value: number): T {
  if (pad.length % 2 !== 0) throw new Error("Length of pad must be even but instead it equals " + pad.length);
  if (pad.length / 2 > x.ndim)
    throw new Error(`Length of pad should be no more than twice the number of dimensions of the input. Pad length is ${pad.length} while the input has ${x.ndim} dimensions.`);
  let r = x;
  const pads = new Array<number>(2 * x.ndim).fill(0);
  for (let i = 0; i < pad.length / 2; i++) {
    const d = x.ndim - 1 - i;
    let lo = pad[2 * i]!;
    let hi = pad[2 * i + 1]!;
    if (lo < 0 || hi < 0) {
      // negative padding crops first (PyTorch narrows, with narrow's errors)
      const n = r.shape[d]!;
      const s = lo < 0 ? -lo : 0;
      const e = hi < 0 ? n + hi : n;
      r = narrowI(r, d, s, e - s);
      lo = Math.max(lo, 0);
      hi = Math.max(hi, 0);
    }
    pads[2 * d] = lo;
    pads[2 * d + 1] = hi;
  }
  const outShape = r.shape.map((n, i) => n + pads[2 * i]! + pads[2 * i + 1]!);
  checkNumel(outShape);
  checkAlloc(outShape, x.dtype);
  return pads.some((p) => p > 0) ? padPrim(r, pads, value) : r;
}
/** F.pad's constant mode without argument binding (internal callers: F.pad, conv). */
export const _constantPad = (x: T, pad: readonly number[], value = 0): T => constantPadI(x, pad, value);

export const constantPadNd = op<Sig<[input: T, pad?: number[], value?: number], { pad?: number[]; value?: number }, T>>(
  "constantPadNd(Tensor input, int[] pad, Scalar value=0) -> Tensor",
  (x: T, pad: number[], value: number | boolean) => constantPadI(x, pad, Number(value)),
);

// ---------------------------------------------------------------- devices and dtypes

/** Move a tensor to another device (synchronous for host-visible sources). */
export function _toDevice(x: T, device: string): T {
  if (x.device === device.split(":")[0]) return x;
  const dst = getDevice(device);
  const host = x._contiguousHost();
  const st = Storage.fromHost(dst, x.dtype, host);
  const out = new Tensor(st, x.shape);
  const src = x.device;
  return attach(out, "ToCopyBackward0", [x], [], ([g]) => [_toDevice(g!, src)]);
}

function checkDevice(device: string, op: string): void {
  const devs = registeredDevices();
  if (!devs.includes(device.split(":")[0]!))
    throw new TypeError(
      `${op}(): '${device}' is neither a torch.dtype (${DTYPES.join(", ")}) nor a registered device (${devs.join(", ")})`,
    );
}

function toI(x: T, device: string | null, dtype: DType | null, copy: boolean, fmt: MemoryFormat | null): T {
  let r = x;
  if (device !== null) {
    checkDevice(device, "to");
    r = _toDevice(r, device);
  }
  if (dtype !== null) r = cast(r, dtype);
  if (fmt === "channels_last" || fmt === "channels_last_3d") r = channelsLastI(r, fmt, copy && r === x);
  else if (fmt === "contiguous_format") r = _contiguous(r);
  if (copy && r === x) r = unary("identity", x);
  return r;
}

type ToOpts = { device?: string | null; dtype?: DType | null; tensor?: T; nonBlocking?: boolean; copy?: boolean; memoryFormat?: MemoryFormat | null };
export const to = op<Sig<[input: T, a?: DType | string | T | null, b?: DType | boolean | null, c?: boolean, d?: boolean], ToOpts, T>>(
  [
    // dtype=None binds here too (PyTorch's keyword-only dtype_layout overload): x.to(null) is x
    "to(Tensor input, ScalarType? dtype, bool nonBlocking=False, bool copy=False, *, MemoryFormat? memoryFormat=None) -> Tensor",
    "to(Tensor input, Device? device=None, ScalarType? dtype=None, bool nonBlocking=False, bool copy=False, *, MemoryFormat? memoryFormat=None) -> Tensor",
    "to(Tensor input, Tensor tensor, bool nonBlocking=False, bool copy=False, *, MemoryFormat? memoryFormat=None) -> Tensor",
  ],
  [
    (x: T, dtype: DType | null, _nb: boolean, copy: boolean, fmt: MemoryFormat | null) => toI(x, null, dtype, copy, fmt),
    (x: T, device: string | null, dtype: DType | null, _nb: boolean, copy: boolean, fmt: MemoryFormat | null) => toI(x, device, dtype, copy, fmt),
    (x: T, o: T, _nb: boolean, copy: boolean, fmt: MemoryFormat | null) => toI(x, o.device, o.dtype, copy, fmt),
  ],
);

const TYPE_NAMES: Record<DType, string> = {
  float32: "FloatTensor", float64: "DoubleTensor", float16: "HalfTensor", bfloat16: "BFloat16Tensor", int64: "LongTensor",
  int32: "IntTensor", int8: "CharTensor", uint8: "ByteTensor", bool: "BoolTensor",
};
const typeName = (x: T) => `torch.${x.device === "cpu" ? "" : `${x.device}.`}${TYPE_NAMES[x.dtype]}`;
/** Tensor.type(): the type name ("torch.FloatTensor") or, given a dtype or type name, a cast. */
export type TypeMethodSig = ((opts?: { dtype?: null; nonBlocking?: boolean }) => string) &
  ((dtype: DType | string | { dtype: DType | string; nonBlocking?: boolean }, nonBlocking?: boolean | { nonBlocking?: boolean }) => T);
const typeMethod = op(
  [
    "type(Tensor self, ScalarType? dtype=None, bool nonBlocking=False) -> Any",
    "type(Tensor self, str dtype, bool nonBlocking=False) -> Tensor",
  ],
  [
    (x: T, dtype: DType | null) => (dtype === null ? typeName(x) : cast(x, dtype)),
    (x: T, name: string) => {
      const m = /^torch\.(?:([a-z]\w*)\.)?([A-Za-z0-9]+Tensor)$/.exec(name);
      const dtype = m ? (Object.keys(TYPE_NAMES) as DType[]).find((k) => TYPE_NAMES[k] === m[2]) : undefined;
      if (!m || !dtype) throw new Error(`invalid type: '${name}'`);
      return toI(x, m[1] ?? "cpu", dtype, false, null);
    },
  ],
  { key: "Tensor.type" },
);
/** Tensor.cpu(memory_format=torch.preserve_format) */
export type CpuMethodSig = (opts?: { memoryFormat?: MemoryFormat }) => T;
const cpuMethod = op(
  "cpu(Tensor self, *, MemoryFormat memoryFormat=preserve_format) -> Tensor",
  (x: T, fmt: MemoryFormat) => toI(x, "cpu", null, false, fmt),
  { key: "Tensor.cpu" },
);

// ---------------------------------------------------------------- Tensor methods

installMethods({
  contiguous, clone, detach, view, viewAs, reshape, reshapeAs, permute, transpose, swapaxes, swapdims, t, movedim,
  expand, expandAs, broadcastTo, narrow, select, slice, squeeze, unsqueeze, flatten, unflatten, ravel, split: splitMethod,
  chunk, unbind, diagonal, flip, roll, tril, triu, repeat, tile, repeatInterleave, unfold, to, cpu: cpuMethod,
});
installMethods({ type: typeMethod });

export type { Shape };
