// Samples for the random ops (src/ops/random.ts). Their results depend on the generator's state:
// a caller that compares calling forms reseeds (torch.manualSeed) before each call. Samples that
// pass a Generator make a fresh one per sample, so every form starts from the same state.
import * as torch from "../../../src/index.js";
import type { Maker, OpInfos, Sample } from "./types.js";

type Gen = (mk: Maker) => Sample[];

const sized: Gen = () => [
  { size: [2, 3] },
  { size: [4], dtype: "float64" },
  { size: [2, 1, 3], generator: new torch.Generator(5), dtype: "float32", device: "cpu", requiresGrad: true },
  { size: [] },
];
const like: Gen = (mk) => [
  { input: mk.randn([2, 3]) },
  { input: mk.randn([3]), generator: new torch.Generator(9), dtype: "float64", device: "cpu", requiresGrad: true },
];

export const OPINFO: OpInfos = {
  manualSeed: () => [{ seed: 1234 }, { seed: 2 ** 40 + 3 }],
  // non-deterministic by design (a fresh seed from Math.random): results differ between calls
  seed: () => [{}],
  getRngState: () => [{}],
  setRngState: () => [{ seed: [1234, 0], offset: 0 }, { seed: [7, 8], offset: 40 }],
  rand: sized,
  randn: sized,
  randLike: like,
  randnLike: like,
  randint: () => [
    { high: 5, size: [2, 3] },
    { low: -3, high: 4, size: [6] },
    { low: 0, high: 10, size: [2, 2], generator: new torch.Generator(3), dtype: "int32", device: "cpu" },
    { high: 3, size: [3], dtype: "float32", requiresGrad: true },
  ],
  randperm: () => [{ n: 6 }, { n: 5, generator: new torch.Generator(4), dtype: "int32", device: "cpu" }, { n: 0 }],
  normal: (mk) => [
    { mean: mk.randn([2, 3]), std: mk.positive([2, 3]) },
    { mean: mk.randn([2, 3]), std: 0.5 },
    { mean: mk.randn([3]) },
    { mean: 1.5, std: mk.positive([4]), generator: new torch.Generator(2) },
    { mean: 2, std: 3, size: [2, 2] },
    { mean: -1, std: 0.5, size: [3], generator: new torch.Generator(6), dtype: "float64", device: "cpu", requiresGrad: true },
  ],
  bernoulli: (mk) => [
    { input: mk.uniform([3, 4], 0, 1) },
    { input: mk.uniform([4], 0, 1, "float64"), generator: new torch.Generator(8) },
    { input: mk.randn([2, 3]), p: 0.3 },
    { input: mk.int([5], 0, 3), p: 0.5, generator: new torch.Generator(1) },
  ],
  multinomial: (mk) => [
    { input: mk.positive([5]), numSamples: 3 },
    { input: mk.positive([2, 4]), numSamples: 6, replacement: true },
    { input: mk.positive([3, 4]), numSamples: 2, replacement: false, generator: new torch.Generator(11) },
  ],
  // in-place: they overwrite `self` (a fresh sample per call form)
  "Tensor.uniform_": (mk) => [
    { self: mk.randn([2, 3]) },
    { self: mk.randn([4], { dtype: "float64" }), from: -2, to: 3, generator: new torch.Generator(12) },
  ],
  "Tensor.normal_": (mk) => [
    { self: mk.randn([2, 3]) },
    { self: mk.randn([4], { dtype: "float64" }), mean: 1, std: 0.25, generator: new torch.Generator(13) },
  ],
};
