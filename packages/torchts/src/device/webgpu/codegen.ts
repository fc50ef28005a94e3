// WGSL generation from IR nodes. Each node becomes one or more passes (a compute shader plus
// the inputs it binds); shapes and strides are baked into the source (they are in the cache key),
// view offsets and scalars arrive in a small uniform block so they never cause recompiles, and the
// element count is a uniform too, so contiguous elementwise kernels of different sizes share one
// pipeline (pipelines are deduplicated by source).
import { isFloating, type DType } from "../../ir/dtype.js";
import type { IRNode, PrimName, ViewMeta } from "../../ir/prims.js";
import { contiguousStrides, numel, type Shape } from "../../ir/shape.js";
import { collapse } from "../cpu/codegen.js";
import { storageType, type WT } from "./dtypes.js";
import { binaryVal, loadVal, storeVal, unaryVal, type Val } from "./wgsl_ops.js";
import { matmulPass } from "./matmul.js";
import { pagedAttentionPass } from "./paged_attention.js";

export interface Pass {
  /** WGSL statements run per thread with `i` (i32) the thread index, or a complete `main` (custom). */
  body: string;
  custom?: boolean;
  /** Which executable inputs this pass binds, in order, as I0, I1, ... */
  bind: number[];
  inTypes: WT[];
  outType: WT;
  /** Fused kernels write several outputs (O0, O1, ...); absent: one output O. */
  outTypes?: WT[];
  threads: number;
  /** Workgroup grid for custom kernels (default: 1-D over `threads`, 64 per workgroup). */
  grid?: [number, number, number];
  /** Extra WGSL (module scope). */
  extra?: string;
}

export interface Program {
  passes: Pass[];
  /** Runtime checks on scalars (the int64/float64 policy raises here). */
  checkScalars?: (s: readonly number[]) => void;
}

/** Emit `var <names[k]> = bases[k] + sum(coord_d * strides[k][d])` for thread index `idx` over `shape`. */
export function stridedOffsets(shape: Shape, strides: Shape[], bases: string[], names: string[], idx = "i"): string {
  const c = collapse(shape, [contiguousStrides(shape), ...strides]);
  let code = `var r_ = ${idx};`;
  names.forEach((n, k) => (code += `var ${n} = ${bases[k]};`));
  for (let d = c.shape.length - 1; d >= 0; d--) {
    const size = c.shape[d]!;
    const terms = names
      .map((n, k) => {
        const st = c.strides[k + 1]![d]!;
        return st === 0 ? "" : `${n} += c_ * ${st};`;
      })
      .join("");
    code += d > 0 ? `{ let c_ = r_ % ${size}; r_ = r_ / ${size}; ${terms} }` : `{ let c_ = r_; ${terms} }`;
  }
  return code;
}

/** Declare `let <p><d>` coordinates of thread index `idx` over `shape` (row-major). */
function coords(shape: Shape, p: string, idx = "i"): string {
  let code = `var ${p}r_ = ${idx};`;
  for (let d = shape.length - 1; d >= 0; d--)
    code += d > 0 ? `let ${p}${d} = ${p}r_ % ${shape[d]}; ${p}r_ = ${p}r_ / ${shape[d]};` : `let ${p}${d} = ${p}r_;`;
  return code;
}

function dot(p: string, strides: Shape, skip = -1, subst?: string): string {
  const t = strides.map((s, d) => (d === skip ? (subst ? `${subst} * ${s}` : "") : s === 0 ? "" : `${p}${d} * ${s}`));
  return t.filter((x) => x).join(" + ") || "0";
}

const st = (v: ViewMeta): WT => storageType(v.dtype);
const simple = (n: IRNode, body: string, bind: number[], threads = numel(n.out.shape)): Pass => ({
  body,
  bind,
  inTypes: bind.map((k) => st(n.inputs[k]!)),
  outType: storageType(n.out.dtype),
  threads,
});

