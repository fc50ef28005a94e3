// In-place ops: compute out of place, then land the result in the tensor's storage and
// bump its version counter. Autograd is rebased like PyTorch: the tensor takes the new
// grad_fn, and writing through a view rewrites its base (CopySlices).
import { isGradEnabled } from "../autograd/grad_mode.js";
import { adoptInto, copyIntoInPlace, prepareInplace } from "../runtime/dispatch.js";
import { Storage } from "../runtime/storage.js";
import { coversStorage, Tensor, type TensorLike } from "../tensor.js";
import { cast, expand, reshape, stridedScatter, asStridedLogical, scalarTensor } from "./core.js";
import { _contiguous as contiguous, _detach as detach, _toDevice as toDevice } from "./shape_ops.js";
import * as M from "./math.js";

function checkLeaf(t: Tensor, name: string): void {
  if (!isGradEnabled()) return;
  if (t.isLeaf && t._requiresGrad)
    throw new Error(`${name}: a leaf Variable that requires grad is being used in an in-place operation.`);
  for (let b = t._viewParent ?? t._base; b; b = b._viewParent ?? b._base)
    if (b.isLeaf && b._requiresGrad)
      throw new Error(`${name}: a view of a leaf Variable that requires grad is being used in an in-place operation.`);
}

/**
 * inplaceSet's refusal of a destination whose elements share memory (an expanded view). Exported so
 * that an op writing several tensors can check them all before its first write (a call that throws
 * changes nothing).
 */
export function checkNoOverlap(t: Tensor, name: string): void {
  if (t._strides.some((s, i) => s === 0 && t.shape[i]! > 1))
    throw new Error(
      `${name}: unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.`,
    );
}

/**
 * Write `value` (broadcast and cast to t's shape/dtype) into t; the core of every `op_`. `owned`:
 * value is a temporary the caller made and no one else holds, which t may take over as it is;
 * otherwise (a tensor of the user's: copy_'s source) t gets a copy.
 */
export function inplaceSet(t: Tensor, value: TensorLike, name: string, owned = false): Tensor {
  checkLeaf(t, name);
  checkNoOverlap(t, name);
  const v = value instanceof Tensor ? value : scalarTensor(value, t.dtype, t.device);
  if (v.device !== t.device)
    throw new Error(`${name}: Expected all tensors to be on the same device, but found at least two devices, ${t.device} and ${v.device}!`);
  // anything pending that reads the old value must run before the write (fused mode)
  prepareInplace(t._storage);
  const born = Storage.created; // storages made from here on are this write's own temporaries
  const track = isGradEnabled() && (v.requiresGrad || t.requiresGrad);
  const r = contiguous(expand(cast(v, t.dtype), t.shape));
  // never alias the destination, nor a value someone else holds
  const full = (r === v && !owned) || r._storage === t._storage ? M._impl.add(r, 0) : r;
  // a view over all of its storage with no autograd to rebase (an optimizer step on a parameter
  // made by .view()) is written like the base itself: no stridedScatter of the old contents
  if (coversStorage(t) && (!t._base || !track)) {
    const fresh = full._offset === 0 && full.numel() === full._storage.numel ? full : contiguous(M._impl.add(full, 0));
    if (!track && (fresh._storage.serial > born || (owned && fresh === v)) && copyIntoInPlace(t._storage, fresh._storage)) {
      t._storage.version++;
      return t;
    }
    adoptInto(t._storage, fresh._storage);
    // keep the autograd history on t; `fresh` is a throwaway handle to the data now owned by t
    if (track) {
      t.gradFn = fresh.gradFn;
      t._outputNr = fresh._outputNr;
    }
    fresh._storage = t._storage;
    t._storage.version++;
    // a grad_fn that saved its own output now sees it through t, at t's new version
    for (const sv of (track && t.gradFn?.saved) || [])
      if (sv.t === fresh) {
        sv.t = t;
        sv.version = t._storage.version;
      }
    return t;
  } else {
    // write through a view: rebuild the whole base storage
    const base = t._base ?? t;
    const n = t._storage.numel;
    const flatOld = new Tensor(t._storage, [n]);
    const baseGrad = track && base.requiresGrad ? reshape(base, [base.numel()]) : null;
    // one pass: the old contents with the view's elements replaced
    const newFlat = stridedScatter(full, [n], t.shape, t._strides, t._offset, baseGrad ?? detach(flatOld));
    adoptInto(t._storage, newFlat._storage);
    if (track) {
      const nb = reshape(newFlat, base.shape);
      base.gradFn = nb.gradFn;
      base._outputNr = 0;
      const tv = asStridedLogical(base, t.shape, t._strides, t._offset);
      t.gradFn = tv.gradFn;
      t._outputNr = 0;
    }
  }
  t._storage.version++;
  return t;
}

/** The body of Tensor.copy_ (inplace_methods.ts): the one in-place op that may cross devices, as in PyTorch. */
export function copy_(t: Tensor, src: Tensor): Tensor {
  return inplaceSet(t, src.device === t.device ? src : toDevice(src, t.device), "copy_");
}
