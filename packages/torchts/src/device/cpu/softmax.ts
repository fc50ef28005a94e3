// softmax / logSoftmax composites over the last dim: one pass-fused wasm row kernel for float32
// (max, exp, normalize), instead of five primitives; plain JS rows otherwise (JS backend,
// float64, or a wasm call that declines).
import type { IRNode } from "../../ir/prims.js";
import { contiguousStrides, isContiguous, numel } from "../../ir/shape.js";
import type { Arr, Kernel } from "./codegen.js";
import { logSoftmaxRowsF32, softmaxRowsF32 } from "./wasm/ops.js";

/** Element offsets of each row's first element (rows in row-major order of the other dims). */
function rowStarts(shape: readonly number[], strides: readonly number[]): number[] {
  const outer = shape.slice(0, -1);
  const os = strides.slice(0, -1);
  const starts: number[] = [];
  const cs = contiguousStrides(outer);
  const rows = numel(outer);
  for (let r = 0; r < rows; r++) {
    let off = 0;
    for (let d = 0; d < outer.length; d++) off += Math.floor(r / cs[d]!) % outer[d]! * os[d]!;
    starts.push(off);
  }
  return starts;
}

function jsRows(n: IRNode<"composite">, log: boolean): Kernel {
  const x = n.inputs[0]!;
  const L = x.shape[x.shape.length - 1] ?? 1;
  const st = x.strides[x.strides.length - 1] ?? 1;
  const starts = rowStarts(x.shape, x.strides);
  const tmp = new Float64Array(L);
  return (O: Arr, ins: Arr[], offs: number[]) => {
    const X = ins[0]!;
    starts.forEach((s0, r) => {
      const b = offs[0]! + s0;
      let mx = -Infinity;
      for (let i = 0; i < L; i++) {
        const v = X[b + i * st]!;
        if (v > mx || v !== v) mx = v;
      }
      let sum = 0;
      for (let i = 0; i < L; i++) {
        const z = X[b + i * st]! - mx;
        tmp[i] = z;
        sum += Math.exp(z);
      }
      const o = r * L;
      if (log) {
        const lse = Math.log(sum);
        for (let i = 0; i < L; i++) O[o + i] = tmp[i]! - lse;
      } else for (let i = 0; i < L; i++) O[o + i] = Math.exp(tmp[i]!) / sum;
    });
  };
}

function rowsKernel(log: boolean) {
  return (n: IRNode<"composite">): Kernel => {
    const x = n.inputs[0]!;
    const js = jsRows(n, log);
    if (x.dtype !== "float32" || n.out.dtype !== "float32" || !isContiguous(x.shape, x.strides) || x.shape.length === 0) return js;
    const L = x.shape[x.shape.length - 1]!;
    const rows = numel(x.shape) / Math.max(1, L);
    const wasm = log ? logSoftmaxRowsF32 : softmaxRowsF32;
    return (O, ins, offs, S) => {
      if (!wasm(ins[0]!, offs[0]!, rows, L, O)) js(O, ins, offs, S);
    };
  };
}

export const softmaxComposite = rowsKernel(false);
export const logSoftmaxComposite = rowsKernel(true);
