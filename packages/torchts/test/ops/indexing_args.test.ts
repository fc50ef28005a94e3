// The indexing family's arguments (src/ops/indexing.ts): index tensors' dtypes and values, dims
// and index specs are checked where PyTorch checks them, with PyTorch 1.13's messages (the
// literals quoted below are its outputs) under the public op's name; every calling form agrees.
// Error classes: TypeError = PyTorch's argument-parser TypeError, RangeError = IndexError,
// Error = RuntimeError.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";
import { _checkIndexRange } from "../../src/ops/indexing.js";
import { pendingCount, traceState } from "../../src/runtime/dispatch.js";

const MODES = ["debug", "strict", "fused"] as const;
const x34 = () => torch.arange(12).float().reshape(3, 4);
const L = (d: torch.NestedArray) => torch.tensor(d); // int64
const F = (d: torch.NestedArray) => torch.tensor(d, { dtype: "float32" });
const I32 = (d: torch.NestedArray) => torch.tensor(d, { dtype: "int32" });
const err = (name: "Error" | "RangeError" | "TypeError", message: string | RegExp) => ({ name, message });
async function eq(t: Tensor, want: unknown): Promise<void> {
  assert.deepEqual(await t.tolist(), want);
}
/** Every form gives the same values. */
async function sameValues(forms: (() => Tensor | Tensor[])[]): Promise<void> {
  const snap = async (r: Tensor | Tensor[]) => (Array.isArray(r) ? Promise.all(r.map((t) => t.tolist())) : r.tolist());
  const want = await snap(forms[0]!());
  for (const [i, f] of forms.entries()) assert.deepEqual(await snap(f()), want, `form ${i}`);
}

