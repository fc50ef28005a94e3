// Samples for the elementwise family (src/ops/math.ts) and its Tensor-only methods: in-place
// variants, x.where(cond, other), zero_/fill_/copy_ and the dtype casts (src/ops/inplace_methods.ts).
import type { Maker, OpInfos, Sample } from "./types.js";

type Gen = (mk: Maker) => Sample[];

/** a unary op over inputs in its domain (plus an int64 input, which computes in float) */
const unary = (dom: (mk: Maker) => Sample["input"], withInt = true): Gen => (mk) => [
  { input: dom(mk) },
  ...(withInt ? [{ input: mk.int([2, 3], 1, 4) }] : []),
];
const normal = (mk: Maker) => mk.randn([3, 4]);
const positive = (mk: Maker) => mk.positive([3, 4]);
const unit = (mk: Maker) => mk.uniform([3, 4], -0.9, 0.9);

/** a binary op: same shapes, broadcasting, a number operand */
const binary = (a: (mk: Maker) => Sample["input"] = normal, b: (mk: Maker) => Sample["input"] = normal, scalar = 1.5): Gen => (mk) => [
  { input: a(mk), other: b(mk) },
  { input: mk.randn([2, 1, 4]), other: mk.randn([3, 1]) },
  { input: a(mk), other: scalar },
];
const compare: Gen = (mk) => [
  { input: mk.randn([3, 4]), other: mk.randn([3, 4]) },
  { input: mk.int([2, 3], 0, 3), other: 1 },
  { input: mk.randn([4]), other: mk.randn([2, 1]) },
];
const logical: Gen = (mk) => [
  { input: mk.bool([3, 4]), other: mk.bool([3, 4]) },
  { input: mk.randn([2, 3]), other: mk.int([3], 0, 2) },
  { input: mk.bool([4]), other: true },
];
const bitwise: Gen = (mk) => [
  { input: mk.int([3, 4], 0, 16), other: mk.int([3, 4], 0, 16) },
  { input: mk.bool([2, 3]), other: mk.bool([3]) },
  { input: mk.int([4], -8, 8, "int32"), other: 5 },
];
const clampSamples: Gen = (mk) => [
  { input: mk.randn([3, 4]), min: -0.5, max: 0.5 },
  { input: mk.randn([3, 4]), min: 0.1 },
  { input: mk.randn([3, 4]), max: mk.randn([4]) },
  { input: mk.int([2, 3], -6, 6), min: -2, max: 3 },
];
const addcSamples = (inplace: boolean): Gen => (mk) => [
  { [inplace ? "self" : "input"]: mk.randn([3, 4]), tensor1: mk.randn([3, 4]), tensor2: mk.positive([3, 4]) },
  { [inplace ? "self" : "input"]: mk.randn([3, 4]), tensor1: mk.randn([4]), tensor2: mk.positive([3, 1]), value: -0.5 },
];
const inplaceUnary = (dom: (mk: Maker) => Sample["self"]): Gen => (mk) => [{ self: dom(mk) }];
const casts: Gen = (mk) => [
  { self: mk.randn([3, 4]) },
  { self: mk.int([2, 3], -3, 3) },
  { self: mk.randn([4, 3]).transpose(0, 1), memoryFormat: "contiguous_format" },
  { self: mk.randn([1, 2, 2, 2]), memoryFormat: "channels_last" },
];

