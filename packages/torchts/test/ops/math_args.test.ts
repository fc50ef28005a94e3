// The elementwise family through the op table: PyTorch's calling convention (expected values and
// messages from PyTorch 1.13), and every op's positional, options and mixed forms agreeing.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import { Tensor } from "../../src/index.js";
import { OPINFO } from "./opinfo/math.js";
import { checkForms } from "./forms_helper.js";

const x = () => torch.tensor([-1.5, 0.25, 3.0, -7.0]);
const y = () => torch.tensor([2.0, -0.5, 1.0, 2.0]);
const vals = (t: Tensor) => t._tolistSync() as number[];
/** x.foo(...) / torch.foo(...) without the TypeScript signature: calls PyTorch rejects, and all-keyword
 * forms (valid, but Sig types an options object in place of one positional at a time) */
const untyped = (t: Tensor) => t as unknown as Record<string, (...a: unknown[]) => Tensor>;
const T = torch as unknown as Record<string, (...a: unknown[]) => Tensor>;

test("x.clamp({ min, max }) clamps (it returned the input unclamped)", () => {
  assert.deepEqual(vals(x().clamp({ min: -1, max: 1 })), [-1, 0.25, 1, -1]);
  assert.deepEqual(vals(x().clamp({ min: 0.5 })), [0.5, 0.5, 3, 0.5]);
  assert.deepEqual(vals(x().clamp({ max: torch.tensor([0, 0, 2, 0]) })), [-1.5, 0, 2, -7]);
  assert.deepEqual(vals(torch.clamp(x(), { min: -1, max: 1 })), [-1, 0.25, 1, -1]);
  assert.deepEqual(vals(torch.clip(x(), -1, { max: 1 })), [-1, 0.25, 1, -1]);
  assert.deepEqual(vals(x().clamp_({ min: -1, max: 1 })), [-1, 0.25, 1, -1]);
  // PyTorch: RuntimeError "torch.clamp: At least one of 'min' or 'max' must not be None"
  assert.throws(() => x().clamp(), (e: Error) => e.constructor === Error && /^clamp\(\): At least one of 'min' or 'max' must not be None/.test(e.message));
  assert.throws(() => x().clamp({ min: null, max: null }), /At least one of 'min' or 'max' must not be None/);
  assert.throws(() => torch.clip(x()), /^Error: clip\(\): At least one of 'min' or 'max' must not be None/);
  assert.throws(() => x().clamp_(), /^Error: clamp_\(\): At least one of 'min' or 'max' must not be None/);
  assert.throws(() => untyped(x()).clamp!("a"), (e: Error) => e instanceof TypeError && /^clamp\(\): argument 'min'/.test(e.message));
});

test("a string or null operand is a TypeError (it was added as a number / gave zeros)", () => {
  assert.throws(() => untyped(x()).add!("3"), { name: "TypeError", message: "add(): argument 'other' (position 1) must be Tensor, not str" });
  assert.throws(() => untyped(x()).mul!(null), { name: "TypeError", message: "mul(): argument 'other' (position 1) must be Tensor, not NoneType" });
  assert.throws(() => T.add!(x(), "3"), { name: "TypeError", message: "add(): argument 'other' (position 2) must be Tensor, not str" });
  assert.throws(() => T.mul!(x(), null), { name: "TypeError", message: "mul(): argument 'other' (position 2) must be Tensor, not NoneType" });
  assert.throws(() => T.mul!(x(), { other: null }), { name: "TypeError", message: "mul(): argument 'other' must be Tensor, not NoneType" });
  assert.throws(() => T.add!(x(), [1, 2, 3, 4]), { name: "TypeError", message: "add(): argument 'other' (position 2) must be Tensor, not list" });
});

