// Samples for the indexing family (src/ops/indexing.ts): t[...] (index / set), masks, gather,
// scatter, index_select / index_add / index_put, take, take_along_dim.
import * as torch from "../../../src/index.js";
import type { OpInfos, Sample } from "./types.js";

/** index's specs: its rest parameter `indices` (Python's x[a, b, ...]). */
const specs = (...s: unknown[]): Sample => ({ indices: s });

export const OPINFO: OpInfos = {
  index: (mk) => [
    { input: mk.randn([2, 3]), ...specs(1, "1:", null) },
    { input: mk.randn([3, 4]), ...specs(mk.int([2], -3, 3), ":") },
    { input: mk.randn([2, 3, 4]), ...specs("::2, 1:7:3") },
    { input: mk.randn([3, 4]), ...specs(mk.bool([3, 4])) },
    { input: mk.randn([2, 3, 4]), ...specs(mk.int([2, 1], 0, 2), "...", mk.int([3], 0, 4)) },
    { input: mk.randn([2, 3, 4]), ...specs(0, { start: 1, stop: null, step: 1 }, null, [3, 0]) },
  ],
  setIndex: (mk) => [
    { input: mk.randn([3, 4]), indices: [":", mk.int([2], 0, 4)], value: 1.5 },
    { input: mk.randn([3, 4]), indices: mk.bool([3, 4]), value: mk.randn([]) },
    { input: mk.randn([2, 3]), indices: "1, ::2", value: mk.randn([2]) },
  ],
  "Tensor.set": (mk) => [
    { input: mk.randn([3, 4]), indices: [mk.int([2], -3, 3), 1], value: -2 },
    { input: mk.randn([3, 4]), indices: 0, value: mk.randn([1, 4]) },
  ],
  nonzero: (mk) => [{ input: mk.bool([3, 4]) }, { input: mk.int([2, 3], 0, 2), asTuple: true }],
  argwhere: (mk) => [{ input: mk.int([3, 3], 0, 2) }],
  maskedSelect: (mk) => [
    { input: mk.randn([3, 4]), mask: mk.bool([3, 4]) },
    { input: mk.randn([3, 4]), mask: mk.bool([4]) },
  ],
  maskedFill: (mk) => [
    { input: mk.randn([3, 4]), mask: mk.bool([3, 4]), value: -1.5 },
    { input: mk.randn([3, 4]), mask: mk.bool([4]), value: torch.tensor(2.5) },
    { input: mk.int([2, 3], 0, 9), mask: mk.bool([2, 1]), value: true },
  ],
  maskedFill_: (mk) => [
    { input: mk.randn([3, 4]), mask: mk.bool([3, 4]), value: -1.5 },
    { input: mk.randn([3, 4]), mask: mk.bool([4]), value: torch.tensor(-3) },
  ],
  indexSelect: (mk) => [
    { input: mk.randn([3, 4]), dim: 1, index: mk.int([5], 0, 4) },
    { input: mk.randn([3, 4]), dim: -2, index: mk.int([2], 0, 3, "int32") },
  ],
  gather: (mk) => [
    { input: mk.randn([3, 4]), dim: 1, index: mk.int([3, 2], 0, 4) },
    { input: mk.randn([3, 4]), dim: -2, index: mk.int([2, 4], 0, 3), sparseGrad: true },
  ],
  scatter: (mk) => [
    { input: mk.randn([3, 4]), dim: 1, index: mk.int([3, 2], 0, 4), src: mk.randn([3, 2]) },
    { input: mk.randn([3, 4]), dim: 0, index: mk.int([2, 4], 0, 3), value: 2.5, reduce: "add" },
    { input: mk.randn([3, 4]), dim: -1, index: mk.int([3, 3], 0, 4), src: mk.randn([3, 3]), reduce: "multiply" },
  ],
  "Tensor.scatter_": (mk) => [
    { input: mk.randn([3, 4]), dim: 1, index: mk.int([3, 2], 0, 4), src: mk.randn([3, 2]) },
    { input: mk.randn([3, 4]), dim: 0, index: mk.int([2, 4], 0, 3), value: -1, reduce: "multiply" },
  ],
  scatterAdd: (mk) => [
    { input: mk.randn([3, 4]), dim: 0, index: mk.int([2, 4], 0, 3), src: mk.randn([2, 4]) },
    { input: mk.randn([3, 4]), dim: -1, index: mk.int([3, 5], 0, 4), src: mk.randn([3, 6]) },
  ],
  "Tensor.scatterAdd_": (mk) => [{ input: mk.randn([3, 4]), dim: 1, index: mk.int([2, 3], 0, 4), src: mk.randn([2, 3]) }],
  indexAdd: (mk) => [
    { input: mk.randn([3, 4]), dim: 0, index: mk.int([2], 0, 3), source: mk.randn([2, 4]), alpha: 2 },
    { input: mk.randn([3, 4]), dim: -1, index: mk.int([3], 0, 4, "int32"), source: mk.randn([3, 3]) },
    { input: mk.randn([3, 4]), dim: 0, index: mk.int([2], 0, 3), source: mk.randn([2, 1]), alpha: -0.5 },
  ],
  indexCopy: (mk) => [
    { input: mk.randn([3, 4]), dim: 0, index: torch.tensor([2, 0]), source: mk.randn([2, 4]) },
    { input: mk.randn([3, 4]), dim: -1, index: torch.tensor([3, 1, 0]), source: mk.randn([3, 3]) },
  ],
  "Tensor.indexCopy_": (mk) => [
    { input: mk.randn([4, 3]), dim: 0, index: torch.tensor([1, 3]), source: mk.randn([2, 3]) },
    { input: mk.randn([3, 4]), dim: 1, index: torch.tensor([2]), source: mk.randn([3, 1]) },
  ],
  "Tensor.indexAdd_": (mk) => [{ input: mk.randn([3, 4]), dim: 1, index: mk.int([2], 0, 4), source: mk.randn([3, 2]), alpha: 3 }],
  indexPut: (mk) => [
    { input: mk.randn([3, 4]), indices: [mk.int([2], 0, 3), mk.int([2], -4, 4)], values: mk.randn([2]), accumulate: true },
    { input: mk.randn([3, 4]), indices: [mk.bool([3, 4])], values: mk.randn([]) },
    { input: mk.randn([3, 4]), indices: [mk.int([2], 0, 3)], values: mk.randn([4]) },
  ],
  indexPut_: (mk) => [
    { input: mk.randn([3, 4]), indices: [mk.int([3], 0, 3)], values: mk.randn([3, 4]), accumulate: true },
    { input: mk.randn([3, 4]), indices: [mk.int([2], 0, 3), mk.int([2], 0, 4)], values: mk.randn([2]) },
  ],
  take: (mk) => [
    { input: mk.randn([3, 4]), index: mk.int([2, 3], -12, 12) },
    { input: mk.randn([5]), index: mk.int([], 0, 5) },
  ],
  takeAlongDim: (mk) => [
    { input: mk.randn([3, 4]), indices: mk.int([3, 2], 0, 4), dim: 1 },
    { input: mk.randn([3, 4]), indices: mk.int([5], 0, 12) },
    { input: mk.randn([3, 4]), indices: mk.int([1, 4], 0, 3), dim: -2 },
  ],
};
