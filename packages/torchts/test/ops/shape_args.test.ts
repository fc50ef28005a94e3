// Calling conventions of the movement and linear-algebra ops (src/ops/shape_ops.ts, linalg.ts):
// PyTorch's parameter names and order, options objects, mixed calls, and PyTorch's results and
// errors (PyTorch 1.13 decided each expected value here). Errors: TypeError for the argument
// parser, RangeError for IndexError, Error for RuntimeError; every message names the op.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

const x34 = () => torch.arange(12, { dtype: "float32" }).reshape(3, 4);
const vals = (t: Tensor) => t._tolistSync();
const MODES: torch.EagerMode[] = ["strict", "fused", "debug"];

function inModes(f: () => void): void {
  const prev = torch.getEagerMode();
  try {
    for (const m of MODES) {
      torch.setEagerMode(m);
      f();
      torch.sync();
    }
  } finally {
    torch.setEagerMode(prev);
  }
}

/** Every form gives the same shape, dtype and values as the first. */
function sameForms(name: string, forms: (() => Tensor | Tensor[])[]): void {
  const snap = (r: Tensor | Tensor[]) =>
    (Array.isArray(r) ? r : [r]).map((t) => ({ shape: [...t.shape], dtype: t.dtype, values: vals(t) }));
  const ref = snap(forms[0]!());
  forms.slice(1).forEach((f, i) => assert.deepEqual(snap(f()), ref, `${name}: form ${i + 1} differs from form 0`));
}

