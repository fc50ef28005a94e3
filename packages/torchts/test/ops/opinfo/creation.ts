// Samples for tensor creation (src/ops/creation.ts) and the torch-level utilities that take
// arguments (src/ops/utility.ts: promoteTypes, setDefaultDtype, getDefaultDtype, numel,
// isTensor, device).
import type { Maker, OpInfos, Sample } from "./types.js";

type Gen = (mk: Maker) => Sample[];

const sized: Gen = () => [
  { size: [2, 3] },
  { size: [4], dtype: "int64" },
  { size: [2, 1, 3], dtype: "float64", device: "cpu", requiresGrad: true },
  { size: [], dtype: "bool" },
  { size: [0, 3] },
];
const like: Gen = (mk) => [
  { input: mk.randn([2, 3]) },
  { input: mk.int([3], 0, 5), dtype: "float32", device: "cpu", requiresGrad: true },
  { input: mk.bool([2, 2]), dtype: "int32" },
];

export const OPINFO: OpInfos = {
  tensor: () => [
    { data: [[1.5, 2], [3, -4]] },
    { data: [1, 2, 3] },
    { data: [true, false] },
    { data: 3.5, dtype: "float64" },
    { data: [[1, 2]], dtype: "float32", device: "cpu", requiresGrad: true },
    { data: new Float32Array([0.5, 1.5, -2]) },
    { data: new Int32Array([1, -2]), dtype: "int64" },
    { data: [] },
  ],
  zeros: sized,
  ones: sized,
  empty: sized,
  full: () => [
    { size: [2, 3], fillValue: 1.5 },
    { size: [3], fillValue: 7 },
    { size: [2, 2], fillValue: true },
    { size: [2], fillValue: 2, dtype: "float64", device: "cpu", requiresGrad: true },
  ],
  zerosLike: like,
  onesLike: like,
  emptyLike: like,
  fullLike: (mk) => [
    { input: mk.randn([2, 3]), fillValue: -2.5 },
    { input: mk.int([3], 0, 5), fillValue: 4, dtype: "float32", device: "cpu", requiresGrad: true },
  ],
  arange: () => [
    { end: 5 },
    { end: 2.5, dtype: "float64" },
    { start: 1, end: 10, step: 3 },
    { start: 1, end: 2, step: 0.25, dtype: "float32", device: "cpu", requiresGrad: true },
    { start: 5, end: -1, step: -2, dtype: "int32" },
    { start: 2, end: 4 },
  ],
  linspace: () => [
    { start: 0, end: 1, steps: 5 },
    { start: -2, end: 3, steps: 1 },
    { start: 0, end: 10, steps: 4, dtype: "float64", device: "cpu", requiresGrad: true },
    { start: 1, end: 0, steps: 0 },
  ],
  eye: () => [
    { n: 3 },
    { n: 2, m: 4, dtype: "int64" },
    { n: 3, m: 2, dtype: "float64", device: "cpu", requiresGrad: true },
    { n: 0 },
  ],
  // ---- torch-level utilities
  promoteTypes: () => [
    { type1: "int32", type2: "float16" },
    { type1: "bool", type2: "int64" },
  ],
  // sets the value it already has: the samples must not change the process's default dtype
  setDefaultDtype: () => [{ d: "float32" }],
  getDefaultDtype: () => [{}],
  numel: (mk) => [{ input: mk.randn([2, 3]) }, { input: mk.randn([]) }],
  isTensor: (mk) => [{ obj: mk.randn([2]) }, { obj: 3 }, { obj: "a" }],
  device: () => [{ type: "cpu" }, { type: "cpu", index: 0 }],
};
