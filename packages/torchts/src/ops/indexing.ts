// Indexing: Python's t[...] and t[...] = v, and the gather/scatter/mask family, as op-table
// entries (registry.ts) with PyTorch's schemas.
// Basic indexing (ints, slices, None, ...) is views; advanced indexing (int/bool tensors)
// becomes one gather over a flat linear index, so gradients (scatter-add) come from core.
// Host reads: nonzero/bool masks must know how many elements they select, and int index
// tensors on host-readable devices are bounds-checked on the host so errors name the op, the
// index and the size like PyTorch (indexBounds); both synchronize (realize the index) when it is
// not ready. On a device without synchronous reads (webgpu) a mask raises (needHostRead) and
// index values are not checked; a cpu mask or index tensor may index a tensor on any device, as in
// PyTorch (its indices are uploaded).
import { isFloating, type DType } from "../ir/dtype.js";
import { broadcastShapes, normDim, numel, sameShape, shapeStr, type Shape } from "../ir/shape.js";
import { currentOpName } from "../runtime/mode.js";
import { isGradEnabled } from "../autograd/grad_mode.js";
import { realize, traceState, writeRowsInPlace } from "../runtime/dispatch.js";
import { Tensor, type NestedArray, type Scalar, type TensorLike } from "../tensor.js";
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
import { isPlainObject, pyTypeName } from "./binder.js";
import { installMethods, method, op, type Method, type Sig } from "./registry.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";

/** A Python slice `start:stop:step` as an object (a string such as "1:7:2" says the same). */
export interface Slice {
  start?: number | null;
  stop?: number | null;
  step?: number | null;
}
/**
 * One entry of `t[...]`: an int (select), null (new axis), "..." (ellipsis), a slice string
 * ("1:7:3", ":", "-3:") or comma list ("::2, 1:7:3", "..., None, 1:3"), a Slice object, an int64
 * or bool Tensor, or a nested number/boolean array (a Python list index, e.g. [[0, 2]] in `set`).
 */
export type IndexSpec = number | boolean | null | string | Slice | Tensor | NestedArray[];

/** PyTorch's name of a dtype in messages (c10::ScalarType): Float, Long, ... */
const PY_DTYPE: Record<DType, string> = {
  float32: "Float",
  float64: "Double",
  float16: "Half",
  bfloat16: "BFloat16",
  int64: "Long",
  int32: "Int",
  int8: "Char",
  uint8: "Byte",
  bool: "Bool",
};
const pyDtype = (d: DType): string => PY_DTYPE[d] ?? d;

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
  if (!INT_RE.test(t)) throw new TypeError(`${what} '${s}' must be an integer or None`);
  return Number(t);
}

function parseToken(tok: string): Item {
  const s = tok.trim();
  if (s === "..." || s === "Ellipsis") return { k: "ellipsis" };
  if (s === "None") return { k: "none" };
  if (INT_RE.test(s)) return { k: "int", v: Number(s) };
  if (s.includes(":")) {
    const p = s.split(":");
    if (p.length > 3) throw new TypeError(`invalid slice '${s}'`);
    return { k: "slice", start: parseInt_(p[0]!, "slice start"), stop: parseInt_(p[1]!, "slice stop"), step: p.length === 3 ? parseInt_(p[2]!, "slice step") : null };
  }
  throw new TypeError(`cannot parse index '${tok}' (expected an int, a slice like '1:7:2', '...' or 'None')`);
}

const NOT_AN_INDEX = (what: string) =>
  new RangeError(`only integers, slices (\`:\`), ellipsis (\`...\`), None and long or byte Variables are valid indices (got ${what})`);

const SLICE_KEYS = new Set(["start", "stop", "step"]);
function sliceBound(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v === "number" && Number.isInteger(v)) return v;
  throw new TypeError("slice indices must be integers or None or have an __index__ method");
}

/** One spec -> items; anything that is not an index spec is PyTorch's IndexError (TypeError for a bad string or slice). */
function parseSpec(sp: unknown, out: Item[]): void {
  if (sp === null || sp === undefined) out.push({ k: "none" });
  else if (sp instanceof Tensor) out.push({ k: "tensor", t: sp });
  else if (typeof sp === "number") {
    if (!Number.isInteger(sp)) throw NOT_AN_INDEX("float");
    out.push({ k: "int", v: sp });
  } else if (typeof sp === "boolean") out.push({ k: "tensor", t: tensor(sp, { dtype: "bool" }) });
  else if (typeof sp === "string") {
    const toks = sp.split(",");
    if (toks.length > 1 && toks[toks.length - 1]!.trim() === "") toks.pop(); // "1," is the tuple (1,)
    for (const t of toks) out.push(parseToken(t));
  } else if (Array.isArray(sp)) {
    out.push({ k: "tensor", t: sp.length === 0 ? tensor([], { dtype: "int64" }) : tensor(sp as NestedArray[]) });
  } else if (isPlainObject(sp) && Object.keys(sp).every((k) => SLICE_KEYS.has(k))) {
    out.push({ k: "slice", start: sliceBound(sp.start), stop: sliceBound(sp.stop), step: sliceBound(sp.step) });
  } else throw NOT_AN_INDEX(pyTypeName(sp));
}

function parseSpecs(specs: readonly unknown[]): Item[] {
  const out: Item[] = [];
  for (const sp of specs) parseSpec(sp, out);
  return out;
}

