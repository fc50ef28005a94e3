// Sharding propagation for the ops a transformer uses beyond pointwise ones (one decision per mesh
// dim; an argument is redistributed only where the op cannot run on its current placement):
//   matmul / mm / bmm   batch or row shards of the left side and column shards of the right side
//                       carry over; a shared contraction dim gives Partial(sum); linear is matmul
//                       with the transposed weight, then the bias (added after any reduction)
//   embedding           sharded indices carry over; a column-sharded table shards the output's
//                       last dim; a row-sharded table gives Partial(sum) (each rank looks up the
//                       rows it holds, zeros elsewhere)
//   sum / mean / amax / amin over a sharded dim: Partial(sum / sum / max / min) (mean divides the
//                       local sum by the global count, so uneven shards are right); other shards move
//   softmax / logSoftmax, layerNorm / rmsNorm: the normalized dims are gathered, other shards stay
//   transpose / permute / t / movedim / unsqueeze / squeeze: shards follow their dims
//   view / reshape / flatten: a shard follows a dim that is kept, or the outermost dim of a merge or
//                       split when the chunks line up (even shards); otherwise it is gathered first
import { full } from "../../ops/creation.js";
import { Tensor } from "../../tensor.js";
import { DistError } from "../errors.js";
import { RULES, wrap, type OpCall } from "./dispatch.js";
import { DTensor, isDTensor, localLayout, type DTensorLike } from "./dtensor.js";
import { chunkRange, Partial, type Placement, Replicate, Shard } from "./placement.js";
import { forOutput } from "./redistribute.js";
import { dtensorArgs, meshOf } from "./rules_pointwise.js";

const R = () => new Replicate();

function arg(c: OpCall, name: string): number {
  const i = c.schema.params.findIndex((p) => p.name === name);
  if (i < 0) throw new DistError(`${c.def.name}: internal: no argument '${name}'`);
  return i;
}

/** Redistribute if needed; the local tensor. */
function to(t: DTensorLike, placements: readonly Placement[]): Tensor {
  const same = placements.every((p, k) => p.equals(t._spec.placements[k]!));
  return (same ? t : t.redistribute(null, placements))._local;
}

function dtArg(c: OpCall, name: string): DTensorLike {
  const v = c.vals[arg(c, name)];
  if (!isDTensor(v)) throw new DistError(`${c.def.name}: argument '${name}' must be a DTensor when another argument is one`);
  return v;
}

const normDim = (d: number, nd: number) => (d < 0 ? d + nd : d);

// ---------------------------------------------------------------- matmul