export const OPINFO: OpInfos = {
  add: (mk) => [
    ...binary()(mk),
    { input: mk.randn([3, 4]), other: mk.randn([3, 4]), alpha: -2.5 },
    { input: mk.int([2, 3], 0, 9), other: mk.int([2, 3], 0, 9), alpha: 3 },
    { input: mk.bool([4]), other: mk.bool([4]), alpha: true },
  ],
  sub: (mk) => [...binary()(mk), { input: mk.randn([3, 4]), other: 2, alpha: 0.5 }],
  rsub: (mk) => [{ input: mk.randn([3, 4]), other: mk.randn([3, 4]), alpha: 2 }, { input: mk.randn([3]), other: 2, alpha: 3 }],
  mul: (mk) => [...binary()(mk), { input: mk.int([2, 3], -5, 5), other: true }],
  div: (mk) => [
    { input: mk.randn([3, 4]), other: mk.positive([3, 4]) },
    { input: mk.randn([2, 1, 4]), other: mk.positive([3, 1]), roundingMode: "floor" },
    { input: mk.int([3, 4], -9, 9), other: mk.int([3, 4], 1, 4), roundingMode: "trunc" },
    { input: mk.int([3, 4], -9, 9), other: 2, roundingMode: "floor" },
    { input: mk.randn([3]), other: -2.5, roundingMode: null },
  ],
  trueDivide: binary(normal, positive, 0.25),
  floorDivide: (mk) => [...binary(normal, positive, 0.75)(mk), { input: mk.int([3, 4], -9, 9), other: mk.int([4], 1, 4) }],
  remainder: (mk) => [...binary(normal, positive, 0.75)(mk), { input: mk.int([3, 4], -9, 9), other: 4 }],
  fmod: (mk) => [...binary(normal, positive, 0.75)(mk), { input: mk.int([3, 4], -9, 9), other: 4 }],
  pow: (mk) => [
    { input: mk.positive([3, 4]), exponent: mk.randn([3, 4]) },
    { input: mk.randn([3, 4]), exponent: 2 },
    { input: mk.positive([3, 4]), exponent: -1.5 },
    { input: mk.int([2, 3], 0, 4), exponent: 3 },
  ],
  maximum: binary(),
  minimum: binary(),
  atan2: binary(),
  eq: compare,
  ne: compare,
  lt: compare,
  le: compare,
  gt: compare,
  ge: compare,
  logicalAnd: logical,
  logicalOr: logical,
  logicalXor: logical,
  logicalNot: (mk) => [{ input: mk.bool([3, 4]) }, { input: mk.randn([2, 3]) }],
  bitwiseAnd: bitwise,
  bitwiseOr: bitwise,
  bitwiseXor: bitwise,
  bitwiseNot: (mk) => [{ input: mk.int([3, 4], -8, 8) }, { input: mk.bool([5]) }],

  exp: unary(normal),
  log: unary(positive),
  sqrt: unary(positive),
  rsqrt: unary(positive),
  sin: unary(normal),
  cos: unary(normal),
  tan: unary(unit),
  tanh: unary(normal),
  sigmoid: unary(normal),
  erf: unary(normal),
  expm1: unary(normal),
  log1p: unary(positive),
  reciprocal: unary(positive),
  atan: unary(normal),
  asin: unary(unit, false),
  acos: unary(unit, false),
  sinh: unary(normal),
  cosh: unary(normal),
  asinh: unary(normal),
  acosh: unary((mk) => mk.uniform([3, 4], 1.1, 3)),
  atanh: unary(unit, false),
  log2: unary(positive),
  exp2: unary(normal),
  frac: unary(normal, false),
  log10: unary(positive),
  neg: unary(normal),
  abs: unary(normal),
  sign: unary(normal),
  floor: unary(normal),
  ceil: unary(normal),
  round: (mk) => [
    { input: mk.randn([3, 4]) },
    { input: mk.uniform([3, 4], -50, 50), decimals: 1 },
    { input: mk.uniform([3, 4], -500, 500), decimals: -2 },
    { input: mk.int([2, 3], -5, 5) },
  ],
  trunc: unary(normal),
  fix: unary(normal),
  isnan: unary(normal),
  isinf: unary(normal),
  isfinite: unary(normal),
  square: unary(normal),
  relu: unary(normal),

  where: (mk) => [
    { condition: mk.bool([3, 4]), input: mk.randn([3, 4]), other: mk.randn([3, 4]) },
    { condition: mk.bool([3, 1]), input: mk.randn([4]), other: 0.5 },
    { condition: mk.bool([2, 3]), input: -1, other: mk.int([3], 0, 5) },
    { condition: mk.bool([4]), input: 1, other: 0 },
  ],
  clamp: clampSamples,
  clip: clampSamples,
  lerp: (mk) => [
    { input: mk.randn([3, 4]), end: mk.randn([3, 4]), weight: 0.25 },
    { input: mk.randn([3, 4]), end: mk.randn([4]), weight: mk.uniform([3, 1]) },
  ],
  addcmul: addcSamples(false),
  addcdiv: addcSamples(false),

  // in-place variants (mutate `self`)
  "Tensor.add_": (mk) => [
    { self: mk.randn([3, 4]), other: mk.randn([4]) },
    { self: mk.randn([3, 4]), other: mk.randn([3, 4]), alpha: -2 },
    { self: mk.int([2, 3], 0, 5), other: 2, alpha: 3 },
  ],
  "Tensor.sub_": (mk) => [{ self: mk.randn([3, 4]), other: mk.randn([3, 1]) }, { self: mk.randn([3, 4]), other: 0.5, alpha: 4 }],
  "Tensor.mul_": (mk) => [{ self: mk.randn([3, 4]), other: mk.randn([4]) }, { self: mk.int([5], -3, 3), other: 3 }],
  "Tensor.div_": (mk) => [
    { self: mk.randn([3, 4]), other: mk.positive([3, 4]) },
    { self: mk.int([3, 4], -9, 9), other: 2, roundingMode: "floor" },
    { self: mk.randn([3, 4]), other: -1.5, roundingMode: "trunc" },
  ],
  "Tensor.pow_": (mk) => [{ self: mk.positive([3, 4]), exponent: mk.randn([4]) }, { self: mk.randn([3, 4]), exponent: 2 }],
  "Tensor.neg_": inplaceUnary(normal),
  "Tensor.exp_": inplaceUnary(normal),
  "Tensor.sqrt_": inplaceUnary(positive),
  "Tensor.abs_": (mk) => [{ self: mk.randn([3, 4]) }, { self: mk.int([5], -4, 4) }],
  "Tensor.relu_": inplaceUnary(normal),
  "Tensor.sigmoid_": inplaceUnary(normal),
  "Tensor.tanh_": inplaceUnary(normal),
  "Tensor.clamp_": (mk) => [
    { self: mk.randn([3, 4]), min: -0.5, max: 0.5 },
    { self: mk.randn([3, 4]), max: mk.randn([4]) },
    { self: mk.int([2, 3], -6, 6), min: -2 },
  ],
  "Tensor.lerp_": (mk) => [
    { self: mk.randn([3, 4]), end: mk.randn([3, 4]), weight: 0.75 },
    { self: mk.randn([3, 4]), end: mk.randn([4]), weight: mk.uniform([3, 1]) },
  ],
  "Tensor.addcmul_": addcSamples(true),
  "Tensor.addcdiv_": addcSamples(true),
  "Tensor.zero_": (mk) => [{ self: mk.randn([3, 4]) }, { self: mk.int([5], 0, 9) }],
  "Tensor.fill_": (mk) => [{ self: mk.randn([3, 4]), value: 2.5 }, { self: mk.int([5], 0, 9), value: mk.randn([]) }, { self: mk.randn([2]), value: true }],
  "Tensor.copy_": (mk) => [
    { self: mk.randn([3, 4]), src: mk.randn([4]) },
    { self: mk.randn([2, 3]), src: mk.int([2, 3], 0, 5), nonBlocking: true },
    { self: mk.int([3], 0, 5), src: mk.randn([3]) },
  ],
  "Tensor.where": (mk) => [
    { self: mk.randn([3, 4]), condition: mk.bool([3, 4]), other: mk.randn([3, 4]) },
    { self: mk.randn([3, 4]), condition: mk.bool([4]), other: 0 },
  ],
  "Tensor.float": casts,
  "Tensor.double": casts,
  "Tensor.half": casts,
  "Tensor.bfloat16": casts,
  "Tensor.long": casts,
  "Tensor.int": casts,
  "Tensor.bool": casts,
  "Tensor.byte": (mk) => [{ self: mk.uniform([3, 4], 0, 200) }, { self: mk.int([2, 3], 0, 9) }],
};
