// The binder: every calling form binds to the same parameters; bad calls get PyTorch's messages.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { bindArgs } from "../../src/ops/binder.js";
import { parseSchema } from "../../src/ops/schema.js";

const sum = parseSchema("sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
const roll = parseSchema("roll(Tensor input, int[1] shifts, int[1] dims=[]) -> Tensor");
const view = parseSchema("view(Tensor input, SymInt[] size) -> Tensor");
const zeros = parseSchema("zeros(Size size, *, ScalarType? dtype=None, Device? device=None, bool requiresGrad=False) -> Tensor");

test("positional, options and mixed forms bind to the same values", () => {
  const x = torch.zeros(2, 3);
  const want = [x, [1], true, "float64"];
  assert.deepEqual(bindArgs(sum, [x, 1, true, { dtype: "float64" }]), want);
  assert.deepEqual(bindArgs(sum, [x, { dim: 1, keepdim: true, dtype: "float64" }]), want);
  assert.deepEqual(bindArgs(sum, [x, [1], { keepdim: true, dtype: "float64" }]), want);
  assert.deepEqual(bindArgs(sum, [{ input: x, dim: [1], keepdim: true, dtype: "float64" }]), want);
  assert.deepEqual(bindArgs(sum, [{ keepdim: true, dtype: "float64" }, ], x), [x, null, true, "float64"]);
  assert.deepEqual(bindArgs(sum, [x]), [x, null, false, null]);
  assert.deepEqual(bindArgs(sum, [x, undefined, undefined]), [x, null, false, null]);
});

test("PyTorch's argument-parser messages", () => {
  const x = torch.zeros(2, 3);
  assert.equal(bindArgs(sum, [x, { dim: 0, keepDim: true }]), "sum() got an unexpected keyword argument 'keepDim' (did you mean 'keepdim'?)");
  assert.equal(bindArgs(roll, [x, "a"]), "roll(): argument 'shifts' (position 2) must be tuple of ints, not str");
  assert.equal(bindArgs(roll, ["a"], x), "roll(): argument 'shifts' (position 1) must be tuple of ints, not str");
  assert.equal(bindArgs(roll, [{ shifts: "a" }], x), "roll(): argument 'shifts' must be tuple of ints, not str");
  assert.equal(bindArgs(roll, [x]), 'roll() missing 1 required positional argument: "shifts"');
  assert.equal(bindArgs(sum, [x, 1.5]), "sum(): argument 'dim' (position 2) must be tuple of ints, not float");
  assert.equal(bindArgs(sum, [x, 0, 1]), "sum(): argument 'keepdim' (position 3) must be bool, not int");
  assert.equal(bindArgs(sum, [x, 0, true, "float64"]), "sum() takes from 1 to 3 positional arguments but 4 were given");
  assert.equal(bindArgs(sum, [x, 0, { dim: 1 }]), "sum() got multiple values for argument 'dim'");
  assert.equal(bindArgs(sum, [x, { dtype: "float128" }]), "sum(): argument 'dtype' must be torch.dtype (one of float32, float64, float16, bfloat16, int64, int32, int8, uint8, bool), not 'float128'");
  assert.equal(bindArgs(view, [2, -1, "a"], x), "view(): argument 'size' (position 1) must be tuple of ints, but found element of type str at pos 2");
  assert.equal(bindArgs(zeros, [-1, 3]), "zeros(): Trying to create tensor with negative dimension -1: [-1, 3]");
});

test("varargs int lists and int[N] broadcasting", () => {
  const x = torch.zeros(2, 3);
  assert.deepEqual(bindArgs(view, [3, 2], x), [x, [3, 2]]);
  assert.deepEqual(bindArgs(view, [[3, 2]], x), [x, [3, 2]]);
  assert.deepEqual(bindArgs(view, [6], x), [x, [6]]);
  assert.deepEqual(bindArgs(zeros, [2, 3, { dtype: "int64" }]), [[2, 3], "int64", null, false]);
  assert.deepEqual(bindArgs(roll, [x, 1, 0]), [x, [1], [0]]);
  const pool = parseSchema("maxPool2d(Tensor input, int[2] kernelSize, int[2] stride=[]) -> Tensor");
  assert.deepEqual(bindArgs(pool, [x, 3]), [x, [3, 3], []]);
});

test("a single int is a list only for a sized list (int[2]) or PyTorch's varargs, as PyTorch's parser", () => {
  const x = torch.zeros(2, 3);
  const full = parseSchema("full(Size size, Scalar fillValue) -> Tensor");
  // PyTorch 1.13: full(): argument 'size' (position 1) must be tuple of SymInts, not int
  assert.equal(bindArgs(full, [2, 3]), "full(): argument 'size' (position 1) must be tuple of ints, not int");
  const ln = parseSchema("layerNorm(Tensor input, int[] normalizedShape, Tensor? weight=None) -> Tensor");
  assert.equal(bindArgs(ln, [x, 3]), "layerNorm(): argument 'normalizedShape' (position 2) must be tuple of ints, not int");
  assert.deepEqual(bindArgs(zeros, [3]), [[3], null, null, false]);
  assert.deepEqual(bindArgs(view, [6], x), [x, [6]]);
  // a size check is PyTorch's RuntimeError (an Error), an argument-type problem a TypeError
  assert.throws(() => torch.zeros(-1, 3), (e: Error) => e.constructor === Error && /negative dimension -1/.test(e.message));
  assert.throws(() => torch.full(2 as never, 3), TypeError);
});

test("undefined is 'not given' (the default) and null is None in every path, fast or slow", () => {
  const x = torch.zeros(2, 3);
  const f = parseSchema("f(Tensor input, int? dim=-1, *, bool flag=False) -> Tensor");
  // fast path (positional), slow path (options object, or a trailing kw-only object)
  assert.deepEqual(bindArgs(f, [x, undefined]), [x, -1, false]);
  assert.deepEqual(bindArgs(f, [x, undefined, { flag: true }]), [x, -1, true]);
  assert.deepEqual(bindArgs(f, [x, { dim: undefined }]), [x, -1, false]);
  assert.deepEqual(bindArgs(f, [x, null]), [x, null, false]);
  assert.deepEqual(bindArgs(f, [x, null, { flag: true }]), [x, null, true]);
});
