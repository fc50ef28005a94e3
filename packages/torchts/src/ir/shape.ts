// Shapes, strides and broadcasting, with PyTorch's error messages.

export type Shape = readonly number[];

export function numel(s: Shape): number {
  let n = 1;
  for (const d of s) n *= d;
  return n;
}

export function contiguousStrides(s: Shape): number[] {
  const st = new Array<number>(s.length);
  let acc = 1;
  for (let i = s.length - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= Math.max(s[i]!, 1);
  }
  return st;
}

export function isContiguous(shape: Shape, strides: Shape): boolean {
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === 1) continue;
    if (strides[i] !== acc) return false;
    acc *= shape[i]!;
  }
  return true;
}

export function shapeStr(s: Shape): string {
  return `[${s.join(", ")}]`;
}

export function sameShape(a: Shape, b: Shape): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function broadcastShapes(op: string, ...shapes: Shape[]): number[] {
  const nd = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(nd).fill(1);
  for (let i = 0; i < nd; i++) {
    for (let k = 0; k < shapes.length; k++) {
      const s = shapes[k]!;
      const d = s[s.length - nd + i];
      if (d === undefined || d === 1) continue;
      const cur = out[i]!;
      if (cur !== 1 && cur !== d) {
        if (shapes.length === 2) {
          const a = shapes[0]![shapes[0]!.length - nd + i] ?? 1;
          const b = shapes[1]![shapes[1]!.length - nd + i] ?? 1;
          throw new RangeError(
            `${op}: The size of tensor a (${a}) must match the size of tensor b (${b}) at non-singleton dimension ${i} ` +
              `(shapes ${shapes.map(shapeStr).join(" and ")})`,
          );
        }
        throw new RangeError(
          `${op}: shapes ${shapes.map(shapeStr).join(", ")} cannot be broadcast together (dimension ${i}: ${cur} vs ${d})`,
        );
      }
      out[i] = d;
    }
  }
  return out;
}

export function normDim(dim: number, ndim: number, op = ""): number {
  const lo = ndim === 0 ? -1 : -ndim;
  const hi = ndim === 0 ? 0 : ndim - 1;
  if (!Number.isInteger(dim) || dim < lo || dim > hi)
    throw new RangeError(
      `${op ? op + ": " : ""}Dimension out of range (expected to be in range of [${lo}, ${hi}], but got ${dim})`,
    );
  return dim < 0 ? dim + Math.max(ndim, 1) : dim;
}

export function normDims(dims: number | readonly number[] | undefined | null, ndim: number, op = ""): number[] {
  if (dims === undefined || dims === null) return Array.from({ length: ndim }, (_, i) => i);
  const arr = typeof dims === "number" ? [dims] : [...dims];
  const out = arr.map((d) => normDim(d, ndim, op));
  const seen = new Set<number>();
  for (const d of out) {
    if (seen.has(d)) throw new RangeError(`${op ? op + ": " : ""}dim ${d} appears multiple times in the list of dims`);
    seen.add(d);
  }
  return out.sort((a, b) => a - b);
}

/** Infer one -1 in a view/reshape target shape. */
export function inferShape(shape: readonly number[], n: number, op = "view"): number[] {
  let inferIdx = -1;
  let prod = 1;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    if (d === -1) {
      if (inferIdx >= 0) throw new RangeError(`${op}: only one dimension can be inferred`);
      inferIdx = i;
    } else if (!Number.isInteger(d) || d < 0) throw new RangeError(`${op}: invalid shape dimension ${d}`);
    else prod *= d;
  }
  const out = [...shape];
  if (inferIdx >= 0) {
    if (prod === 0 || n % prod !== 0)
      throw new RangeError(`${op}: shape '${shapeStr(shape)}' is invalid for input of size ${n}`);
    out[inferIdx] = n / prod;
  } else if (prod !== n) throw new RangeError(`${op}: shape '${shapeStr(shape)}' is invalid for input of size ${n}`);
  return out;
}

/**
 * PyTorch's computeStride: strides for viewing (shape, strides) as newShape without a
 * copy, or null when the memory layout does not allow it.
 */
export function viewStrides(oldShape: Shape, oldStrides: Shape, newShape: Shape): number[] | null {
  const n = numel(oldShape);
  const newStrides = new Array<number>(newShape.length).fill(0);
  if (n === 0) return contiguousStrides(newShape);
  // a 0-d tensor (one element) can be viewed as any all-ones shape
  if (oldShape.length === 0) return newShape.map(() => 1);
  let viewD = newShape.length - 1;
  let chunkBase = oldStrides[oldStrides.length - 1] ?? 1;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let td = oldShape.length - 1; td >= 0; td--) {
    tensorNumel *= oldShape[td]!;
    if (td === 0 || (oldShape[td - 1] !== 1 && oldStrides[td - 1] !== tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        newStrides[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD]!;
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (td > 0) {
        chunkBase = oldStrides[td - 1]!;
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD !== -1) return null;
  return newStrides;
}

/** Parse `zeros(2, 3)` or `zeros([2, 3])` into a shape. */
export function parseShape(args: readonly unknown[], op = ""): number[] {
  const a = args.length === 1 && Array.isArray(args[0]) ? (args[0] as unknown[]) : args;
  for (const d of a)
    if (typeof d !== "number" || !Number.isInteger(d) || d < -1)
      throw new TypeError(`${op ? op + ": " : ""}size must be a sequence of non-negative ints, got ${String(d)}`);
  return a as number[];
}
