// Sharding propagation for pointwise ops (unary, binary with broadcasting, ternary, their in-place
// forms), the `*Like` creation ops, casts and copies, and the ops that only read metadata.
//   - a mesh dim where some argument is Shard(d) (d not a broadcast dim) shards the output on the
//     matching output dim; the other arguments are brought to Shard on their matching dim (a
//     local chunk when they are replicated) or to Replicate where they broadcast along it
//   - Partial passes through linear ops (neg, a product with a number, sums of Partials of one
//     kind, clone/detach); otherwise a Partial argument is reduced first
//   - an in-place op keeps its target's placements and brings the other arguments to them
import { Tensor } from "../../tensor.js";
import { DistError } from "../errors.js";
import { mixedError, RULES, wrap, type OpCall } from "./dispatch.js";
import { isDTensor, type DTensorLike } from "./dtensor.js";
import { Partial, type Placement, Replicate, Shard } from "./placement.js";
import { forOutput } from "./redistribute.js";

const UNARY = "exp log sqrt rsqrt sin cos tan tanh sigmoid erf expm1 log1p reciprocal atan asin acos sinh cosh asinh acosh atanh log2 exp2 frac log10 neg abs sign floor ceil round trunc fix isnan isinf isfinite square relu logicalNot bitwiseNot clamp clip hardtanh relu6 leakyRelu elu celu selu gelu silu softplus mish logsigmoid hardsigmoid hardswish softsign tanhshrink threshold float double half bfloat16 long int bool byte";
const BINARY = "add sub rsub mul div trueDivide floorDivide remainder fmod pow maximum minimum atan2 eq ne lt le gt ge logicalAnd logicalOr logicalXor bitwiseAnd bitwiseOr bitwiseXor where lerp addcmul addcdiv maskedFill";
const INPLACE = "add_ sub_ mul_ div_ pow_ neg_ exp_ sqrt_ abs_ relu_ sigmoid_ tanh_ clamp_ lerp_ addcmul_ addcdiv_ zero_ fill_ copy_ maskedFill_";
const LINEAR_ALWAYS = new Set(["neg", "neg_", "clone", "detach", "contiguous", "zero_"]);
const LINEAR_SCALAR = new Set(["mul", "mul_", "div", "div_"]);
const LINEAR_SUM = new Set(["add", "sub", "add_", "sub_", "copy_"]);

export function dtensorArgs(c: OpCall): { i: number; t: DTensorLike }[] {
  const out: { i: number; t: DTensorLike }[] = [];
  c.vals.forEach((v, i) => {
    if (isDTensor(v)) out.push({ i, t: v });
    else if (v instanceof Tensor && !(v.ndim === 0)) throw mixedError(c.def.name);
  });
  return out;
}

function broadcastShapes(name: string, shapes: (readonly number[])[]): number[] {
  const nd = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(nd).fill(1);
  for (const s of shapes)
    s.forEach((d, k) => {
      const j = nd - s.length + k;
      if (d !== 1) {
        if (out[j] !== 1 && out[j] !== d) throw new DistError(`${name}: shapes [${shapes.map((x) => x.join(", ")).join("], [")}] do not broadcast`);
        out[j] = d;
      }
    });
  return out;
}

/** The placement argument `a` needs for the output placement `p` on one mesh dim. */
function argPlacement(p: Placement, a: DTensorLike, outShape: readonly number[]): Placement {
  if (p instanceof Shard) {
    const e = p.dim - (outShape.length - a.ndim);
    return e >= 0 && a.shape[e] === outShape[p.dim] ? new Shard(e) : new Replicate();
  }
  if (p instanceof Partial) return a._spec.placements.find((q) => q instanceof Partial) ?? new Replicate();
  return new Replicate();
}

/** Bring each DTensor argument to what `out` needs and put its local tensor into the call. */
export function localize(c: OpCall, args: { i: number; t: DTensorLike }[], need: (a: DTensorLike) => Placement[], out: readonly Placement[], skip?: DTensorLike | null): void {
  for (const { i, t } of args) {
    const want = need(t);
    const same = want.every((p, k) => p.equals(t._spec.placements[k]!));
    const local = (same ? t : t.redistribute(null, want))._local;
    c.vals[i] = t === skip ? local : forOutput(local, want, out, t._spec.mesh);
  }
}

export function meshOf(c: OpCall, args: { t: DTensorLike }[]) {
  const mesh = args[0]!.t._spec.mesh;
  for (const { t } of args) if (!t._spec.mesh.equals(mesh)) throw new DistError(`${c.def.name}: DTensor arguments are on different meshes`);
  return mesh;
}

