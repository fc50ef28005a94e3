// Samples for the movement ops (src/ops/shape_ops.ts) and linear algebra (src/ops/linalg.ts):
// views, joins and splits, repeats, padding, device/dtype moves, and matmul's family.
import type { OpInfos } from "./types.js";

export const OPINFO: OpInfos = {
  // ---- layout
  contiguous: (mk) => [
    { input: mk.randn([3, 4]).t() },
    { input: mk.randn([2, 3, 2, 2]), memoryFormat: "channels_last" },
    { input: mk.randn([3, 4]) },
  ],
  clone: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([1, 2, 2, 3]).transpose(1, 3), memoryFormat: "channels_last" }],
  detach: (mk) => [{ input: mk.randn([3, 4], { requiresGrad: true }) }],
  // ---- view / reshape
  view: (mk) => [{ input: mk.randn([3, 4]), size: [2, -1] }, { input: mk.randn([2, 3]), dtype: "float32" }, { input: mk.randn([6]), size: [6] }],
  viewAs: (mk) => [{ input: mk.randn([3, 4]), other: mk.randn([4, 3]) }],
  reshape: (mk) => [{ input: mk.randn([3, 4]).t(), shape: [2, 6] }, { input: mk.randn([2, 3]), shape: [-1] }],
  reshapeAs: (mk) => [{ input: mk.randn([2, 6]), other: mk.randn([3, 4]) }],
  // ---- permutations
  permute: (mk) => [{ input: mk.randn([2, 3, 4]), dims: [2, 0, 1] }, { input: mk.randn([3, 4]), dims: [-1, 0] }],
  transpose: (mk) => [{ input: mk.randn([2, 3, 4]), dim0: 0, dim1: -1 }, { input: mk.randn([3, 4]), dim0: 1, dim1: 0 }],
  swapaxes: (mk) => [{ input: mk.randn([2, 3, 4]), axis0: 2, axis1: 0 }],
  swapdims: (mk) => [{ input: mk.randn([2, 3, 4]), dim0: 1, dim1: 2 }],
  t: (mk) => [{ input: mk.randn([3, 4]) }, { input: mk.randn([4]) }],
  movedim: (mk) => [
    { input: mk.randn([2, 3, 4]), source: 0, destination: -1 },
    { input: mk.randn([2, 3, 4]), source: [0, 1], destination: [2, 0] },
  ],
  // ---- expand
  expand: (mk) => [{ input: mk.randn([3, 1]), size: [2, 3, 4] }, { input: mk.randn([1, 4]), size: [3, -1] }],
  expandAs: (mk) => [{ input: mk.randn([3, 1]), other: mk.randn([2, 3, 4]) }],
  broadcastTo: (mk) => [{ input: mk.randn([1, 4]), size: [3, 4] }],
  // ---- slicing
  slice: (mk) => [
    { input: mk.randn([5, 4]), dim: 0, start: 1, end: 5, step: 2 },
    { input: mk.randn([3, 6]), dim: 1, start: -4, end: null },
    { input: mk.randn([4, 3]) },
  ],
  narrow: (mk) => [{ input: mk.randn([4, 5]), dim: 1, start: 1, length: 3 }, { input: mk.randn([4, 5]), dim: 0, start: -2, length: 2 }],
  select: (mk) => [{ input: mk.randn([3, 4]), dim: 1, index: -1 }, { input: mk.randn([3, 4]), dim: 0, index: 2 }],
  // ---- squeeze / unsqueeze / flatten
  unsqueeze: (mk) => [{ input: mk.randn([3, 4]), dim: -1 }, { input: mk.randn([3, 4]), dim: 1 }],
  squeeze: (mk) => [{ input: mk.randn([3, 1, 4]), dim: 1 }, { input: mk.randn([1, 3, 1]) }],
  flatten: (mk) => [{ input: mk.randn([2, 3, 4]), startDim: 1, endDim: 2 }, { input: mk.randn([2, 3, 2]) }],
  unflatten: (mk) => [{ input: mk.randn([3, 8]), dim: 1, sizes: [2, -1] }, { input: mk.randn([6, 2]), dim: 0, sizes: [2, 3] }],
  ravel: (mk) => [{ input: mk.randn([3, 4]).t() }],
  // ---- split / chunk / unbind
  split: (mk) => [
    { input: mk.randn([5, 4]), splitSizeOrSections: 2 },
    { input: mk.randn([3, 6]), splitSizeOrSections: [1, 2, 3], dim: 1 },
  ],
  "Tensor.split": (mk) => [
    { self: mk.randn([3, 4]), splitSize: 2, dim: 1 },
    { self: mk.randn([5, 2]), splitSize: [4, 1] },
  ],
  chunk: (mk) => [{ input: mk.randn([5, 4]), chunks: 2 }, { input: mk.randn([3, 7]), chunks: 3, dim: 1 }],
  unbind: (mk) => [{ input: mk.randn([3, 4]), dim: 1 }, { input: mk.randn([2, 3]) }],
  // ---- diagonal, flip, roll, tril/triu
  diagonal: (mk) => [
    { input: mk.randn([3, 4]), offset: 1 },
    { input: mk.randn([2, 3, 4]), offset: -1, dim1: 2, dim2: 1 },
  ],
  flip: (mk) => [{ input: mk.randn([3, 4]), dims: [0, 1] }, { input: mk.randn([2, 3, 2]), dims: [-1] }],
  roll: (mk) => [
    { input: mk.randn([3, 4]), shifts: [1, -2], dims: [0, 1] },
    { input: mk.randn([3, 4]), shifts: 5 },
    { input: mk.randn([4, 3]), shifts: -1, dims: 1 },
  ],
  tril: (mk) => [{ input: mk.randn([3, 4]), diagonal: -1 }, { input: mk.randn([2, 3, 3]) }],
  triu: (mk) => [{ input: mk.randn([3, 4]), diagonal: 1 }, { input: mk.randn([4, 3]) }],
  // ---- joins
  cat: (mk) => [
    { tensors: [mk.randn([3, 4]), mk.randn([3, 2])], dim: 1 },
    { tensors: [mk.randn([2, 3]), mk.int([1, 3], 0, 5)] },
  ],
  concat: (mk) => [{ tensors: [mk.randn([2, 3]), mk.randn([1, 3])], dim: 0 }],
  concatenate: (mk) => [{ tensors: [mk.randn([2, 3]), mk.randn([2, 1])], dim: -1 }],
  stack: (mk) => [{ tensors: [mk.randn([3, 4]), mk.randn([3, 4])], dim: 1 }, { tensors: [mk.randn([2]), mk.randn([2]), mk.randn([2])] }],
  hstack: (mk) => [{ tensors: [mk.randn([3, 2]), mk.randn([3, 1])] }, { tensors: [mk.randn([2]), mk.randn([3])] }],
  vstack: (mk) => [{ tensors: [mk.randn([2, 3]), mk.randn([1, 3])] }, { tensors: [mk.randn([3]), mk.randn([3])] }],
  // ---- repeats
  repeat: (mk) => [{ input: mk.randn([2, 3]), repeats: [2, 1, 2] }, { input: mk.randn([3]), repeats: [2] }],
  tile: (mk) => [{ input: mk.randn([2, 3]), dims: [2] }, { input: mk.randn([2, 2]), dims: [1, 2, 2] }],
  repeatInterleave: (mk) => [
    { input: mk.randn([2, 3]), repeats: 2, dim: 1 },
    { input: mk.randn([3, 2]), repeats: 2, dim: 0, outputSize: 6 },
    { input: mk.randn([2, 3]), repeats: 3 },
    { input: mk.randn([3, 2]), repeats: mk.int([3], 0, 3), dim: 0 },
  ],
  unfold: (mk) => [{ input: mk.randn([3, 6]), dimension: 1, size: 2, step: 2 }, { input: mk.randn([5, 2]), dimension: 0, size: 3, step: 1 }],
  constantPadNd: (mk) => [{ input: mk.randn([2, 3]), pad: [1, 2], value: 0.5 }, { input: mk.randn([3, 4]), pad: [-1, 1, 1, 0] }],
  // ---- devices and dtypes (to(tensor) has no sample: its `tensor = null` mutation is x.to(None),
  // which PyTorch accepts; test/ops/shape_args.test.ts covers that overload)
  to: (mk) => [
    { input: mk.randn([2, 3]), device: "cpu", dtype: "int32", copy: true },
    { input: mk.randn([2, 3]), dtype: "float64" },
    { input: mk.randn([2, 3]), dtype: "float32", nonBlocking: true, copy: true, memoryFormat: "contiguous_format" },
  ],
  "Tensor.type": (mk) => [{ self: mk.randn([2, 3]), dtype: "float64" }, { self: mk.randn([2, 3]) }, { self: mk.randn([2]), dtype: "torch.IntTensor" }],
  "Tensor.cpu": (mk) => [{ self: mk.randn([2, 3]) }, { self: mk.randn([1, 2, 2, 2]), memoryFormat: "channels_last" }],
  // ---- linear algebra
  matmul: (mk) => [
    { input: mk.randn([3, 4]), other: mk.randn([4, 2]) },
    { input: mk.randn([2, 3, 4]), other: mk.randn([4]) },
    { input: mk.randn([4]), other: mk.randn([2, 4, 3]) },
    { input: mk.int([2, 3], -3, 3), other: mk.int([3, 2], -3, 3) },
  ],
  mm: (mk) => [{ input: mk.randn([3, 4]), mat2: mk.randn([4, 2]) }],
  bmm: (mk) => [{ input: mk.randn([2, 3, 4]), mat2: mk.randn([2, 4, 2]) }],
  mv: (mk) => [{ input: mk.randn([3, 4]), vec: mk.randn([4]) }],
  dot: (mk) => [{ input: mk.randn([5]), tensor: mk.randn([5]) }],
  outer: (mk) => [{ input: mk.randn([3]), vec2: mk.randn([4]) }, { input: mk.randn([2]), vec2: mk.int([3], 0, 4) }],
  addmm: (mk) => [
    { input: mk.randn([3, 2]), mat1: mk.randn([3, 4]), mat2: mk.randn([4, 2]), beta: 0.5, alpha: 2 },
    { input: mk.randn([2]), mat1: mk.randn([3, 4]), mat2: mk.randn([4, 2]) },
    { input: mk.randn([3, 2]), mat1: mk.randn([3, 4]), mat2: mk.randn([4, 2]), beta: 0 },
  ],
  linear: (mk) => [
    { input: mk.randn([2, 3, 4]), weight: mk.randn([5, 4]), bias: mk.randn([5]) },
    { input: mk.randn([3, 4]), weight: mk.randn([2, 4]) },
    { input: mk.randn([4]), weight: mk.randn([4]), bias: null },
  ],
};
