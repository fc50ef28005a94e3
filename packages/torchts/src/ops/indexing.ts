// Indexing: Python's t[...] and t[...] = v, and the gather/scatter/mask family.
// Basic indexing (ints, slices, None, ...) is views; advanced indexing (int/bool tensors)
// becomes one gather over a flat linear index, so gradients (scatter-add) come from core.
// Host reads: nonzero/bool masks must know how many elements they select, and int index
// tensors on host-readable devices are bounds-checked on the host so errors name the
// index like PyTorch; both synchronize (flush pending work) when the index is not ready. On a
// device without synchronous reads (webgpu) a mask raises (needHostRead); a cpu mask or index
// tensor may index a tensor on any device, as in PyTorch (its indices are uploaded).
import { isFloating, type DType } from "../ir/dtype.js";
import { broadcastShapes, normDim, numel, sameShape, shapeStr, type Shape } from "../ir/shape.js";
import { currentOpName, withOp } from "../runtime/mode.js";
import { isGradEnabled } from "../autograd/grad_mode.js";
import { realize, traceState } from "../runtime/dispatch.js";
import { Tensor, type NestedArray, type TensorLike } from "../tensor.js";
import {
  cast,
  expand,
  fromHostData,
  gather as gatherPrim,
  reshape,
  scalarTensor,
  scatterAdd as scatterAddPrim,
  where as wherePrim,
} from "./core.js";
import { full, tensor } from "./creation.js";
import { inplaceSet } from "./inplace.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";

/** A Python slice `start:stop:step`; build one with `sl(...)`. */
export interface Slice {
  start?: number | null;
  stop?: number | null;
  step?: number | null;
}
/**
 * One entry of `t[...]`: an int (select), null (new axis), "..." (ellipsis), a slice string
 * ("1:7:3", ":", "-3:") or comma list ("::2, 1:7:3", "..., None, 1:3"), a Slice, an int or
 * bool Tensor, or a nested number/boolean array (a Python list index, e.g. [[0, 2]] in `set`).
 */
export type IndexSpec = number | boolean | null | string | Slice | Tensor | NestedArray[];

export function sl(start: number | null = null, stop: number | null = null, step: number | null = null): Slice {
  return { start, stop, step };
}

type Item =
  | { k: "int"; v: number }
  | { k: "none" }
  | { k: "ellipsis" }
  | { k: "slice"; start: number | null; stop: number | null; step: number | null }
  | { k: "tensor"; t: Tensor };

const INT_RE = /^[+-]?\d+$/;

function parseInt_(s: string, what: string): number | null {
  const t = s.trim();
  if (t === "" || t === "None") return null;
  if (!INT_RE.test(t)) throw new TypeError(`index: ${what} '${s}' must be an integer or None`);
  return Number(t);
}

function parseToken(tok: string): Item {
  const s = tok.trim();
  if (s === "..." || s === "Ellipsis") return { k: "ellipsis" };
  if (s === "None") return { k: "none" };
  if (INT_RE.test(s)) return { k: "int", v: Number(s) };
  if (s.includes(":")) {
    const p = s.split(":");
    if (p.length > 3) throw new TypeError(`index: invalid slice '${s}'`);
    return { k: "slice", start: parseInt_(p[0]!, "slice start"), stop: parseInt_(p[1]!, "slice stop"), step: p.length === 3 ? parseInt_(p[2]!, "slice step") : null };
  }
  throw new TypeError(`index: cannot parse index '${tok}' (expected an int, a slice like '1:7:2', '...' or 'None')`);
}

function parseSpecs(specs: readonly IndexSpec[]): Item[] {
  const out: Item[] = [];
  for (const sp of specs) {
    if (sp === null || sp === undefined) out.push({ k: "none" });
    else if (sp instanceof Tensor) out.push({ k: "tensor", t: sp });
    else if (typeof sp === "number") {
      if (!Number.isInteger(sp))
        throw new TypeError(
          `only integers, slices (\`:\`), ellipsis (\`...\`), None and long or byte Variables are valid indices (got ${sp})`,
        );
      out.push({ k: "int", v: sp });
    } else if (typeof sp === "boolean") out.push({ k: "tensor", t: tensor(sp, { dtype: "bool" }) });
    else if (typeof sp === "string") {
      const toks = sp.split(",");
      if (toks.length > 1 && toks[toks.length - 1]!.trim() === "") toks.pop(); // "1," is the tuple (1,)
      for (const t of toks) out.push(parseToken(t));
    } else if (Array.isArray(sp)) {
      out.push({ k: "tensor", t: sp.length === 0 ? tensor([], { dtype: "int64" }) : tensor(sp) });
    } else out.push({ k: "slice", start: sp.start ?? null, stop: sp.stop ?? null, step: sp.step ?? null });
  }
  return out;
}

