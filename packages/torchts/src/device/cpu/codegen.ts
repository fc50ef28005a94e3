// Generates specialized JS loops for elementwise and reduction kernels. The generated
// function is the "compiled executable" of strict eager: specialized on shapes, strides
// and dtypes (the cache key), with offsets and scalars as runtime arguments.
import type { DType } from "../../ir/dtype.js";
import type { Shape } from "../../ir/shape.js";
import { H } from "./math.js";

export type Arr = ArrayLike<number> & { [i: number]: number; length: number };
export type Kernel = (out: Arr, ins: Arr[], offs: number[], scalars: readonly number[]) => void;

/** Wrap an expression so the stored value matches the output dtype exactly. */
export function storeExpr(expr: string, d: DType): string {
  switch (d) {
    case "float16":
      return `H.f16(${expr})`;
    case "bfloat16":
      return `H.bf16(${expr})`;
    case "int64":
      return `Math.trunc(${expr})`;
    case "bool":
      return `((${expr}) ? 1 : 0)`;
    default:
      return expr; // typed-array stores round (float32) or wrap (int32/int8/uint8)
  }
}

/** Merge adjacent dims that are contiguous in every operand; drop size-1 dims. */
export function collapse(shape: Shape, strides: Shape[]): { shape: number[]; strides: number[][] } {
  const s: number[] = [];
  const st: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    const last = s.length - 1;
    if (last >= 0 && strides.every((x, k) => st[k]![last] === x[d]! * shape[d]!)) {
      s[last] = s[last]! * shape[d]!;
      strides.forEach((x, k) => (st[k]![last] = x[d]!));
    } else {
      s.push(shape[d]!);
      strides.forEach((x, k) => st[k]!.push(x[d]!));
    }
  }
  return { shape: s, strides: st };
}

/**
 * out[i] = expr(in0[i], in1[i], ...), inputs already broadcast (stride 0) to the output shape.
 * `expr` gets variable names x0, x1, ... and scalar names S[0], S[1], ...
 */
export function elementwise(shape: Shape, inStrides: Shape[], expr: (xs: string[]) => string, outDtype: DType): Kernel {
  // output is contiguous: add its strides as a pseudo-operand so collapsing keeps it consistent.
  const outStrides: number[] = [];
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    outStrides[i] = acc;
    acc *= shape[i]!;
  }
  const c = collapse(shape, [outStrides, ...inStrides]);
  const nd = c.shape.length;
  const nin = inStrides.length;
  const xs = Array.from({ length: nin }, (_, k) => `x${k}`);
  let body = "";
  for (let k = 0; k < nin; k++) {
    const idx = [`o${k}`, ...c.shape.map((_, d) => `i${d}*${c.strides[k + 1]![d]}`)].join("+");
    body += `const x${k}=I${k}[${idx}];`;
  }
  body += `O[p++]=${storeExpr(expr(xs), outDtype)};`;
  let code = body;
  for (let d = nd - 1; d >= 0; d--) code = `for(let i${d}=0;i${d}<${c.shape[d]};i${d}++){${code}}`;
  const src =
    `return function(O, ins, offs, S){` +
    xs.map((_, k) => `const I${k}=ins[${k}], o${k}=offs[${k}];`).join("") +
    `let p=0;${code}}`;
  return new Function("H", src)(H) as Kernel;
}

/** Reduce `axes` of a strided input into a contiguous keepdim-shaped output. */
export function reduction(
  shape: Shape,
  strides: Shape,
  axes: readonly number[],
  init: string,
  combine: string, // statement using `acc` and `x`
  finish: string, // expression of `acc` and `n`
  outDtype: DType,
): Kernel {
  const kept = shape.map((_, d) => d).filter((d) => !axes.includes(d));
  let n = 1;
  for (const a of axes) n *= shape[a]!;
  const idx = ["o0", ...shape.map((_, d) => `i${d}*${strides[d]}`)].join("+");
  let inner = `const x=I0[${idx}];${combine}`;
  for (let k = axes.length - 1; k >= 0; k--) {
    const d = axes[k]!;
    inner = `for(let i${d}=0;i${d}<${shape[d]};i${d}++){${inner}}`;
  }
  let code = `let acc=${init};${inner}O[p++]=${storeExpr(finish, outDtype)};`;
  for (let k = kept.length - 1; k >= 0; k--) {
    const d = kept[k]!;
    code = `for(let i${d}=0;i${d}<${shape[d]};i${d}++){${code}}`;
  }
  const src = `return function(O, ins, offs, S){const I0=ins[0], o0=offs[0]; const n=${n}; let p=0;${code}}`;
  return new Function("H", src)(H) as Kernel;
}
