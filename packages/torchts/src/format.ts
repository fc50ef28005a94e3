// PyTorch-style printing: tensor([[1., 2.]], requires_grad=True).
import type { Tensor } from "./tensor.js";
import { isFloating } from "./ir/dtype.js";

const EDGE = 3;
const THRESHOLD = 1000;

// Mirrors torch._tensor_str._Formatter: the mode (integer-valued, fixed or scientific) and
// the column width come from the nonzero finite values only; nan/inf/0 just get padded.
function fmtFloatFactory(vals: number[]): { f: (v: number) => string; width: number } {
  const special = (v: number) => (v !== v ? "nan" : v > 0 ? "inf" : "-inf");
  const sign = (v: number, s: string) => (Object.is(v, -0) ? `-${s}` : s);
  const sci = (v: number) => (Number.isFinite(v) ? v.toExponential(4).replace(/e([+-])(\d)$/, "e$10$2") : special(v));
  const nz = vals.filter((v) => Number.isFinite(v) && v !== 0);
  if (nz.length === 0) return { f: (v) => (Number.isFinite(v) ? sign(v, `${v.toFixed(0)}.`) : special(v)), width: 1 };
  const abs = nz.map(Math.abs);
  const max = Math.max(...abs);
  const min = Math.min(...abs);
  const widthOf = (f: (v: number) => string) => Math.max(...nz.map((v) => f(v).length));
  if (nz.every((v) => Number.isInteger(v))) {
    if (max / min > 1000 || max > 1e8) return { f: sci, width: widthOf(sci) };
    const f = (v: number) => (Number.isFinite(v) ? sign(v, `${v.toFixed(0)}.`) : special(v));
    return { f, width: widthOf(f) };
  }
  if (max / min > 1000 || max > 1e8 || min < 1e-4) return { f: sci, width: widthOf(sci) };
  const f = (v: number) => (Number.isFinite(v) ? sign(v, v.toFixed(4)) : special(v));
  return { f, width: widthOf(f) };
}

export function formatTensor(t: Tensor): string {
  if (t.isDisposed) return "tensor(<disposed>)";
  let flat: ArrayLike<number>;
  try {
    flat = t._contiguousHost();
  } catch {
    return `tensor(<${t.device}, shape=[${t.shape.join(", ")}]; read it with await t.data()>)`;
  }
  const vals = Array.from(flat);
  const summarize = vals.length > THRESHOLD;
  let strs: string[];
  let width: number;
  if (isFloating(t.dtype)) {
    const ff = fmtFloatFactory(vals);
    strs = vals.map(ff.f);
    width = ff.width;
  } else {
    strs = vals.map(t.dtype === "bool" ? (v: number) => (v ? "True" : "False") : (v: number) => String(v));
    width = Math.max(0, ...strs.map((s) => s.length));
  }
  const pad = (s: string) => s.padStart(width);
  const strides: number[] = [];
  let acc = 1;
  for (let d = t.ndim - 1; d >= 0; d--) {
    strides[d] = acc;
    acc *= t.shape[d]!;
  }
  const indent = "tensor(".length;
  const rec = (d: number, base: number): string => {
    if (d === t.ndim) return pad(strs[base]!);
    const n = t.shape[d]!;
    let idx = Array.from({ length: n }, (_, i) => i);
    let cut = false;
    if (summarize && n > 2 * EDGE) {
      idx = [...idx.slice(0, EDGE), ...idx.slice(n - EDGE)];
      cut = true;
    }
    const parts = idx.map((i) => rec(d + 1, base + i * strides[d]!));
    if (cut) parts.splice(EDGE, 0, d === t.ndim - 1 ? " ..." : "...");
    const sep = d === t.ndim - 1 ? ", " : "," + "\n".repeat(t.ndim - d - 1) + " ".repeat(indent + d + 1);
    return `[${parts.join(sep)}]`;
  };
  let body = t.ndim === 0 ? strs[0]! : rec(0, 0);
  if (t.numel() === 0 && t.ndim > 0) body = "[]";
  const extras: string[] = [];
  if (t.numel() === 0 && t.ndim > 1) extras.push(`size=(${t.shape.join(", ")})`);
  if (t.device !== "cpu") extras.push(`device='${t.device}'`);
  if (!["float32", "int64", "bool"].includes(t.dtype)) extras.push(`dtype=torch.${t.dtype}`);
  if (t.gradFn) extras.push(`grad_fn=<${t.gradFn.name}>`);
  else if (t.requiresGrad) extras.push("requires_grad=True");
  return `tensor(${body}${extras.length ? ", " + extras.join(", ") : ""})`;
}