// ---------------- index tensors ----------------

interface Adv {
  dim: number; // dim of the (basic-indexed) tensor this index selects along
  t: Tensor; // int64, possibly negative
  safe?: boolean; // from a mask's nonzero(): in range and non-negative
}

const isIntDtype = (d: DType) => d === "int64" || d === "int32" || d === "int8";

/**
 * A boolean mask (or nonzero's input) is read on the host to count its true elements, which size
 * the result; on a device without synchronous reads (webgpu) that raises, naming the op and the fix.
 */
function needHostRead(t: Tensor): void {
  if (t._storage.device.readSync) return;
  const op = currentOpName() ?? "nonzero";
  const d = t.device;
  const why = `needs its number of true (nonzero) elements on the host, since they size the result, and ${d} tensors cannot be read synchronously`;
  throw new Error(
    op === "nonzero" || op === "argwhere"
      ? `${op}: the input on ${d} ${why}. Use torch.${op}(await t.cpuAsync()) (and .to("${d}") if the indices are needed there).`
      : `${op}: a boolean mask on ${d} ${why}. Pass the mask on the cpu instead, e.g. x.index(await mask.cpuAsync()): ` +
          `a cpu mask or index tensor may index a ${d} tensor, as in PyTorch (maskedFill and torch.where need no host read).`,
  );
}

/** Record a tensor index at `dim` of a tensor of `shape`; returns how many dims it consumes. */
function pushTensorIndex(adv: Adv[], t: Tensor, dim: number, shape: Shape, device: string): number {
  if (t.device !== device && t.device !== "cpu")
    throw new Error(`indices should be either on cpu or on the same device as the indexed tensor (${device})`);
  if (t.dtype === "bool" || t.dtype === "uint8") {
    for (let j = 0; j < t.ndim; j++)
      if (t.shape[j] !== shape[dim + j])
        throw new RangeError(
          `The shape of the mask ${shapeStr(t.shape)} at index ${j} does not match the shape of the indexed tensor ${shapeStr(shape)} at index ${dim + j}`,
        );
    needHostRead(t);
    const nz = S.toDevice(nonzero(t), device); // a cpu mask's indices are uploaded
    for (let j = 0; j < t.ndim; j++) adv.push({ dim: dim + j, t: S.select(nz, 1, j), safe: true });
    return t.ndim;
  }
  if (!isIntDtype(t.dtype)) throw new TypeError("tensors used as indices must be long, byte or bool tensors");
  if (t.device !== device) {
    // a cpu index for a tensor on another device: bounds-checked and wrapped on the host, then uploaded
    const size = shape[dim]!;
    const i64 = cast(t, "int64");
    const neg = checkIndex(i64, size, (v) => `index ${v} is out of bounds for dimension ${dim} with size ${size}`);
    adv.push({ dim, t: S.toDevice(wrapNegative(i64, size, neg), device), safe: true });
    return 1;
  }
  adv.push({ dim, t: cast(t, "int64") });
  return 1;
}

function consumed(items: Item[]): number {
  let n = 0;
  for (const it of items)
    if (it.k === "int" || it.k === "slice") n++;
    else if (it.k === "tensor") n += it.t.dtype === "bool" || it.t.dtype === "uint8" ? it.t.ndim : 1;
  return n;
}

/** Apply the basic part of an index (views); tensor indices are recorded against the view's dims. */
function applyBasic(x: Tensor, items: Item[]): { view: Tensor; adv: Adv[] } {
  if (items.filter((i) => i.k === "ellipsis").length > 1) throw new RangeError("an index can only have a single ellipsis ('...')");
  const used = consumed(items);
  if (x.ndim === 0 && items.some((i) => i.k === "int"))
    throw new RangeError(
      "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number",
    );
  if (used > x.ndim) throw new RangeError(`too many indices for tensor of dimension ${x.ndim}`);
  let r = x;
  let dim = 0;
  const adv: Adv[] = [];
  for (const it of items) {
    switch (it.k) {
      case "int": {
        const n = r.shape[dim]!;
        if (it.v < -n || it.v >= n) throw new RangeError(`index ${it.v} is out of bounds for dimension ${dim} with size ${n}`);
        r = S.select(r, dim, it.v);
        break;
      }
      case "slice": {
        if (it.step === 0) throw new RangeError("slice step cannot be zero");
        if (it.step !== null && it.step < 0) throw new RangeError("step must be greater than zero");
        r = S.slice(r, dim, it.start, it.stop, it.step ?? 1);
        dim++;
        break;
      }
      case "none":
        r = S.unsqueeze(r, dim);
        dim++;
        break;
      case "ellipsis":
        dim += x.ndim - used;
        break;
      case "tensor":
        if (it.t.ndim === 0 && it.t.dtype === "bool") {
          // x[True] adds an axis; x[False] adds an empty one
          r = S.unsqueeze(r, dim);
          needHostRead(it.t);
          if (!it.t._tolistSync()) adv.push({ dim, t: tensor([], { dtype: "int64", device: x.device }) });
          dim++;
        } else dim += pushTensorIndex(adv, it.t, dim, r.shape, x.device);
        break;
    }
  }
  return { view: r, adv };
}

