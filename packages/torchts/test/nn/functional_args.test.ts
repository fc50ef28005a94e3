// torch.nn.functional called the way PyTorch's F is: positional arguments in F's order, keywords
// (camelCase) in an options object, or a mix, all binding alike; the cases of the issue that
// silently misbehaved before the op table (a positional mode, p or dim ignored, NaN losses for
// out-of-range class targets, garbage rows for out-of-range embedding indices). Expected values
// and messages are PyTorch 1.13's.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { OPINFO } from "../ops/opinfo/functional.js";
import { checkForms } from "../ops/forms_helper.js";

const F = torch.nn.functional;

/** float32 tensor from JS numbers (torch.tensor of integers is int64, as PyTorch's of Python ints) */
const ft = (v: unknown) => torch.tensor(v as number[], { dtype: "float32" });

function close(got: Tensor, want: number | number[] | number[][] | number[][][] | number[][][][], tol = 1e-6): void {
  const g = [got._tolistSync()].flat(5) as number[];
  const w = [want].flat(5) as number[];
  assert.equal(g.length, w.length, `length: got ${g.length}, want ${w.length}`);
  g.forEach((v, i) => assert.ok(Math.abs(v - w[i]!) <= tol * Math.max(1, Math.abs(w[i]!)), `[${i}] got ${v}, want ${w[i]}`));
}

const X = () => ft([[1, 2, 3], [4, 6, 5]]);

test("x.softmax({ dim: 1 }) binds dim (it threw before); torch.softmax takes dtype positionally", () => {
  const want = [[0.09003057330846786, 0.2447284758090973, 0.6652409434318542], [0.09003056585788727, 0.6652408838272095, 0.2447284460067749]];
  close(X().softmax({ dim: 1 }), want);
  close(X().softmax(1), want);
  close(torch.softmax(X(), { dim: 1 }), want);
  const d = X().softmax(1, "float64");
  assert.equal(d.dtype, "float64");
  assert.equal(torch.softmax(X(), 1, "float64").dtype, "float64");
  assert.equal(X().logSoftmax({ dim: -1, dtype: "float64" }).dtype, "float64");
  // torch.softmax / Tensor.softmax need dim, as PyTorch
  assert.throws(() => (torch.softmax as (x: Tensor) => Tensor)(X()), TypeError);
  assert.throws(() => X().softmax({ dim: 2 }), /softmax\(\): Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)/);
});

test("F.softmax without dim: PyTorch's implicit choice (1 for 2-d, 0 for 3-d); dtype is keyword-only", () => {
  close(F.softmax(ft([[1, 2], [3, 5]])), [[0.2689414322376251, 0.7310585975646973], [0.11920291185379028, 0.8807970285415649]]);
  close(F.softmax(ft([[[1, 2], [3, 5]]])), [[[1, 1], [1, 1]]]);
  assert.equal(F.softmax(X(), 1, { dtype: "float64" }).dtype, "float64");
  assert.throws(() => (F.softmax as (...a: unknown[]) => Tensor)(X(), 1, "float64"), /softmax\(\) takes from 1 to 2 positional arguments but 3 were given/);
  // 0-dim: exp(x - x) = 1, not x / x (nan at 0)
  close(F.softmax(ft(0), 0), [1] );
});

