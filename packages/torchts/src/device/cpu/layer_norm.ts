// The layerNorm / layerNormBackward composites over the last dim (PyTorch's native_layer_norm and
// native_layer_norm_backward): one row kernel each instead of the ~9 primitives of the forward and
// ~14 of the backward, which a small training step recorded, keyed and ran five times over. The
// wasm row kernels (wasm/layernorm.ts) take contiguous float32; everything else (float64, the JS
// backend, a wasm call that declines) runs the JS rows here, which accumulate in float64.
import type { IRNode } from "../../ir/prims.js";
import { isContiguous, numel } from "../../ir/shape.js";
import type { Arr, Kernel } from "./codegen.js";
import { layerNormBackwardF32, layerNormRowsF32 } from "./wasm/ops.js";

function rowsOf(n: IRNode<"composite">): { rows: number; len: number } {
  const x = n.inputs[0]!;
  const len = x.shape[x.shape.length - 1] ?? 1;
  return { rows: len === 0 ? 0 : numel(x.shape) / len, len };
}

function stats(X: Arr, o: number, len: number, eps: number): [number, number] {
  let s = 0;
  for (let j = 0; j < len; j++) s += X[o + j]!;
  const mean = s / len;
  let v = 0;
  for (let j = 0; j < len; j++) {
    const d = X[o + j]! - mean;
    v += d * d;
  }
  return [mean, 1 / Math.sqrt(v / len + eps)];
}

/** Inputs [x, weight?, bias?] (attrs say which), scalar [eps]; out has x's shape. */
export function layerNormComposite(n: IRNode<"composite">): Kernel {
  const { rows, len } = rowsOf(n);
  const hasW = n.params.attrs.weight === true, hasB = n.params.attrs.bias === true;
  const bi = hasW ? 2 : 1;
  const js: Kernel = (O, ins, offs, S) => {
    const X = ins[0]!, W = hasW ? ins[1]! : null, B = hasB ? ins[bi]! : null;
    for (let r = 0; r < rows; r++) {
      const xo = offs[0]! + r * len;
      const [mean, rstd] = stats(X, xo, len, S[0]!);
      for (let j = 0; j < len; j++) O[r * len + j] = (X[xo + j]! - mean) * rstd * (W ? W[offs[1]! + j]! : 1) + (B ? B[offs[bi]! + j]! : 0);
    }
  };
  if (!n.inputs.every((v) => v.dtype === "float32" && isContiguous(v.shape, v.strides)) || n.out.dtype !== "float32") return js;
  return (O, ins, offs, S) => {
    const ok = layerNormRowsF32(ins[0] as Float32Array, offs[0]!, hasW ? (ins[1] as Float32Array) : null, hasW ? offs[1]! : 0,
      hasB ? (ins[bi] as Float32Array) : null, hasB ? offs[bi]! : 0, rows, len, S[0]!, O as Float32Array);
    if (!ok) js(O, ins, offs, S);
  };
}

/**
 * Inputs [x, grad, weight?], scalar [eps]; out [rows + 2, len]: the input's gradient (rows of
 * x's shape), then the weight's and the bias's.
 */
export function layerNormBackwardComposite(n: IRNode<"composite">): Kernel {
  const { rows, len } = rowsOf(n);
  const hasW = n.params.attrs.weight === true;
  const js: Kernel = (O, ins, offs, S) => {
    const X = ins[0]!, G = ins[1]!, W = hasW ? ins[2]! : null;
    const dw = new Float64Array(len), db = new Float64Array(len);
    for (let r = 0; r < rows; r++) {
      const xo = offs[0]! + r * len, go = offs[1]! + r * len;
      const [mean, rstd] = stats(X, xo, len, S[0]!);
      let a = 0, c = 0;
      for (let j = 0; j < len; j++) {
        const gw = G[go + j]! * (W ? W[offs[2]! + j]! : 1), xh = (X[xo + j]! - mean) * rstd;
        a += gw;
        c += gw * xh;
        dw[j] += G[go + j]! * xh;
        db[j] += G[go + j]!;
      }
      a /= len;
      c /= len;
      for (let j = 0; j < len; j++) {
        const gw = G[go + j]! * (W ? W[offs[2]! + j]! : 1), xh = (X[xo + j]! - mean) * rstd;
        O[r * len + j] = rstd * (gw - a - xh * c);
      }
    }
    for (let j = 0; j < len; j++) {
      O[rows * len + j] = dw[j]!;
      O[(rows + 1) * len + j] = db[j]!;
    }
  };
  if (!n.inputs.every((v) => v.dtype === "float32" && isContiguous(v.shape, v.strides)) || n.out.dtype !== "float32") return js;
  return (O, ins, offs, S) => {
    const ok = layerNormBackwardF32(ins[0] as Float32Array, offs[0]!, ins[1] as Float32Array, offs[1]!, hasW ? (ins[2] as Float32Array) : null, hasW ? offs[2]! : 0, rows, len, S[0]!, O as Float32Array);
    if (!ok) js(O, ins, offs, S);
  };
}