test("sub/add alpha and div roundingMode are keyword arguments; every form agrees", () => {
  const want = [-5.5, 1.25, 1, -11];
  assert.deepEqual(vals(x().sub(y(), { alpha: 2 })), want);
  assert.deepEqual(vals(torch.sub(x(), y(), { alpha: 2 })), want);
  assert.deepEqual(vals(torch.sub(x(), { other: y(), alpha: 2 })), want);
  assert.deepEqual(vals(T.sub!({ input: x(), other: y(), alpha: 2 })), want);
  assert.deepEqual(vals(x().sub({ other: y(), alpha: 2 })), want);
  assert.deepEqual(vals(torch.add(x(), y(), { alpha: -0.5 })), [-2.5, 0.5, 2.5, -8]);
  // alpha is keyword-only for a tensor other (PyTorch: "add() takes 1 positional argument but 2 were given")
  assert.throws(() => untyped(x()).add!(y(), 2), { name: "TypeError", message: "add() takes 1 positional argument but 2 were given" });

  const floor = [-1, -1, 3, -4];
  assert.deepEqual(vals(x().div(y(), { roundingMode: "floor" })), floor);
  assert.deepEqual(vals(torch.div(x(), y(), { roundingMode: "floor" })), floor);
  assert.deepEqual(vals(torch.div(x(), { other: y(), roundingMode: "floor" })), floor);
  assert.deepEqual(vals(T.div!({ input: x(), other: y(), roundingMode: "floor" })), floor);
  assert.deepEqual(vals(x().div(y(), { roundingMode: "trunc" })), [-0, -0, 3, -3]);
  assert.deepEqual(vals(x().div(y(), { roundingMode: null })), [-0.75, -0.5, 3, -3.5]);
  // rounding_mode is keyword-only: PyTorch's TypeError "div() received an invalid combination of arguments"
  assert.throws(() => untyped(x()).div!(y(), "floor"), (e: Error) => e instanceof TypeError && /^div\(\)/.test(e.message));
  assert.throws(() => T.div!(x(), y(), "floor"), (e: Error) => e instanceof TypeError && /^div\(\)/.test(e.message));
  assert.throws(() => T.div!(x(), y(), { roundingMode: "round" }), (e: Error) => e instanceof TypeError && /roundingMode/.test(e.message));
  assert.throws(() => T.div!(x(), y(), { rounding_mode: "floor" }), {
    name: "TypeError",
    message: "div() got an unexpected keyword argument 'rounding_mode' (did you mean 'roundingMode'?)",
  });
});

test("numbers as operands follow PyTorch (torch.add(2, x), torch.pow(2, x), rsub's positional alpha)", () => {
  assert.deepEqual(vals(torch.add(2, y())), [4, 1.5, 3, 4]);
  assert.deepEqual(vals(torch.mul(2, y())), [4, -1, 2, 4]);
  assert.deepEqual(vals(torch.pow(2, y())), [4, 2 ** -0.5, 2, 4].map((v) => Math.fround(v)));
  assert.deepEqual(vals(torch.remainder(2, torch.tensor([3, 5]))), [2, 2]);
  assert.deepEqual(vals(torch.bitwiseAnd(2, torch.tensor([3, 5]))), [2, 0]);
  const s = torch.add(2, 3);
  assert.equal(s.dtype, "int64");
  assert.deepEqual(s._tolistSync(), 5);
  assert.deepEqual(vals(torch.rsub(x(), 2, 2)), [5, 1.5, -4, 16]);
  assert.deepEqual(vals(torch.rsub(x(), y(), { alpha: 2 })), [5, -1, -5, 16]);
  // PyTorch: pow(int, int) has no overload
  assert.throws(() => T.pow!(2, 3), (e: Error) => e instanceof TypeError && /^pow\(\) received an invalid combination of arguments/.test(e.message));
  assert.throws(() => T.exp!(2), { name: "TypeError", message: "exp(): argument 'input' (position 1) must be Tensor, not int" });
});

test("round(decimals) is keyword-only; where, lerp, addcmul bind PyTorch's parameters", () => {
  const r = torch.tensor([1.234, -5.678]);
  assert.deepEqual(vals(r.round({ decimals: 1 })), [Math.fround(1.2), Math.fround(-5.7)]);
  assert.deepEqual(vals(torch.round(r, { decimals: 1 })), vals(r.round({ decimals: 1 })));
  assert.throws(() => untyped(r).round!(1), { name: "TypeError", message: "round() takes 0 positional arguments but 1 was given" });
  const c = torch.tensor([true, false, true, false]);
  assert.deepEqual(vals(torch.where(c, x(), 0)), [-1.5, 0, 3, 0]);
  assert.deepEqual(vals(T.where!({ condition: c, input: x(), other: y() })), [-1.5, -0.5, 3, 2]);
  assert.deepEqual(vals(x().where(c, y())), [-1.5, -0.5, 3, 2]);
  assert.deepEqual(vals(untyped(x()).where!({ condition: c, other: y() })), [-1.5, -0.5, 3, 2]);
  // PyTorch 1.13: RuntimeError for a non-bool condition
  assert.throws(() => torch.where(torch.tensor([1, 0, 1, 0], { dtype: "float32" }), x(), y()), /where expected condition to be a boolean tensor, but got a tensor with dtype float32/);
  assert.deepEqual(vals(torch.lerp(x(), y(), 0.5)), vals(T.lerp!(x(), { end: y(), weight: 0.5 })));
  assert.throws(() => T.lerp!(x(), 2, 0.5), (e: Error) => e instanceof TypeError && /^lerp\(\): argument 'end'/.test(e.message));
  assert.deepEqual(vals(torch.addcmul(x(), x(), y(), { value: 2 })), vals(T.addcmul!({ input: x(), tensor1: x(), tensor2: y(), value: 2 })));
  assert.throws(() => T.addcmul!(x(), x(), y(), 2), { name: "TypeError", message: "addcmul() takes 3 positional arguments but 4 were given" });
});

