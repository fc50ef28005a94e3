// PyTorch-style printing: tensor([[1., 2.]], requires_grad=True).
import type { Tensor } from "./tensor.js";
import { isFloating } from "./ir/dtype.js";

const EDGE = 3;
const THRESHOLD = 1000;

function fmtFloatFactory(vals: number[]): (v: number) => string {
  const finite = vals.filter((v) => Number.isFinite(v));
  const special = (v: number) => (v !== v ? "nan" : v > 0 ? "inf" : "-inf");
  if (finite.length === 0) return (v) => (Number.isFinite(v) ? String(v) : special(v));
  const intMode = finite.every((v) => Number.isInteger(v));
  const abs = finite.map(Math.abs);
  const nz = abs.filter((v) => v !== 0);
  const max = Math.max(...abs);
  const min = nz.length ? Math.min(...nz) : 0;
  if (intMode) {
    if (max > 1e8) return (v) => (Number.isFinite(v) ? v.toExponential(4).replace(/e([+-])(\d)$/, "e$10$2") : special(v));
    return (v) => (Number.isFinite(v) ? `${v.toFixed(0)}.` : special(v));
  }
  if ((min > 0 && max / min > 1000) || max > 1e8 || (min > 0 && min < 1e-4))
    return (v) => (Number.isFinite(v) ? v.toExponential(4).replace(/e([+-])(\d)$/, "e$10$2") : special(v));
  return (v) => (Number.isFinite(v) ? v.toFixed(4) : special(v));
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
  const f = isFloating(t.dtype)
    ? fmtFloatFactory(vals)
    : t.dtype === "bool"
      ? (v: number) => (v ? "True" : "False")
      : (v: number) => String(v);
  const strs = vals.map(f);
  const width = Math.max(0, ...strs.map((s) => s.length));
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
    if (cut) parts.splice(EDGE, 0, "...");
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