test("F.pad(x, [1, 1], 'reflect'): the positional mode is used (it padded with zeros before)", () => {
  close(F.pad(ft([[[1, 2, 3, 4]]]), [1, 1], "reflect"), [[[2, 1, 2, 3, 4, 3]]]);
  close(F.pad(ft([[[1, 2, 3, 4]]]), [1, 1], { mode: "reflect" }), [[[2, 1, 2, 3, 4, 3]]]);
  close(F.pad(ft([[1, 2]]), [1, 0], "constant", 7), [[7, 1, 2]]);
  // negative padding crops: reflect/replicate from the input, circular from the cropped input
  const v = () => ft([[[1, 2, 3, 4, 5]]]);
  close(F.pad(v(), [-1, 1], "reflect"), [[[2, 3, 4, 5, 4]]]);
  close(F.pad(v(), [-1, 1], "circular"), [[[2, 3, 4, 5, 2]]]);
  close(F.pad(v(), [2, -1], "circular"), [[[3, 4, 1, 2, 3, 4]]]);
  close(F.pad(v(), [-1, 2], "replicate"), [[[2, 3, 4, 5, 5, 5]]]);
  assert.throws(() => F.pad(v(), [1, 1], "foo" as "reflect"), /pad\(\): Unrecognised padding mode foo/);
  assert.throws(() => F.pad(torch.zeros(5), [1, 1], "reflect"), /Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now/);
  assert.throws(() => F.pad(v(), [1, 1], "reflect", 2), /Padding mode "reflect" doesn't take in value argument/);
  assert.throws(() => F.pad(torch.zeros(5), [1, 1, 1, 1]), /pad\(\): Padding length too large/);
});

test("F.dropout(x, 0, true) keeps everything (it dropped with p = 0.5 before); p is checked", () => {
  torch.manualSeed(0);
  const x = torch.ones([64]);
  const y = F.dropout(x, 0, true);
  assert.deepEqual(y._tolistSync(), x._tolistSync());
  assert.equal(F.dropout(x, 0.5, false), x); // not training: the input itself, as PyTorch
  const z = F.dropout(torch.ones([1000]), 0.2, true)._tolistSync() as number[];
  const kept = z.filter((e) => e !== 0);
  assert.ok(kept.every((e) => Math.abs(e - 1.25) < 1e-6));
  assert.ok(kept.length > 700 && kept.length < 900, `kept ${kept.length} of 1000 at p = 0.2`);
  assert.throws(() => F.dropout(x, 1.5), /^RangeError: (dropout\(\): )?dropout probability has to be between 0 and 1, but got 1\.5$/);
  assert.throws(() => F.dropout(x, NaN), /dropout probability has to be between 0 and 1, but got NaN/);
  // inplace: the input is the result
  const w = torch.ones([8]);
  assert.equal(F.dropout(w, 1, true, true), w);
  assert.deepEqual(w._tolistSync(), new Array(8).fill(0));
});

test("F.normalize(x, 2, 0) normalizes dim 0 (it normalized dim 1 before)", () => {
  const want = [[0.24253563582897186, 0.3162277638912201, 0.5144957900047302], [0.9701425433158875, 0.9486832618713379, 0.857492983341217]];
  close(F.normalize(X(), 2, 0), want);
  close(F.normalize(X(), { dim: 0 }), want);
  close(F.normalize(X()), [[0.26726123690605164, 0.5345224738121033, 0.8017836809158325], [0.4558423161506653, 0.6837634444236755, 0.5698028802871704]]);
  assert.throws(() => F.normalize(X(), 2, 5), /normalize\(\): Dimension out of range \(expected to be in range of \[-2, 1\], but got 5\)/);
  const out = torch.zeros([2, 3]);
  assert.equal(F.normalize(X(), 2, 0, 1e-12, out), out);
  close(out, want);
  assert.throws(() => F.normalize(X(), { out: torch.zeros([2, 3], { dtype: "int64" }) }), /can't be cast to the desired output type/);
});

test("crossEntropy / nllLoss: a class target out of range is PyTorch's IndexError (it gave NaN before)", () => {
  const x = torch.randn([3, 5]);
  for (const loss of [F.crossEntropy, F.nllLoss] as ((i: Tensor, t: Tensor, o?: object) => Tensor)[]) {
    const name = loss === F.crossEntropy ? "crossEntropy" : "nllLoss";
    assert.throws(() => loss(x, torch.tensor([1, 7, 2])), (e: Error) => e instanceof RangeError && e.message === `${name}(): Target 7 is out of bounds.`);
    assert.throws(() => loss(x, torch.tensor([1, -1, 2])), (e: Error) => e instanceof RangeError && e.message === `${name}(): Target -1 is out of bounds.`);
    // the ignored class is exempt (even when it is out of range), every other value is checked
    assert.ok(Number.isFinite(loss(x, torch.tensor([1, -100, 2]))._tolistSync() as number));
    assert.ok(Number.isFinite(loss(x, torch.tensor([1, 5, 2]), { ignoreIndex: 5 })._tolistSync() as number));
    assert.throws(() => loss(x, torch.tensor([1, -100, 2]), { ignoreIndex: 5 }), /Target -100 is out of bounds\./);
    // [N, C, d] layouts too
    assert.throws(() => loss(torch.randn([2, 5, 3]), torch.tensor([[1, 2, 9], [0, 0, 0]])), /Target 9 is out of bounds\./);
  }
  assert.throws(() => F.crossEntropy(x, torch.tensor([1, 7, 2]), { labelSmoothing: 0.1 }), /Target 7 is out of bounds\./);
  assert.throws(() => F.crossEntropy(x, torch.tensor([1, 7, 2]), { reduction: "none" }), /Target 7 is out of bounds\./);
  // PyTorch's value with ignore_index = 7 for a 7 target
  close(F.crossEntropy(X(), torch.tensor([7, 1]), { ignoreIndex: 7 }), [0.40760597586631775] , 1e-6);
});

test("embedding: an index out of range is PyTorch's IndexError naming embedding", () => {
  const w = torch.randn([5, 2]);
  assert.throws(() => F.embedding(torch.tensor([1, 7]), w), (e: Error) => e instanceof RangeError && e.message === "embedding(): index out of range in self");
  assert.throws(() => F.embedding(torch.tensor([1, -1]), w), /embedding\(\): index out of range in self/);
  assert.throws(() => F.embedding(torch.tensor([1, 2]), torch.randn([5])), /embedding\(\): 'weight' must be 2-D/);
  assert.throws(() => F.embedding(torch.tensor([1, 2]), w, 5), /Padding_idx must be within num_embeddings/);
});

test("embedding maxNorm renormalizes the looked-up rows of weight in place (PyTorch's embedding_renorm_)", () => {
  const w = torch.arange(15).reshape(5, 3).float();
  const y = F.embedding(torch.tensor([1, 2, 1]), w, null, 5, 1);
  const r1 = [1.25, 1.6666666269302368, 2.0833332538604736];
  const r2 = [1.4285714626312256, 1.6666666269302368, 1.9047619104385376];
  close(y, [r1, r2, r1]);
  close(w, [[0, 1, 2], r1, r2, [9, 10, 11], [12, 13, 14]]);
});

test("losses: PyTorch's legacy sizeAverage / reduce positions and their reduction", () => {
  const x = X();
  const z = torch.zeros([2, 3]);
  close(F.mseLoss(x, z, false, true), [91] ); // sum
  close(F.mseLoss(x, z, null, false), [[1, 4, 9], [16, 36, 25]]); // none
  close(F.mseLoss(x, z, { reduction: "sum" }), [91] );
  assert.throws(() => F.mseLoss(x, z, { reduction: "foo" as "sum" }), /mseLoss\(\): foo is not a valid value for reduction/);
  assert.throws(() => F.huberLoss(x, z, "mean", 0), /huber_loss does not support non-positive values for delta\./);
  assert.throws(() => F.binaryCrossEntropy(ft([1.5, 0.2]), ft([1, 0])), /all elements of input should be between 0 and 1/);
  assert.throws(() => F.crossEntropy(x, torch.tensor([0, 1]), { labelSmoothing: 2 }), /label_smoothing must be between 0.0 and 1.0. Got: 2/);
});

test("activations: inplace=true writes the input; a leaf that requires grad refuses, as PyTorch", () => {
  const x = ft([-1, 2, -3]);
  const y = F.relu(x, true);
  assert.equal(y, x);
  assert.deepEqual(x._tolistSync(), [0, 2, 0]);
  const l = torch.tensor([-1, 2], { dtype: "float32", requiresGrad: true });
  assert.throws(() => F.relu(l, true), /a leaf Variable that requires grad is being used in an in-place operation/);
  // F.relu is not torch.relu (which has no inplace), but the values agree
  assert.deepEqual(F.relu(torch.tensor([-1, 2]))._tolistSync(), torch.relu(torch.tensor([-1, 2]))._tolistSync());
  // hardtanh with min > max is max everywhere (PyTorch 1.13's clamp)
  close(F.hardtanh(ft([-2, 0, 2]), 1, -1), [-1, -1, -1]);
  assert.throws(() => F.gelu(x, { approximate: "foo" as "tanh" }), /gelu\(\): approximate argument must be either none or tanh\./);
  assert.throws(() => (F.gelu as (...a: unknown[]) => Tensor)(x, "tanh"), /gelu\(\) takes 1 positional argument but 2 were given/);
  assert.throws(() => F.glu(ft(1)), /glu does not support scalars because halving size must be even/);
  assert.throws(() => F.celu(x, 0), /ZeroDivisionError: alpha cannot be 0 for CELU/);
});

test("conv / pooling: PyTorch's value checks (no NaN-sized outputs)", () => {
  const x = torch.randn([2, 3, 6, 6]);
  const w = torch.randn([4, 3, 3, 3]);
  assert.throws(() => F.conv2d(x, w, null, 0), /conv2d\(\): non-positive stride is not supported/);
  assert.throws(() => F.conv2d(x, w, null, 1, -1), /negative padding is not supported/);
  assert.throws(() => F.conv2d(x, w, null, 1, 0, 0), /non-positive dilation is not supported/);
  assert.throws(() => F.conv2d(x, w, { groups: 0 }), /non-positive groups is not supported/);
  assert.throws(() => F.conv2d(x, w, null, 1, "foo" as "same"), /Invalid padding string: 'foo'/);
  assert.throws(() => F.conv1d(torch.randn([1, 3, 6]), torch.randn([4, 3, 3]), null, [1, 2]), /expected stride to be a single integer value or a list of 1 values/);
  assert.throws(() => F.convTranspose2d(x, torch.randn([3, 4, 3, 3]), { outputPadding: -1 }), /negative output_padding is not supported/);
  // conv2d(x, w, b, stride, padding, dilation, groups) positionally = the options form
  const b = torch.randn([4]);
  assert.deepEqual(F.conv2d(x, w, b, 2, 1, 1, 1)._tolistSync(), F.conv2d(x, w, b, { stride: 2, padding: 1 })._tolistSync());
  assert.deepEqual(F.conv2d(x, w, b, 1, "same")._tolistSync(), F.conv2d(x, w, b, { padding: "same" })._tolistSync());
  assert.throws(() => F.maxPool2d(x, 0), /maxPool2d\(\): stride should not be zero/);
  assert.throws(() => F.maxPool2d(x, 0, 1), /kernel size should be greater than zero, but got kH: 0 kW: 0/);
  assert.throws(() => F.maxPool2d(x, 2, -1), /stride should be greater than zero, but got dH: -1 dW: -1/);
  assert.throws(() => F.maxPool2d(x, 2, 2, -1), /pad must be non-negative, but got pad: -1/);
  assert.throws(() => F.maxPool2d(x, 2, 1, 2, 3), /pad should be at most half of kernel size, but got pad=2 and kernel_size=2/);
  assert.throws(() => F.maxPool2d(torch.randn([1, 1, 2, 2]), 3), /Given input size: \(1x2x2\). Calculated output size: \(1x0x0\). Output size is too small/);
  assert.throws(() => F.avgPool2d(x, 2, { divisorOverride: 0 }), /divisor must be not zero/);
  assert.throws(() => F.adaptiveAvgPool2d(x, [-1, 2]), /elements of output_size must be greater than or equal to 0 but received \{-1, 2\}/);
  assert.throws(() => F.adaptiveAvgPool1d(torch.randn([1, 2, 6]), [2, 2]), /'output_size' should contain one int \(got 2\)/);
  // returnIndices as PyTorch's max_pool2d: the pair
  const [v, i] = F.maxPool2d(x, 2, { returnIndices: true }) as unknown as [Tensor, Tensor];
  const [v2, i2] = F.maxPool2dWithIndices(x, 2);
  assert.deepEqual([v._tolistSync(), i._tolistSync()], [v2._tolistSync(), i2._tolistSync()]);
});

test("interpolate: area mode, PyTorch's checks in its order", () => {
  close(F.interpolate(ft([[[[1, 2], [3, 4]]]]), null, 1.5, "area"), [[[[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]]]]);
  const x = torch.randn([2, 3, 6, 6]);
  assert.throws(() => F.interpolate(x), /interpolate\(\): either size or scale_factor should be defined/);
  assert.throws(() => F.interpolate(x, 3, 2), /only one of size or scale_factor should be defined/);
  assert.throws(() => F.interpolate(x, [3, 3, 3]), /Input and output must have the same number of spatial dimensions/);
  assert.throws(() => F.interpolate(x, [0, 3]), /Input and output sizes should be greater than 0, but got input \(H: 6, W: 6\) output \(H: 0, W: 3\)/);
  assert.throws(() => F.interpolate(x, null, -1), /output \(H: -6, W: -6\)/);
  assert.throws(() => F.interpolate(x, 3, null, "linear"), /Got 4D input, but linear mode needs 3D input/);
  assert.throws(() => F.interpolate(x, 3, null, "foo" as "linear"), /Only 3D, 4D and 5D input Tensors supported \(got 4D\).*\(got foo\)/);
  assert.throws(() => F.interpolate(x, 3, { alignCorners: true }), /align_corners option can only be set with the interpolating modes/);
  assert.throws(() => F.interpolate(x, 3, { antialias: true }), /Anti-alias option is only supported for bilinear and bicubic modes/);
  assert.deepEqual(F.upsample(x, 3)._tolistSync(), F.interpolate(x, { size: 3 })._tolistSync());
});

test("oneHot: PyTorch's class checks", () => {
  assert.deepEqual(F.oneHot(torch.tensor([0, 2]))._tolistSync(), [[1, 0, 0], [0, 0, 1]]);
  assert.throws(() => F.oneHot(torch.tensor([1, -1])), /oneHot\(\): Class values must be non-negative\./);
  assert.throws(() => F.oneHot(torch.tensor([1, 5]), 3), /Class values must be smaller than num_classes\./);
  assert.throws(() => F.oneHot(torch.tensor([], { dtype: "int64" })), /Can not infer total number of classes from empty tensor\./);
  assert.throws(() => F.oneHot(torch.tensor([1.5])), /one_hot is only applicable to index tensor\./);
});

test("instanceNorm with running stats: PyTorch's values and running-stat update", () => {
  const x = ft([[[1, 2, 4], [0, 3, 3]], [[2, 2, 5], [1, 1, 0]]]);
  const rm = torch.zeros([2]);
  const rv = torch.ones([2]);
  const y = F.instanceNorm(x, rm, rv, { momentum: 0.5 });
  close(y, [[[-1.0690414905548096, -0.2672603130340576, 1.3363019227981567], [-1.4142100811004639, 0.7071050405502319, 0.7071050405502319]], [[-0.7071049213409424, -0.7071049213409424, 1.4142102003097534], [0.7070908546447754, 0.7070908546447754, -1.4141817092895508]]], 1e-5);
  close(rm, [1.3333332538604736, 0.6666666865348816], 1e-6);
  close(rv, [1.8333333730697632, 1.3333333730697632], 1e-6);
  assert.throws(() => F.instanceNorm(torch.randn([2, 3, 1])), /Expected more than 1 spatial element when training/);
  assert.throws(() => F.instanceNorm(x, { useInputStats: false }), /Expected running_mean and running_var to be defined when use_input_stats is false/);
  assert.throws(() => F.groupNorm(torch.randn([2, 6, 4]), -3), /Expected num groups to be greater than 0, got -3/);
  assert.throws(() => F.layerNorm(torch.randn([2, 3]), []), /Expected normalized_shape to be at least 1-dimensional/);
});

test("F's argument-parser errors are TypeErrors in PyTorch's words", () => {
  const x = X();
  assert.throws(() => F.crossEntropy(x, torch.tensor([0, 1]), { ignore_index: 1 } as never), /crossEntropy\(\) got an unexpected keyword argument 'ignore_index' \(did you mean 'ignoreIndex'\?\)/);
  assert.throws(() => F.layerNorm(x, "3" as never), TypeError);
  assert.throws(() => F.scaledDotProductAttention(x, x, x, null, 0, false, 0.5 as never), /takes from 3 to 6 positional arguments but 7 were given/);
});

// every sample of test/ops/opinfo/functional.ts, in every calling form, gives the same values
for (const [key, gen] of Object.entries(OPINFO))
  test(`${key}: positional, options, keywords, mixed (and method) forms agree`, () => checkForms(key, gen, () => torch.manualSeed(7)));

test("batchNorm / instanceNorm with an expanded running_var throw before running_mean is written", () => {
  const rv = () => torch.ones([1]).expand([3]);
  const rm = torch.zeros([3]);
  assert.throws(() => F.batchNorm(torch.randn([4, 3]), rm, rv(), { training: true }), /refers to a single memory location/);
  assert.deepEqual(rm._tolistSync(), [0, 0, 0]);
  assert.throws(() => F.instanceNorm(torch.randn([2, 3, 4]), rm, rv(), { useInputStats: true }), /refers to a single memory location/);
  assert.deepEqual(rm._tolistSync(), [0, 0, 0]);
});
