// matmul in all its forms, bmm, mm, mv, dot, outer, linear, einsum-free helpers.
import { shapeStr } from "../ir/shape.js";
import { withOp } from "../runtime/mode.js";
import type { Tensor } from "../tensor.js";
import { matmulPrim, reshape } from "./core.js";
import * as M from "./math.js";
import * as S from "./shape_ops.js";
import { autocastInputs } from "../amp/autocast.js";

export function matmul(a: Tensor, b: Tensor): Tensor {
  return withOp("matmul", () => {
    [a, b] = autocastInputs(a, b);
    if (a.ndim === 0 || b.ndim === 0)
      throw new RangeError(`matmul: both arguments to matmul need to be at least 1D, but they are ${a.ndim}D and ${b.ndim}D`);
    const kA = a.shape[a.ndim - 1]!;
    const kB = b.ndim === 1 ? b.shape[0]! : b.shape[b.ndim - 2]!;
    if (kA !== kB) {
      if (a.ndim <= 2 && b.ndim <= 2)
        throw new RangeError(
          `matmul: mat1 and mat2 shapes cannot be multiplied (${a.ndim === 1 ? `1x${kA}` : a.shape.join("x")} and ${b.ndim === 1 ? `${kB}x1` : b.shape.join("x")}) (shapes ${shapeStr(a.shape)} and ${shapeStr(b.shape)})`,
        );
      throw new RangeError(`matmul: Expected size for first two dimensions of batch2 tensor to be: [${b.shape.slice(0, -2).join(", ")}, ${kA}] but got: [${b.shape.slice(0, -2).join(", ")}, ${kB}] (shapes ${shapeStr(a.shape)} and ${shapeStr(b.shape)})`);
    }
    const a2 = a.ndim === 1 ? S.unsqueeze(a, 0) : a;
    const b2 = b.ndim === 1 ? S.unsqueeze(b, 1) : b;
    let out = matmulPrim(a2, b2);
    if (a.ndim === 1) out = S.squeeze(out, -2);
    if (b.ndim === 1) out = S.squeeze(out, -1);
    return out;
  });
}

export function mm(a: Tensor, b: Tensor): Tensor {
  if (a.ndim !== 2 || b.ndim !== 2) throw new RangeError(`mm: expected 2D tensors, got ${a.ndim}D and ${b.ndim}D`);
  return matmul(a, b);
}
export function bmm(a: Tensor, b: Tensor): Tensor {
  if (a.ndim !== 3 || b.ndim !== 3) throw new RangeError(`bmm: batch1 must be a 3D tensor (got ${a.ndim}D and ${b.ndim}D)`);
  if (a.shape[0] !== b.shape[0])
    throw new RangeError(`bmm: batch1 and batch2 must have same number of batches, got ${a.shape[0]} and ${b.shape[0]}`);
  return matmul(a, b);
}
export function mv(a: Tensor, v: Tensor): Tensor {
  return matmul(a, v);
}
export function dot(a: Tensor, b: Tensor): Tensor {
  if (a.ndim !== 1 || b.ndim !== 1) throw new RangeError(`1D tensors expected, but got ${a.ndim}D and ${b.ndim}D tensors`);
  return matmul(a, b);
}
export function outer(a: Tensor, b: Tensor): Tensor {
  return M.mul(S.unsqueeze(a, 1), S.unsqueeze(b, 0));
}
export function addmm(input: Tensor, a: Tensor, b: Tensor, opts: { beta?: number; alpha?: number } = {}): Tensor {
  const p = matmul(a, b);
  return M.add(M.mul(input, opts.beta ?? 1), M.mul(p, opts.alpha ?? 1));
}

/** F.linear: x @ w^T + b */
export function linear(x: Tensor, w: Tensor, b?: Tensor | null): Tensor {
  return withOp("linear", () => {
    [x, w, b] = autocastInputs(x, w, b);
    if (x.shape[x.ndim - 1] !== w.shape[w.ndim - 1])
      throw new RangeError(
        `linear: mat1 and mat2 shapes cannot be multiplied (${x.shape.slice(0, -1).reduce((p, q) => p * q, 1)}x${x.shape[x.ndim - 1]} and ${w.shape[w.ndim - 1]}x${w.shape[0]})`,
      );
    const lead = x.shape.slice(0, -1);
    const x2 = x.ndim > 2 ? reshape(x, [lead.reduce((p, q) => p * q, 1), x.shape[x.ndim - 1]!]) : x;
    let y = matmul(x2, w.ndim === 1 ? w : S.t(w));
    if (b) y = M.add(y, b);
    return x.ndim > 2 ? reshape(y, [...lead, ...(w.ndim === 1 ? [] : [w.shape[0]!])]) : y;
  });
}