function elementwise(n: IRNode, f: (xs: Val[]) => Val): Pass {
  const names = n.inputs.map((_, k) => `p${k}`);
  let body = stridedOffsets(n.out.shape, n.inputs.map((v) => v.strides), names.map((_, k) => `off(${k}u)`), names);
  const xs = n.inputs.map((v, k) => {
    body += `let x${k} = I${k}[p${k}];`;
    return loadVal(`x${k}`, v.dtype);
  });
  body += `O[i] = ${storeVal(f(xs), n.out.dtype)};`;
  return simple(n, body, n.inputs.map((_, k) => k));
}

const I32_LIMIT = 2147483648;
function intScalarCheck(d: DType, which: number[]): ((s: readonly number[]) => void) | undefined {
  if (isFloating(d) || d === "bool") return undefined;
  return (s) => {
    for (const k of which) {
      const v = s[k]!;
      if (Number.isFinite(v) && (v >= I32_LIMIT || v < -I32_LIMIT))
        throw new RangeError(`webgpu: value ${v} does not fit the device's 32-bit integer storage for ${d} (int64 is stored as int32 on webgpu)`);
    }
  };
}

/** The scalar S[k] as a value of the output dtype's compute type. */
function scalarVal(d: DType, k: number): Val {
  return isFloating(d) ? { e: `sf(${k}u)`, t: "f32" } : { e: `si(${k}u)`, t: "i32" };
}

/**
 * A reduce op's accumulator over values `x`: `init` declares `acc` (and any state), `step` folds
 * in one `x`; `t` is the type of `acc`. Shared by the single-node and the fused reduction kernels.
 */
export function reduceAcc(op: IRNode<"reduce">["params"]["op"], f: boolean): { init: string; step: string; t: Val["t"] } {
  switch (op) {
    case "sum":
      // Kahan summation for floats: cpu accumulates in float64, this keeps float32 sums close to it
      return f
        ? {
            init: "var acc = 0.0; var comp = 0.0;",
            step: "let y_ = x - comp; let t_ = acc + y_; if (isinf_(t_) || isnan_(t_)) { acc = acc + x; } else { comp = (t_ - acc) - y_; acc = t_; }",
            t: "f32",
          }
        : { init: "var acc = 0;", step: "acc += x;", t: "i32" };
    case "prod":
      return { init: f ? "var acc = 1.0;" : "var acc = 1;", step: "acc *= x;", t: f ? "f32" : "i32" };
    case "max":
    case "min": {
      const c = op === "max" ? ">" : "<";
      return f
        ? { init: `var acc = inf_(${op === "max"});`, step: `if (!isnan_(acc) && (x ${c} acc || isnan_(x))) { acc = x; }`, t: "f32" }
        : { init: `var acc = ${op === "max" ? "i32(-2147483647 - 1)" : "2147483647"};`, step: `if (x ${c} acc) { acc = x; }`, t: "i32" };
    }
    default: {
      const nz = f ? "x != 0.0" : "x != 0";
      return { init: `var acc = ${op === "all"};`, step: op === "any" ? `if (${nz}) { acc = true; }` : `if (!(${nz})) { acc = false; }`, t: "bool" };
    }
  }
}

type Builder<P extends PrimName> = (n: IRNode<P>) => Program;