// ---------------- host bounds checks of index values ----------------

/**
 * The smallest and largest value of an integer index tensor, read on the host; null where no cheap
 * synchronous read exists, and then the caller skips its value check:
 * - a device without synchronous reads (webgpu): reading would need an await; its kernels are not
 *   bounds-checked either, so an out-of-range index there is undefined behaviour, as in CUDA PyTorch
 *   (a device-side assert there, here no error);
 * - while torch.compile traces: a host read there is a graph break (dispatch's hostReadError), and a
 *   value read at trace time would be baked into the replay; the cpu kernel checks every index
 *   when the compiled graph runs (its error names the primitive).
 * A pending index (fused eager) is realized first: its producer runs (only the graph that index
 * needs), which fused mode would do anyway before the gather/scatter kernel, which is not fused;
 * a recorded node with a bad index would otherwise fail at some later, unrelated flush.
 * The scan is one pass over the values without a copy for a contiguous index (~1 ns an element:
 * a 64K-id embedding batch costs ~0.1 ms; test/ops/indexing_args.test.ts measures it).
 */
interface IndexScan {
  min: number;
  max: number;
  data: ArrayLike<number>;
}

/**
 * The values of `t` read on the host (this view's elements, row-major), or null where that is not
 * cheap and synchronous (see indexBounds); a contiguous view is read without a copy. With
 * materializedOnly, a value still pending in fused eager is not computed just to be checked (null).
 * Shared with nn.functional's value checks (class targets, probabilities); not public API.
 */
export function _hostValues(t: Tensor, materializedOnly = false): ArrayLike<number> | null {
  const st = t._storage;
  if (!st.device.readSync || traceState.fn !== null) return null;
  if (materializedOnly && !st.buf && st.pending) return null;
  if (!t.isContiguous()) return t._contiguousHost();
  t._checkAlive();
  realize(st);
  return st.device.readSync(st.buf!, st.dtype, st.numel).subarray(t._offset, t._offset + t.numel());
}

function indexBounds(t: Tensor): IndexScan | null {
  const data = _hostValues(t);
  if (data === null) return null;
  if (data.length === 0) return { min: 0, max: -1, data };
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max, data };
}

