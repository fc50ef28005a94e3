// Tensor creation and the torch-level utilities through the op table: PyTorch's calling convention
// (sizes as varargs or a list, keyword-only dtype / device / requiresGrad; values and messages from
// PyTorch 1.13), and every op's positional, options and mixed forms agreeing.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { Tensor } from "../../src/index.js";
import { OPINFO } from "./opinfo/creation.js";
import { checkForms } from "./forms_helper.js";

const vals = (t: Tensor) => t._tolistSync();
const T = torch as unknown as Record<string, (...a: unknown[]) => unknown>;

test("torch.full([2], 'a') is PyTorch's TypeError (it gave NaN)", () => {
  assert.throws(() => T.full!([2], "a"), { name: "TypeError", message: "full(): argument 'fillValue' (position 2) must be Number, not str" });
  assert.throws(() => T.full!([2], { fillValue: null }), (e: Error) => e instanceof TypeError && /^full\(\)/.test(e.message));
  assert.throws(() => T.full!([2]), { name: "TypeError", message: 'full() missing 1 required positional argument: "fillValue"' });
  assert.deepEqual(vals(torch.full([2], 1)), [1, 1]);
  assert.equal(torch.full([2], 1).dtype, "int64");
  assert.equal(torch.full([2], true).dtype, "bool");
  assert.equal(torch.full([2], 1.5).dtype, "float32");
  assert.equal(torch.full([2], 3, { dtype: "float64" }).dtype, "float64");
  assert.deepEqual(vals(torch.fullLike(torch.zeros(2), 4)), [4, 4]);
  // dtype is keyword-only
  assert.throws(() => T.full!([2], 1, "float64"), { name: "TypeError", message: "full() takes 2 positional arguments but 3 were given" });
});

test("torch.zeros(-1, 3) is PyTorch's 'Trying to create tensor with negative dimension' naming zeros", () => {
  // PyTorch raises RuntimeError; the binder's Size check raises it (as a TypeError subclass of Error)
  for (const f of [() => torch.zeros(-1, 3), () => torch.zeros([-1, 3]), () => T.ones!({ size: [-1, 3] })])
    assert.throws(f, (e: Error) => e instanceof Error && /^(zeros|ones)\(\): Trying to create tensor with negative dimension -1: \[-1, 3\]$/.test(e.message));
  assert.throws(() => torch.empty(2, -5), /^Error|empty\(\): Trying to create tensor with negative dimension -5: \[2, -5\]/);
  assert.throws(() => torch.randperm(-1), (e: Error) => e.constructor === Error && /^randperm\(\): Trying to create tensor with negative dimension -1: \[-1\]/.test(e.message));
});

test("sizes: varargs, a list, an options object; dtype/device/requiresGrad keyword-only", () => {
  assert.deepEqual(torch.zeros(2, 3).shape, [2, 3]);
  assert.deepEqual(torch.zeros([2, 3]).shape, [2, 3]);
  assert.deepEqual(torch.ones(2, 3, { dtype: "int64" }).dtype, "int64");
  assert.deepEqual(torch.ones({ size: [4], dtype: "int32" }).shape, [4]);
  assert.deepEqual(torch.zeros([]).shape, []);
  assert.equal(torch.empty(2, { requiresGrad: true }).requiresGrad, true);
  assert.throws(() => T.zeros!(2.5), { name: "TypeError", message: "zeros(): argument 'size' (position 1) must be tuple of ints, not float" });
  assert.throws(() => T.zeros!(2, "float64"), (e: Error) => e instanceof TypeError && /^zeros\(\): argument 'size'/.test(e.message));
  assert.throws(() => T.zeros!(), { name: "TypeError", message: 'zeros() missing 1 required positional argument: "size"' });
  assert.throws(() => T.zeros!(2, { dtype: "float128" }), (e: Error) => e instanceof TypeError && /^zeros\(\): argument 'dtype' must be torch.dtype/.test(e.message));
  assert.throws(() => T.zeros!(2, { dype: "float64" }), { name: "TypeError", message: "zeros() got an unexpected keyword argument 'dype'" });
  assert.throws(() => torch.zeros(2, { device: "tpu" }), (e: Error) => /^zeros\(\)/.test(e.message));
  // PyTorch: RuntimeError "Only Tensors of floating point and complex dtype can require gradients"
  for (const f of [() => torch.zeros(2, { dtype: "int64", requiresGrad: true }), () => torch.tensor([1, 2], { requiresGrad: true }), () => torch.arange(3, { requiresGrad: true })])
    assert.throws(f, (e: Error) => e.constructor === Error && /Only Tensors of floating point and complex dtype can require gradients/.test(e.message));
  assert.deepEqual(vals(torch.zerosLike(torch.ones(2, 2), { dtype: "int32" })), [[0, 0], [0, 0]]);
  assert.equal(torch.onesLike(torch.ones(2, { dtype: "float64" })).dtype, "float64");
});