function matmulRule(c: OpCall): DTensor {
  const name = c.def.name;
  const [ia, ib] = name === "matmul" ? [arg(c, "input"), arg(c, "other")] : [arg(c, "input"), arg(c, "mat2")];
  const A = c.vals[ia];
  const B = c.vals[ib];
  if (!isDTensor(A) || !isDTensor(B)) throw new DistError(`${name}: got mixed Tensor and DTensor, need to convert all Tensors to DTensor before calling distributed operators!`);
  const mesh = meshOf(c, [{ t: A }, { t: B }]);
  const na = A.ndim;
  const nb = B.ndim;
  if (!na || !nb) throw new DistError(`${name}: both arguments need at least one dimension`);
  const batchA = na >= 2 ? A.shape.slice(0, -2) : [];
  const batchB = nb >= 2 ? B.shape.slice(0, -2) : [];
  const nBatch = Math.max(batchA.length, batchB.length);
  const batch: number[] = [];
  for (let j = 0; j < nBatch; j++) {
    const a = batchA[j - (nBatch - batchA.length)] ?? 1;
    const b = batchB[j - (nBatch - batchB.length)] ?? 1;
    if (a !== b && a !== 1 && b !== 1) throw new DistError(`${name}: batch dims [${batchA}] and [${batchB}] do not broadcast`);
    batch.push(Math.max(a, b));
  }
  const kA = na - 1;
  const mA = na >= 2 ? na - 2 : -1;
  const kB = nb >= 2 ? nb - 2 : 0;
  const nB = nb >= 2 ? nb - 1 : -1;
  const outShape = [...batch, ...(na >= 2 ? [A.shape[mA]!] : []), ...(nb >= 2 ? [B.shape[nB]!] : [])];
  const mOut = na >= 2 ? nBatch : -1;
  const nOut = nb >= 2 ? nBatch + (na >= 2 ? 1 : 0) : -1;
  // A's (B's) dim for output batch dim o, or -1 when it broadcasts there
  const batchDim = (nd: number, b: number[], o: number) => {
    const j = o - (nBatch - b.length);
    return j >= 0 && b[j]! > 1 ? j : -1;
  };
  const pa: Placement[] = [];
  const pb: Placement[] = [];
  const po: Placement[] = [];
  mesh.shape.forEach((_, k) => {
    const a = A._spec.placements[k]!;
    const b = B._spec.placements[k]!;
    const aBatch = a instanceof Shard && na >= 2 && a.dim < na - 2 ? a.dim + (nBatch - batchA.length) : -1;
    const bBatch = b instanceof Shard && nb >= 2 && b.dim < nb - 2 ? b.dim + (nBatch - batchB.length) : -1;
    const set = (x: Placement, y: Placement, o: Placement) => (pa.push(x), pb.push(y), po.push(o));
    if (aBatch >= 0 || bBatch >= 0) {
      const o = aBatch >= 0 ? aBatch : bBatch;
      const ja = batchDim(na, batchA, o);
      const jb = batchDim(nb, batchB, o);
      return set(ja >= 0 ? new Shard(ja) : R(), jb >= 0 ? new Shard(jb) : R(), new Shard(o));
    }
    if (a.isShard(mA) && mA >= 0) return set(a, R(), new Shard(mOut));
    if (b.isShard(nB) && nB >= 0) return set(R(), b, new Shard(nOut));
    if (a.isShard(kA) || b.isShard(kB)) return set(new Shard(kA), new Shard(kB), new Partial());
    if (a instanceof Partial && a.reduceOp === "sum" && !(b instanceof Partial)) return set(a, R(), a);
    if (b instanceof Partial && b.reduceOp === "sum" && !(a instanceof Partial)) return set(R(), b, b);
    return set(R(), R(), R());
  });
  c.vals[ia] = forOutput(to(A, pa), pa, po, mesh);
  c.vals[ib] = forOutput(to(B, pb), pb, po, mesh);
  return wrap(name, c.run(), mesh, po, outShape);
}
for (const n of ["matmul", "mm", "bmm"]) RULES.set(n, matmulRule);

RULES.set("linear", (c) => {
  const x = dtArg(c, "input");
  const w = dtArg(c, "weight");
  const b = c.vals[arg(c, "bias")];
  if (b !== null && b !== undefined && !isDTensor(b)) throw new DistError("linear: got mixed Tensor and DTensor (the bias)");
  const out = x.matmul(w.t()) as DTensor;
  return b ? (out.add(b as DTensor) as DTensor) : out;
});

// ---------------------------------------------------------------- embedding

RULES.set("embedding", (c) => {
  const idx = dtArg(c, "input");
  const w = dtArg(c, "weight");
  const mesh = meshOf(c, [{ t: idx }, { t: w }]);
  const outShape = [...idx.shape, w.shape[1]!];
  const pi: Placement[] = [];
  const pw: Placement[] = [];
  const po: Placement[] = [];
  let rowSharded = -1;
  mesh.shape.forEach((_, k) => {
    const a = idx._spec.placements[k]!;
    const b = w._spec.placements[k]!;
    if (a instanceof Shard) return pi.push(a), pw.push(R()), po.push(a);
    if (b.isShard(1)) return pi.push(R()), pw.push(b), po.push(new Shard(outShape.length - 1));
    if (b.isShard(0) && rowSharded < 0) {
      rowSharded = k;
      return pi.push(R()), pw.push(b), po.push(new Partial());
    }
    return pi.push(R()), pw.push(R()), po.push(R());
  });
  const ids = to(idx, pi);
  const table = w.redistribute(null, pw);
  if (rowSharded < 0) {
    c.vals[arg(c, "input")] = ids;
    c.vals[arg(c, "weight")] = forOutput(table._local, pw, po, mesh);
    return wrap("embedding", c.run(), mesh, po, outShape);
  }
  if (c.vals[arg(c, "paddingIdx")] !== null && c.vals[arg(c, "paddingIdx")] !== undefined)
    throw new DistError("embedding: paddingIdx with a row-sharded table is not supported");
  // the rows this rank holds: look them up, zeros for the others (the sum over ranks is the lookup)
  const start = table.localOffsets()[0]!;
  const rows = table._local.shape[0]!;
  const mine = ids.ge(start).logicalAnd(ids.lt(start + rows));
  c.vals[arg(c, "input")] = ids.sub(start).mul(mine);
  c.vals[arg(c, "weight")] = table._local;
  const local = (c.run() as Tensor).mul(mine.unsqueeze(-1));
  return wrap("embedding", local, mesh, po, outShape);
});