function pointwise(c: OpCall, inplace: boolean): unknown {
  const name = c.def.name;
  const args = dtensorArgs(c);
  const mesh = meshOf(c, args);
  const self = isDTensor(c.vals[0]) ? (c.vals[0] as DTensorLike) : null;
  const outShape = inplace ? [...self!.shape] : broadcastShapes(name, c.vals.filter((v): v is Tensor => v instanceof Tensor).map((v) => v.shape));
  const partialOk = (p: Partial) =>
    LINEAR_ALWAYS.has(name) ||
    (LINEAR_SCALAR.has(name) && args.length === 1) ||
    (LINEAR_SUM.has(name) && args.every(({ t }) => t._spec.placements.some((q) => q.equals(p))) && (p.reduceOp === "sum" || p.reduceOp === "avg"));
  const out: Placement[] = mesh.shape.map((_, k) => {
    if (inplace) {
      const p = self!._spec.placements[k]!;
      if (p instanceof Partial && !partialOk(p)) throw new DistError(`${name}: an in-place ${name} on a Partial DTensor is not linear; redistribute it first`);
      return p;
    }
    for (const { t } of args) {
      const p = t._spec.placements[k]!;
      if (p instanceof Shard) {
        const od = p.dim + (outShape.length - t.ndim);
        if (t.shape[p.dim] === outShape[od]) return new Shard(od);
      }
    }
    const parts = args.map(({ t }) => t._spec.placements[k]!);
    if (parts.every((p) => p instanceof Partial && p.equals(parts[0]!)) && partialOk(parts[0] as Partial)) return parts[0]!;
    return new Replicate();
  });
  localize(c, args, (a) => out.map((p) => argPlacement(p, a, outShape)).map((p, k) => (a === self && inplace ? a._spec.placements[k]! : p)), out, inplace ? self : null);
  const r = c.run();
  if (inplace) return self;
  return wrap(name, r, mesh, out, outShape);
}

for (const n of `${UNARY} ${BINARY}`.split(" ")) RULES.set(n, (c) => pointwise(c, false));
for (const n of INPLACE.split(" ")) RULES.set(n, (c) => pointwise(c, true));

// like-creation, casts and copies: the input's layout (constants are the same everywhere: Replicate for a Partial input)
function sameLayout(c: OpCall, keepPartial: boolean): unknown {
  const args = dtensorArgs(c);
  const t = args[0]!.t;
  const out = t._spec.placements.map((p) => (p instanceof Partial && !keepPartial ? new Replicate() : p));
  c.vals[args[0]!.i] = t._local;
  for (const a of args.slice(1)) throw mixedError(`${c.def.name} (argument ${a.i})`);
  return wrap(c.def.name, c.run(), t._spec.mesh, out, t.shape);
}
for (const n of ["zerosLike", "onesLike", "emptyLike", "fullLike"]) RULES.set(n, (c) => sameLayout(c, false));
for (const n of ["clone", "detach", "contiguous"]) RULES.set(n, (c) => sameLayout(c, true));
RULES.set("to", (c) => {
  // a dtype change only (DTensors stay on the cpu mesh)
  const t = c.vals[0] as DTensorLike;
  if (c.vals.slice(1).some((v) => v instanceof Tensor)) throw mixedError("to");
  const r = (c.vals[0] = t._local, c.run()) as Tensor;
  if (r.device !== t._local.device) throw new DistError("to: moving a DTensor to another device is not supported");
  return r === t._local ? t : wrap("to", r, t._spec.mesh, t._spec.placements, t.shape);
});

// backward from a DTensor (a loss): from its local tensor (a Partial or Replicate loss's local gradient is
// the whole one, the gradient convention of redistribute.ts)
RULES.set("backward", (c) => {
  const t = c.vals[0] as DTensorLike;
  const g = c.vals[1];
  if (g !== null && g !== undefined && !isDTensor(g)) throw mixedError("backward (gradient)");
  c.vals[0] = t._local;
  if (g) c.vals[1] = (g as DTensorLike).redistribute(null, t._spec.placements.map((p) => (p instanceof Partial ? new Replicate() : p)))._local;
  return c.run();
});

// metadata (the global tensor's) and autograd flags: the op on the DTensor itself
for (const n of ["dim", "ndimension", "size", "stride", "numel", "nelement", "isContiguous", "isTensor", "requiresGrad_", "storageOffset"]) RULES.set(n, (c) => c.run());