const builders: { [P in PrimName]: Builder<P> } = {
  unary: (n) => ({ passes: [elementwise(n, ([x]) => unaryVal(n.params.op, x!, n.inputs[0]!.dtype))] }),
  binary: (n) => ({ passes: [elementwise(n, ([a, b]) => binaryVal(n.params.op, a!, b!))] }),
  where: (n) => ({
    passes: [elementwise(n, ([c, a, b]) => ({ e: `select(${b!.e}, ${a!.e}, ${c!.e} != 0)`, t: a!.t }))],
  }),
  cast: (n) => ({ passes: [elementwise(n, ([x]) => x!)] }),
  reduce: (n) => {
    const v = n.inputs[0]!;
    const { op, axes } = n.params;
    let body = stridedOffsets(n.out.shape, [v.strides], ["off(0u)"], ["p0"]);
    const q = ["p0", ...axes.map((a) => (v.strides[a] === 0 ? "" : `j${a} * ${v.strides[a]}`))].filter((x) => x).join(" + ");
    let inner = `let x = I0[${q}];`;
    const { init, step, t } = reduceAcc(op, isFloating(v.dtype));
    inner += step;
    for (let k = axes.length - 1; k >= 0; k--) {
      const a = axes[k]!;
      inner = `for (var j${a} = 0; j${a} < ${v.shape[a]}; j${a}++) { ${inner} }`;
    }
    body += `${init}${inner}O[i] = ${storeVal({ e: "acc", t }, n.out.dtype)};`;
    return { passes: [simple(n, body, [0])] };
  },
  argreduce: (n) => {
    const v = n.inputs[0]!;
    const ax = n.params.axis;
    const f = isFloating(v.dtype);
    const c = n.params.op === "argmax" ? ">" : "<";
    let body = stridedOffsets(n.out.shape, [v.strides], ["off(0u)"], ["p0"]);
    body += f ? `var best = inf_(${c === ">"});` : `var best = ${c === ">" ? "i32(-2147483647 - 1)" : "2147483647"};`;
    body += `var acc = 0; for (var j = 0; j < ${v.shape[ax]}; j++) { let x = I0[p0 + j * ${v.strides[ax]}];`;
    body += f ? `if (!isnan_(best) && (x ${c} best || isnan_(x))) { best = x; acc = j; } }` : `if (x ${c} best) { best = x; acc = j; } }`;
    body += `O[i] = acc;`;
    return { passes: [simple(n, body, [0])] };
  },
  matmul: (n) => ({ passes: [matmulPass(n)] }),
  gather: (n) => {
    const [x, idx] = n.inputs as [ViewMeta, ViewMeta];
    const dim = n.params.dim;
    let body = coords(idx.shape, "c");
    body += `let v = I1[off(1u) + ${dot("c", idx.strides)}];`;
    body += `if (v < 0 || v >= ${x.shape[dim]}) { O[i] = ${storageType(n.out.dtype) === "f32" ? "nan_()" : "0"}; return; }`;
    body += `O[i] = I0[off(0u) + ${dot("c", x.strides, dim, "v")}];`;
    return { passes: [simple(n, body, [0, 1])] };
  },
  scatterAdd: (n) => {
    const [self, idx, src] = n.inputs as [ViewMeta, ViewMeta, ViewMeta];
    const dim = n.params.dim;
    const f = storageType(n.out.dtype) === "f32";
    let body = coords(self.shape, "c");
    body += `var acc = I0[off(0u) + ${dot("c", self.strides)}];`;
    const inside = self.shape.map((_, d) => (d === dim ? "" : `c${d} < ${idx.shape[d]}`)).filter((x) => x);
    body += `if (${inside.join(" && ") || "true"}) { for (var j = 0; j < ${idx.shape[dim]}; j++) {`;
    body += `if (I1[off(1u) + ${dot("c", idx.strides, dim, "j")}] == c${dim}) { acc += ${f ? "" : ""}I2[off(2u) + ${dot("c", src.strides, dim, "j")}]; } } }`;
    body += `O[i] = ${storeVal({ e: "acc", t: f ? "f32" : "i32" }, n.out.dtype)};`;
    return { passes: [simple(n, body, [0, 1, 2])] };
  },
  stridedScatter: (n) => {
    const src = n.inputs[0]!;
    const { shape, strides, offset } = n.params;
    const zero = storageType(n.out.dtype) === "f32" ? "0.0" : "0";
    const base = n.inputs[1];
    // with a base (an in-place write through a view): start from it and replace the region
    const fill: Pass = base
      ? simple(n, `${coords(base.shape, "c")} O[i] = I0[off(0u) + ${dot("c", base.strides)}];`, [1]) // binds input 1 as I0
      : { ...simple(n, `O[i] = ${zero};`, []) };
    // Injective maps (slices, selects: the usual backward of a view) scatter in parallel; overlapping ones
    // accumulate sequentially in one thread so every sum has cpu's order.
    const dims = shape.map((s, d) => ({ s, st: strides[d]! })).filter((x) => x.s > 1).sort((a, b) => a.st - b.st);
    let span = 0;
    let injective = true;
    for (const d of dims) {
      if (d.st <= span) injective = false;
      span += (d.s - 1) * d.st;
    }
    const total = numel(shape);
    const step = (idx: string) =>
      `${coords(shape, "c", idx)} let o = ${offset} + ${dot("c", strides)}; O[o] = ${base ? "" : "O[o] + "}I0[off(0u) + ${dot("c", src.strides)}];`;
    const scatter = injective
      ? simple(n, step("i"), [0], total)
      : simple(n, `for (var k = 0; k < ${total}; k++) { ${step("k")} }`, [0], 1);
    return { passes: total === 0 ? [fill] : [fill, scatter] };
  },
  scan: (n) => {
    const x = n.inputs[0]!;
    const { op, dim } = n.params;
    const outer = x.shape.map((s, d) => (d === dim ? 1 : s));
    const os = contiguousStrides(x.shape);
    const f = storageType(n.out.dtype) === "f32";
    const t = f ? "f32" : "i32";
    let body = coords(outer, "c");
    body += `var acc = ${op === "sum" ? (f ? "0.0" : "0") : f ? "1.0" : "1"};`;
    body += `for (var j = 0; j < ${x.shape[dim]}; j++) { let v = ${t}(I0[off(0u) + ${dot("c", x.strides, dim, "j")}]);`;
    body += `acc = ${storeVal({ e: op === "sum" ? "acc + v" : "acc * v", t }, n.out.dtype)}; O[${dot("c", os, dim, "j")}] = acc; }`;
    return { passes: [simple(n, body, [0], numel(outer))] };
  },
  argsort: (n) => {
    const x = n.inputs[0]!;
    const { dim, descending } = n.params;
    const os = contiguousStrides(x.shape);
    const f = isFloating(x.dtype);
    // Stable rank sort: each element counts the elements that sort before it (NaN is the largest).
    const lt = (a: string, b: string) => (f ? `(!isnan_(${a}) && (isnan_(${b}) || ${a} < ${b}))` : `(${a} < ${b})`);
    let body = coords(x.shape, "c");
    body += `let me = I0[off(0u) + ${dot("c", x.strides)}]; var rank = 0;`;
    body += `for (var j = 0; j < ${x.shape[dim]}; j++) { let o = I0[off(0u) + ${dot("c", x.strides, dim, "j")}];`;
    const [first, second] = descending ? [lt("me", "o"), lt("o", "me")] : [lt("o", "me"), lt("me", "o")];
    body += `if (${first} || (!${second} && j < c${dim})) { rank++; } }`;
    body += `O[${dot("c", os, dim, "rank")}] = c${dim};`;
    return { passes: [simple(n, body, [0], numel(x.shape))] };
  },
  rand: (n) => {
    const wide = n.out.dtype === "float64";
    const u = (a: string, b: string) =>
      `(f32(${a} >> 5u) / 134217728.0 + f32(${b} >> 6u) / 9007199254740992.0)`;
    let body = "let lo = su(2u) + u32(i); let hi = su(3u) + select(0u, 1u, lo < su(2u));";
    body += "let w = philox(vec4<u32>(lo, hi, 0u, 0u), vec2<u32>(su(0u), su(1u)));";
    body += `let u0 = ${wide ? u("w.x", "w.y") : "f32(w.x >> 8u) / 16777216.0"};`;
    if (n.params.dist === "uniform") body += `O[i] = ${storeVal({ e: "u0", t: "f32" }, n.out.dtype)};`;
    else
      body += `let u1 = ${u("w.z", "w.w")}; O[i] = ${storeVal({ e: "sqrt(-2.0 * logf_(1.0 - u0)) * sincos_(6.283185307179586 * u1, true)", t: "f32" }, n.out.dtype)};`;
    return { passes: [{ ...simple(n, body, []), extra: PHILOX }] };
  },
  full: (n) => ({
    passes: [simple(n, `O[i] = ${storeVal(scalarVal(n.out.dtype, 0), n.out.dtype)};`, [])],
    checkScalars: intScalarCheck(n.out.dtype, [0]),
  }),
  arange: (n) => {
    const d = n.out.dtype;
    const e = isFloating(d) ? "sf(0u) + f32(i) * sf(1u)" : "si(0u) + i * si(1u)";
    return {
      passes: [simple(n, `O[i] = ${storeVal({ e, t: isFloating(d) ? "f32" : "i32" }, d)};`, [])],
      checkScalars: intScalarCheck(d, [0, 1]),
    };
  },
  cat: (n) => {
    const dim = n.params.dim;
    const os = contiguousStrides(n.out.shape);
    let start = 0;
    const passes: Pass[] = [];
    n.inputs.forEach((v, k) => {
      const base = start * os[dim]!;
      start += v.shape[dim]!;
      if (numel(v.shape) === 0) return;
      let body = stridedOffsets(v.shape, [v.strides, os], ["off(0u)", `${base}`], ["p0", "q"]);
      body += `O[q] = ${storeVal(loadVal("I0[p0]", v.dtype), n.out.dtype)};`;
      passes.push({ ...simple(n, body, [k], numel(v.shape)), inTypes: [st(v)] });
    });
    return { passes };
  },
  pad: (n) => {
    const x = n.inputs[0]!;
    const pads = n.params.pads;
    const os = contiguousStrides(n.out.shape);
    const base = pads.reduce((s, _, i) => (i % 2 === 0 ? s + pads[i]! * os[i / 2]! : s), 0);
    const fill = simple(n, `O[i] = ${storeVal(scalarVal(n.out.dtype, 0), n.out.dtype)};`, []);
    let body = stridedOffsets(x.shape, [x.strides, os], ["off(0u)", `${base}`], ["p0", "q"]);
    body += `O[q] = I0[p0];`;
    const passes = numel(x.shape) ? [fill, simple(n, body, [0], numel(x.shape))] : [fill];
    return { passes, checkScalars: intScalarCheck(n.out.dtype, [0]) };
  },
  // the op library only records a composite node for devices listing it in `overrides`
  composite: (n) => {
    if (n.params.name === "pagedAttention") return { passes: [pagedAttentionPass(n)] };
    throw new Error(`webgpu: no kernel for the composite ${n.params.name} (the op should have been decomposed)`);
  },
};

const PHILOX = `
fn mulhilo(a: u32, b: u32) -> vec2<u32> {
  let aH = a >> 16u; let aL = a & 0xffffu; let bH = b >> 16u; let bL = b & 0xffffu;
  let t = aL * bL; let m1 = aH * bL + (t >> 16u); let m2 = aL * bH + (m1 & 0xffffu);
  return vec2<u32>(aH * bH + (m1 >> 16u) + (m2 >> 16u), a * b);
}
fn philox(c: vec4<u32>, k: vec2<u32>) -> vec4<u32> {
  var x = c; var key = k;
  for (var r = 0; r < 10; r++) {
    let p0 = mulhilo(0xd2511f53u, x.x); let p1 = mulhilo(0xcd9e8d57u, x.z);
    x = vec4<u32>(p1.x ^ x.y ^ key.x, p1.y, p0.x ^ x.w ^ key.y, p0.y);
    key = key + vec2<u32>(0x9e3779b9u, 0xbb67ae85u);
  }
  return x;
}
`;

export function buildProgram(node: IRNode): Program {
  return (builders[node.prim] as Builder<PrimName>)(node);
}