// ---------------------------------------------------------------- reductions

function reduction(kind: "sum" | "mean" | "amax" | "amin") {
  return (c: OpCall): DTensor => {
    const [{ t: x }] = dtensorArgs(c);
    const nd = x.ndim;
    const dimV = c.vals[arg(c, "dim")] as number[] | null;
    const dims = dimV === null || dimV === undefined || dimV.length === 0 ? [...Array(nd).keys()] : dimV.map((d) => normDim(d, nd));
    const keepdim = c.vals[arg(c, "keepdim")] as boolean;
    const outShape = x.shape.flatMap((s, d) => (dims.includes(d) ? (keepdim ? [1] : []) : [s]));
    const partialKind = kind === "amax" ? "max" : kind === "amin" ? "min" : "sum";
    const need: Placement[] = [];
    const out: Placement[] = [];
    let sharded = false;
    x._spec.placements.forEach((p) => {
      if (p instanceof Shard) {
        if (dims.includes(p.dim)) {
          sharded = true;
          need.push(p);
          out.push(new Partial(partialKind));
        } else {
          need.push(p);
          out.push(new Shard(keepdim ? p.dim : p.dim - dims.filter((d) => d < p.dim).length));
        }
      } else if (p instanceof Partial) {
        // sums and means are linear: a Partial(sum) stays one; a max of partial sums is not
        const keep = p.reduceOp === "sum" && kind !== "amax" && kind !== "amin";
        need.push(keep ? p : R());
        out.push(keep ? p : R());
      } else {
        need.push(p);
        out.push(p);
      }
    });
    const local = to(x, need);
    let r: Tensor;
    if (kind === "mean" && (sharded || out.some((p) => p instanceof Partial))) {
      // the global mean = the sum over ranks of (local sum / global count)
      const count = dims.reduce((a, d) => a * x.shape[d]!, 1);
      const dt = c.vals[arg(c, "dtype")];
      r = local.sum(dims, keepdim, ...(dt ? [{ dtype: dt as never }] : [])).div(count);
    } else if ((kind === "amax" || kind === "amin") && local.numel() === 0 && sharded) {
      // an empty shard: the identity of the max (min) over ranks
      const shape = local.shape.flatMap((s, d) => (dims.includes(d) ? (keepdim ? [1] : []) : [s]));
      r = full(shape, kind === "amax" ? -Infinity : Infinity, { dtype: local.dtype });
    } else {
      c.vals[arg(c, "input")] = local;
      r = c.run() as Tensor;
    }
    const fixed = out.map((p) => (p instanceof Partial && p.reduceOp === "sum" && kind === "mean" ? new Partial("sum") : p));
    return wrap(c.def.name, r, x._spec.mesh, fixed, outShape);
  };
}
for (const k of ["sum", "mean", "amax", "amin"] as const) RULES.set(k, reduction(k));

// ---------------------------------------------------------------- normalizations

/** Gather the dims `dims` (and reduce Partials); other shards stay; the output has the input's placements. */
function keepingShards(c: OpCall, x: DTensorLike, dims: number[]): Placement[] {
  return x._spec.placements.map((p) => (p instanceof Partial || (p instanceof Shard && dims.includes(p.dim)) ? R() : p));
}

for (const n of ["softmax", "logSoftmax"])
  RULES.set(n, (c) => {
    const [{ i, t: x }] = dtensorArgs(c);
    const dv = c.vals[arg(c, "dim")] as number | null;
    if (dv === null || dv === undefined) throw new DistError(`${n}: dim is required for a DTensor`);
    const need = keepingShards(c, x, [normDim(dv, x.ndim)]);
    c.vals[i] = to(x, need);
    return wrap(n, c.run(), x._spec.mesh, need, x.shape);
  });