/** The first value (row-major) outside [lo, hi) of a scanned index. */
function firstOutside(s: IndexScan, lo: number, hi: number): number {
  for (let i = 0; i < s.data.length; i++) {
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

/**
 * Indices that may be negative (advanced indexing, take), checked on the host to lie in
 * [-size, size) (a RangeError with `msg`) and wrapped; null where they cannot be read (indexBounds).
 */
function checkWrapped(t: Tensor, size: number, msg: (v: number) => string): Tensor | null {
  const b = indexBounds(t);
  if (b === null) return null;
  if (b.min < -size || b.max >= size) throw new RangeError(msg(firstOutside(b, -size, size)));
  return b.min < 0 ? M.where(M.lt(t, 0), M.add(t, size), t) : t;
}

/**
 * checkWrapped, or where the values cannot be read, wrapped on the device with an out-of-range
 * index sent to `past` (at least the length the kernel indexes), so that the cpu kernel's own
 * check raises instead of reading another element (webgpu kernels do not check).
 */
function wrapIndex(t: Tensor, size: number, past: number, msg: (v: number) => string): Tensor {
  const w = checkWrapped(t, size, msg);
  if (w !== null) return w;
  const wrapped = M.where(M.lt(t, 0), M.add(t, size), t);
  return M.where(M.logicalOr(M.lt(t, -size), M.ge(t, size)), Math.max(past, 1), wrapped);
}

/** An int64 cpu index (or nonzero's result) uploaded to `device` (no autograd: indices have none). */
function upload(t: Tensor, device: string): Tensor {
  if (t.device === device) return t;
  return fromHostData(t._contiguousHost(), t.shape, t.dtype, device);
}

// ---------------- index tensors ----------------

interface Adv {
  dim: number; // dim of the (basic-indexed) tensor this index selects along
  t: Tensor; // int64, possibly negative
  safe?: boolean; // from a mask's nonzero() or checked on the host: in range and non-negative
}

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
    const nz = upload(nonzeroImpl(t, false) as Tensor, device); // a cpu mask's indices are uploaded
    for (let j = 0; j < t.ndim; j++) adv.push({ dim: dim + j, t: S.select(nz, 1, j), safe: true });
    return t.ndim;
  }
  // PyTorch 1.13 indexes with int64 (long), uint8 (byte, a mask) and bool tensors only
  if (t.dtype !== "int64") throw new RangeError("tensors used as indices must be long, byte or bool tensors");
  if (t.device !== device) {
    // a cpu index for a tensor on another device: bounds-checked and wrapped on the host, then uploaded
    const size = shape[dim]!;
    const k = adv.length;
    const w = checkWrapped(t, size, (v) => `index ${v} is out of bounds for dimension ${k} with size ${size}`);
    adv.push(w ? { dim, t: upload(w, device), safe: true } : { dim, t: upload(t, device) });
    return 1;
  }
  adv.push({ dim, t });
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
          if (!it.t._tolistSync()) adv.push({ dim, t: tensor([], { dtype: "int64", device: x.device }), safe: true });
          dim++;
        } else dim += pushTensorIndex(adv, it.t, dim, r.shape, x.device);
        break;
    }
  }
  return { view: r, adv };
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
  const nA = dims.reduce((p, d) => p * shape[d]!, 1);
  let lin: Tensor | null = null;
  let stride = 1;
  for (let k = adv.length - 1; k >= 0; k--) {
    const size = shape[dims[k]!]!;
    // PyTorch names the position in the index list as the dimension
    let t = adv[k]!.safe ? adv[k]!.t : wrapIndex(adv[k]!.t, size, nA, (v) => `index ${v} is out of bounds for dimension ${k} with size ${size}`);
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
    throw new Error(`shape mismatch: value tensor of shape ${shapeStr(values.shape)} cannot be broadcast to indexing result of shape ${shapeStr(rs)}`);
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

/** PyTorch's setitem ignores leading size-1 dims of the value that the target lacks. */
function dropLeadingOnes(v: Tensor, ndim: number): Tensor {
  let lead = 0;
  while (v.ndim - lead > ndim && v.shape[lead] === 1) lead++;
  return lead ? reshape(v, v.shape.slice(lead)) : v;
}

// ---------------- t[...] and t[...] = v ----------------

/**
 * `x.index(a, b, c)` is Python's `x[a, b, c]`: the specs are the rest parameter `indices` of the
 * schema (each validated by parseSpec). (A comma string holds any number of basic specs in one:
 * "1, ::2, None".)
 */
function indexImpl(x: Tensor, specs: unknown[]): Tensor {
  try {
    const { view, adv } = applyBasic(x, parseSpecs(specs));
    if (adv.length) return advancedGet(view, adv);
    return view === x ? reshape(x, x.shape, "view") : view;
  } catch (e) {
    // op() names the op unless the message starts with its name, which "index 5 is out of bounds ..." does
    if (e instanceof Error && !/^index[(:]/.test(e.message)) e.message = `index(): ${e.message}`;
    throw e;
  }
}

/**
 * Python `x[specs]`: `x.index(1, "1:", "::2")` is `x[1, 1:, ::2]`. Basic indexing returns a view
 * sharing x's storage; tensor indices copy (and differentiate).
 */
export const index = op<(input: Tensor, ...indices: IndexSpec[]) => Tensor>("index(Tensor input, Any... indices) -> Tensor", indexImpl);

function setImpl(x: Tensor, indices: unknown, value: TensorLike): Tensor {
  const name = currentOpName() ?? "set";
  const list = Array.isArray(indices) ? indices : [indices];
  const { view, adv } = applyBasic(x, parseSpecs(list));
  // inplaceSet checks the view's storage base, which is not x when x itself views another tensor
  if (isGradEnabled() && x.isLeaf && x._requiresGrad)
    throw new Error(`a ${view === x ? "" : "view of a "}leaf Variable that requires grad is being used in an in-place operation.`);
  const v = value instanceof Tensor ? cast(value, view.dtype) : scalarTensor(value, x.dtype, x.device);
  if (adv.length) inplaceSet(view, advancedPut(view, adv, v, false), name);
  else inplaceSet(view, dropLeadingOnes(v, view.ndim), name);
  return x;
}

type SetSig = Sig<[input: Tensor, indices?: IndexSpec | IndexSpec[], value?: TensorLike], { input?: Tensor; indices?: IndexSpec | IndexSpec[]; value?: TensorLike }, Tensor>;
/** Python `x[specs] = value` (in place; returns x): torch.setIndex(x, specs, value) is x.set(specs, value). An array is the index tuple: `set([":", idx], v)`. */
export const setIndex = op<SetSig>("setIndex(Tensor input, Any? indices, TensorLike value) -> Tensor", setImpl);
method("set", "set(Tensor input, Any? indices, TensorLike value) -> Tensor", setImpl);

// ---------------- nonzero / masks ----------------

function nonzeroImpl(x: Tensor, asTuple: boolean): Tensor | Tensor[] {
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
  if (!asTuple) return r;
  if (nd === 0) return [fromHostData(new Array<number>(n).fill(0), [n], "int64", x.device)];
  return Array.from({ length: nd }, (_, k) => S.select(r, 1, k));
}

interface NonzeroSig {
  (input: Tensor | { input?: Tensor; asTuple?: false }, opts?: { input?: Tensor; asTuple?: false }): Tensor;
  (input: Tensor | { input?: Tensor; asTuple: true }, opts: { input?: Tensor; asTuple: true }): Tensor[];
  (input: Tensor | { input?: Tensor; asTuple?: boolean }, opts?: { input?: Tensor; asTuple?: boolean }): Tensor | Tensor[];
}
export interface NonzeroMethod {
  (opts?: { asTuple?: false }): Tensor;
  (opts: { asTuple: true }): Tensor[];
  (opts?: { asTuple?: boolean }): Tensor | Tensor[];
}
/** Indices of the nonzero elements, int64 [n, ndim] (asTuple: one 1-D tensor per dim). Synchronizes: n is read from x on the host. */
export const nonzero = op<NonzeroSig>("nonzero(Tensor input, *, bool asTuple=False) -> Tensor", nonzeroImpl);
/** Same as nonzero(x). Synchronizes. */
export const argwhere = op<Sig<[input: Tensor], { input?: Tensor }, Tensor>>("argwhere(Tensor input) -> Tensor", (x: Tensor) => nonzeroImpl(x, false));

/** 1-D tensor of the elements of x where mask (broadcast with x) is true. Synchronizes. */
export const maskedSelect = op<Sig<[input: Tensor, mask?: Tensor], { input?: Tensor; mask?: Tensor }, Tensor>>(
  "maskedSelect(Tensor input, Tensor mask) -> Tensor",
  (x: Tensor, mask: Tensor): Tensor => {
    if (mask.dtype !== "bool" && mask.dtype !== "uint8") throw new Error("expected BoolTensor or ByteTensor for mask");
    const m = cast(mask, "bool");
    const shape = broadcastShapes("maskedSelect", x.shape, m.shape);
    const adv: Adv[] = [];
    const full1 = shape.length ? shape : [1]; // a 0-dim pair selects from a 1-element vector
    pushTensorIndex(adv, reshape(expand(m, shape), full1), 0, full1, x.device);
    return advancedGet(reshape(expand(x, shape), full1), adv);
  },
);

function boolMask(mask: Tensor): Tensor {
  if (mask.dtype === "uint8") return cast(mask, "bool"); // deprecated in PyTorch (a warning), still accepted
  // PyTorch 1.13 silently accepted other dtypes (a float mask did nothing); 2.x raises this
  if (mask.dtype !== "bool") throw new Error(`masked_fill_ only supports boolean masks, but got mask with dtype ${pyDtype(mask.dtype)}`);
  return mask;
}

function maskedFillImpl(x: Tensor, mask: Tensor, value: TensorLike): Tensor {
  const m = boolMask(mask);
  broadcastShapes(currentOpName() ?? "maskedFill", m.shape, x.shape); // PyTorch's "The size of tensor a (5) must match ..."
  let v: Tensor;
  if (value instanceof Tensor) {
    if (value.ndim !== 0)
      throw new Error(`masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ${value.ndim} dimension(s).`);
    v = cast(value, x.dtype);
  } else v = M._scalarConstant(value, x.dtype, x.device); // shared: a fresh one was ~5 us and a registration a call
  return wherePrim(m, v, x);
}

type MaskedFillSig = Sig<[input: Tensor, mask?: Tensor, value?: TensorLike], { input?: Tensor; mask?: Tensor; value?: TensorLike }, Tensor>;
/** x with `value` where mask (broadcast) is true; the gradient is zero there. */
export const maskedFill = op<MaskedFillSig>("maskedFill(Tensor input, Tensor mask, TensorLike value) -> Tensor", maskedFillImpl);
/** In place (returns x); mask must broadcast to x's shape. */
export const maskedFill_ = op<MaskedFillSig>(
  "maskedFill_(Tensor input, Tensor mask, TensorLike value) -> Tensor",
  (x: Tensor, mask: Tensor, value: TensorLike): Tensor => {
    const shape = broadcastShapes("maskedFill_", x.shape, mask.shape);
    if (!sameShape(shape, x.shape)) throw new Error(`output with shape ${shapeStr(x.shape)} doesn't match the broadcast shape ${shapeStr(shape)}`);
    return inplaceSet(x, maskedFillImpl(x, mask, value), "maskedFill_");
  },
);

// ---------------- index_select / gather / scatter ----------------

/** index as a [1, .., n, .., 1] column along dim, expanded to `shape`. */
function alongDim(index: Tensor, dim: number, shape: Shape): Tensor {
  const col = shape.map((_, i) => (i === dim ? index.numel() : 1));
  return expand(reshape(index, col), shape.map((s, i) => (i === dim ? index.numel() : s)));
}

/** Rows (along dim) of x picked by a 1-D index. */
export const indexSelect = op<Sig<[input: Tensor, dim?: number, index?: Tensor], { input?: Tensor; dim?: number; index?: Tensor }, Tensor>>(
  "indexSelect(Tensor input, int dim, Tensor index) -> Tensor",
  (x: Tensor, dim: number, index: Tensor): Tensor => {
    if (index.dtype !== "int64" && index.dtype !== "int32") throw new Error("Expected dtype int32 or int64 for index");
    if (index.ndim > 1) throw new RangeError("Index is supposed to be a vector");
    const xx = x.ndim === 0 ? reshape(x, [1]) : x;
    const d = normDim(dim, x.ndim);
    // checked before the cast: an int32 index is read as it is (on webgpu not at all: see indexBounds)
    _checkIndexRange(index, xx.shape[d]!, "indexSelect");
    const idx = cast(index, "int64");
    const out = gatherPrim(xx, d, alongDim(idx, d, xx.shape));
    return x.ndim === 0 ? reshape(out, index.ndim === 0 ? [] : [idx.numel()]) : out;
  },
);

function checkGatherShapes(x: Tensor, d: number, index: Tensor, src?: Tensor): void {
  if (index.ndim !== x.ndim && !(index.ndim <= 1 && x.ndim <= 1))
    throw new Error(`Index tensor must have the same number of dimensions as ${src ? "self" : "input"} tensor`);
  if (src && src.ndim !== index.ndim && !(index.ndim <= 1 && src.ndim <= 1))
    throw new Error("Index tensor must have the same number of dimensions as src tensor");
  for (let i = 0; i < index.ndim; i++) {
    const si = index.shape[i]!;
    const bad = (i !== d && si > (x.shape[i] ?? 1)) || (src && si > (src.shape[i] ?? 1));
    if (!bad) continue;
    if (src)
      throw new Error(
        `Expected index ${shapeStr(index.shape)} to be smaller than self ${shapeStr(x.shape)} apart from dimension ${d} and to be smaller size than src ${shapeStr(src.shape)}`,
      );
    throw new Error(
      `Size does not match at dimension ${i} expected index ${shapeStr(index.shape)} to be smaller than self ${shapeStr(x.shape)} apart from dimension ${d}`,
    );
  }
}

/** torch.gather: out[i][j] = x[index[i][j]][j] (dim 0). Indices must be in [0, size). sparseGrad is accepted; the gradient is dense. */
export const gather = op<Sig<[input: Tensor, dim?: number, index?: Tensor], { input?: Tensor; dim?: number; index?: Tensor; sparseGrad?: boolean }, Tensor>>(
  "gather(Tensor input, int dim, Tensor index, *, bool sparseGrad=False) -> Tensor",
  (x: Tensor, dim: number, index: Tensor): Tensor => {
    if (index.dtype !== "int64") throw new Error("Expected dtype int64 for index");
    const d = normDim(dim, x.ndim);
    checkGatherShapes(x, d, index);
    _checkIndexRange(index, x.ndim === 0 ? 1 : x.shape[d]!, "gather", d);
    if (x.ndim === 0) return reshape(gatherPrim(reshape(x, [1]), 0, reshape(index, [1])), index.shape);
    return gatherPrim(x, d, index);
  },
);

/** scatter/scatter_add's checks (PyTorch's order: index dtype, dims, src dtype, shapes, index values); returns the dim. */
function scatterChecks(name: string, x: Tensor, dim: number, index: Tensor, src: Tensor): number {
  if (index.dtype !== "int64") throw new Error("Expected dtype int64 for index");
  const d = normDim(dim, x.ndim);
  if (src.dtype !== x.dtype) throw new Error("Expected self.dtype to be equal to src.dtype");
  checkGatherShapes(x, d, index, src);
  _checkIndexRange(index, x.ndim === 0 ? 1 : x.shape[d]!, name, d);
  return d;
}

/** scatterAdd in x's dtype (a bool x sums in int32: true + true stays true); a 0-dim x is one element along dim 0. */
function scatterAddWork(x: Tensor, d: number, index: Tensor, src: Tensor): Tensor {
  if (x.ndim === 0) return reshape(scatterAddWork(reshape(x, [1]), 0, reshape(index, [index.numel()]), reshape(src, [src.numel()])), []);
  if (x.dtype !== "bool") return scatterAddPrim(x, d, index, src);
  return cast(scatterAddPrim(cast(x, "int32"), d, index, cast(src, "int32")), "bool");
}

function scatterAddImpl(name: string) {
  return (x: Tensor, dim: number, index: Tensor, src: Tensor): Tensor => scatterAddWork(x, scatterChecks(name, x, dim, index, src), index, src);
}

/**
 * x.scatter(dim, index, src | value, {reduce}): out[index[i][j]][j] = src[i][j] (dim 0).
 * Duplicate targets without `reduce` are undefined in PyTorch; here they get the mean.
 */
function scatterImpl(name: string) {
  return (x: Tensor, dim: number, index: Tensor, src: TensorLike, reduce: string | null): Tensor => {
    if (reduce !== null && reduce !== "add" && reduce !== "multiply") throw new Error("reduce argument must be either add or multiply.");
    if (index.dtype !== "int64") throw new Error("Expected dtype int64 for index");
    const s = src instanceof Tensor ? src : full(index.shape, Number(src), { dtype: x.dtype, device: x.device });
    const d = scatterChecks(name, x, dim, index, s);
    const zeros = (dt: DType) => full(x.shape, 0, { dtype: dt, device: x.device });
    if (reduce === "add") return scatterAddWork(x, d, index, s);
    const cnt = scatterAddWork(zeros("int32"), d, index, full(index.shape, 1, { dtype: "int32", device: x.device }));
    const hit = M.gt(cnt, 0);
    if (reduce === "multiply") {
      // product of the scattered values as sign * exp(sum log|v|), in float64; exact zeros kept
      const f = cast(s, "float64");
      const logs = scatterAddWork(zeros("float64"), d, index, M.log(M.abs(M.where(M.eq(f, 0), 1, f))));
      const negs = scatterAddWork(zeros("int32"), d, index, cast(M.lt(f, 0), "int32"));
      const zs = scatterAddWork(zeros("int32"), d, index, cast(M.eq(f, 0), "int32"));
      let prod = M.mul(M.exp(logs), M.where(M.eq(M.remainder(negs, 2), 1), -1, 1));
      prod = M.where(M.gt(zs, 0), 0, prod);
      const r = M.mul(cast(x, "float64"), prod);
      return wherePrim(hit, cast(isFloating(x.dtype) ? r : M.round(r), x.dtype), x);
    }
    const work: DType = x.dtype === "bool" ? "int32" : x.dtype;
    const sum = scatterAddWork(zeros(work), d, index, cast(s, work));
    return wherePrim(hit, cast(meanOfWrites(sum, cnt), x.dtype), x);
  };
}

const SCATTER_SRC = (name: string) => `${name}(Tensor input, int dim, Tensor index, Tensor src, *, str? reduce=None) -> Tensor`;
const SCATTER_VALUE = (name: string) => `${name}(Tensor input, int dim, Tensor index, Scalar value, *, str? reduce=None) -> Tensor`;
/** PyTorch's reduce is a str checked by the op ("reduce argument must be either add or multiply."). */
type Reduce = "add" | "multiply" | (string & Record<never, never>);
type ScatterOpts = { input?: Tensor; dim?: number; index?: Tensor; src?: Tensor; value?: Scalar; reduce?: Reduce | null };
type ScatterSig = Sig<[input: Tensor, dim?: number, index?: Tensor, src?: TensorLike], ScatterOpts, Tensor>;

export const scatter = op<ScatterSig>([SCATTER_SRC("scatter"), SCATTER_VALUE("scatter")], scatterImpl("scatter"));

type ScatterAddSig = Sig<[input: Tensor, dim?: number, index?: Tensor, src?: Tensor], { input?: Tensor; dim?: number; index?: Tensor; src?: Tensor }, Tensor>;
/** x.scatter_add(dim, index, src): out = x; out[index[i][j]][j] += src[i][j] (dim 0). */
export const scatterAdd = op<ScatterAddSig>("scatterAdd(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", scatterAddImpl("scatterAdd"));

function indexAddImpl(name: string) {
  return (x: Tensor, dim: number, index: Tensor, source: Tensor, alpha: Scalar): Tensor => {
    if (index.dtype !== "int64" && index.dtype !== "int32") throw new Error(`Expected dtype int32/int64 for index but got: ${pyDtype(index.dtype)}`);
    if (index.ndim > 1)
      throw new RangeError(`Index is supposed to be a vector, but got dim: ${index.ndim} with type: ${pyDtype(index.dtype)} and size: ${shapeStr(index.shape)}`);
    const d = normDim(dim, x.ndim);
    if (source.dtype !== x.dtype) throw new Error(`self (${pyDtype(x.dtype)}) and source (${pyDtype(source.dtype)}) must have the same scalar type`);
    const n = index.numel();
    let src: Tensor;
    if (x.ndim <= 1) {
      // PyTorch's 1-D (and 0-dim) path: one source element per index
      const have = source.ndim === 0 ? 1 : source.shape[0]!;
      if (source.ndim > 1 || have !== n)
        throw new Error(`Number of indices (${n}) should be equal to source.size(dim): (${have}), for dim: ${d}`);
      src = reshape(source, [n]);
    } else {
      // each source slice (along dim) is added to a slice of x: it broadcasts to x's slice
      if (source.ndim === 0) throw new RangeError("select() cannot be applied to a 0-dim tensor.");
      const sd = normDim(dim, source.ndim);
      if (source.shape[sd] !== n) throw new Error(`Number of indices (${n}) should be equal to source.size(dim): (${source.shape[sd]}), for dim: ${d}`);
      const xSlice = x.shape.filter((_, i) => i !== d);
      const sSlice = source.shape.filter((_, i) => i !== sd);
      const b = broadcastShapes(name, xSlice, sSlice);
      if (!sameShape(b, xSlice)) throw new Error(`output with shape ${shapeStr(xSlice)} doesn't match the broadcast shape ${shapeStr(b)}`);
      if (source.ndim === x.ndim && sameShape(sSlice, xSlice)) src = source;
      else {
        // [n, ...sSlice] -> [n, 1.., ...sSlice] (x's slice rank) -> n moved to dim d -> expanded to x's shape with n at d
        const lead = xSlice.length - sSlice.length;
        const m = reshape(S.movedim(source, sd, 0), [n, ...new Array<number>(lead).fill(1), ...sSlice]);
        src = expand(S.movedim(m, 0, d), x.shape.map((s, i) => (i === d ? n : s)));
      }
    }
    _checkIndexRange(index, x.ndim === 0 ? 1 : x.shape[d]!, name);
    const idx = cast(index, "int64");
    // PyTorch converts alpha to the tensor's dtype: integers truncate it
    const a = isFloating(x.dtype) ? Number(alpha) : Math.trunc(Number(alpha));
    const scaled = a === 1 ? src : cast(M.mul(src, a), x.dtype);
    if (x.ndim === 0) return reshape(scatterAddWork(reshape(x, [1]), 0, reshape(idx, [n]), reshape(scaled, [n])), []);
    return scatterAddWork(x, d, x.ndim === 1 ? reshape(idx, [n]) : alongDim(idx, d, scaled.shape), scaled);
  };
}

const INDEX_ADD = (name: string) => `${name}(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor`;
type IndexAddSig = Sig<
  [input: Tensor, dim?: number, index?: Tensor, source?: Tensor],
  { input?: Tensor; dim?: number; index?: Tensor; source?: Tensor; alpha?: Scalar },
  Tensor
>;
/** x.index_add(dim, index, source, {alpha}): out.select(dim, index[i]) += alpha * source.select(dim, i). */
export const indexAdd = op<IndexAddSig>(INDEX_ADD("indexAdd"), indexAddImpl("indexAdd"));

/** PyTorch's index_copy checks (its messages say index_copy_() for both forms); the normalized dim. */
function indexCopyChecks(x: Tensor, dim: number, index: Tensor, source: Tensor): number {
  const d = normDim(dim, Math.max(1, x.ndim));
  if (index.ndim > 1) throw new RangeError(`Index should have dimension 1 or 0 (got ${index.ndim})`);
  if (index.dtype !== "int64") throw new Error(`Expected a long tensor for index, but got ${pyDtype(index.dtype)}`);
  if (source.dtype !== x.dtype)
    throw new Error(`self and source expected to have the same dtype, but got (self) ${pyDtype(x.dtype)} and (source) ${pyDtype(source.dtype)}`);
  const n = index.numel();
  const sd = source.ndim === 0 ? 1 : source.shape[Math.min(d, source.ndim - 1)]!;
  if (x.ndim > 0 && source.ndim > 0 && source.ndim !== x.ndim && !(x.ndim <= 1 && source.ndim <= 1))
    throw new Error(`When source and destination are not scalars, their dimensionality must match. Source dimensionality (${source.ndim}), destination dimensionality (${x.ndim})`);
  if ((source.ndim === 0 ? 1 : source.shape[d]) !== n) throw new RangeError(`Number of indices (${n}) should be equal to source.size(dim) (${sd})`);
  for (let i = 0; i < x.ndim; i++)
    if (i !== d && source.shape[i] !== x.shape[i])
      throw new Error(
        `Source/destination tensor must have same slice shapes. Destination slice shape: ${x.shape.filter((_, j) => j !== d).join(", ")} at dimension ${d} and source slice shape: ${source.shape.filter((_, j) => j !== d).join(", ")} at dimension 0.`,
      );
  const size = x.ndim === 0 ? 1 : x.shape[d]!;
  const b = indexBounds(index);
  if (b && (b.min < 0 || b.max >= size)) throw new RangeError(`index ${firstOutside(b, 0, size)} is out of bounds for dimension ${d} with size ${size}`);
  return d;
}

function indexCopyImpl(x: Tensor, dim: number, index: Tensor, source: Tensor): Tensor {
  const d = indexCopyChecks(x, dim, index, source);
  if (index.numel() === 0) return S.clone(x);
  if (x.ndim === 0) return reshape(source, []);
  const idx = reshape(index, [index.numel()]);
  return scatterImpl("indexCopy")(x, d, alongDim(idx, d, source.shape), source, null);
}

/**
 * x.index_copy_(dim, index, source) in place. Rows along dim 0 of a dense tensor that needs no
 * gradient are written on the device without rewriting the rest of its storage (a paged KV cache
 * taking one step's new keys: O(new rows), not O(cache)); everything else is the general in-place path.
 * The index may stay on the cpu when x is on another device (its rows are then read without a device
 * round trip); PyTorch would ask for it on x's device.
 */
function indexCopyInplace(x: Tensor, dim: number, index: Tensor, source: Tensor): Tensor {
  const d = indexCopyChecks(x, dim, index, source);
  const dense = x._offset === 0 && x.isContiguous() && x.numel() === x._storage.numel;
  const tracked = isGradEnabled() && (x.requiresGrad || source.requiresGrad);
  if (d === 0 && x.ndim >= 1 && dense && !tracked && source.isContiguous() && source.device === x.device) {
    const rows = _hostValues(index);
    const n = x.shape[0]!;
    if (rows && (rows.length === 0 || writeRowsInPlace(x._storage, { storage: source._storage, shape: source.shape, strides: source._strides, offset: source._offset, dtype: source.dtype }, n ? x.numel() / n : 0, rows))) return x;
  }
  // an index on the cpu for a tensor elsewhere (torchts: the host knows the rows without a device read)
  const idx = index.device !== x.device && index.device === "cpu" ? S.to(index, x.device) : index;
  return inplaceSet(x, indexCopyImpl(x, dim, idx, source), "indexCopy_");
}

const INDEX_COPY = (name: string) => `${name}(Tensor input, int dim, Tensor index, Tensor source) -> Tensor`;
type IndexCopySig = Sig<[input: Tensor, dim?: number, index?: Tensor, source?: Tensor], { input?: Tensor; dim?: number; index?: Tensor; source?: Tensor }, Tensor>;
/** x.index_copy(dim, index, source): out = x with out.select(dim, index[i]) = source.select(dim, i). */
export const indexCopy = op<IndexCopySig>(INDEX_COPY("indexCopy"), indexCopyImpl);

function indexPutImpl(x: Tensor, indices: Tensor[], values: Tensor, accumulate: boolean): Tensor {
  if (values.dtype !== x.dtype)
    throw new Error(
      `Index put requires the source and destination dtypes match, got ${pyDtype(x.dtype)} for the destination and ${pyDtype(values.dtype)} for the source.`,
    );
  const used = indices.reduce((n, t) => n + (t.dtype === "bool" || t.dtype === "uint8" ? t.ndim : 1), 0);
  if (used > x.ndim) throw new RangeError(`too many indices for tensor of dimension ${x.ndim} (got ${used})`);
  const adv: Adv[] = [];
  let dim = 0;
  for (const t of indices) dim += pushTensorIndex(adv, t, dim, x.shape, x.device);
  if (!adv.length) return accumulate ? M.add(x, values) : S.clone(expand(values, x.shape));
  return advancedPut(x, adv, values, accumulate);
}

type IndexPutSig = Sig<
  [input: Tensor, indices?: Tensor[], values?: Tensor, accumulate?: boolean],
  { input?: Tensor; indices?: Tensor[]; values?: Tensor; accumulate?: boolean },
  Tensor
>;
/** x.index_put(indices, values, accumulate): out-of-place `x[indices] = values` (`+=` with accumulate). */
export const indexPut = op<IndexPutSig>("indexPut(Tensor input, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor", indexPutImpl);
/** In place (returns x). */
export const indexPut_ = op<IndexPutSig>(
  "indexPut_(Tensor input, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor",
  (x: Tensor, indices: Tensor[], values: Tensor, accumulate: boolean) => inplaceSet(x, indexPutImpl(x, indices, values, accumulate), "indexPut_"),
);

/** torch.take: x viewed as 1-D, indexed by `index` (negative indices wrap); result has index's shape. */
export const take = op<Sig<[input: Tensor, index?: Tensor], { input?: Tensor; index?: Tensor }, Tensor>>(
  "take(Tensor input, Tensor index) -> Tensor",
  (x: Tensor, index: Tensor): Tensor => {
    if (index.dtype !== "int64") throw new Error(`Expected a long tensor for index, but got ${pyDtype(index.dtype)}`);
    const n = x.numel();
    if (n === 0 && index.numel() > 0) throw new RangeError("tried to take from an empty tensor");
    const w = wrapIndex(index, n, n, (v) => `out of range: tried to access index ${v} on a tensor of ${n} elements.`);
    return reshape(gatherPrim(reshape(x, [n]), 0, reshape(w, [index.numel()])), index.shape);
  },
);

/** torch.take_along_dim: gather along dim with x and indices broadcast in the other dims (no dim: flattened). */
export const takeAlongDim = op<Sig<[input: Tensor, indices?: Tensor, dim?: number | null], { input?: Tensor; indices?: Tensor; dim?: number | null }, Tensor>>(
  "takeAlongDim(Tensor input, Tensor indices, int? dim=None) -> Tensor",
  (x: Tensor, indices: Tensor, dim: number | null): Tensor => {
    if (indices.dtype !== "int64") throw new Error(`dtype of indices should be Long but got ${pyDtype(indices.dtype)}`);
    if (dim === null) {
      _checkIndexRange(indices, x.numel(), "takeAlongDim", 0);
      return gatherPrim(reshape(x, [x.numel()]), 0, reshape(indices, [indices.numel()]));
    }
    if (x.ndim !== indices.ndim)
      throw new Error(
        `input and indices should have the same number of dimensions, but got ${x.ndim} dimensions for input, and ${indices.ndim} dimensions for indices`,
      );
    const d = normDim(dim, x.ndim);
    const shape = broadcastShapes("takeAlongDim", x.shape.map((s, i) => (i === d ? indices.shape[d]! : s)), indices.shape);
    _checkIndexRange(indices, x.ndim === 0 ? 1 : x.shape[d]!, "takeAlongDim", d);
    if (x.ndim === 0) return reshape(gatherPrim(reshape(x, [1]), 0, reshape(indices, [1])), []);
    const xs = [...shape];
    xs[d] = x.shape[d]!;
    return gatherPrim(expand(x, xs), d, expand(indices, shape));
  },
);

// ---------------- Tensor methods ----------------

installMethods({
  index, nonzero, argwhere, maskedSelect, maskedFill, maskedFill_, indexSelect, gather, scatter, scatterAdd, indexAdd, indexCopy,
  indexPut, indexPut_, take, takeAlongDim,
});
// in-place methods (PyTorch has no torch.scatter_ function)
method("scatter_", [SCATTER_SRC("scatter_"), SCATTER_VALUE("scatter_")], (x: Tensor, dim: number, index: Tensor, src: TensorLike, reduce: string | null) =>
  inplaceSet(x, scatterImpl("scatter_")(x, dim, index, src, reduce), "scatter_"),
);
method("scatterAdd_", "scatterAdd_(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", (x: Tensor, dim: number, index: Tensor, src: Tensor) =>
  inplaceSet(x, scatterAddImpl("scatterAdd_")(x, dim, index, src), "scatterAdd_"),
);
method("indexCopy_", INDEX_COPY("indexCopy_"), indexCopyInplace);
method("indexAdd_", INDEX_ADD("indexAdd_"), (x: Tensor, dim: number, index: Tensor, source: Tensor, alpha: Scalar) =>
  inplaceSet(x, indexAddImpl("indexAdd_")(x, dim, index, source, alpha), "indexAdd_"),
);

declare module "../tensor.js" {
  interface Tensor {
    /** Python `t[...]`: basic indexing returns a view; int/bool tensor indices copy. */
    index: Method<typeof index>;
    /** Python `t[...] = value`; an array is the index tuple (`t.set([":", 0], v)`). Returns t. */
    set: Method<SetSig>;
    nonzero: NonzeroMethod;
    argwhere: Method<typeof argwhere>;
    maskedSelect: Method<typeof maskedSelect>;
    maskedFill: Method<typeof maskedFill>;
    maskedFill_: Method<typeof maskedFill_>;
    indexSelect: Method<typeof indexSelect>;
    gather: Method<typeof gather>;
    scatter: Method<typeof scatter>;
    scatter_: Method<ScatterSig>;
    scatterAdd: Method<typeof scatterAdd>;
    scatterAdd_: Method<ScatterAddSig>;
    indexAdd: Method<typeof indexAdd>;
    indexAdd_: Method<IndexAddSig>;
    indexCopy: Method<typeof indexCopy>;
    indexCopy_: Method<IndexCopySig>;
    indexPut: Method<typeof indexPut>;
    indexPut_: Method<typeof indexPut_>;
    take: Method<typeof take>;
    takeAlongDim: Method<typeof takeAlongDim>;
  }
}