// ---------------- host bounds checks of index values ----------------

/**
 * The smallest and largest value of an integer index tensor, read on the host; null where no cheap
 * synchronous read exists, and then the caller skips its value check:
 * - a device without synchronous reads (webgpu): reading would need an await; its kernels are not
 *   bounds-checked either, so an out-of-range index there is undefined behaviour, as in CUDA PyTorch
 *   (a device-side assert there, here no error);
 * - while torch.compile traces: a host read there is a graph break (dispatch's hostReadError); the
 *   cpu kernel checks every index when the compiled graph runs (its error names the primitive).
 * A pending index (fused eager) is realized first: its producer runs (only the graph that index
 * needs), which fused mode would do anyway before the gather/scatter kernel, which is not fused.
 * A recorded node with a bad index would otherwise fail at some later, unrelated flush.
 * The scan is one pass over the values without a copy for a contiguous index (about 1 ns an element;
 * an embedding batch of 64K ids costs ~0.1 ms).
 */
interface IndexScan {
  min: number;
  max: number;
  /** the values are data[off .. off + n) */
  data: ArrayLike<number>;
  off: number;
  n: number;
}

function indexBounds(t: Tensor): IndexScan | null {
  const st = t._storage;
  const dev = st.device;
  if (!dev.readSync || traceState.fn !== null) return null;
  const n = t.numel();
  if (n === 0) return { min: 0, max: -1, data: [], off: 0, n: 0 };
  let data: ArrayLike<number>;
  let off = 0;
  if (t.isContiguous()) {
    t._checkAlive();
    realize(st);
    data = dev.readSync(st.buf!, st.dtype, st.numel) as ArrayLike<number>;
    off = t._offset;
  } else data = t._contiguousHost() as ArrayLike<number>;
  let min = Infinity;
  let max = -Infinity;
  for (let i = off, e = off + n; i < e; i++) {
    const v = data[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max, data, off, n };
}

/** The first value (row-major) outside [lo, hi) of a scanned index. */
function firstOutside(s: IndexScan, lo: number, hi: number): number {
  for (let i = s.off, e = s.off + s.n; i < e; i++) {
    const v = s.data[i]!;
    if (v < lo || v >= hi) return v;
  }
  return NaN;
}

/**
 * Check on the host that every value of the integer tensor `index` lies in [0, size) (where the
 * device allows a cheap synchronous read: see indexBounds; elsewhere nothing is checked and it
 * returns false). With `dim`, it throws PyTorch's gather/scatter RuntimeError (an Error)
 * "op(): index 9 is out of bounds for dimension 1 with size 4"; without, PyTorch's IndexError of
 * index_select / index_add / embedding (a RangeError) "op(): index out of range in self".
 * Exported for other modules' index arguments (F.embedding); not public API.
 */
export function _checkIndexRange(index: Tensor, size: number, op: string, dim?: number): boolean {
  const b = indexBounds(index);
  if (b === null) return false;
  if (b.min < 0 || b.max >= size) {
    if (dim === undefined) throw new RangeError(`${op}(): index out of range in self`);
    const v = firstOutside(b, 0, size);
    throw new Error(`${op}(): index ${v} is out of bounds for dimension ${dim} with size ${size}`);
  }
  return true;
}

/** Bounds-check an index on the host (when the device allows a synchronous read); returns whether any is negative. */
function checkIndex(t: Tensor, size: number, msg: (v: number) => string): boolean {
  if (!t._storage.device.readSync) return true;
  const d = t._contiguousHost();
  let neg = false;
  for (let i = 0; i < d.length; i++) {
    const v = Number(d[i]);
    if (v < -size || v >= size) throw new RangeError(msg(v));
    if (v < 0) neg = true;
  }
  return neg;
}

function wrapNegative(t: Tensor, size: number, neg: boolean): Tensor {
  return neg ? M.where(M.lt(t, 0), M.add(t, size), t) : t;
}

/** What advanced indexing over `adv` does to a tensor of `shape`. */
interface AdvPlan {
  lin: Tensor; // int64 [nB]: row-major linear index over the indexed dims
  B: number[]; // broadcast shape of the index tensors
  perm: number[]; // indexed dims first, then the rest
  nA: number;
  nR: number;
  rest: number[]; // sizes of the non-indexed dims
  front: number; // where the B dims land in the result (0, or the first indexed dim if they are adjacent)
}

function planAdvanced(shape: Shape, adv: Adv[]): AdvPlan {
  const dims = adv.map((a) => a.dim);
  let B: number[];
  try {
    B = broadcastShapes("index", ...adv.map((a) => a.t.shape));
  } catch {
    throw new RangeError(
      `shape mismatch: indexing tensors could not be broadcast together with shapes ${adv.map((a) => shapeStr(a.t.shape)).join(", ")}`,
    );
  }
  let lin: Tensor | null = null;
  let stride = 1;
  for (let k = adv.length - 1; k >= 0; k--) {
    const size = shape[dims[k]!]!;
    const neg = !adv[k]!.safe && checkIndex(adv[k]!.t, size, (v) => `index ${v} is out of bounds for dimension ${k} with size ${size}`);
    let t = wrapNegative(adv[k]!.t, size, neg);
    if (stride !== 1) t = M.mul(t, stride);
    lin = lin ? M.add(t, lin) : t;
    stride *= size;
  }
  const restDims = shape.map((_, i) => i).filter((i) => !dims.includes(i));
  const adjacent = dims.every((d, i) => i === 0 || d === dims[i - 1]! + 1);
  const nB = numel(B);
  return {
    lin: reshape(expand(lin!, B), [nB]),
    B,
    perm: [...dims, ...restDims],
    nA: stride,
    nR: numel(restDims.map((d) => shape[d]!)),
    rest: restDims.map((d) => shape[d]!),
    front: adjacent ? dims[0]! : 0,
  };
}

/** [...B, ...rest] -> the result layout (B moved to `front`), or back with inverse=true. */
function placeB(t: Tensor, p: AdvPlan, inverse: boolean): Tensor {
  if (p.front === 0) return t;
  const nb = p.B.length;
  const order = [
    ...Array.from({ length: p.front }, (_, i) => nb + i),
    ...Array.from({ length: nb }, (_, i) => i),
    ...Array.from({ length: p.rest.length - p.front }, (_, i) => nb + p.front + i),
  ];
  return S.permute(t, inverse ? invertPerm(order) : order);
}

function invertPerm(perm: number[]): number[] {
  const inv = new Array<number>(perm.length);
  perm.forEach((d, i) => (inv[d] = i));
  return inv;
}

/** sum / max(cnt, 1) in sum's dtype: the mean of duplicate writes (truncated for integers). */
function meanOfWrites(sum: Tensor, cnt: Tensor): Tensor {
  const c = cast(M.clamp(cnt, 1), sum.dtype);
  return isFloating(sum.dtype) ? M.div(sum, c) : M.div(sum, c, { roundingMode: "trunc" });
}

function resultShape(p: AdvPlan): number[] {
  const r = [...p.B, ...p.rest];
  if (p.front === 0) return r;
  return [...p.rest.slice(0, p.front), ...p.B, ...p.rest.slice(p.front)];
}

function advancedGet(v: Tensor, adv: Adv[]): Tensor {
  const p = planAdvanced(v.shape, adv);
  const v2 = reshape(S.permute(v, p.perm), [p.nA, p.nR]);
  const nB = p.lin.shape[0]!;
  const idx = expand(reshape(p.lin, [nB, 1]), [nB, p.nR]);
  return placeB(reshape(gatherPrim(v2, 0, idx), [...p.B, ...p.rest]), p, false);
}

/** index_put on `x` with indices recorded as `adv`; non-accumulating duplicate writes average (PyTorch leaves them undefined). */
function advancedPut(x: Tensor, adv: Adv[], values: Tensor, accumulate: boolean): Tensor {
  const p = planAdvanced(x.shape, adv);
  const rs = resultShape(p);
  let v: Tensor;
  try {
    v = expand(dropLeadingOnes(values, rs.length), rs);
  } catch {
    throw new RangeError(`shape mismatch: value tensor of shape ${shapeStr(values.shape)} cannot be broadcast to indexing result of shape ${shapeStr(rs)}`);
  }
  const nB = p.lin.shape[0]!;
  const work: DType = x.dtype === "bool" ? "int32" : x.dtype;
  const x2 = reshape(S.permute(cast(x, work), p.perm), [p.nA, p.nR]);
  const v2 = reshape(placeB(cast(v, work), p, true), [nB, p.nR]);
  const idx = expand(reshape(p.lin, [nB, 1]), [nB, p.nR]);
  let out2: Tensor;
  if (accumulate) out2 = scatterAddPrim(x2, 0, idx, v2);
  else {
    const sum = scatterAddPrim(full([p.nA, p.nR], 0, { dtype: work, device: x.device }), 0, idx, v2);
    const cnt = scatterAddPrim(full([p.nA, 1], 0, { dtype: work, device: x.device }), 0, reshape(p.lin, [nB, 1]), full([nB, 1], 1, { dtype: work, device: x.device }));
    out2 = wherePrim(M.gt(cnt, 0), meanOfWrites(sum, cnt), x2);
  }
  const out = S.permute(reshape(out2, p.perm.map((d) => x.shape[d]!)), invertPerm(p.perm));
  return cast(out, x.dtype);
}

// ---------------- t[...] and t[...] = v ----------------

/** PyTorch's setitem ignores leading size-1 dims of the value that the target lacks. */
function dropLeadingOnes(v: Tensor, ndim: number): Tensor {
  let lead = 0;
  while (v.ndim - lead > ndim && v.shape[lead] === 1) lead++;
  return lead ? reshape(v, v.shape.slice(lead)) : v;
}

/** Python `x[specs]`. Basic indexing returns a view sharing x's storage; tensor indices copy (and differentiate). */
export function index(x: Tensor, ...specs: IndexSpec[]): Tensor {
  return withOp("index", () => {
    const { view, adv } = applyBasic(x, parseSpecs(specs));
    if (adv.length) return advancedGet(view, adv);
    return view === x ? reshape(x, x.shape, "view") : view;
  });
}

/** Python `x[specs] = value` (in place; returns x). An array is the index tuple: `set([":", idx], v)`. */
export function setIndex(x: Tensor, specs: IndexSpec | IndexSpec[], value: TensorLike): Tensor {
  return withOp("index_put_", () => {
    const list = Array.isArray(specs) ? (specs as IndexSpec[]) : [specs];
    const { view, adv } = applyBasic(x, parseSpecs(list));
    // inplaceSet checks the view's storage base, which is not x when x itself views another tensor
    if (isGradEnabled() && x.isLeaf && x._requiresGrad)
      throw new Error(`index_put_: a ${view === x ? "" : "view of a "}leaf Variable that requires grad is being used in an in-place operation.`);
    const v = value instanceof Tensor ? cast(value, view.dtype) : scalarTensor(value, x.dtype, x.device);
    if (adv.length) inplaceSet(view, advancedPut(view, adv, v, false), "index_put_");
    else inplaceSet(view, dropLeadingOnes(v, view.ndim), "index_put_");
    return x;
  });
}

// ---------------- nonzero / masks ----------------

/** Indices of the nonzero elements, int64 [n, ndim]. Synchronizes: n is read from x on the host. */
export function nonzero(x: Tensor): Tensor;
export function nonzero(x: Tensor, opts: { asTuple: true }): Tensor[];
export function nonzero(x: Tensor, opts: { asTuple?: boolean } = {}): Tensor | Tensor[] {
  return withOp("nonzero", () => {
    needHostRead(x);
    const d = x._contiguousHost();
    const nd = x.ndim;
    const out: number[] = [];
    const ix = new Array<number>(nd).fill(0);
    for (let p = 0; p < d.length; p++) {
      if (d[p] !== 0) out.push(...ix);
      for (let k = nd - 1; k >= 0; k--) {
        if (++ix[k]! < x.shape[k]!) break;
        ix[k] = 0;
      }
    }
    const n = nd === 0 ? (d[0] !== 0 ? 1 : 0) : out.length / nd;
    const r = fromHostData(out, [n, nd], "int64", x.device);
    if (!opts.asTuple) return r;
    if (nd === 0) return [fromHostData(new Array<number>(n).fill(0), [n], "int64", x.device)];
    return Array.from({ length: nd }, (_, k) => S.select(r, 1, k));
  });
}
/** Same as nonzero(x). Synchronizes. */
export function argwhere(x: Tensor): Tensor {
  return withOp("argwhere", () => nonzero(x));
}

function checkBoolMask(mask: Tensor, op: string): Tensor {
  if (mask.dtype === "uint8") return cast(mask, "bool");
  if (mask.dtype !== "bool") throw new TypeError(`${op} only supports boolean masks, but got mask with dtype ${mask.dtype}`);
  return mask;
}

/** 1-D tensor of the elements of x where mask (broadcast with x) is true. Synchronizes. */
export function maskedSelect(x: Tensor, mask: Tensor): Tensor {
  return withOp("masked_select", () => {
    const m = checkBoolMask(mask, "masked_select:");
    const shape = broadcastShapes("masked_select", x.shape, m.shape);
    const adv: Adv[] = [];
    const full1 = shape.length ? shape : [1]; // a 0-dim pair selects from a 1-element vector
    pushTensorIndex(adv, reshape(expand(m, shape), full1), 0, full1, x.device);
    return advancedGet(reshape(expand(x, shape), full1), adv);
  });
}

/** x with `value` where mask (broadcast) is true; the gradient is zero there. */
export function maskedFill(x: Tensor, mask: Tensor, value: TensorLike): Tensor {
  return withOp("masked_fill", () => {
    const m = checkBoolMask(mask, "masked_fill_");
    let v: Tensor;
    if (value instanceof Tensor) {
      if (value.ndim !== 0)
        throw new RangeError(`masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ${value.ndim} dimension(s).`);
      v = cast(value, x.dtype);
    } else v = scalarTensor(value, x.dtype, x.device);
    return wherePrim(m, v, x);
  });
}
export function maskedFill_(x: Tensor, mask: Tensor, value: TensorLike): Tensor {
  return withOp("masked_fill_", () => {
    const shape = broadcastShapes("masked_fill_", x.shape, mask.shape);
    if (!sameShape(shape, x.shape))
      throw new RangeError(`output with shape ${shapeStr(x.shape)} doesn't match the broadcast shape ${shapeStr(shape)}`);
    return inplaceSet(x, maskedFill(x, mask, value), "masked_fill_");
  });
}

// ---------------- index_select / gather / scatter ----------------

function checkLong(index: Tensor, op: string): void {
  if (index.dtype !== "int64") throw new TypeError(`${op}(): Expected dtype int64 for index`);
}

/** index as a [1, .., n, .., 1] column along dim, expanded to `shape`. */
function alongDim(index: Tensor, dim: number, shape: Shape): Tensor {
  const col = shape.map((_, i) => (i === dim ? index.numel() : 1));
  return expand(reshape(index, col), shape.map((s, i) => (i === dim ? index.numel() : s)));
}

function checkVector(index: Tensor, op: string): Tensor {
  if (!isIntDtype(index.dtype)) throw new TypeError(`${op}(): Expected dtype int32 or int64 for index`);
  if (index.ndim > 1) throw new RangeError(`${op}(): Index is supposed to be a vector`);
  return cast(index, "int64");
}

/** Rows (along dim) of x picked by a 1-D index. */
export function indexSelect(x: Tensor, dim: number, index: Tensor): Tensor {
  return withOp("index_select", () => {
    const idx = checkVector(index, "index_select");
    const xx = x.ndim === 0 ? reshape(x, [1]) : x;
    const d = normDim(dim, xx.ndim, "index_select");
    const n = xx.shape[d]!;
    const neg = checkIndex(idx, n, () => "index out of range in self");
    // (on devices without synchronous reads the indices are not checked on the host)
    if (neg && idx._storage.device.readSync) throw new RangeError("index out of range in self");
    const out = gatherPrim(xx, d, alongDim(idx, d, xx.shape));
    return x.ndim === 0 ? reshape(out, index.ndim === 0 ? [] : [idx.numel()]) : out;
  });
}

function checkGatherShapes(x: Tensor, d: number, index: Tensor, src?: Tensor): void {
  if (index.ndim !== x.ndim && !(index.ndim <= 1 && x.ndim <= 1))
    throw new RangeError(`Index tensor must have the same number of dimensions as ${src ? "self" : "input"} tensor`);
  if (src && src.ndim !== index.ndim && !(index.ndim <= 1 && src.ndim <= 1))
    throw new RangeError("Index tensor must have the same number of dimensions as src tensor");
  for (let i = 0; i < index.ndim; i++) {
    const si = index.shape[i]!;
    const bad = (i !== d && si > (x.shape[i] ?? 1)) || (src && si > (src.shape[i] ?? 1));
    if (!bad) continue;
    if (src)
      throw new RangeError(
        `Expected index ${shapeStr(index.shape)} to be smaller than self ${shapeStr(x.shape)} apart from dimension ${d} and to be smaller size than src ${shapeStr(src.shape)}`,
      );
    throw new RangeError(
      `Size does not match at dimension ${i} expected index ${shapeStr(index.shape)} to be smaller than self ${shapeStr(x.shape)} apart from dimension ${d}`,
    );
  }
}

/** torch.gather: out[i][j] = x[index[i][j]][j] (dim 0). Indices must be in [0, size). */
export function gather(x: Tensor, dim: number, index: Tensor): Tensor {
  return withOp("gather", () => {
    checkLong(index, "gather");
    const d = normDim(dim, x.ndim, "gather");
    checkGatherShapes(x, d, index);
    if (x.ndim === 0) return reshape(gatherPrim(reshape(x, [1]), 0, reshape(index, [1])), index.shape);
    return gatherPrim(x, d, index);
  });
}

function scatterChecks(op: string, x: Tensor, dim: number, index: Tensor, src: Tensor): number {
  checkLong(index, op);
  if (src.dtype !== x.dtype) throw new TypeError("scatter(): Expected self.dtype to be equal to src.dtype");
  const d = normDim(dim, x.ndim, op);
  checkGatherShapes(x, d, index, src);
  return d;
}

/** self.scatter_add(dim, index, src): out = self; out[index[i][j]][j] += src[i][j] (dim 0). */
export function scatterAdd(x: Tensor, dim: number, index: Tensor, src: Tensor): Tensor {
  return withOp("scatter_add", () => scatterAddPrim(x, scatterChecks("scatter_add", x, dim, index, src), index, src));
}

/**
 * self.scatter(dim, index, src | value, {reduce}): out[index[i][j]][j] = src[i][j] (dim 0).
 * Duplicate targets without `reduce` are undefined in PyTorch; here they get the mean.
 */
export function scatter(x: Tensor, dim: number, index: Tensor, src: TensorLike, opts: { reduce?: "add" | "multiply" } = {}): Tensor {
  return withOp("scatter", () => {
    const s = src instanceof Tensor ? src : full(index.shape, Number(src), { dtype: x.dtype, device: x.device });
    const d = scatterChecks("scatter", x, dim, index, s);
    const zeros = (dt: DType) => full(x.shape, 0, { dtype: dt, device: x.device });
    if (opts.reduce === "add") return scatterAddPrim(x, d, index, s);
    const cnt = scatterAddPrim(zeros("int32"), d, index, full(index.shape, 1, { dtype: "int32", device: x.device }));
    const hit = M.gt(cnt, 0);
    if (opts.reduce === "multiply") {
      // product of the scattered values as sign * exp(sum log|v|), in float64; exact zeros kept
      const f = cast(s, "float64");
      const logs = scatterAddPrim(zeros("float64"), d, index, M.log(M.abs(M.where(M.eq(f, 0), 1, f))));
      const negs = scatterAddPrim(zeros("int32"), d, index, cast(M.lt(f, 0), "int32"));
      const zs = scatterAddPrim(zeros("int32"), d, index, cast(M.eq(f, 0), "int32"));
      let prod = M.mul(M.exp(logs), M.where(M.eq(M.remainder(negs, 2), 1), -1, 1));
      prod = M.where(M.gt(zs, 0), 0, prod);
      const r = M.mul(cast(x, "float64"), prod);
      return wherePrim(hit, cast(isFloating(x.dtype) ? r : M.round(r), x.dtype), x);
    }
    if (opts.reduce !== undefined) throw new RangeError(`scatter: reduce argument must be either add or multiply (got ${String(opts.reduce)})`);
    const work: DType = x.dtype === "bool" ? "int32" : x.dtype;
    const sum = scatterAddPrim(zeros(work), d, index, cast(s, work));
    return wherePrim(hit, cast(meanOfWrites(sum, cnt), x.dtype), x);
  });
}

/** x.index_add(dim, index, source, {alpha}): out.select(dim, index[i]) += alpha * source.select(dim, i). */
export function indexAdd(x: Tensor, dim: number, index: Tensor, source: Tensor, opts: { alpha?: number } = {}): Tensor {
  return withOp("index_add", () => {
    const idx = checkVector(index, "index_add_");
    if (source.dtype !== x.dtype)
      throw new TypeError(`index_add_(): self (${x.dtype}) and source (${source.dtype}) must have the same scalar type`);
    const d = normDim(dim, x.ndim, "index_add_");
    const want = x.shape.map((s, i) => (i === d ? idx.numel() : s));
    if (source.ndim !== x.ndim || !sameShape(source.shape, want))
      throw new RangeError(`index_add_(): source ${shapeStr(source.shape)} must have shape ${shapeStr(want)} (self ${shapeStr(x.shape)}, dim ${d}, index of ${idx.numel()})`);
    const n = x.shape[d]!;
    if (checkIndex(idx, n, () => "index out of range in self") && idx._storage.device.readSync)
      throw new RangeError("index out of range in self");
    const src = opts.alpha === undefined || opts.alpha === 1 ? source : M.mul(source, opts.alpha);
    return scatterAddPrim(x, d, alongDim(idx, d, source.shape), cast(src, x.dtype));
  });
}

/** x.index_put(indices, values, {accumulate}): out-of-place `x[indices] = values` (or `+=` with accumulate). */
export function indexPut(x: Tensor, indices: (Tensor | null)[], values: TensorLike, opts: { accumulate?: boolean } = {}): Tensor {
  return withOp("index_put", () => {
    const v = values instanceof Tensor ? values : scalarTensor(values, x.dtype, x.device);
    if (v.dtype !== x.dtype)
      throw new TypeError(`Index put requires the source and destination dtypes match, got ${x.dtype} for the destination and ${v.dtype} for the source.`);
    const used = indices.reduce((n, t) => n + (t && (t.dtype === "bool" || t.dtype === "uint8") ? t.ndim : 1), 0);
    if (used > x.ndim) throw new RangeError(`too many indices for tensor of dimension ${x.ndim} (got ${used})`);
    const adv: Adv[] = [];
    let dim = 0;
    for (const t of indices) dim += t ? pushTensorIndex(adv, t, dim, x.shape, x.device) : 1;
    if (!adv.length) return opts.accumulate ? M.add(x, v) : S.clone(expand(v, x.shape));
    return advancedPut(x, adv, v, !!opts.accumulate);
  });
}
export function indexPut_(x: Tensor, indices: (Tensor | null)[], values: TensorLike, opts: { accumulate?: boolean } = {}): Tensor {
  return withOp("index_put_", () => inplaceSet(x, indexPut(x, indices, values, opts), "index_put_"));
}

/** torch.take: x viewed as 1-D, indexed by `index` (negative indices wrap); result has index's shape. */
export function take(x: Tensor, index: Tensor): Tensor {
  return withOp("take", () => {
    checkLong(index, "take");
    const n = x.numel();
    const neg = checkIndex(index, n, (v) => `out of range: tried to access index ${v} on a tensor of ${n} elements.`);
    const idx = reshape(wrapNegative(index, n, neg), [index.numel()]);
    return reshape(gatherPrim(reshape(x, [n]), 0, idx), index.shape);
  });
}

/** torch.take_along_dim: gather along dim with x and indices broadcast in the other dims (no dim: flattened). */
export function takeAlongDim(x: Tensor, indices: Tensor, dim?: number | null): Tensor {
  return withOp("take_along_dim", () => {
    if (!isIntDtype(indices.dtype)) throw new TypeError("torch.take_along_dim(): dtype of indices should be Long but got " + indices.dtype);
    const idx = cast(indices, "int64");
    if (dim === undefined || dim === null) return gatherPrim(reshape(x, [x.numel()]), 0, reshape(idx, [idx.numel()]));
    if (x.ndim !== idx.ndim)
      throw new RangeError(
        `torch.take_along_dim(): input and indices should have the same number of dimensions, but got ${x.ndim} dimensions for input, and ${idx.ndim} dimensions for indices`,
      );
    const d = normDim(dim, x.ndim, "take_along_dim");
    const shape = broadcastShapes("take_along_dim", x.shape.map((s, i) => (i === d ? idx.shape[d]! : s)), idx.shape);
    const xs = [...shape];
    xs[d] = x.shape[d]!;
    return gatherPrim(expand(x, xs), d, expand(idx, shape));
  });
}

// ---------------- Tensor methods ----------------

type T = Tensor;
declare module "../tensor.js" {
  interface Tensor {
    /** Python `t[...]`: basic indexing returns a view; int/bool tensor indices copy. */
    index(...specs: IndexSpec[]): T;
    /** Python `t[...] = value`; an array is the index tuple (`t.set([":", 0], v)`). Returns t. */
    set(specs: IndexSpec | IndexSpec[], value: TensorLike): T;
    nonzero(): T;
    nonzero(opts: { asTuple: true }): T[];
    argwhere(): T;
    maskedSelect(mask: T): T;
    maskedFill(mask: T, value: TensorLike): T;
    maskedFill_(mask: T, value: TensorLike): T;
    indexSelect(dim: number, index: T): T;
    gather(dim: number, index: T): T;
    scatter(dim: number, index: T, src: TensorLike, opts?: { reduce?: "add" | "multiply" }): T;
    scatter_(dim: number, index: T, src: TensorLike, opts?: { reduce?: "add" | "multiply" }): T;
    scatterAdd(dim: number, index: T, src: T): T;
    scatterAdd_(dim: number, index: T, src: T): T;
    indexAdd(dim: number, index: T, source: T, opts?: { alpha?: number }): T;
    indexAdd_(dim: number, index: T, source: T, opts?: { alpha?: number }): T;
    indexPut(indices: (T | null)[], values: TensorLike, opts?: { accumulate?: boolean }): T;
    indexPut_(indices: (T | null)[], values: TensorLike, opts?: { accumulate?: boolean }): T;
    take(index: T): T;
    takeAlongDim(indices: T, dim?: number | null): T;
  }
}

const P = Tensor.prototype as unknown as Record<string, unknown>;
const methods: Record<string, (x: T, ...a: never[]) => unknown> = {
  index, set: setIndex, nonzero, argwhere, maskedSelect, maskedFill, maskedFill_, indexSelect, gather, scatter,
  scatterAdd, indexAdd, indexPut, indexPut_, take, takeAlongDim,
};
for (const [k, f] of Object.entries(methods))
  P[k] = function (this: T, ...a: unknown[]) {
    return (f as (...x: unknown[]) => unknown)(this, ...a);
  };
const inplace: Record<string, [string, (x: T, ...a: never[]) => T]> = {
  scatter_: ["scatter_", scatter],
  scatterAdd_: ["scatter_add_", scatterAdd],
  indexAdd_: ["index_add_", indexAdd],
};
for (const [k, [name, f]] of Object.entries(inplace))
  P[k] = function (this: T, ...a: unknown[]) {
    return inplaceSet(this, (f as (...x: unknown[]) => T)(this, ...a), name);
  };