for (const n of ["layerNorm", "rmsNorm"])
  RULES.set(n, (c) => {
    const x = dtArg(c, "input");
    const k = (c.vals[arg(c, "normalizedShape")] as number[]).length;
    const need = keepingShards(c, x, [...Array(k).keys()].map((j) => x.ndim - k + j));
    c.vals[arg(c, "input")] = to(x, need);
    for (const p of n === "layerNorm" ? ["weight", "bias"] : ["weight"]) {
      const v = c.vals[arg(c, p)];
      if (v === null || v === undefined) continue;
      if (!isDTensor(v)) throw new DistError(`${n}: got mixed Tensor and DTensor (${p})`);
      const rep = v._spec.placements.map(() => R());
      c.vals[arg(c, p)] = forOutput(to(v, rep), rep, need, x._spec.mesh);
    }
    return wrap(n, c.run(), x._spec.mesh, need, x.shape);
  });

// ---------------------------------------------------------------- dims moving

/** An op that only moves dims: `perm[o]` is the input dim of output dim o (null: a new dim of size 1). */
function permuting(c: OpCall, x: DTensorLike, perm: (number | null)[], outShape: number[]): DTensor {
  const placements = x._spec.placements.map((p) => {
    if (!(p instanceof Shard)) return p;
    const o = perm.indexOf(p.dim);
    if (o < 0) throw new DistError(`${c.def.name}: internal: a sharded dim disappeared`);
    return new Shard(o);
  });
  c.vals[0] = x._local;
  return wrap(c.def.name, c.run(), x._spec.mesh, placements, outShape);
}

RULES.set("transpose", (c) => {
  const x = c.vals[0] as DTensorLike;
  const a = normDim(c.vals[1] as number, x.ndim);
  const b = normDim(c.vals[2] as number, x.ndim);
  const perm = [...Array(x.ndim).keys()];
  [perm[a], perm[b]] = [perm[b]!, perm[a]!];
  return permuting(c, x, perm, perm.map((d) => x.shape[d]!));
});
RULES.set("t", (c) => {
  const x = c.vals[0] as DTensorLike;
  const perm = x.ndim < 2 ? [...Array(x.ndim).keys()] : [1, 0];
  return permuting(c, x, perm, perm.map((d) => x.shape[d]!));
});
RULES.set("permute", (c) => {
  const x = c.vals[0] as DTensorLike;
  const perm = (c.vals[1] as number[]).map((d) => normDim(d, x.ndim));
  return permuting(c, x, perm, perm.map((d) => x.shape[d]!));
});
RULES.set("movedim", (c) => {
  const x = c.vals[0] as DTensorLike;
  const src = ([] as number[]).concat(c.vals[1] as number | number[]).map((d) => normDim(d, x.ndim));
  const dst = ([] as number[]).concat(c.vals[2] as number | number[]).map((d) => normDim(d, x.ndim));
  const perm = new Array<number>(x.ndim).fill(-1);
  src.forEach((s, j) => (perm[dst[j]!] = s));
  const rest = [...Array(x.ndim).keys()].filter((d) => !src.includes(d));
  for (let o = 0; o < x.ndim; o++) if (perm[o] === -1) perm[o] = rest.shift()!;
  return permuting(c, x, perm, perm.map((d) => x.shape[d]!));
});
RULES.set("unsqueeze", (c) => {
  const x = c.vals[0] as DTensorLike;
  const d = normDim(c.vals[1] as number, x.ndim + 1);
  const perm: (number | null)[] = [...Array(x.ndim).keys()];
  perm.splice(d, 0, null);
  return permuting(c, x, perm, perm.map((p) => (p === null ? 1 : x.shape[p]!)));
});
RULES.set("squeeze", (c) => {
  const x = c.vals[0] as DTensorLike;
  const dv = c.vals[1] as number | null;
  const drop = dv === null || dv === undefined ? x.shape.flatMap((s, d) => (s === 1 ? [d] : [])) : x.shape[normDim(dv, x.ndim)] === 1 ? [normDim(dv, x.ndim)] : [];
  // a size-1 dim that is sharded is gathered (its shards are [1, 0, ...])
  const need = x._spec.placements.map((p) => (p instanceof Shard && drop.includes(p.dim) ? R() : p));
  const y = need.every((p, k) => p.equals(x._spec.placements[k]!)) ? x : x.redistribute(null, need);
  const perm = [...Array(x.ndim).keys()].filter((d) => !drop.includes(d));
  return permuting(c, y, perm, perm.map((d) => x.shape[d]!));
});

// ---------------------------------------------------------------- view / reshape / flatten

