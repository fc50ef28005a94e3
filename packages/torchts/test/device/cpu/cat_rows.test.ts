// The row path of the cpu cat kernel: inputs whose dims from `dim` on are contiguous land as
// whole rows, in the arena by copyWithin on one view of its memory, elsewhere by set. Values
// equal an element-by-element reference for inputs with permuted or sliced outer dims, of
// several dtypes, in every mode.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";

function ref(parts: { shape: number[]; get: (ix: number[]) => number }[], dim: number, outShape: number[]): number[] {
  const out: number[] = [];
  const walk = (ix: number[]): void => {
    if (ix.length === outShape.length) {
      let at = ix[dim]!;
      for (const p of parts) {
        if (at < p.shape[dim]!) return void out.push(p.get(ix.map((v, d) => (d === dim ? at : v))));
        at -= p.shape[dim]!;
      }
      return;
    }
    for (let i = 0; i < outShape[ix.length]!; i++) walk([...ix, i]);
  };
  walk([]);
  return out;
}

test("cat copies whole rows of permuted and sliced inputs in order, in every mode and dtype", async () => {
  for (const dtype of ["float32", "int32", "float64"] as const)
    for (const mode of ["strict", "fused", "compiled"] as const) {
      // a: [3, 4, 5, 6] permuted on its outer dims; b: a slice of the last dim (rows stay contiguous)
      const base = torch.arange(0, 3 * 4 * 5 * 6, { dtype }).reshape([4, 3, 5, 6]);
      const bBase = torch.arange(1000, 1000 + 3 * 4 * 5 * 7, { dtype }).reshape([3, 4, 5, 7]);
      const run = (x: torch.Tensor, y: torch.Tensor) => torch.cat([x.permute([1, 0, 2, 3]), y.narrow(3, 1, 4)], 3);
      const got =
        mode === "compiled" ? torch.compile(run)(base, bBase) : torch.withEagerMode(mode, () => run(base, bBase));
      assert.deepEqual(got.shape, [3, 4, 5, 10]);
      const want = ref(
        [
          { shape: [3, 4, 5, 6], get: ([i, j, k, l]) => ((j! * 3 + i!) * 5 + k!) * 6 + l! },
          { shape: [3, 4, 5, 4], get: ([i, j, k, l]) => 1000 + ((i! * 4 + j!) * 5 + k!) * 7 + l! + 1 },
        ],
        3,
        [3, 4, 5, 10],
      );
      assert.deepEqual(Array.from((await got.data()) as ArrayLike<number>), want, `${dtype} ${mode}`);
      // along dim 1: rows of 5 x 6 elements from a permuted outer dim
      const run1 = (x: torch.Tensor) =>
        torch.cat([x.permute([1, 0, 2, 3]), x.permute([1, 0, 2, 3]).narrow(1, 1, 2)], 1);
      const g1 = mode === "compiled" ? torch.compile(run1)(base) : torch.withEagerMode(mode, () => run1(base));
      const w1 = ref(
        [
          { shape: [3, 4, 5, 6], get: ([i, j, k, l]) => ((j! * 3 + i!) * 5 + k!) * 6 + l! },
          { shape: [3, 2, 5, 6], get: ([i, j, k, l]) => (((j! + 1) * 3 + i!) * 5 + k!) * 6 + l! },
        ],
        1,
        [3, 6, 5, 6],
      );
      assert.deepEqual(Array.from((await g1.data()) as ArrayLike<number>), w1, `${dtype} ${mode} dim 1`);
    }
});