function throwsNaming(f: () => unknown, cls: new (...a: never[]) => Error, op: string, text: string | RegExp): void {
  assert.throws(f, (e: Error) => {
    assert.equal(e.constructor, cls, `${op}: expected ${cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.ok(e.message.includes(op), `${op}: message does not name the op: ${e.message}`);
    if (typeof text === "string") assert.ok(e.message.includes(text), `${op}: ${e.message}`);
    else assert.match(e.message, text);
    return true;
  });
}

// ---------------------------------------------------------------- the cases

test("roll({ shifts, dims }) is PyTorch's roll, and later results stay exact", () => {
  const canary = () => {
    torch.manualSeed(7);
    return vals(torch.randn(64, 64).mul(2).sum());
  };
  const before = canary();
  inModes(() => {
    const x = x34();
    const want = [[10, 11, 8, 9], [2, 3, 0, 1], [6, 7, 4, 5]];
    assert.deepEqual(vals(x.roll({ shifts: [1, -2], dims: [0, 1] })), want);
    assert.deepEqual(vals(torch.roll(x, { shifts: [1, -2], dims: [0, 1] })), want);
    assert.deepEqual(vals(x.roll([1, -2], { dims: [0, 1] })), want);
    assert.deepEqual(vals(x.roll([1, -2], [0, 1])), want);
    assert.deepEqual(vals(torch.roll(x, 1)), [[11, 0, 1, 2], [3, 4, 5, 6], [7, 8, 9, 10]]);
    throwsNaming(() => x.roll([1, 2], [0]), Error, "roll", "shifts and dimensions must align. shifts: 2, dims:1");
    throwsNaming(() => x.roll({ shifts: 1, dims: 5 }), RangeError, "roll", "Dimension out of range");
  });
  assert.deepEqual(canary(), before);
});

test("torch.cat(tensors, { dim }) concatenates along dim", () => {
  const a = x34();
  const b = x34().narrow(1, 0, 2).mul(10);
  const want = [[0, 1, 2, 3, 0, 10], [4, 5, 6, 7, 40, 50], [8, 9, 10, 11, 80, 90]];
  assert.deepEqual(vals(torch.cat([a, b], { dim: 1 })), want);
  assert.deepEqual(vals(torch.cat({ tensors: [a, b], dim: -1 })), want);
  assert.deepEqual(vals(torch.concat([a, b], 1)), want);
  throwsNaming(() => torch.cat([a, b]), Error, "cat", "Sizes of tensors must match except in dimension 0. Expected size 4 but got size 2 for tensor number 1 in the list");
  throwsNaming(() => torch.concatenate([a, b], { dim: 2 }), RangeError, "concatenate", "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  throwsNaming(() => torch.cat([]), Error, "cat", "expected a non-empty list of Tensors");
  throwsNaming(() => torch.cat([a], { dims: 1 } as never), TypeError, "cat", "cat() got an unexpected keyword argument 'dims'");
});

test("x.split(2, { dim: 1 }) splits along dim 1", () => {
  const parts = x34().split(2, { dim: 1 });
  assert.deepEqual(parts.map(vals), [[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [10, 11]]]);
  assert.deepEqual(x34().split({ splitSize: [1, 3], dim: 1 }).map((t) => t.shape), [[3, 1], [3, 3]]);
  assert.deepEqual(torch.split(x34(), { splitSizeOrSections: 2 }).map((t) => t.shape), [[2, 4], [1, 4]]);
  throwsNaming(() => x34().split(0), Error, "split", "split_size can only be 0 if dimension size is 0, but got dimension size of 3");
  throwsNaming(() => x34().split(-1), Error, "split", "split expects split_size be non-negative, but got split_size=-1");
  throwsNaming(() => x34().split([1, 1]), Error, "split", "split_with_sizes expects split_sizes to sum exactly to 3");
  throwsNaming(() => x34().split([-1, 4]), Error, "split", "split_with_sizes expects split_sizes have only non-negative entries");
  assert.deepEqual(torch.zeros(0).split(0).map((t) => t.shape), [[0]]);
});

test("x.squeeze({ dim: 1 }) squeezes only that dim", () => {
  assert.deepEqual(torch.zeros(3, 1, 2, 1).squeeze({ dim: 1 }).shape, [3, 2, 1]);
  assert.deepEqual(torch.zeros(3, 1, 2, 1).squeeze({ dim: -1 }).shape, [3, 1, 2]);
  assert.deepEqual(torch.zeros(3, 1, 2, 1).squeeze().shape, [3, 2]);
  assert.deepEqual(x34().squeeze({ dim: 1 }).shape, [3, 4]); // not of size 1: unchanged
  assert.deepEqual(torch.tensor(1).squeeze(0).shape, []);
  throwsNaming(() => x34().squeeze(5), RangeError, "squeeze", "Dimension out of range (expected to be in range of [-2, 1], but got 5)");
  throwsNaming(() => x34().squeeze([0, 1] as never), TypeError, "squeeze", "must be int, not list");
});

test("x.transpose({ dim0: 0, dim1: 1 })", () => {
  const want = [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]];
  assert.deepEqual(vals(x34().transpose({ dim0: 0, dim1: 1 })), want);
  assert.deepEqual(vals(torch.transpose(x34(), 1, { dim1: 0 })), want);
  assert.deepEqual(vals(torch.swapaxes(x34(), { axis0: 0, axis1: 1 })), want);
  assert.deepEqual(vals(x34().swapdims(0, 1)), want);
  assert.deepEqual(torch.tensor(1).transpose(0, -1).shape, []);
  throwsNaming(() => x34().transpose(0), TypeError, "transpose", 'missing 1 required positional argument: "dim1"');
  throwsNaming(() => torch.tensor(1).transpose(0, 1), RangeError, "transpose", "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
  throwsNaming(() => torch.swapaxes(x34(), { dim0: 0, dim1: 1 } as never), TypeError, "swapaxes", "unexpected keyword argument 'dim0'");
});

test("x.tril({ diagonal: -1 }) and triu keep PyTorch's triangles", () => {
  assert.deepEqual(vals(x34().tril({ diagonal: -1 })), [[0, 0, 0, 0], [4, 0, 0, 0], [8, 9, 0, 0]]);
  assert.deepEqual(vals(torch.triu(x34(), { diagonal: 1 })), [[0, 1, 2, 3], [0, 0, 6, 7], [0, 0, 0, 11]]);
  assert.deepEqual(vals(x34().tril(100)), vals(x34()));
  throwsNaming(() => torch.zeros(3).tril(), RangeError, "tril", "Dimension out of range (expected to be in range of [-1, 0], but got -2)");
  throwsNaming(() => x34().tril(0.5), TypeError, "tril", "argument 'diagonal' (position 1) must be int, not float");
});

test("x.diagonal({ offset: 1 }) is the superdiagonal", () => {
  assert.deepEqual(vals(x34().diagonal({ offset: 1 })), [1, 6, 11]);
  assert.deepEqual(vals(x34().diagonal(-1)), [4, 9]);
  assert.deepEqual(torch.zeros(2, 3, 4).diagonal({ offset: -1, dim1: 2, dim2: 1 }).shape, [2, 3]);
  throwsNaming(() => x34().diagonal(1, 0, 0), Error, "diagonal", "diagonal dimensions cannot be identical 0, 0");
  throwsNaming(() => x34().diagonal(1, 0, 2), RangeError, "diagonal", "Dimension out of range");
});

test("x.to({ dtype: 'float128' }) and x.to('float128') are TypeErrors naming to()", () => {
  const x = x34();
  throwsNaming(() => x.to({ dtype: "float128" as never }), TypeError, "to", /^to\(\) received an invalid combination of arguments/);
  throwsNaming(() => x.to("float128"), TypeError, "to", "'float128' is neither a torch.dtype");
  throwsNaming(() => x.to("tpu"), TypeError, "to", "nor a registered device (cpu");
  throwsNaming(() => x.to("float64", "float32" as never), TypeError, "to", "'float64' is neither a torch.dtype");
});

// ---------------------------------------------------------------- to / type / cpu

test("to(): PyTorch's three overloads", () => {
  const x = x34();
  assert.equal(x.to({ dtype: "float64" }).dtype, "float64");
  assert.equal(x.to({ device: "cpu", dtype: "float64" }).dtype, "float64");
  assert.equal(x.to("cpu", "int32").dtype, "int32");
  assert.equal(x.to("float64", true).dtype, "float64");
  assert.equal(x.to(torch.zeros(1, { dtype: "int64" })).dtype, "int64");
  assert.equal(x.to({ tensor: torch.zeros(1, { dtype: "float64" }) }).dtype, "float64");
  assert.equal(x.to(), x);
  assert.equal(x.to("float32"), x);
  assert.equal(x.to({ device: "cpu" }), x);
  assert.equal(x.to(null), x);
  const c = x.to("float32", { copy: true });
  assert.notEqual(c, x);
  assert.deepEqual(vals(c), vals(x));
  const cl = torch.zeros(1, 2, 3, 4).to({ memoryFormat: "channels_last" });
  assert.deepEqual(cl.stride(), [24, 1, 8, 2]);
  throwsNaming(() => x.to({ memoryFormat: "channels_last" }), Error, "to", "required rank 4 tensor to use channels_last format");
});

test("type() names the type; type(dtype) casts", () => {
  const x = x34();
  assert.equal(x.type(), "torch.FloatTensor");
  assert.equal(x.to("float64").type(), "torch.DoubleTensor");
  assert.equal(x.to("int64").type(), "torch.LongTensor");
  assert.equal(x.to("int8").type(), "torch.CharTensor");
  assert.equal(x.to("bool").type(), "torch.BoolTensor");
  assert.equal(x.type("float64").dtype, "float64");
  assert.equal(x.type({ dtype: "int32" }).dtype, "int32");
  assert.equal(x.type("torch.DoubleTensor").dtype, "float64");
  assert.equal(x.type("float32"), x);
  throwsNaming(() => x.type("foo"), Error, "type", "invalid type: 'foo'");
  assert.equal(x.cpu(), x);
  assert.deepEqual(torch.zeros(1, 2, 3, 4).cpu({ memoryFormat: "channels_last" }).stride(), [24, 1, 8, 2]);
  throwsNaming(() => x.cpu("cpu" as never), TypeError, "cpu", "cpu() takes 0 positional arguments but 1 was given");
});

// ---------------------------------------------------------------- PyTorch's results and errors

test("view and reshape: PyTorch's size inference and errors", () => {
  assert.deepEqual(x34().view(2, -1).shape, [2, 6]);
  assert.deepEqual(x34().view({ size: [4, 3] }).shape, [4, 3]);
  assert.deepEqual(x34().reshape({ shape: [-1] }).shape, [12]);
  assert.deepEqual(x34().viewAs(torch.zeros(4, 3)).shape, [4, 3]);
  assert.deepEqual(x34().t().reshapeAs(torch.zeros(2, 6)).shape, [2, 6]);
  assert.deepEqual(torch.tensor(1).view(-1).shape, [1]);
  throwsNaming(() => x34().view(5), Error, "view", "shape '[5]' is invalid for input of size 12");
  throwsNaming(() => x34().view(-1, -1), Error, "view", "only one dimension can be inferred");
  throwsNaming(() => x34().reshape(-2, 6), Error, "reshape", "invalid shape dimension -2");
  throwsNaming(() => torch.zeros(0, 3).reshape(-1, 0), Error, "reshape",
    "cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified dimension size -1 can be any value and is ambiguous");
  throwsNaming(() => x34().t().view(12), Error, "view", "view size is not compatible with input tensor's size and stride");
  assert.equal(x34().view("float32").dtype, "float32");
  throwsNaming(() => x34().view("int32"), Error, "view", "reinterprets its bytes");
});

test("permute, movedim, t: PyTorch's checks", () => {
  assert.deepEqual(torch.zeros(2, 3, 4).permute(2, 0, 1).shape, [4, 2, 3]);
  assert.deepEqual(torch.zeros(2, 3, 4).permute({ dims: [2, 0, 1] }).shape, [4, 2, 3]);
  throwsNaming(() => x34().permute(0), Error, "permute", "input.dim() = 2 is not equal to len(dims) = 1");
  throwsNaming(() => x34().permute(0, 0), Error, "permute", "duplicate dims are not allowed");
  throwsNaming(() => x34().permute(0, 2), RangeError, "permute", "Dimension out of range");
  assert.deepEqual(vals(x34().movedim(0, 1)), vals(x34().t()));
  assert.deepEqual(torch.zeros(2, 3, 4).movedim({ source: [0, 1], destination: [2, 0] }).shape, [3, 4, 2]);
  assert.deepEqual(torch.tensor(1).movedim(0, 0).shape, []);
  throwsNaming(() => x34().movedim([0, 1], [1]), Error, "movedim", "should contain the same number of dims as destination");
  throwsNaming(() => x34().movedim([0, 0], [0, 1]), Error, "movedim", "repeated dim in `source` ([0, 0])");
  throwsNaming(() => torch.zeros(2, 3, 4).t(), Error, "t", "t() expects a tensor with <= 2 dimensions, but self is 3D");
  assert.deepEqual(torch.zeros(3).t().shape, [3]);
});

test("expand / broadcastTo: -1 keeps a size, negative sizes and overflow are errors", () => {
  assert.deepEqual(x34().expand(2, -1, 4).shape, [2, 3, 4]);
  assert.deepEqual(torch.zeros(1, 4).expand({ size: [0, 4] }).shape, [0, 4]);
  assert.deepEqual(torch.broadcastTo(torch.zeros(1, 4), [3, 4]).shape, [3, 4]);
  assert.deepEqual(torch.zeros(3, 1).expandAs(torch.zeros(2, 3, 4)).shape, [2, 3, 4]);
  throwsNaming(() => x34().expand(3, 5), RangeError, "expand", "The expanded size of the tensor (5) must match the existing size (4) at non-singleton dimension 1");
  throwsNaming(() => torch.zeros(1, 4).expand(3, -2), Error, "expand", "negative dimension -2");
  throwsNaming(() => torch.zeros(1).expand(2 ** 31, 2 ** 31, 2 ** 31), Error, "expand", "integer multiplication overflow");
});

test("narrow, select, slice, unbind: PyTorch's ranges", () => {
  assert.deepEqual(vals(x34().narrow(0, -1, 1)), [[8, 9, 10, 11]]);
  assert.deepEqual(x34().narrow({ dim: 0, start: 3, length: 0 }).shape, [0, 4]);
  throwsNaming(() => x34().narrow(0, 2, 2), Error, "narrow", "start (2) + length (2) exceeds dimension size (3).");
  throwsNaming(() => x34().narrow(0, -1, 2), Error, "narrow", "start (2) + length (2) exceeds dimension size (3).");
  throwsNaming(() => x34().narrow(0, 4, 0), RangeError, "narrow", "Dimension out of range (expected to be in range of [-3, 2], but got 4)");
  throwsNaming(() => torch.narrow(torch.tensor(1), 0, 0, 1), Error, "narrow", "narrow() cannot be applied to a 0-dim tensor.");
  assert.deepEqual(vals(x34().select(0, -1)), [8, 9, 10, 11]);
  throwsNaming(() => x34().select(0, 3), RangeError, "select", "select(): index 3 out of range for tensor of size [3, 4] at dimension 0");
  throwsNaming(() => torch.tensor(1).select(0, 0), RangeError, "select", "select() cannot be applied to a 0-dim tensor.");
  assert.deepEqual(vals(x34().slice(1, 1, null, 2)), [[1, 3], [5, 7], [9, 11]]);
  throwsNaming(() => x34().slice(0, 0, 2, 0), Error, "slice", "slice step must be positive");
  assert.equal(x34().unbind(1).length, 4);
  assert.deepEqual(torch.zeros(0, 3).unbind(0), []);
  throwsNaming(() => torch.tensor(1).unbind(), RangeError, "unbind", "Dimension specified as 0 but tensor has no dimensions");
});

test("flatten, unflatten, unsqueeze, ravel: PyTorch's shapes and checks", () => {
  assert.deepEqual(torch.zeros(2, 3, 4).flatten({ startDim: 1 }).shape, [2, 12]);
  assert.deepEqual(torch.tensor(1).flatten().shape, [1]);
  throwsNaming(() => torch.tensor(1).flatten(0, 1), RangeError, "flatten", "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
  throwsNaming(() => x34().flatten(1, 0), Error, "flatten", "start_dim cannot come after end_dim");
  assert.deepEqual(x34().unflatten(1, [2, -1]).shape, [3, 2, 2]);
  assert.deepEqual(torch.unflatten(x34(), { dim: 1, sizes: [2, 2] }).shape, [3, 2, 2]);
  throwsNaming(() => x34().unflatten(1, [3, 2]), Error, "unflatten", "Provided sizes [3, 2] don't multiply up to the size of dim 1 (4) in the input tensor");
  throwsNaming(() => x34().unflatten(1, []), Error, "unflatten", "sizes must be non-empty");
  throwsNaming(() => x34().unflatten(1, [-1, -1]), Error, "unflatten", "only one dimension can be inferred");
  assert.deepEqual(x34().unsqueeze(-3).shape, [1, 3, 4]);
  throwsNaming(() => x34().unsqueeze(3), RangeError, "unsqueeze", "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  assert.deepEqual(vals(x34().t().ravel()), [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
});

test("chunk: PyTorch's part counts, including an empty dim", () => {
  assert.equal(x34().chunk(2).length, 2);
  assert.equal(x34().chunk(5, 1).length, 4);
  assert.equal(torch.zeros(5).chunk(4).length, 3);
  assert.deepEqual(torch.zeros(0, 3).chunk(3).map((t) => t.shape), [[0, 3], [0, 3], [0, 3]]);
  assert.deepEqual(x34().chunk({ chunks: 3, dim: 1 })[0]!.shape, [3, 2]);
  throwsNaming(() => x34().chunk(0), Error, "chunk", "chunk expects `chunks` to be greater than 0, got: 0");
  throwsNaming(() => torch.tensor(1).chunk(1), Error, "chunk", "chunk expects at least a 1-dimensional tensor");
});

test("flip: dims as varargs or a list, repeated dims rejected", () => {
  assert.deepEqual(vals(x34().flip(0)), [[8, 9, 10, 11], [4, 5, 6, 7], [0, 1, 2, 3]]);
  assert.deepEqual(vals(x34().flip(0, 1)), vals(x34().flip({ dims: [1, 0] })));
  throwsNaming(() => x34().flip([0, 0]), Error, "flip", "dim 0 appears multiple times in the list of dims");
  throwsNaming(() => (x34().flip as () => Tensor)(), TypeError, "flip", 'missing 1 required positional argument: "dims"');
});

test("stack, hstack, vstack: PyTorch's atleast_1d / atleast_2d and errors", () => {
  assert.deepEqual(torch.stack([x34(), x34()], 2).shape, [3, 4, 2]);
  assert.equal(torch.stack([x34(), x34().to("float64")]).dtype, "float64");
  throwsNaming(() => torch.stack([x34(), x34().t()]), Error, "stack", "stack expects each tensor to be equal size, but got [3, 4] at entry 0 and [4, 3] at entry 1");
  throwsNaming(() => torch.stack([]), Error, "stack", "stack expects a non-empty TensorList");
  assert.deepEqual(vals(torch.hstack([torch.tensor(1), torch.tensor(2)])), [1, 2]);
  assert.deepEqual(vals(torch.vstack([torch.tensor(1), torch.tensor(2)])), [[1], [2]]);
  assert.deepEqual(torch.hstack([x34(), x34()]).shape, [3, 8]);
  assert.deepEqual(torch.vstack({ tensors: [torch.zeros(3), torch.zeros(3)] }).shape, [2, 3]);
  throwsNaming(() => torch.hstack([]), Error, "hstack", "hstack expects a non-empty TensorList");
});

test("repeat, tile, repeatInterleave: PyTorch's shapes, tensor repeats and errors", () => {
  assert.deepEqual(vals(torch.tensor([1, 2]).repeat(2, 2)), [[1, 2, 1, 2], [1, 2, 1, 2]]);
  assert.deepEqual(x34().repeat({ repeats: [1, 2] }).shape, [3, 8]);
  assert.deepEqual(x34().repeat(0, 1).shape, [0, 4]);
  throwsNaming(() => x34().repeat(2), Error, "repeat", "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  throwsNaming(() => x34().repeat(1, -1), Error, "repeat", "Trying to create tensor with negative dimension -4: [3, -4]");
  assert.deepEqual(x34().tile(2).shape, [3, 8]);
  assert.deepEqual(x34().tile(1, 2, 2).shape, [1, 6, 8]);
  assert.deepEqual(torch.tensor(1).tile([]).shape, []);
  assert.deepEqual(x34().repeatInterleave(2).shape, [24]);
  assert.deepEqual(x34().repeatInterleave(2, { dim: 1, outputSize: 8 }).shape, [3, 8]);
  assert.deepEqual(vals(x34().repeatInterleave(torch.tensor([1, 2, 0]), { dim: 0 })), [[0, 1, 2, 3], [4, 5, 6, 7], [4, 5, 6, 7]]);
  assert.deepEqual(x34().repeatInterleave(torch.tensor(2), 0).shape, [6, 4]);
  assert.deepEqual(vals(torch.repeatInterleave(torch.tensor([1, 2, 3]))), [0, 1, 1, 2, 2, 2]);
  throwsNaming(() => x34().repeatInterleave(-1), Error, "repeatInterleave", "repeats can not be negative");
  throwsNaming(() => x34().repeatInterleave(2, { dim: 1, outputSize: 7 }), Error, "repeatInterleave", "allocated size does not match required size");
  throwsNaming(() => x34().repeatInterleave(torch.tensor([1, 2]), 0), Error, "repeatInterleave", "repeats must have the same size as input along dim");
});

test("unfold and constantPadNd: PyTorch's windows and padding", () => {
  assert.deepEqual(vals(x34().unfold(1, 2, 2)), [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], [10, 11]]]);
  assert.deepEqual(x34().unfold({ dimension: 1, size: 0, step: 1 }).shape, [3, 5, 0]);
  assert.deepEqual(torch.tensor(1).unfold(0, 1, 1).shape, [1]);
  throwsNaming(() => x34().unfold(1, 5, 1), Error, "unfold", "maximum size for tensor at dimension 1 is 4 but size is 5");
  throwsNaming(() => x34().unfold(1, 2, 0), Error, "unfold", "step is 0 but must be > 0");
  assert.deepEqual(vals(torch.constantPadNd(x34().narrow(1, 0, 2), [1, -1], 0.5)), [[0.5, 0], [0.5, 4], [0.5, 8]]);
  assert.deepEqual(vals(torch.constantPadNd(x34(), { pad: [1, -2], value: 0.5 })), [[0.5, 0, 1], [0.5, 4, 5], [0.5, 8, 9]]);
  throwsNaming(() => torch.constantPadNd(x34(), [1]), Error, "constantPadNd", "Length of pad must be even but instead it equals 1");
});

test("contiguous / clone memory formats", () => {
  const x = torch.zeros(1, 2, 3, 4);
  assert.deepEqual(x.contiguous({ memoryFormat: "channels_last" }).stride(), [24, 1, 8, 2]);
  assert.deepEqual(torch.zeros(1, 2, 3, 4, 5).contiguous({ memoryFormat: "channels_last_3d" }).stride(), [120, 1, 40, 10, 2]);
  const c = x34();
  assert.equal(c.contiguous(), c);
  assert.equal(c.contiguous({ memoryFormat: "preserve_format" }), c);
  throwsNaming(() => c.t().contiguous({ memoryFormat: "preserve_format" }), Error, "contiguous", "preserve memory format is unsupported by the contiguous operator");
  throwsNaming(() => c.contiguous({ memoryFormat: "channels_last" }), Error, "contiguous", "required rank 4 tensor to use channels_last format");
  throwsNaming(() => c.contiguous("channels_last" as never), TypeError, "contiguous", "contiguous() takes 0 positional arguments but 1 was given");
  const cl = torch.arange(24, { dtype: "float32" }).reshape(1, 2, 3, 4).clone({ memoryFormat: "channels_last" });
  assert.deepEqual(cl.stride(), [24, 1, 8, 2]);
  assert.deepEqual(vals(cl), vals(torch.arange(24, { dtype: "float32" }).reshape(1, 2, 3, 4)));
});

test("matmul family: PyTorch's checks", () => {
  const a = torch.randn(2, 3);
  const b = torch.randn(3, 4);
  const v = torch.randn(3);
  throwsNaming(() => torch.matmul(a, torch.tensor(1)), Error, "matmul", "both arguments to matmul need to be at least 1D, but they are 2D and 0D");
  throwsNaming(() => torch.matmul(a, torch.randn(4, 5)), Error, "matmul", "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  throwsNaming(() => torch.matmul(v, torch.randn(4)), Error, "matmul", "inconsistent tensor size, expected tensor [3] and src [4]");
  throwsNaming(() => torch.matmul(a.bool(), b.bool()), Error, "matmul", `"addmm_impl_cpu_" not implemented for 'Bool'`);
  throwsNaming(() => torch.mm(a, v), Error, "mm", "mat2 must be a matrix");
  throwsNaming(() => torch.mm(v, b), Error, "mm", "self must be a matrix");
  throwsNaming(() => torch.mm(a, torch.randn(4, 5)), Error, "mm", "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  assert.deepEqual(torch.mm(a, { mat2: b }).shape, [2, 4]);
  throwsNaming(() => torch.bmm(a, b), Error, "bmm", "batch1 must be a 3D tensor");
  throwsNaming(() => torch.bmm(torch.randn(2, 2, 3), torch.randn(3, 3, 4)), Error, "bmm",
    "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3].");
  assert.deepEqual(torch.mv(a, { vec: v }).shape, [2]);
  throwsNaming(() => torch.mv(a, torch.randn(4)), Error, "mv", "size mismatch, got 2, 2x3,4");
  throwsNaming(() => torch.mv(v, v), Error, "mv", "vector + matrix @ vector expected, got 1, 1, 1");
  assert.deepEqual(torch.dot(v, { tensor: v }).shape, []);
  throwsNaming(() => torch.dot(a, v), Error, "dot", "1D tensors expected, but got 2D and 1D tensors");
  throwsNaming(() => torch.dot(v, v.to("float64")), Error, "dot", "dot : expected both vectors to have same dtype, but found Float and Double");
  assert.equal(torch.outer(v, torch.randn(4).to("float64")).dtype, "float64");
  throwsNaming(() => torch.outer(a, v), Error, "outer", "outer: Expected 1-D argument self, but got 2-D");
});

test("addmm: beta and alpha are keyword-only; beta = 0 ignores the input", () => {
  const nan = torch.full([2, 2], NaN);
  assert.deepEqual(vals(torch.addmm(nan, torch.ones(2, 3), torch.ones(3, 2), { beta: 0, alpha: 2 })), [[6, 6], [6, 6]]);
  assert.deepEqual(vals(torch.ones(2, 2).addmm(torch.ones(2, 3), torch.ones(3, 2), { beta: 0.5 })), [[3.5, 3.5], [3.5, 3.5]]);
  assert.deepEqual(torch.addmm(torch.zeros(4), torch.randn(2, 3), torch.randn(3, 4)).shape, [2, 4]);
  throwsNaming(() => (torch.addmm as (...a: unknown[]) => Tensor)(torch.zeros(2, 4), torch.randn(2, 3), torch.randn(3, 4), 0, 1), TypeError, "addmm",
    "addmm() takes 3 positional arguments but 5 were given");
  throwsNaming(() => torch.addmm(torch.zeros(3), torch.randn(2, 3), torch.randn(3, 4)), RangeError, "addmm", "The expanded size of the tensor (4) must match the existing size (3)");
  throwsNaming(() => torch.addmm(torch.zeros(2, 4), torch.randn(3), torch.randn(3, 4)), Error, "addmm", "mat1 must be a matrix, got 1-D tensor");
  throwsNaming(() => torch.addmm(torch.zeros(2, 4, { dtype: "float64" }), torch.randn(2, 3), torch.randn(3, 4)), Error, "addmm", "self and mat2 must have the same dtype");
});

test("linear: x @ w^T + b with PyTorch's checks", () => {
  assert.deepEqual(torch.linear(torch.randn(2, 3), torch.randn(4, 3), torch.randn(4)).shape, [2, 4]);
  assert.deepEqual(torch.linear(torch.randn(5, 2, 3), { weight: torch.randn(4, 3) }).shape, [5, 2, 4]);
  assert.deepEqual(torch.linear(torch.randn(2, 3), torch.randn(3)).shape, [2]);
  throwsNaming(() => torch.linear(torch.randn(2, 3), torch.randn(4, 5)), Error, "linear", "mat1 and mat2 shapes cannot be multiplied (2x3 and 5x4)");
  throwsNaming(() => torch.linear(torch.randn(2, 3), torch.randn(2, 4, 3)), Error, "linear", "t() expects a tensor with <= 2 dimensions, but self is 3D");
  throwsNaming(() => torch.linear(torch.tensor(1), torch.randn(4, 3)), Error, "linear", "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
  throwsNaming(() => torch.linear(torch.randn(2, 3), torch.randn(4, 3), torch.randn(5)), RangeError, "linear", "The expanded size of the tensor (4) must match the existing size (5)");
});

// ---------------------------------------------------------------- forms agree

test("every op: positional, options and mixed forms give the same values", () => {
  const x = () => x34();
  const y = () => torch.arange(24, { dtype: "float32" }).reshape(2, 3, 4);
  const m = () => torch.arange(6, { dtype: "float32" }).reshape(2, 3);
  const F: Record<string, (() => Tensor | Tensor[])[]> = {
    contiguous: [() => x().t().contiguous(), () => torch.contiguous(x().t(), { memoryFormat: "contiguous_format" }), () => torch.contiguous({ input: x().t() } as never)],
    clone: [() => x().clone(), () => torch.clone(x(), { memoryFormat: null }), () => x().clone({ memoryFormat: "preserve_format" })],
    detach: [() => x().detach(), () => torch.detach(x())],
    view: [() => x().view(2, 6), () => x().view([2, 6]), () => x().view({ size: [2, 6] }), () => torch.view(x(), [2, -1])],
    viewAs: [() => x().viewAs(m().reshape(6).repeat(2).reshape(2, 6)), () => torch.viewAs(x(), { other: torch.zeros(2, 6) })],
    reshape: [() => x().reshape(6, 2), () => x().reshape([6, 2]), () => x().reshape({ shape: [6, -1] }), () => torch.reshape(x(), [-1, 2])],
    reshapeAs: [() => x().reshapeAs(torch.zeros(6, 2)), () => torch.reshapeAs(x(), { other: torch.zeros(6, 2) })],
    permute: [() => y().permute(2, 0, 1), () => y().permute([2, 0, 1]), () => y().permute({ dims: [2, 0, 1] }), () => torch.permute(y(), [-1, 0, 1])],
    transpose: [() => y().transpose(0, 2), () => y().transpose(0, { dim1: 2 }), () => torch.transpose(y(), { dim0: 0, dim1: -1 })],
    swapaxes: [() => y().swapaxes(0, 2), () => y().swapaxes({ axis0: 2, axis1: 0 }), () => torch.swapaxes(y(), 0, { axis1: 2 })],
    swapdims: [() => y().swapdims(0, 2), () => torch.swapdims(y(), { dim0: 0, dim1: 2 })],
    t: [() => x().t(), () => torch.t(x())],
    movedim: [() => y().movedim(0, 2), () => y().movedim({ source: 0, destination: -1 }), () => torch.movedim(y(), [0], { destination: [2] })],
    expand: [() => m().reshape(2, 1, 3).expand(2, 4, 3), () => m().reshape(2, 1, 3).expand([2, 4, 3]), () => m().reshape(2, 1, 3).expand({ size: [-1, 4, -1] })],
    expandAs: [() => m().reshape(2, 1, 3).expandAs(torch.zeros(2, 4, 3)), () => torch.expandAs(m().reshape(2, 1, 3), { other: torch.zeros(2, 4, 3) })],
    broadcastTo: [() => torch.broadcastTo(m(), [2, 2, 3]), () => torch.broadcastTo(m(), { size: [2, 2, 3] }), () => m().broadcastTo(2, 2, 3)],
    slice: [() => x().slice(1, 1, 4, 2), () => x().slice(1, { start: 1, end: 4, step: 2 }), () => torch.slice(x(), { dim: 1, start: 1, step: 2 })],
    narrow: [() => x().narrow(1, 1, 2), () => x().narrow(1, { start: 1, length: 2 }), () => torch.narrow(x(), { dim: 1, start: -3, length: 2 })],
    select: [() => x().select(1, 2), () => x().select({ dim: 1, index: -2 }), () => torch.select(x(), 1, { index: 2 })],
    unsqueeze: [() => x().unsqueeze(1), () => x().unsqueeze({ dim: -2 }), () => torch.unsqueeze(x(), { dim: 1 })],
    squeeze: [() => x().reshape(3, 1, 4).squeeze(1), () => x().reshape(3, 1, 4).squeeze({ dim: -2 }), () => torch.squeeze(x().reshape(3, 1, 4))],
    flatten: [() => y().flatten(1), () => y().flatten(1, -1), () => y().flatten({ startDim: 1 }), () => torch.flatten(y(), 1, { endDim: 2 })],
    unflatten: [() => x().unflatten(1, [2, 2]), () => x().unflatten(1, { sizes: [2, -1] }), () => torch.unflatten(x(), { dim: -1, sizes: [-1, 2] })],
    ravel: [() => x().t().ravel(), () => torch.ravel(x().t())],
    split: [() => torch.split(x(), 2, 1), () => torch.split(x(), 2, { dim: 1 }), () => torch.split(x(), { splitSizeOrSections: [2, 2], dim: 1 }), () => x().split(2, 1), () => x().split({ splitSize: 2, dim: 1 })],
    chunk: [() => x().chunk(2, 1), () => x().chunk(2, { dim: 1 }), () => torch.chunk(x(), { chunks: 2, dim: -1 })],
    unbind: [() => x().unbind(1), () => x().unbind({ dim: 1 }), () => torch.unbind(x(), -1)],
    diagonal: [() => y().diagonal(1, 1, 2), () => y().diagonal(1, { dim1: 1, dim2: 2 }), () => torch.diagonal(y(), { offset: 1, dim1: -2, dim2: -1 })],
    flip: [() => y().flip(0, 2), () => y().flip([0, 2]), () => y().flip({ dims: [2, 0] }), () => torch.flip(y(), [-1, 0])],
    roll: [() => y().roll([1, 2], [0, 2]), () => y().roll([1, 2], { dims: [0, 2] }), () => torch.roll(y(), { shifts: [1, -2], dims: [0, -1] })],
    tril: [() => x().tril(1), () => x().tril({ diagonal: 1 }), () => torch.tril(x(), 1)],
    triu: [() => x().triu(-1), () => x().triu({ diagonal: -1 }), () => torch.triu(x(), { diagonal: -1 })],
    cat: [() => torch.cat([x(), x()], 1), () => torch.cat([x(), x()], { dim: 1 }), () => torch.cat({ tensors: [x(), x()], dim: -1 })],
    concat: [() => torch.concat([x(), x()], 1), () => torch.concat([x(), x()], { dim: 1 })],
    concatenate: [() => torch.concatenate([x(), x()], 1), () => torch.concatenate({ tensors: [x(), x()], dim: 1 })],
    stack: [() => torch.stack([x(), x()], 1), () => torch.stack([x(), x()], { dim: 1 }), () => torch.stack({ tensors: [x(), x()], dim: -2 })],
    hstack: [() => torch.hstack([x(), x()]), () => torch.hstack({ tensors: [x(), x()] })],
    vstack: [() => torch.vstack([x(), x()]), () => torch.vstack({ tensors: [x(), x()] })],
    repeat: [() => x().repeat(2, 1, 2), () => x().repeat([2, 1, 2]), () => x().repeat({ repeats: [2, 1, 2] }), () => torch.repeat(x(), [2, 1, 2])],
    tile: [() => x().tile(2), () => x().tile([1, 2]), () => x().tile({ dims: [2] }), () => torch.tile(x(), [2])],
    repeatInterleave: [() => x().repeatInterleave(2, 1), () => x().repeatInterleave(2, { dim: 1 }), () => torch.repeatInterleave(x(), { repeats: 2, dim: 1, outputSize: 8 }), () => x().repeatInterleave(torch.tensor([2, 2, 2, 2]), 1)],
    unfold: [() => x().unfold(1, 2, 1), () => x().unfold(1, { size: 2, step: 1 }), () => torch.unfold(x(), { dimension: 1, size: 2, step: 1 })],
    constantPadNd: [() => torch.constantPadNd(x(), [1, 1], 2), () => torch.constantPadNd(x(), [1, 1], { value: 2 }), () => torch.constantPadNd(x(), { pad: [1, 1], value: 2 })],
    to: [() => x().to("float64"), () => x().to({ dtype: "float64" }), () => x().to("cpu", "float64"), () => x().to("cpu", { dtype: "float64" }), () => x().to(torch.zeros(1, { dtype: "float64" })), () => torch.to(x(), { device: "cpu", dtype: "float64", copy: true })],
    type: [() => x().type("float64"), () => x().type({ dtype: "float64" }), () => x().type("torch.DoubleTensor"), () => x().type("float64", { nonBlocking: true })],
    cpu: [() => x().cpu(), () => x().cpu({ memoryFormat: "preserve_format" })],
    matmul: [() => x().matmul(x().t()), () => torch.matmul(x(), x().t()), () => torch.matmul(x(), { other: x().t() })],
    mm: [() => x().mm(x().t()), () => torch.mm(x(), { mat2: x().t() })],
    bmm: [() => y().bmm(y().transpose(1, 2)), () => torch.bmm(y(), { mat2: y().transpose(1, 2) })],
    mv: [() => x().mv(torch.ones(4)), () => torch.mv(x(), { vec: torch.ones(4) })],
    dot: [() => torch.ones(4).dot(torch.arange(4, { dtype: "float32" })), () => torch.dot(torch.ones(4), { tensor: torch.arange(4, { dtype: "float32" }) })],
    outer: [() => torch.ones(3).outer(torch.arange(4, { dtype: "float32" })), () => torch.outer(torch.ones(3), { vec2: torch.arange(4, { dtype: "float32" }) })],
    addmm: [() => torch.addmm(m(), m(), torch.ones(3, 3), { beta: 2, alpha: 0.5 }), () => m().addmm(m(), torch.ones(3, 3), { beta: 2, alpha: 0.5 }), () => torch.addmm(m(), { mat1: m(), mat2: torch.ones(3, 3), beta: 2, alpha: 0.5 })],
    linear: [() => torch.linear(m(), x().narrow(1, 0, 3), torch.ones(3)), () => torch.linear(m(), x().narrow(1, 0, 3), { bias: torch.ones(3) }), () => torch.linear(m(), { weight: x().narrow(1, 0, 3), bias: torch.ones(3) })],
  };
  for (const [name, forms] of Object.entries(F)) sameForms(name, forms);
});
