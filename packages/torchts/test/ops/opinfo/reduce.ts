// Samples for the reductions, scans and sorting (src/ops/reduce.ts). Overloaded ops (max/min,
// prod, any/all, var/std, sort/argsort, median) have a sample per overload.
import type { Maker, OpInfos, Sample } from "./types.js";

type Gen = (mk: Maker) => Sample[];

/** sum / mean: all dims, one dim, a dim list with keepdim and a dtype */
const sumLike = (intInput: boolean): Gen => (mk) => [
  { input: mk.randn([3, 4]) },
  { input: mk.randn([2, 3, 4]), dim: 1 },
  { input: mk.randn([2, 3, 4]), dim: [0, 2], keepdim: true },
  { input: mk.randn([3, 4]), dim: -1, keepdim: false, dtype: "float64" },
  ...(intInput ? [{ input: mk.int([3, 4], -5, 5), dim: [1] }] : [{ input: mk.int([3, 4], -5, 5), dim: 0, dtype: "float32" }]),
];
const maxMin: Gen = (mk) => [
  { input: mk.randn([3, 4]) },
  { input: mk.randn([3, 4]), other: mk.randn([4]) },
  { input: mk.randn([3, 4]), dim: 1 },
  { input: mk.randn([2, 3, 4]), dim: -2, keepdim: true },
  { input: mk.int([3, 4], 0, 3), dim: 0 },
];
const amaxLike: Gen = (mk) => [
  { input: mk.randn([3, 4]) },
  { input: mk.randn([2, 3, 4]), dim: [1, 2] },
  { input: mk.randn([2, 3, 4]), dim: -1, keepdim: true },
];
const argLike: Gen = (mk) => [
  { input: mk.randn([3, 4]) },
  { input: mk.randn([3, 4]), dim: 1, keepdim: true },
  { input: mk.int([3, 4], 0, 3), dim: 0 },
  { input: mk.randn([2, 3]), dim: null, keepdim: true },
];
/** var / std / varMean / stdMean: the correction overload, the unbiased overload, unbiased alone */
const varLike: Gen = (mk) => [
  { input: mk.randn([3, 4]) },
  { input: mk.randn([3, 4]), dim: 1, correction: 0, keepdim: true },
  { input: mk.randn([2, 3, 4]), dim: [0, 2], correction: 2 },
  { input: mk.randn([3, 4]), dim: 0, unbiased: false, keepdim: true },
  { input: mk.randn([3, 4]), unbiased: false },
];
const anyAll: Gen = (mk) => [
  { input: mk.bool([3, 4]) },
  { input: mk.bool([3, 4]), dim: 1, keepdim: true },
  { input: mk.int([2, 3], 0, 2), dim: -1 },
];
const scanLike: Gen = (mk) => [
  { input: mk.randn([3, 4]), dim: 1 },
  { input: mk.uniform([2, 3], 0.5, 1.5), dim: 0, dtype: "float64" },
  { input: mk.int([2, 3], -3, 3), dim: -1 },
];
const sortLike: Gen = (mk) => [
  { input: mk.randn([3, 4]) },
  { input: mk.randn([3, 4]), dim: 0, descending: true },
  { input: mk.int([2, 5], 0, 3), dim: -1, descending: false },
  { input: mk.randn([3, 4]), stable: true, dim: 1, descending: true },
];

export const OPINFO: OpInfos = {
  sum: sumLike(true),
  mean: sumLike(false),
  prod: (mk) => [
    { input: mk.uniform([3, 4], 0.5, 1.5) },
    { input: mk.uniform([3, 4], 0.5, 1.5), dim: 1, keepdim: true },
    { input: mk.int([2, 3], -3, 3), dim: 0, keepdim: false, dtype: "float64" },
    { input: mk.uniform([3, 4], 0.5, 1.5), dtype: "float64" },
  ],
  max: maxMin,
  min: maxMin,
  amax: amaxLike,
  amin: amaxLike,
  argmax: argLike,
  argmin: argLike,
  var: varLike,
  std: varLike,
  varMean: varLike,
  stdMean: varLike,
  logsumexp: (mk) => [
    { input: mk.randn([3, 4]), dim: 1 },
    { input: mk.randn([2, 3, 4]), dim: [0, 2], keepdim: true },
  ],
  norm: (mk) => [
    { input: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), p: 2, dim: 1 },
    { input: mk.randn([3, 4]), p: 1, dim: [0], keepdim: true },
    { input: mk.randn([3, 4]), p: Infinity, dim: -1 },
    { input: mk.randn([3, 4]), p: 3, dim: null, keepdim: false, dtype: "float64" },
    { input: mk.randn([2, 3]), p: "fro", dim: [0, 1] },
    { input: mk.randn([2, 3]), p: 0 },
  ],
  any: anyAll,
  all: anyAll,
  countNonzero: (mk) => [
    { input: mk.int([3, 4], 0, 2) },
    { input: mk.int([3, 4], 0, 2), dim: 1 },
    { input: mk.randn([2, 3, 4]), dim: [0, 2] },
  ],
  cumsum: scanLike,
  cumprod: scanLike,
  sort: sortLike,
  argsort: (mk) => [
    { input: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), dim: 0, descending: true },
    { input: mk.randn([3, 4]), stable: true, dim: 1, descending: true },
  ],
  topk: (mk) => [
    { input: mk.randn([3, 5]), k: 2 },
    { input: mk.randn([3, 5]), k: 2, dim: 0, largest: false, sorted: true },
    { input: mk.randn([3, 5]), k: 3, dim: -1, largest: true, sorted: false },
  ],
  kthvalue: (mk) => [
    { input: mk.randn([3, 5]), k: 2 },
    { input: mk.randn([3, 5]), k: 3, dim: 0, keepdim: true },
  ],
  median: (mk) => [
    { input: mk.randn([3, 5]) },
    { input: mk.randn([3, 5]), dim: 1 },
    { input: mk.randn([4, 3]), dim: 0, keepdim: true },
  ],
};