test("a huge size is an OutOfMemoryError naming the op, not a JS 'Invalid typed array length'", () => {
  for (const [name, f] of [
    ["zeros", () => torch.zeros(1e12)],
    ["full", () => torch.full([2 ** 31, 2 ** 31], 1)],
    ["arange", () => torch.arange(1e12)],
    ["linspace", () => torch.linspace(0, 1, 1e12)],
    ["eye", () => torch.eye(1e6)],
  ] as [string, () => unknown][])
    assert.throws(f, (e: Error) => e instanceof torch.OutOfMemoryError && e.message.startsWith(`${name}(): `) && !/Invalid typed array length/.test(e.message), name);
  // PyTorch: RuntimeError "invalid size, possible overflow?"
  assert.throws(() => torch.arange(1e20), (e: Error) => e.constructor === Error && /^arange\(\): invalid size, possible overflow\?/.test(e.message));
});

test("tensor(): data checked (a string, null or a Tensor element is a TypeError naming tensor)", () => {
  assert.deepEqual(vals(torch.tensor([[1, 2], [3, 4]])), [[1, 2], [3, 4]]);
  assert.equal(torch.tensor([1, 2]).dtype, "int64");
  assert.equal(torch.tensor([1.5]).dtype, "float32");
  assert.equal(torch.tensor([]).dtype, "float32");
  assert.equal(torch.tensor(new Float64Array([1, 2])).dtype, "float64");
  assert.equal(torch.tensor([1, 2], { dtype: "float64" }).dtype, "float64");
  const bad = T.tensor!;
  assert.throws(() => bad(["a"]), (e: Error) => e instanceof TypeError && /^tensor\(\): Could not infer dtype of str/.test(e.message));
  assert.throws(() => bad(null), { name: "TypeError", message: "tensor(): argument 'data' (position 1) must be any, not NoneType" });
  assert.throws(() => bad([1, null], { dtype: "float32" }), /Could not infer dtype of NoneType/);
  assert.throws(() => bad(torch.zeros(2)), (e: Error) => e instanceof TypeError && /^tensor\(\)/.test(e.message));
  // PyTorch: ValueError "expected sequence of length 2 at dim 1 (got 1)"
  assert.throws(() => bad([[1, 2], [3]]), /^RangeError: tensor\(\): expected sequence of length 2 at dim 1 \(got 1\)/);
  assert.throws(() => bad([1], "float64"), { name: "TypeError", message: "tensor() takes 1 positional argument but 2 were given" });
});

