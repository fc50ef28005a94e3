// Samples for torch.nn.functional (src/nn/functional/*.ts) and torch.softmax / torch.logSoftmax
// (the table keys "softmax" / "logSoftmax"; F's own, with the implicit dim, are "F.softmax" /
// "F.logSoftmax"). Ops with an `inplace` flag have an inplace sample (it mutates its input: the
// samples are made afresh per call); dropout and dropout-in-attention samples are random.
import * as torch from "../../../src/index.js";
import type { Maker, OpInfos, Sample } from "./types.js";

type Gen = (mk: Maker) => Sample[];

const softmaxTorch: Gen = (mk) => [
  { input: mk.randn([3, 4]), dim: 1 },
  { input: mk.randn([2, 3, 4]), dim: 0, dtype: "float64" },
  { input: mk.randn([4]), dim: -1 },
];
const softmaxF: Gen = (mk) => [
  { input: mk.randn([3, 4]), dim: 1 },
  { input: mk.randn([2, 3, 4]) }, // implicit dim 0
  { input: mk.randn([2, 3]), dim: -1, dtype: "float64" },
  { input: mk.randn([2, 3, 2, 2]) }, // implicit dim 1
];
/** an activation with only `inplace` */
const inplaceOnly: Gen = (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([2, 3]).mul(4), inplace: true }];
const unary: Gen = (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([5]).mul(3) }];

const convInput = (mk: Maker, nd: number, c = 2, n = 5) => mk.randn([1, c, ...new Array<number>(nd).fill(n)]);
const convW = (mk: Maker, nd: number, o: number, c: number, k = 3) => mk.randn([o, c, ...new Array<number>(nd).fill(k)]);
const conv = (nd: 1 | 2 | 3): Gen => (mk) => [
  { input: convInput(mk, nd), weight: convW(mk, nd, 2, 2) },
  { input: convInput(mk, nd), weight: convW(mk, nd, 4, 1, 2), bias: mk.randn([4]), stride: 2, padding: 1, dilation: 1, groups: 2 },
  { input: convInput(mk, nd), weight: convW(mk, nd, 2, 2), padding: "same", dilation: nd === 3 ? 1 : 2 },
  { input: mk.randn([2, ...new Array<number>(nd).fill(4)]), weight: convW(mk, nd, 3, 2, 2), padding: "valid" }, // unbatched
  ...(nd === 2 ? [{ input: convInput(mk, 2), weight: convW(mk, 2, 2, 2), stride: [2, 1], padding: [1, 0], dilation: [1, 2] }] : []),
];
const convT = (nd: 1 | 2): Gen => (mk) => [
  { input: convInput(mk, nd, 2, 3), weight: convW(mk, nd, 2, 3) },
  { input: convInput(mk, nd, 2, 3), weight: convW(mk, nd, 2, 2, 2), bias: mk.randn([4]), stride: 2, padding: 1, outputPadding: 1, groups: 2, dilation: 1 },
  { input: convInput(mk, nd, 2, 3), weight: convW(mk, nd, 2, 1, 2), dilation: 2, groups: 1 },
];
const maxPool = (nd: 1 | 2 | 3): Gen => (mk) => [
  { input: convInput(mk, nd, 2, 4), kernelSize: 2 },
  { input: convInput(mk, nd, 1, 5), kernelSize: 3, stride: 2, padding: 1, dilation: 1, ceilMode: true },
  { input: mk.randn([2, ...new Array<number>(nd).fill(5)]), kernelSize: 2, stride: 1, dilation: 2 },
  { input: convInput(mk, nd, 1, 4), kernelSize: 2, returnIndices: true },
];
const avgPool = (nd: 1 | 2 | 3): Gen => (mk) => [
  { input: convInput(mk, nd, 2, 4), kernelSize: 2 },
  { input: convInput(mk, nd, 1, 5), kernelSize: 3, stride: 2, padding: 1, ceilMode: true, countIncludePad: false },
  { input: mk.randn([2, ...new Array<number>(nd).fill(4)]), kernelSize: 2, stride: 1 },
  ...(nd > 1 ? [{ input: convInput(mk, nd, 1, 4), kernelSize: 2, divisorOverride: 3 }] : []),
];