test("PyTorch's value checks: alpha type, bool subtraction, in-place result shape and dtype", () => {
  const i = torch.tensor([1, 2]);
  assert.throws(() => torch.add(i, i, { alpha: 1.5 }), /For integral input tensors, argument alpha must not be a floating point number\./);
  assert.throws(() => torch.sub(x(), y(), { alpha: true }), /Boolean alpha only supported for Boolean results\./);
  const b = torch.tensor([true, false]);
  assert.throws(() => torch.sub(b, b), /Subtraction, the `-` operator, with two bool tensors is not supported/);
  assert.throws(() => torch.sub(b, 1), /Subtraction, the `-` operator, with a bool tensor is not supported/);
  assert.throws(() => torch.neg(b), /Negation, the `-` operator, on a bool tensor is not supported/);
  // PyTorch: RuntimeError "Integers to negative integer powers are not allowed."
  assert.throws(() => i.pow(-1), (e: Error) => e.constructor === Error && e.message === "pow(): Integers to negative integer powers are not allowed.");
  assert.throws(() => i.clone().pow_(-1), { message: "pow_(): Integers to negative integer powers are not allowed." });
  assert.throws(() => x().add_(torch.ones(2, 4)), /^Error: add_: output with shape \[4\] doesn't match the broadcast shape \[2, 4\]/);
  assert.throws(() => i.clone().add_(1.5), /add_: result type float32 can't be cast to the desired output type int64/);
  assert.throws(() => i.clone().exp_(), /exp_: result type float32 can't be cast to the desired output type int64/);
  assert.throws(() => x().fill_(torch.ones(2)), /fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions\./);
  assert.throws(() => x().copy_(torch.ones(2, 4)), /copy_: output with shape \[4\] doesn't match the broadcast shape \[2, 4\]/);
  assert.throws(() => untyped(x()).zero_!(1), { name: "TypeError", message: "zero_() takes 0 positional arguments but 1 was given" });
  assert.deepEqual(vals(x().copy_(2)), [2, 2, 2, 2]);
  assert.deepEqual(vals(i.clone().fill_(1.7)), [1, 1]);
  // a failed in-place call leaves the tensor as it was
  const z = x();
  assert.throws(() => z.add_(torch.ones(3)));
  assert.deepEqual(vals(z), [-1.5, 0.25, 3, -7]);
});

test("the casts take only memoryFormat, keyword-only", () => {
  const t = torch.tensor([1.5, -2]);
  assert.equal(t.float(), t);
  assert.equal(t.long().dtype, "int64");
  assert.deepEqual(vals(t.int({ memoryFormat: "contiguous_format" })), [1, -2]);
  assert.throws(() => untyped(t).float!("float64"), { name: "TypeError", message: "float() takes 0 positional arguments but 1 was given" });
  assert.throws(() => untyped(t).double!({ dtype: "float32" }), { name: "TypeError", message: "double() got an unexpected keyword argument 'dtype'" });
  assert.throws(() => t.half({ memoryFormat: "channels_last" }), /required rank 4 tensor to use channels_last format/);
});

// ---- every op of the family: positional, options, all keywords, mixed and method forms agree

for (const [key, gen] of Object.entries(OPINFO)) test(`forms agree: ${key}`, () => checkForms(key, gen));

test("number operands: -0 and 0, NaN, and more distinct constants than the cache keeps, in every eager mode", async () => {
  for (const mode of ["strict", "fused", "debug"] as const)
    await torch.withEagerMode(mode, async () => {
      const t = torch.tensor([1.0, -2.0]);
      // the cached constant for 0 must not serve -0 (1 * -0 is -0, 1 * 0 is 0)
      assert.deepEqual(await t.mul(0).tolist(), [0, -0]);
      assert.deepEqual(await t.mul(-0).tolist(), [-0, 0]);
      assert.deepEqual(await t.mul(0).tolist(), [0, -0]);
      assert.deepEqual(await t.add(NaN).tolist(), [NaN, NaN]);
      // 300 distinct constants (the cache holds 256), then the first ones again
      for (let k = 0; k < 300; k++) assert.deepEqual(await t.add(k + 0.5).tolist(), [1.5 + k, -1.5 + k], `${mode} k=${k}`);
      assert.deepEqual(await t.add(0.5).tolist(), [1.5, -1.5]);
      assert.deepEqual(await t.mul(2).to("float64").tolist(), [2, -4]);
      assert.deepEqual(await t.to("int32").mul(3).tolist(), [3, -6]);
    });
});