test("arange / linspace / eye: PyTorch's overloads and value checks", () => {
  assert.deepEqual(vals(torch.arange(4)), [0, 1, 2, 3]);
  assert.deepEqual(vals(torch.arange(1, 4)), [1, 2, 3]);
  assert.deepEqual(vals(torch.arange(0, 1, 0.25)), [0, 0.25, 0.5, 0.75]);
  assert.deepEqual(vals(torch.arange(5, { dtype: "float64" })), [0, 1, 2, 3, 4]);
  assert.deepEqual(vals(torch.arange({ start: 1, end: 7, step: 2 })), [1, 3, 5]);
  assert.deepEqual(vals(torch.arange(1, 7, { step: 3 })), [1, 4]);
  // PyTorch: RuntimeError for each
  assert.throws(() => torch.arange(0, 1, 0), (e: Error) => e.constructor === Error && /^arange\(\): step must be nonzero$/.test(e.message));
  assert.throws(() => torch.arange(0, 10, -1), /upper bound and larger bound inconsistent with step sign/);
  assert.throws(() => torch.arange(NaN), /unsupported range: 0 -> nan/);
  assert.throws(() => torch.arange(Infinity), /unsupported range: 0 -> inf/);
  assert.deepEqual(vals(torch.linspace(0, 1, 5)), [0, 0.25, 0.5, 0.75, 1]);
  assert.deepEqual(vals(torch.linspace(0, 1, 0)), []);
  assert.throws(() => torch.linspace(0, 1, -1), (e: Error) => e.constructor === Error && /^linspace\(\): number of steps must be non-negative/.test(e.message));
  assert.throws(() => T.linspace!(0, 1, 1.5), { name: "TypeError", message: "linspace(): argument 'steps' (position 3) must be int, not float" });
  assert.deepEqual(vals(torch.eye(2, 3)), [[1, 0, 0], [0, 1, 0]]);
  assert.deepEqual(vals(torch.eye(2, { dtype: "bool" })), [[true, false], [false, true]]);
  assert.throws(() => torch.eye(-1), (e: Error) => e.constructor === Error && /^eye\(\): n must be greater or equal to 0, got -1/.test(e.message));
  assert.throws(() => torch.eye(2, -1), /m must be greater or equal to 0, got -1/);
});

test("torch-level utilities: promoteTypes, setDefaultDtype, getDefaultDtype, numel, isTensor, device", () => {
  assert.equal(torch.promoteTypes("int32", "float16"), "float16");
  assert.equal(T.promoteTypes!({ type1: "bool", type2: "int64" }), "int64");
  assert.throws(() => T.promoteTypes!("int32"), { name: "TypeError", message: 'promoteTypes() missing 1 required positional argument: "type2"' });
  assert.throws(() => T.promoteTypes!("int32", "float128"), (e: Error) => e instanceof TypeError && /^promoteTypes\(\): argument 'type2'/.test(e.message));
  assert.equal(torch.getDefaultDtype(), "float32");
  assert.throws(() => T.getDefaultDtype!(1), { name: "TypeError", message: "getDefaultDtype() takes 0 positional arguments but 1 was given" });
  // PyTorch: TypeError "invalid dtype object: only floating-point types are supported as the default type"
  assert.throws(() => torch.setDefaultDtype("int64"), (e: Error) => e instanceof TypeError && /only floating-point types are supported as the default type/.test(e.message));
  torch.setDefaultDtype("float64");
  try {
    assert.equal(torch.getDefaultDtype(), "float64");
    assert.equal(torch.zeros(1).dtype, "float64");
  } finally {
    torch.setDefaultDtype({ d: "float32" });
  }
  assert.equal(torch.numel(torch.zeros(2, 3)), 6);
  assert.throws(() => T.numel!([2, 3]), { name: "TypeError", message: "numel(): argument 'input' (position 1) must be Tensor, not list" });
  assert.equal(torch.isTensor(torch.zeros(1)), true);
  assert.equal(torch.isTensor(3), false);
  assert.equal(torch.device("cpu"), "cpu");
  assert.equal(torch.device("cpu", 0), "cpu:0");
  assert.equal(torch.device("webgpu"), "webgpu");
  // PyTorch: RuntimeError for each
  assert.throws(() => torch.device("cpu:0", 1), /type \(string\) must not include an index because index was passed explicitly: cpu:0/);
  assert.throws(() => torch.device("cpu", -1), /Device index must not be negative/);
  assert.throws(() => torch.device("tpu"), (e: Error) => /^device\(\): Expected one of .*device type at start of device string: tpu/.test(e.message));
});

// ---- every op of the family: positional, options, all keywords, mixed, varargs and method forms agree
for (const [key, gen] of Object.entries(OPINFO)) test(`forms agree: ${key}`, () => checkForms(key, gen));