export const OPINFO: OpInfos = {
  // ---- softmax family
  softmax: softmaxTorch,
  logSoftmax: softmaxTorch,
  "F.softmax": softmaxF,
  "F.logSoftmax": softmaxF,
  softmin: softmaxF,
  // ---- activations
  "F.relu": inplaceOnly,
  relu6: inplaceOnly,
  selu: inplaceOnly,
  silu: inplaceOnly,
  mish: inplaceOnly,
  hardsigmoid: inplaceOnly,
  hardswish: inplaceOnly,
  hardtanh: (mk) => [
    { input: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), minVal: -0.5, maxVal: 0.25, inplace: true },
    { input: mk.randn([4]), minVal: 1, maxVal: -1 }, // min > max: max everywhere, as PyTorch 1.13
  ],
  leakyRelu: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([3, 4]), negativeSlope: 0.2, inplace: true }],
  elu: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([3, 4]), alpha: 0.5, inplace: true }],
  celu: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([3, 4]), alpha: 2, inplace: true }],
  gelu: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([3, 4]), approximate: "tanh" }],
  softplus: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([3, 4]).mul(5), beta: 2, threshold: 3 }],
  logsigmoid: unary,
  softsign: unary,
  tanhshrink: unary,
  threshold: (mk) => [
    { input: mk.randn([3, 4]), threshold: 0.1, value: 20 },
    { input: mk.randn([3, 4]), threshold: -0.5, value: 0, inplace: true },
  ],
  glu: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([4, 3]), dim: 0 }],
  // ---- normalization
  layerNorm: (mk) => [
    { input: mk.randn([2, 3, 4]), normalizedShape: [4] },
    { input: mk.randn([2, 3, 4]), normalizedShape: [3, 4], weight: mk.randn([3, 4]), bias: mk.randn([3, 4]), eps: 1e-3 },
    { input: mk.randn([3, 5]), normalizedShape: [5], weight: mk.randn([5]) },
  ],
  rmsNorm: (mk) => [
    { input: mk.randn([2, 3, 4]), normalizedShape: [4] },
    { input: mk.randn([2, 3, 4]), normalizedShape: [3, 4], weight: mk.randn([3, 4]), eps: 1e-3 },
  ],
  batchNorm: (mk) => [
    { input: mk.randn([4, 3]), runningMean: mk.randn([3]), runningVar: mk.positive([3]) },
    {
      input: mk.randn([2, 3, 4]), runningMean: mk.randn([3]), runningVar: mk.positive([3]), weight: mk.randn([3]), bias: mk.randn([3]),
      training: true, momentum: 0.3, eps: 1e-3,
    },
    { input: mk.randn([2, 3, 2, 2]), runningMean: null, runningVar: null, training: true },
  ],
  groupNorm: (mk) => [
    { input: mk.randn([2, 4, 3]), numGroups: 2 },
    { input: mk.randn([2, 6, 2, 2]), numGroups: 3, weight: mk.randn([6]), bias: mk.randn([6]), eps: 1e-3 },
  ],
  instanceNorm: (mk) => [
    { input: mk.randn([2, 3, 4]) },
    { input: mk.randn([2, 3, 2, 2]), weight: mk.randn([3]), bias: mk.randn([3]), eps: 1e-3 },
    { input: mk.randn([2, 3, 4]), runningMean: mk.randn([3]), runningVar: mk.positive([3]), momentum: 0.2 },
    { input: mk.randn([2, 3, 4]), runningMean: mk.randn([3]), runningVar: mk.positive([3]), useInputStats: false },
  ],
  normalize: (mk) => [
    { input: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), p: 1, dim: 0, eps: 1e-6 },
    { input: mk.randn([2, 3, 4]), p: 3, dim: -1 },
    { input: mk.randn([3, 4]), p: Infinity, dim: 1, out: mk.randn([3, 4]) },
  ],
  // ---- losses
  nllLoss: (mk) => [
    { input: mk.randn([4, 5]).logSoftmax(1), target: mk.int([4], 0, 5) },
    { input: mk.randn([4, 5]), target: mk.int([4], 0, 5), weight: mk.positive([5]), ignoreIndex: 2, reduction: "sum" },
    { input: mk.randn([2, 3, 4]), target: mk.int([2, 4], 0, 3), reduction: "none" },
    { input: mk.randn([4, 5]), target: mk.int([4], 0, 5), sizeAverage: false, reduce: true },
  ],
  crossEntropy: (mk) => [
    { input: mk.randn([4, 5]), target: mk.int([4], 0, 5) },
    { input: mk.randn([4, 5]), target: mk.int([4], 0, 5), weight: mk.positive([5]), ignoreIndex: 1, reduction: "sum", labelSmoothing: 0.1 },
    { input: mk.randn([2, 3, 4]), target: mk.int([2, 4], 0, 3), reduction: "none" },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]).softmax(1), labelSmoothing: 0.2 },
    { input: mk.randn([5]), target: mk.int([], 0, 5) },
    { input: mk.randn([4, 5]), target: mk.int([4], 0, 5), reduce: false },
  ],
  mseLoss: (mk) => [
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]), reduction: "sum" },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]), sizeAverage: false, reduce: false },
  ],
  l1Loss: (mk) => [
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]), sizeAverage: null, reduce: null, reduction: "none" },
  ],
  smoothL1Loss: (mk) => [
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]), reduction: "sum", beta: 0.5 },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]), beta: 0 },
  ],
  huberLoss: (mk) => [
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), target: mk.randn([3, 4]), reduction: "none", delta: 0.5 },
  ],
  binaryCrossEntropy: (mk) => [
    { input: mk.uniform([3, 4], 0.05, 0.95), target: mk.uniform([3, 4]) },
    { input: mk.uniform([3, 4], 0.05, 0.95), target: mk.uniform([3, 4]), weight: mk.positive([4]), reduction: "sum" },
    { input: mk.uniform([3, 4], 0.05, 0.95), target: mk.uniform([3, 4]), sizeAverage: true, reduce: false },
  ],
  binaryCrossEntropyWithLogits: (mk) => [
    { input: mk.randn([3, 4]), target: mk.uniform([3, 4]) },
    { input: mk.randn([3, 4]), target: mk.uniform([3, 4]), weight: mk.positive([4]), reduction: "none", posWeight: mk.positive([4]) },
  ],
  klDiv: (mk) => [
    { input: mk.randn([3, 4]).logSoftmax(1), target: mk.randn([3, 4]).softmax(1) },
    { input: mk.randn([3, 4]).logSoftmax(1), target: mk.randn([3, 4]).logSoftmax(1), reduction: "batchmean", logTarget: true },
    { input: mk.randn([3, 4]), target: mk.uniform([3, 4]), reduction: "sum" },
  ],
  // ---- convolution and pooling
  conv1d: conv(1),
  conv2d: conv(2),
  conv3d: conv(3),
  convTranspose1d: convT(1),
  convTranspose2d: convT(2),
  maxPool1d: maxPool(1),
  maxPool2d: maxPool(2),
  maxPool3d: maxPool(3),
  maxPool2dWithIndices: (mk) => [
    { input: convInput(mk, 2, 2, 4), kernelSize: 2 },
    { input: convInput(mk, 2, 1, 5), kernelSize: [3, 2], stride: [2, 1], padding: [1, 0], dilation: 1, ceilMode: true, returnIndices: true },
  ],
  avgPool1d: avgPool(1),
  avgPool2d: avgPool(2),
  avgPool3d: avgPool(3),
  adaptiveAvgPool1d: (mk) => [{ input: convInput(mk, 1, 2, 6), outputSize: 3 }, { input: mk.randn([2, 5]), outputSize: [2] }],
  adaptiveAvgPool2d: (mk) => [
    { input: convInput(mk, 2, 2, 4), outputSize: 1 },
    { input: convInput(mk, 2, 1, 5), outputSize: [3, 2] },
    { input: mk.randn([2, 4, 4]), outputSize: [null, 2] },
  ],
  // ---- misc
  pad: (mk) => [
    { input: mk.randn([2, 3]), pad: [1, 2] },
    { input: mk.randn([2, 3]), pad: [1, 1, 0, 1], mode: "constant", value: 0.5 },
    { input: mk.randn([1, 2, 4]), pad: [2, 1], mode: "reflect" },
    { input: mk.randn([1, 2, 3]), pad: [1, 2, 1, 0], mode: "replicate" },
    { input: mk.randn([1, 1, 4]), pad: [2, -1], mode: "circular" },
    { input: mk.randn([3, 4]), pad: [-1, 1] },
  ],
  embedding: (mk) => [
    { input: mk.int([2, 3], 0, 5), weight: mk.randn([5, 3]) },
    { input: mk.int([4], 0, 5), weight: mk.randn([5, 2]), paddingIdx: -1 },
    { input: mk.int([4], 0, 5), weight: mk.randn([5, 3]), paddingIdx: 0, maxNorm: 1, normType: 1, scaleGradByFreq: false, sparse: false },
  ],
  oneHot: (mk) => [{ input: mk.int([4], 0, 3) }, { input: mk.int([2, 3], 0, 3), numClasses: 5 }],
  dropout: (mk) => [
    { input: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), p: 0.25, training: true, inplace: true },
    { input: mk.randn([3, 4]), p: 0.9, training: false },
  ],
  interpolate: (mk) => [
    { input: mk.randn([1, 2, 3]), size: 5 },
    { input: mk.randn([1, 1, 2, 3]), scaleFactor: 2, mode: "bilinear", alignCorners: true },
    { input: mk.randn([1, 1, 4, 4]), size: [2, 3], mode: "area" },
    { input: mk.randn([1, 1, 3, 3]), scaleFactor: [1.5, 2], mode: "nearest-exact", recomputeScaleFactor: true, antialias: false },
    { input: mk.randn([1, 1, 2, 2, 2]), scaleFactor: 1.5, mode: "trilinear", alignCorners: false },
    { input: mk.randn([1, 2, 4]), size: [3], mode: "linear" },
  ],
  upsample: (mk) => [
    { input: mk.randn([1, 2, 3]), size: 5 },
    { input: mk.randn([1, 1, 2, 3]), scaleFactor: 2, mode: "bilinear", alignCorners: false },
  ],
  cosineSimilarity: (mk) => [
    { x1: mk.randn([3, 4]), x2: mk.randn([3, 4]) },
    { x1: mk.randn([3, 4]), x2: mk.randn([4]), dim: -1, eps: 1e-4 },
  ],
  pairwiseDistance: (mk) => [
    { x1: mk.randn([3, 4]), x2: mk.randn([3, 4]) },
    { x1: mk.randn([3, 4]), x2: mk.randn([3, 4]), p: 1, eps: 1e-3, keepdim: true },
  ],
  // ---- attention
  pagedAttention: (mk) => [
    {
      // sequence 0: 2 cached positions + 2 new tokens; sequence 1: 5 cached (two blocks) + 1 new
      query: mk.randn([3, 4, 4]), key: mk.randn([3, 2, 4]), value: mk.randn([3, 2, 4]),
      keyCache: mk.randn([4, 4, 2, 4]), valueCache: mk.randn([4, 4, 2, 4]),
      blockTable: torch.tensor([[3, 0], [1, 2]], { dtype: "int32" }), cuSeqlensQ: torch.tensor([0, 2, 3], { dtype: "int32" }),
      cacheSeqlens: torch.tensor([2, 5], { dtype: "int32" }),
    },
    {
      query: mk.randn([2, 2, 3]), key: mk.randn([2, 2, 3]), value: mk.randn([2, 2, 2]),
      keyCache: mk.randn([2, 2, 2, 3]), valueCache: mk.randn([2, 2, 2, 2]),
      blockTable: torch.tensor([[1], [0]]), cuSeqlensQ: torch.tensor([0, 1, 2]), cacheSeqlens: torch.tensor([0, 2]), scale: 0.25,
    },
  ],
  scaledDotProductAttention: (mk) => [
    { query: mk.randn([1, 2, 3, 4]), key: mk.randn([1, 2, 5, 4]), value: mk.randn([1, 2, 5, 4]) },
    { query: mk.randn([2, 3, 4]), key: mk.randn([2, 3, 4]), value: mk.randn([2, 3, 2]), isCausal: true, scale: 0.5 },
    { query: mk.randn([1, 2, 3, 4]), key: mk.randn([1, 2, 3, 4]), value: mk.randn([1, 2, 3, 4]), attnMask: mk.int([3, 3], 1, 2, "bool"), dropoutP: 0 },
    { query: mk.randn([1, 4, 2, 4]), key: mk.randn([1, 2, 3, 4]), value: mk.randn([1, 2, 3, 4]), attnMask: mk.randn([2, 3]), enableGqa: true },
    { query: mk.randn([1, 2, 3, 4]), key: mk.randn([1, 2, 3, 4]), value: mk.randn([1, 2, 3, 4]), dropoutP: 0.5 },
  ],
};