function inferShape(name: string, numel: number, shape: number[]): number[] {
  const k = shape.indexOf(-1);
  if (k < 0) return shape;
  const rest = shape.reduce((a, s, j) => (j === k ? a : a * s), 1);
  if (rest === 0 || numel % rest !== 0) throw new DistError(`${name}: shape '[${shape.join(", ")}]' is invalid for input of size ${numel}`);
  return shape.map((s, j) => (j === k ? numel / rest : s));
}

/** The reshape's dim groups of equal products: input dims [i0, i1) become output dims [o0, o1). */
function reshapeGroups(a: readonly number[], b: readonly number[]): { i0: number; i1: number; o0: number; o1: number }[] {
  const out: { i0: number; i1: number; o0: number; o1: number }[] = [];
  let i = 0;
  let o = 0;
  while (i < a.length || o < b.length) {
    const i0 = i;
    const o0 = o;
    let pa = i < a.length ? a[i++]! : 1;
    let pb = o < b.length ? b[o++]! : 1;
    while (pa !== pb) {
      if (pa < pb && i < a.length) pa *= a[i++]!;
      else if (pb < pa && o < b.length) pb *= b[o++]!;
      else return [];
    }
    out.push({ i0, i1: i, o0, o1: o });
  }
  return out;
}

/** Where a shard on input dim d goes in a reshape to `out` (-1: gather it first). */
function reshapeTarget(inShape: readonly number[], out: readonly number[], d: number, n: number): number {
  const g = reshapeGroups(inShape, out).find((x) => d >= x.i0 && d < x.i1);
  if (!g || inShape[d] === 1) return -1;
  // the shard moves to the outermost (non-1) output dim of its group, if d is the group's outermost
  // input dim and the chunks of the two line up element for element
  const firstIn = [...Array(g.i1 - g.i0).keys()].map((k) => k + g.i0).find((k) => inShape[k] !== 1);
  const firstOut = [...Array(g.o1 - g.o0).keys()].map((k) => k + g.o0).find((k) => out[k] !== 1);
  if (firstIn !== d || firstOut === undefined) return -1;
  const numel = inShape.slice(g.i0, g.i1).reduce((x, y) => x * y, 1);
  const innerIn = numel / inShape[d]!;
  const innerOut = numel / out[firstOut]!;
  for (let j = 0; j < n; j++) {
    const [a0, a1] = chunkRange(inShape[d]!, n, j);
    const [b0, b1] = chunkRange(out[firstOut]!, n, j);
    if (a0 * innerIn !== b0 * innerOut || a1 * innerIn !== b1 * innerOut) return -1;
  }
  return firstOut;
}

function reshapeRule(c: OpCall, x: DTensorLike, target: number[], shapeArg: number): DTensor {
  const out = inferShape(c.def.name, x.numel(), target);
  const mesh = x._spec.mesh;
  const need: Placement[] = [];
  const placed: Placement[] = [];
  x._spec.placements.forEach((p, k) => {
    const nested = p instanceof Shard && x._spec.placements.some((q, j) => j !== k && q.isShard(p.dim));
    const e = p instanceof Shard && !nested ? reshapeTarget(x.shape, out, p.dim, mesh.shape[k]!) : -1;
    const gather = p instanceof Shard && e < 0;
    need.push(gather ? R() : p);
    placed.push(gather ? R() : p instanceof Shard ? new Shard(e) : p);
  });
  c.vals[0] = to(x, need);
  c.vals[shapeArg] = localLayout(out, placed, mesh.shape, mesh.getCoordinate()!).shape;
  return wrap(c.def.name, c.run(), mesh, placed, out);
}

RULES.set("reshape", (c) => reshapeRule(c, c.vals[0] as DTensorLike, c.vals[1] as number[], 1));
RULES.set("view", (c) => {
  if (!Array.isArray(c.vals[1])) throw new DistError("view(dtype) of a DTensor is not supported");
  return reshapeRule(c, c.vals[0] as DTensorLike, c.vals[1] as number[], 1);
});
RULES.set("flatten", (c) => {
  const x = c.vals[0] as DTensorLike;
  const s = normDim(c.vals[1] as number, Math.max(1, x.ndim));
  const e = normDim(c.vals[2] as number, Math.max(1, x.ndim));
  const shape = x.ndim === 0 ? [1] : [...x.shape.slice(0, s), x.shape.slice(s, e + 1).reduce((a, b) => a * b, 1), ...x.shape.slice(e + 1)];
  return x.reshape(shape) as DTensor;
});