for (const mode of MODES) {
  const mt = (name: string, fn: () => void | Promise<void>) => test(`${mode}: ${name}`, () => torch.withEagerMode(mode, fn));

  mt("gather: index values, dtype and dim", () => {
    const x = x34();
    // RuntimeError: index 9 is out of bounds for dimension 1 with size 4
    assert.throws(() => torch.gather(x, 1, L([[9]])), err("Error", "gather(): index 9 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.gather(1, L([[0, -1]])), err("Error", "gather(): index -1 is out of bounds for dimension 1 with size 4"));
    // RuntimeError: gather(): Expected dtype int64 for index (float and int32 alike)
    assert.throws(() => x.gather(1, F([[1]])), err("Error", "gather(): Expected dtype int64 for index"));
    assert.throws(() => x.gather(1, I32([[1]])), err("Error", "gather(): Expected dtype int64 for index"));
    // IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)
    assert.throws(() => x.gather(2, L([[1]])), err("RangeError", "gather(): Dimension out of range (expected to be in range of [-2, 1], but got 2)"));
    assert.throws(() => x.gather(-3, L([[1]])), err("RangeError", /but got -3\)$/));
    // a 0-dim input: index 1 is out of bounds for dimension 0 with size 1
    assert.throws(() => torch.tensor(5).float().gather(0, L(1)), err("Error", "gather(): index 1 is out of bounds for dimension 0 with size 1"));
    // a lazily computed index (pending in fused eager) is checked too, and leaves nothing pending
    const lazy = L([[4]]).add(5);
    const before = pendingCount();
    assert.throws(() => x.gather(1, lazy), err("Error", "gather(): index 9 is out of bounds for dimension 1 with size 4"));
    assert.equal(pendingCount(), before);
  });

  mt("scatter / scatter_ / scatterAdd: index values, dtype, dim, reduce", async () => {
    const x = x34();
    const one = torch.ones(1, 1);
    assert.throws(() => x.scatter(1, L([[9]]), one), err("Error", "scatter(): index 9 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.scatter(1, L([[-1]]), one), err("Error", "scatter(): index -1 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.scatter(0, L([[9]]), 2.0), err("Error", "scatter(): index 9 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.scatter(1, F([[1]]), one), err("Error", "scatter(): Expected dtype int64 for index"));
    assert.throws(() => x.scatter(0, L([[1]]), 2.0, { reduce: "foo" as never }), err("Error", "scatter(): reduce argument must be either add or multiply."));
    assert.throws(() => x.scatter(0, L([[1]]), one.double()), err("Error", "scatter(): Expected self.dtype to be equal to src.dtype"));
    assert.throws(() => x.scatter(3, L([[1]]), one), err("RangeError", /^scatter\(\): Dimension out of range/));
    assert.throws(() => x.clone().scatter_(1, L([[4]]), one), err("Error", "scatter_(): index 4 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.scatterAdd(1, L([[9]]), one), err("Error", "scatterAdd(): index 9 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.scatterAdd(1, L([[-1]]), one), err("Error", "scatterAdd(): index -1 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.scatterAdd(1, F([[1]]), one), err("Error", "scatterAdd(): Expected dtype int64 for index"));
    // IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 5)
    assert.throws(() => x.scatterAdd(5, L([[1]]), one), err("RangeError", "scatterAdd(): Dimension out of range (expected to be in range of [-2, 1], but got 5)"));
    assert.throws(() => x.clone().scatterAdd_(0, L([[3]]), one), err("Error", "scatterAdd_(): index 3 is out of bounds for dimension 0 with size 3"));
    // failed in-place calls leave the input as it was
    const y = x34();
    assert.throws(() => y.scatter_(0, L([[7]]), 1));
    await eq(y, await x34().tolist());
    // PyTorch's results: a value, reduce, a bool value, a 0-dim input
    await eq(torch.zeros(3, 4).scatter(1, L([[3], [0], [1]]), 5), [[0, 0, 0, 5], [5, 0, 0, 0], [0, 5, 0, 0]]);
    await eq(x.scatter(0, L([[1]]), 2.0, { reduce: "add" }), [[0, 1, 2, 3], [6, 5, 6, 7], [8, 9, 10, 11]]);
    await eq(x.scatter(1, torch.zeros([3, 1], { dtype: "int64" }), true), [[1, 1, 2, 3], [1, 5, 6, 7], [1, 9, 10, 11]]);
    await eq(torch.full([3], 2).scatter(0, L([1]), L([3]), { reduce: "multiply" }), [2, 6, 2]);
    await eq(torch.tensor(1).float().scatter(0, L(0), torch.tensor(5).float()), 5);
  });

  mt("indexSelect: index values, dtype, shape and dim", async () => {
    const x = x34();
    // IndexError: index out of range in self
    assert.throws(() => x.indexSelect(0, L([9])), err("RangeError", "indexSelect(): index out of range in self"));
    assert.throws(() => x.indexSelect(1, L([-1])), err("RangeError", "indexSelect(): index out of range in self"));
    assert.throws(() => torch.tensor(3).float().indexSelect(0, L([1])), err("RangeError", "indexSelect(): index out of range in self"));
    // RuntimeError: index_select(): Expected dtype int32 or int64 for index
    assert.throws(() => x.indexSelect(1, F([1])), err("Error", "indexSelect(): Expected dtype int32 or int64 for index"));
    // IndexError: index_select(): Index is supposed to be a vector
    assert.throws(() => x.indexSelect(0, L([[1]])), err("RangeError", "indexSelect(): Index is supposed to be a vector"));
    assert.throws(() => x.indexSelect(2, L([1])), err("RangeError", /^indexSelect\(\): Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)/));
    assert.throws(() => x.indexSelect(1, I32([4])), err("RangeError", "indexSelect(): index out of range in self"));
    await eq(x.indexSelect(1, I32([1])), [[1], [5], [9]]);
    await eq(x.indexSelect(0, L(1)), [[4, 5, 6, 7]]);
    await eq(torch.tensor(3).float().indexSelect(0, L([0])), [3]);
  });

  mt("indexAdd / indexAdd_: index values, dtype, shapes, alpha", async () => {
    const x = x34();
    const src = torch.ones(3, 1);
    assert.throws(() => x.indexAdd(1, L([9]), src), err("RangeError", "indexAdd(): index out of range in self"));
    assert.throws(() => x.indexAdd(1, L([-1]), src), err("RangeError", "indexAdd(): index out of range in self"));
    assert.throws(() => x.clone().indexAdd_(1, L([4]), src), err("RangeError", "indexAdd_(): index out of range in self"));
    // RuntimeError: index_add_(): Expected dtype int32/int64 for index but got: Float
    assert.throws(() => x.indexAdd(1, F([1]), src), err("Error", "indexAdd(): Expected dtype int32/int64 for index but got: Float"));
    assert.throws(() => x.indexAdd(2, L([1]), src), err("RangeError", /^indexAdd\(\): Dimension out of range/));
    // IndexError: index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]
    assert.throws(() => x.indexAdd(0, L([[1]]), torch.ones(1, 4)), err("RangeError", "indexAdd(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]"));
    // RuntimeError: index_add_(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 0
    assert.throws(() => x.indexAdd(0, L([1]), torch.ones(2, 4)), err("Error", "indexAdd(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 0"));
    assert.throws(() => x.indexAdd(0, L([1]), torch.ones(4)), err("Error", "indexAdd(): Number of indices (1) should be equal to source.size(dim): (4), for dim: 0"));
    // RuntimeError: index_add_(): self (Float) and source (Double) must have the same scalar type
    assert.throws(() => x.indexAdd(0, L([1]), torch.ones(1, 4).double()), err("Error", "indexAdd(): self (Float) and source (Double) must have the same scalar type"));
    // RuntimeError: output with shape [4] doesn't match the broadcast shape [4, 4]
    assert.throws(() => x.indexAdd(0, L([1]), torch.ones(1, 4, 1)), err("Error", "indexAdd(): output with shape [4] doesn't match the broadcast shape [4, 4]"));
    // IndexError: select() cannot be applied to a 0-dim tensor.
    assert.throws(() => x.indexAdd(0, L([1]), torch.tensor(2).float()), err("RangeError", "indexAdd(): select() cannot be applied to a 0-dim tensor."));
    // PyTorch's results: a source slice broadcasts to x's slice, an int32 or 0-dim index, integer alpha truncates, bool
    await eq(x.indexAdd(0, L([1]), torch.ones(1, 1)), [[0, 1, 2, 3], [5, 6, 7, 8], [8, 9, 10, 11]]);
    await eq(x.indexAdd(1, L([1]), torch.ones(1, 1)), [[0, 2, 2, 3], [4, 6, 6, 7], [8, 10, 10, 11]]);
    await eq(x.indexAdd(0, I32([1]), torch.ones(1, 4)), [[0, 1, 2, 3], [5, 6, 7, 8], [8, 9, 10, 11]]);
    await eq(x.indexAdd(0, L(1), torch.ones(1, 4)), [[0, 1, 2, 3], [5, 6, 7, 8], [8, 9, 10, 11]]);
    await eq(x.indexAdd(1, L([1]), torch.ones(3, 1), { alpha: 2 }), [[0, 3, 2, 3], [4, 7, 6, 7], [8, 11, 10, 11]]);
    await eq(torch.zeros([3], { dtype: "int64" }).indexAdd(0, L([1]), L([2]), { alpha: 1.5 }), [0, 2, 0]);
    await eq(torch.zeros(4).indexAdd(0, L([1, 1]), torch.ones(2)), [0, 2, 0, 0]);
    await eq(torch.zeros(4).indexAdd(0, L([1]), torch.tensor(2).float()), [0, 2, 0, 0]);
    await eq(torch.tensor(1).float().indexAdd(0, L([0]), torch.tensor(2).float()), 3);
    await eq(torch.zeros([3], { dtype: "bool" }).indexAdd(0, L([1]), torch.tensor([true])), [false, true, false]);
  });

  mt("indexPut / indexPut_: index values (negative wrap), dtypes, None", async () => {
    const x = x34();
    const one = torch.tensor(1).float();
    // IndexError: index 9 is out of bounds for dimension 0 with size 3
    assert.throws(() => x.indexPut([L([9])], one), err("RangeError", "indexPut(): index 9 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.indexPut([L([-4])], one), err("RangeError", "indexPut(): index -4 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.indexPut([L([0]), L([7])], one), err("RangeError", "indexPut(): index 7 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => x.indexPut([L([5])], one, true), err("RangeError", "indexPut(): index 5 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.clone().indexPut_([L([3])], one), err("RangeError", "indexPut_(): index 3 is out of bounds for dimension 0 with size 3"));
    // IndexError: tensors used as indices must be long, byte or bool tensors (float and int32 alike, in 1.13)
    assert.throws(() => x.indexPut([F([1])], one), err("RangeError", "indexPut(): tensors used as indices must be long, byte or bool tensors"));
    assert.throws(() => x.indexPut([I32([1])], one), err("RangeError", "indexPut(): tensors used as indices must be long, byte or bool tensors"));
    // TypeError: expected Tensor as element 0 in argument 0, but got NoneType (the Python binding)
    assert.throws(() => x.indexPut([null as unknown as Tensor, L([1])], one), err("TypeError", /^indexPut\(\): argument 'indices' .*must be tuple of Tensors, but found element of type NoneType at pos 0/));
    // TypeError: index_put_(): argument 'values' (position 2) must be Tensor, not float
    assert.throws(() => x.clone().indexPut_([L([1])], 5 as unknown as Tensor), err("TypeError", "indexPut_(): argument 'values' (position 2) must be Tensor, not int"));
    // RuntimeError: Index put requires the source and destination dtypes match, got Float for the destination and Double for the source.
    assert.throws(() => x.indexPut([L([1])], one.double()), err("Error", "indexPut(): Index put requires the source and destination dtypes match, got Float for the destination and Double for the source."));
    // IndexError: too many indices for tensor of dimension 2 (got 3)
    assert.throws(() => x.indexPut([L([1]), L([1]), L([1])], one), err("RangeError", "indexPut(): too many indices for tensor of dimension 2 (got 3)"));
    // RuntimeError: shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 4]
    assert.throws(() => x.indexPut([L([0, 1])], torch.ones(3)), err("Error", "indexPut(): shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 4]"));
    // IndexError: The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0
    assert.throws(() => x.indexPut([L([true, false])], one), err("RangeError", "indexPut(): The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0"));
    await eq(x.indexPut([L([-1])], one), [[0, 1, 2, 3], [4, 5, 6, 7], [1, 1, 1, 1]]);
    await eq(x.indexPut([L([0, 0])], one, true), [[2, 3, 4, 5], [4, 5, 6, 7], [8, 9, 10, 11]]);
    await eq(x.indexPut([L([[0], [2]]), L([1, 3])], torch.tensor(7).float()), [[0, 7, 2, 7], [4, 5, 6, 7], [8, 7, 10, 7]]);
    await eq(x.indexPut([L([true, false, true])], one), [[1, 1, 1, 1], [4, 5, 6, 7], [1, 1, 1, 1]]);
  });

  mt("take: index values (negative wrap), dtype, empty input", async () => {
    const x = x34();
    // IndexError: out of range: tried to access index 12 on a tensor of 12 elements.
    assert.throws(() => x.take(L([12])), err("RangeError", "take(): out of range: tried to access index 12 on a tensor of 12 elements."));
    assert.throws(() => x.take(L([0, -13])), err("RangeError", "take(): out of range: tried to access index -13 on a tensor of 12 elements."));
    // RuntimeError: take(): Expected a long tensor for index, but got Float (Int for int32)
    assert.throws(() => x.take(F([1])), err("Error", "take(): Expected a long tensor for index, but got Float"));
    assert.throws(() => x.take(I32([1])), err("Error", "take(): Expected a long tensor for index, but got Int"));
    // IndexError: take(): tried to take from an empty tensor
    assert.throws(() => torch.zeros(0).take(L([0])), err("RangeError", "take(): tried to take from an empty tensor"));
    await eq(x.take(L([-1, 0])), [11, 0]);
    await eq(x.take(L(5)), 5);
    await eq(torch.zeros(0).take(torch.tensor([], { dtype: "int64" })), []);
  });

  mt("takeAlongDim: index values, dtype, dims", async () => {
    const x = x34();
    // RuntimeError: index 9 is out of bounds for dimension 1 with size 4
    assert.throws(() => torch.takeAlongDim(x, L([[9]]), 1), err("Error", "takeAlongDim(): index 9 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => torch.takeAlongDim(x, L([[-1]]), 1), err("Error", "takeAlongDim(): index -1 is out of bounds for dimension 1 with size 4"));
    assert.throws(() => torch.takeAlongDim(x, L([12])), err("Error", "takeAlongDim(): index 12 is out of bounds for dimension 0 with size 12"));
    assert.throws(() => torch.takeAlongDim(x, L([-1])), err("Error", "takeAlongDim(): index -1 is out of bounds for dimension 0 with size 12"));
    // RuntimeError: torch.take_along_dim(): dtype of indices should be Long but got Float (Int for int32)
    assert.throws(() => torch.takeAlongDim(x, F([[1]]), 1), err("Error", "takeAlongDim(): dtype of indices should be Long but got Float"));
    assert.throws(() => torch.takeAlongDim(x, I32([[1]]), 1), err("Error", "takeAlongDim(): dtype of indices should be Long but got Int"));
    assert.throws(() => torch.takeAlongDim(x, L([[1]]), 2), err("RangeError", /^takeAlongDim\(\): Dimension out of range/));
    assert.throws(() => torch.takeAlongDim(x, L([1]), 1), err("Error", "takeAlongDim(): input and indices should have the same number of dimensions, but got 2 dimensions for input, and 1 dimensions for indices"));
    await eq(torch.takeAlongDim(x, L([[3], [0], [1]]), 1), [[3], [4], [9]]);
  });

  mt("maskedFill / maskedFill_ / maskedSelect: mask dtype and shape, value", async () => {
    const x = x34();
    // PyTorch 2.x's RuntimeError (1.13 silently does nothing with a float mask, and fills with a 0/1 int mask)
    assert.throws(() => x.maskedFill(torch.ones(3, 4), 1), err("Error", "maskedFill(): masked_fill_ only supports boolean masks, but got mask with dtype Float"));
    assert.throws(() => x.maskedFill(torch.ones([4], { dtype: "int64" }), 1), err("Error", /but got mask with dtype Long$/));
    assert.throws(() => x.clone().maskedFill_(torch.ones(4), 1), err("Error", /^maskedFill_\(\): masked_fill_ only supports boolean masks/));
    // RuntimeError: masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s).
    assert.throws(() => x.maskedFill(torch.ones([4], { dtype: "bool" }), F([1])), err("Error", "maskedFill(): masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)."));
    // RuntimeError: The size of tensor a (5) must match the size of tensor b (4) at non-singleton dimension 1
    assert.throws(() => x.maskedFill(torch.ones([5], { dtype: "bool" }), 1), /^RangeError: maskedFill.*The size of tensor a \(5\) must match the size of tensor b \(4\) at non-singleton dimension 1/);
    // RuntimeError: output with shape [3, 4] doesn't match the broadcast shape [2, 3, 4]
    assert.throws(() => x.clone().maskedFill_(torch.ones([2, 3, 4], { dtype: "bool" }), 1), err("Error", "maskedFill_(): output with shape [3, 4] doesn't match the broadcast shape [2, 3, 4]"));
    // RuntimeError: masked_select: expected BoolTensor or ByteTensor for mask
    assert.throws(() => x.maskedSelect(torch.ones(3, 4)), err("Error", "maskedSelect(): expected BoolTensor or ByteTensor for mask"));
    // PyTorch's results: uint8 mask (deprecated), broadcasting, int input with a float value, a bool value, a 0-dim int value tensor
    await eq(x.maskedFill(torch.ones([3, 4], { dtype: "uint8" }), 1), [[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]]);
    assert.deepEqual(x.maskedFill(torch.ones([2, 3, 4], { dtype: "bool" }), 1).shape, [2, 3, 4]);
    await eq(x.long().maskedFill(torch.ones([4], { dtype: "bool" }), 2.7).index(0), [2, 2, 2, 2]);
    await eq(x.maskedFill(torch.ones([4], { dtype: "bool" }), true).index(0), [1, 1, 1, 1]);
    await eq(x.maskedFill(torch.ones([4], { dtype: "bool" }), L(2)).index(0), [2, 2, 2, 2]);
    await eq(torch.tensor(1).float().maskedSelect(torch.tensor(true)), [1]);
  });

  mt("index / set: index specs (PyTorch's IndexError / TypeError), index values, dtypes", async () => {
    const x = x34();
    const only = (got: string) => `index(): only integers, slices (\`:\`), ellipsis (\`...\`), None and long or byte Variables are valid indices (got ${got})`;
    // IndexError: only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got float)
    assert.throws(() => x.index(1.5), err("RangeError", only("float")));
    assert.throws(() => x.index(NaN), err("RangeError", only("float")));
    assert.throws(() => x.index((() => 1) as unknown as number), err("RangeError", only("function")));
    assert.throws(() => x.index({ a: 1 } as unknown as number, 0), err("RangeError", only("dict")));
    assert.throws(() => x.index(Symbol("s") as unknown as number), err("RangeError", only("symbol")));
    // TypeError: slice indices must be integers or None or have an __index__ method
    assert.throws(() => x.index({ start: 1.5 }, 0), err("TypeError", "index(): slice indices must be integers or None or have an __index__ method"));
    assert.throws(() => x.index("a:b"), err("TypeError", /^index\(\): slice start 'a' must be an integer or None/));
    assert.throws(() => x.index("@"), err("TypeError", /^index\(\): cannot parse index '@'/));
    // index takes no options: a trailing Slice object is an index (x[0, 1:])
    assert.deepEqual(await x.index(0, { start: 1 }).tolist(), await x.index(0, "1:").tolist());
    // IndexError: index 5 is out of bounds for dimension 0 with size 3 (and 10**12 alike)
    assert.throws(() => x.index(L([5])), err("RangeError", "index(): index 5 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.index(L([-4])), err("RangeError", "index(): index -4 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.index(1e12), err("RangeError", "index(): index 1000000000000 is out of bounds for dimension 0 with size 3"));
    // IndexError: tensors used as indices must be long, byte or bool tensors (float; int32 in 1.13)
    assert.throws(() => x.index(F([1])), err("RangeError", "index(): tensors used as indices must be long, byte or bool tensors"));
    assert.throws(() => x.index(I32([1])), err("RangeError", "index(): tensors used as indices must be long, byte or bool tensors"));
    // IndexError: too many indices for tensor of dimension 2
    assert.throws(() => x.index(0, 0, 0), err("RangeError", "index(): too many indices for tensor of dimension 2"));
    // ValueError: step must be greater than zero
    assert.throws(() => x.index("::-1"), err("RangeError", "index(): step must be greater than zero"));
    // a plain object that is not a Slice ({start, stop, step}) is no index
    assert.throws(() => x.index({ i1: 0 } as unknown as number), err("RangeError", /^index\(\): only integers, slices .* \(got dict\)/));
    await eq(x.index(L([-1])), [[8, 9, 10, 11]]);
    await eq(x.index([0, 2], 1), [1, 9]);
    assert.deepEqual(x.index(true).shape, [1, 3, 4]);

    // x[...] = v
    assert.throws(() => x.clone().set(L([7]), 1), err("RangeError", "set(): index 7 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => torch.setIndex(x.clone(), L([7]), 1), err("RangeError", "setIndex(): index 7 is out of bounds for dimension 0 with size 3"));
    assert.throws(() => x.clone().set([F([1])], 1), err("RangeError", "set(): tensors used as indices must be long, byte or bool tensors"));
    assert.throws(() => x.clone().set(1.5, 1), err("RangeError", only("float").replace("index()", "set()")));
    assert.throws(() => x.clone().set(0, "a" as unknown as number), err("TypeError", "set(): argument 'value' (position 2) must be Tensor, not str"));
    // RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
    assert.throws(() => torch.zeros(3, { requiresGrad: true }).set(0, 1), err("Error", "set(): a view of a leaf Variable that requires grad is being used in an in-place operation."));
    const y = x.clone();
    assert.equal(y.set(L([-1]), 0), y);
    await eq(y, [[0, 1, 2, 3], [4, 5, 6, 7], [0, 0, 0, 0]]);
    const z = x.clone();
    z.set(null, torch.zeros(1, 3, 4)); // x[None] = v
    await eq(z.sum(), 0);
  });
}

test("every calling form agrees: positional, options, mixed, method", async () => {
  const x = x34();
  const i = L([[3, 0], [1, 1], [2, 0]]);
  await sameValues([
    () => torch.gather(x, 1, i),
    () => torch.gather(x, { dim: 1, index: i }),
    () => torch.gather({ input: x, dim: 1, index: i, sparseGrad: true }),
    () => torch.gather(x, 1, { index: i }),
    () => x.gather(1, i),
    () => x.gather({ dim: 1, index: i }),
  ]);
  const src = torch.arange(6).float().reshape(3, 2);
  await sameValues([
    () => torch.scatter(x, 1, i, src),
    () => torch.scatter(x, { dim: 1, index: i, src }),
    () => torch.scatter(x, 1, { index: i, src }),
    () => x.scatter(1, i, src),
    () => x.clone().scatter_(1, i, src),
    () => x.clone().scatter_({ dim: 1, index: i, src }),
  ]);
  await sameValues([
    () => torch.scatter(x, 1, i, 2.5, { reduce: "add" }),
    () => torch.scatter(x, { dim: 1, index: i, value: 2.5, reduce: "add" }),
    () => x.scatter(1, i, { value: 2.5, reduce: "add" }),
    () => x.clone().scatter_(1, i, 2.5, { reduce: "add" }),
  ]);
  await sameValues([
    () => torch.scatterAdd(x, 1, i, src),
    () => torch.scatterAdd(x, { dim: 1, index: i, src }),
    () => torch.scatterAdd(x, 1, i, { src }),
    () => x.scatterAdd(1, i, src),
    () => x.clone().scatterAdd_(1, i, src),
    () => x.clone().scatterAdd_({ dim: 1, index: i, src }),
  ]);
  const v = L([2, 0]);
  await sameValues([
    () => torch.indexSelect(x, 0, v),
    () => torch.indexSelect(x, { dim: 0, index: v }),
    () => torch.indexSelect({ input: x, dim: 0, index: v }),
    () => x.indexSelect(0, { index: v }),
  ]);
  const s = torch.ones(2, 4);
  await sameValues([
    () => torch.indexAdd(x, 0, v, s, { alpha: 3 }),
    () => torch.indexAdd(x, { dim: 0, index: v, source: s, alpha: 3 }),
    () => torch.indexAdd(x, 0, { index: v, source: s, alpha: 3 }),
    () => x.indexAdd(0, v, s, { alpha: 3 }),
    () => x.clone().indexAdd_(0, v, s, { alpha: 3 }),
    () => x.clone().indexAdd_({ dim: 0, index: v, source: s, alpha: 3 }),
  ]);
  const vals = torch.tensor([5, 6]).float();
  await sameValues([
    () => torch.indexPut(x, [v, L([1, 3])], vals, true),
    () => torch.indexPut(x, { indices: [v, L([1, 3])], values: vals, accumulate: true }),
    () => torch.indexPut(x, [v, L([1, 3])], { values: vals, accumulate: true }),
    () => x.indexPut([v, L([1, 3])], vals, true),
    () => x.clone().indexPut_([v, L([1, 3])], vals, { accumulate: true }),
    () => torch.indexPut_(x.clone(), { indices: [v, L([1, 3])], values: vals, accumulate: true }),
  ]);
  const m = torch.tensor([true, false, false, true]);
  await sameValues([
    () => torch.maskedFill(x, m, -1),
    () => torch.maskedFill(x, { mask: m, value: -1 }),
    () => torch.maskedFill({ input: x, mask: m, value: -1 }),
    () => x.maskedFill(m, { value: -1 }),
    () => x.clone().maskedFill_(m, -1),
    () => torch.maskedFill_(x.clone(), { mask: m, value: -1 }),
  ]);
  await sameValues([() => torch.maskedSelect(x, m), () => torch.maskedSelect(x, { mask: m }), () => x.maskedSelect(m), () => x.maskedSelect({ mask: m })]);
  const t = L([[-1, 0], [5, 7]]);
  await sameValues([() => torch.take(x, t), () => torch.take(x, { index: t }), () => torch.take({ input: x, index: t }), () => x.take(t)]);
  await sameValues([
    () => torch.takeAlongDim(x, i, 1),
    () => torch.takeAlongDim(x, { indices: i, dim: 1 }),
    () => torch.takeAlongDim(x, i, { dim: 1 }),
    () => x.takeAlongDim(i, 1),
    () => x.takeAlongDim({ indices: i, dim: 1 }),
  ]);
  await sameValues([() => torch.takeAlongDim(x, L([11, 0])), () => torch.takeAlongDim(x, L([11, 0]), null), () => x.takeAlongDim(L([11, 0]), { dim: null })]);
  const b = torch.tensor([[0, 1], [2, 0]]);
  await sameValues([() => torch.nonzero(b), () => torch.nonzero({ input: b }), () => b.nonzero(), () => torch.argwhere(b), () => b.argwhere()]);
  await sameValues([() => torch.nonzero(b, { asTuple: true }), () => b.nonzero({ asTuple: true }), () => torch.nonzero({ input: b, asTuple: true })]);
  await sameValues([() => x.index(1, "1:", null), () => torch.index(x, 1, "1:", null), () => x.index(1, { start: 1 }, null), () => x.index("1, 1:, None")]);
  await sameValues([
    () => x.clone().set([":", L([0, 3])], 9),
    () => torch.setIndex(x.clone(), [":", L([0, 3])], 9),
    () => x.clone().set({ indices: [":", L([0, 3])], value: 9 }),
    () => torch.setIndex(x.clone(), [":", L([0, 3])], { value: 9 }),
  ]);
});

test("_checkIndexRange: PyTorch's gather-style and index_select-style errors; skipped where values cannot be read", () => {
  const i = L([[1, 9], [-1, 2]]);
  assert.throws(() => _checkIndexRange(i, 4, "gather", 1), err("Error", "gather(): index 9 is out of bounds for dimension 1 with size 4"));
  assert.throws(() => _checkIndexRange(i, 4, "embedding"), err("RangeError", "embedding(): index out of range in self"));
  assert.equal(_checkIndexRange(L([[1, 3], [0, 2]]), 4, "gather", 1), true);
  assert.equal(_checkIndexRange(torch.tensor([], { dtype: "int64" }), 0, "gather", 0), true);
  // a strided view and an offset view are read as views
  assert.throws(() => _checkIndexRange(i.t().index(0), 4, "gather", 1), err("Error", "gather(): index -1 is out of bounds for dimension 1 with size 4"));
  assert.equal(_checkIndexRange(i.index(1, "1:"), 4, "gather", 1), true);
  // while torch.compile traces, values are not read (the kernel checks them when the graph runs)
  traceState.fn = "f";
  try {
    assert.equal(_checkIndexRange(i, 4, "gather", 1), false);
  } finally {
    traceState.fn = null;
  }
});

test("a disposed index names the op", () => {
  const i = L([[0]]);
  i.dispose();
  assert.throws(() => x34().gather(1, i), /^TypeError: gather\(\): .*disposed/);
  assert.throws(() => x34().index(i), /^Error: index\(\): .*disposed/);
  assert.throws(() => x34().set([":", i], 0), /^Error: set\(\): .*disposed/);
});

test("the host bounds check is cheap: one pass over the values (1M ids well under 100 ms)", (t) => {
  const ids = torch.randint(0, 1000, [1 << 20]);
  _checkIndexRange(ids, 1000, "embedding"); // warm
  const t0 = performance.now();
  for (let k = 0; k < 5; k++) _checkIndexRange(ids, 1000, "embedding");
  const ms = (performance.now() - t0) / 5;
  t.diagnostic(`_checkIndexRange over 1M int64 ids: ${ms.toFixed(2)} ms`);
  assert.ok(ms < 100, `${ms} ms`);
});
