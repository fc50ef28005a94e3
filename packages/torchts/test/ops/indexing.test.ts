// Indexing ops against values computed with PyTorch 1.13 (the expected literals below).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { Tensor } from "../../src/index.js";

const MODES = ["debug", "strict", "fused"] as const;
const x24 = () => torch.arange(24).float().reshape(2, 3, 4);
const x12 = (grad = false) => torch.arange(12).float().reshape(3, 4).requiresGrad_(grad);
const w12 = () => torch.arange(12).float().reshape(3, 4);
const T = (d: torch.NestedArray, dtype?: torch.DType) => torch.tensor(d, dtype ? { dtype } : {});
async function eq(t: Tensor | null, want: unknown): Promise<void> {
  assert.ok(t, "tensor is null");
  assert.deepEqual(await t.tolist(), want);
}
/** sum(y * w).backward() */
function backwardWeighted(y: Tensor, w: Tensor): void {
  y.mul(w).sum().backward();
}

for (const mode of MODES) {
  const mt = (name: string, fn: () => Promise<void>) => test(`${mode}: ${name}`, () => torch.withEagerMode(mode, fn));

  mt("basic indexing: ints, slices, None, ellipsis, comma strings and Slice objects", async () => {
    const x = x24();
    await eq(x.index(1, "1:", "::2"), [[16, 18], [20, 22]]);
    await eq(x.index("1, 1:, ::2"), [[16, 18], [20, 22]]);
    await eq(x.index(1, { start: 1 }, "::2"), [[16, 18], [20, 22]]); // a Slice object (not last: a trailing object is the options)
    await eq(x.index(1, { start: null, stop: null, step: 2 }, ":"), [[12, 13, 14, 15], [20, 21, 22, 23]]);
    await eq(x.index(-1, "-2:", "1:7:2"), [[17, 19], [21, 23]]);
    assert.deepEqual(x.index("..., None, 1:3").shape, [2, 3, 1, 2]);
    assert.deepEqual(x.index("...", null, "1:3").shape, [2, 3, 1, 2]);
    assert.deepEqual(x.index().shape, [2, 3, 4]);
    assert.deepEqual(x.index("1,").shape, [3, 4]);
    assert.deepEqual(x.index(":", ":", ":", null).shape, [2, 3, 4, 1]);
  });

  mt("basic indexing returns views: writes through them are visible in the base", async () => {
    const x = x24();
    const v = x.index(1, "1:", "::2");
    assert.equal(v._storage, x._storage);
    v.fill_(-1);
    await eq(x.index(1), [[12, 13, 14, 15], [-1, 17, -1, 19], [-1, 21, -1, 23]]);
    const row = x.index(0, 2);
    x.set([0, 2, "1:3"], 100); // and writes to the base are visible in the view
    await eq(row, [8, 100, 100, 11]);
    const whole = x.index("...");
    assert.notEqual(whole, x);
    assert.equal(whole._storage, x._storage);
  });

  mt("advanced indexing: placement of the index dims (PyTorch's rule)", async () => {
    const x = x24();
    await eq(x.index(0, ":", T([0, 1, 1, 3, 2])), [[0, 1, 1, 3, 2], [4, 5, 5, 7, 6], [8, 9, 9, 11, 10]]);
    await eq(x.index(T([1, 0]), ":", T([3, 1])), [[15, 19, 23], [1, 5, 9]]); // separated by a slice -> front
    await eq(x.index(":", T([2, 0]), T([1, 3])), [[9, 3], [21, 15]]); // adjacent -> in place
    await eq(x.index(null, T([1, 0]), null, T([0, 2])), [[[[12, 13, 14, 15]]], [[[8, 9, 10, 11]]]]);
    await eq(x.index([1, 0, 1], 2), [[20, 21, 22, 23], [8, 9, 10, 11], [20, 21, 22, 23]]);
    await eq(x.index(T([-1]), T([-3])), [[12, 13, 14, 15]]);
    const i = T([0, 2, 1]);
    await eq(x.index(1, i.index(":", null), T([0, 3]).index(null, ":")), [[12, 15], [20, 23], [16, 19]]);
    assert.notEqual(x.index(T([0]))._storage, x._storage); // advanced indexing copies
  });

  mt("boolean masks", async () => {
    const x = x24();
    await eq(x.index(":", x.index(0).gt(5)), [[6, 7, 8, 9, 10, 11], [18, 19, 20, 21, 22, 23]]);
    await eq(x.index(T([true, false])), [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]]);
    await eq(x.index(x.gt(20)), [21, 22, 23]);
    assert.deepEqual(x.index(true).shape, [1, 2, 3, 4]);
    assert.deepEqual(x.index(false).shape, [0, 2, 3, 4]);
  });

  mt("gradients through advanced indexing (duplicates accumulate) and masks", async () => {
    const x = x12(true);
    const y = x.index(T([[0], [2]]), T([1, 1, -1]));
    await eq(y, [[1, 1, 3], [9, 9, 11]]);
    backwardWeighted(y, T([[1, 2, 3], [4, 5, 6]]));
    await eq(x.grad, [[0, 3, 0, 3], [0, 0, 0, 0], [0, 9, 0, 6]]);
    x.grad = null;
    const m = T([[true, false, true, false], [false, false, false, false], [true, true, false, true]]);
    backwardWeighted(x.index(m), torch.arange(5).float());
    await eq(x.grad, [[0, 0, 1, 0], [0, 0, 0, 0], [2, 3, 0, 4]]);
  });

  mt("set: basic, advanced, masks, broadcasting and casting", async () => {
    let b = x12();
    b.set(b.gt(6), 0);
    await eq(b, [[0, 1, 2, 3], [4, 5, 6, 0], [0, 0, 0, 0]]);
    b = x12();
    b.set([":", T([0, 3])], T([[-1], [-2], [-3]]));
    await eq(b, [[-1, 1, 2, -1], [-2, 5, 6, -2], [-3, 9, 10, -3]]);
    b = x12();
    b.set(0, T([[5, 6, 7, 8]]));
    await eq(b, [[5, 6, 7, 8], [4, 5, 6, 7], [8, 9, 10, 11]]);
    const bi = torch.arange(12).reshape(3, 4);
    bi.set("1, ::2", 2.7);
    await eq(bi, [[0, 1, 2, 3], [2, 5, 2, 7], [8, 9, 10, 11]]);
    const c = torch.zeros(3, 4);
    c.set([[[0, 2]], T([3, 0])], T([7, 8]).float()); // [[0, 2]] is the list index [0, 2]
    await eq(c, [[0, 0, 0, 7], [0, 0, 0, 0], [8, 0, 0, 0]]);
  });

  mt("set on non-leaf tensors rebases autograd (like setitem)", async () => {
    const x = x12(true);
    const z = x.mul(2);
    z.set([T([0, 2]), "1:3"], T([10, 20]).float());
    await eq(z, [[0, 10, 20, 6], [8, 10, 12, 14], [16, 10, 20, 22]]);
    backwardWeighted(z, w12());
    await eq(x.grad, [[0, 0, 0, 6], [8, 10, 12, 14], [16, 0, 0, 22]]);
    x.grad = null;
    const z2 = x.mul(1);
    z2.set(1, 7);
    z2.index(":", 0).add_(1);
    await eq(z2, [[1, 1, 2, 3], [8, 7, 7, 7], [9, 9, 10, 11]]);
    z2.mul(z2).sum().backward();
    await eq(x.grad, [[2, 2, 4, 6], [0, 0, 0, 0], [18, 18, 20, 22]]);
    assert.throws(() => x.set(0, 1), /leaf Variable that requires grad/);
  });

  mt("maskedFill (+ gradient to x and to a 0-dim value) and maskedFill_", async () => {
    const x = x12(true);
    const m = T([[true, false, true, false], [false, false, false, false], [true, true, false, true]]);
    const y = x.maskedFill(m, -2.5);
    await eq(y, [[-2.5, 1, -2.5, 3], [4, 5, 6, 7], [-2.5, -2.5, 10, -2.5]]);
    backwardWeighted(y, w12());
    await eq(x.grad, [[0, 1, 0, 3], [4, 5, 6, 7], [0, 0, 10, 0]]);
    const val = T(3).float().requiresGrad_();
    backwardWeighted(torch.maskedFill(x, m, val), w12());
    assert.equal(await val.grad!.item(), 30);
    const mf = torch.arange(6).float().reshape(2, 3);
    const ver = mf._version;
    assert.equal(mf.maskedFill_(T([false, true, true]), -1), mf);
    assert.ok(mf._version > ver);
    await eq(mf, [[0, -1, -1], [3, -1, -1]]);
    await eq(torch.arange(6).reshape(2, 3).maskedFill(T([[true], [false]]), 2.9), [[2, 2, 2], [3, 4, 5]]);
  });

  mt("indexPut / indexPut_ (accumulate, bool, gradients)", async () => {
    const x = x12(true);
    const v = T([[1, 2, 3, 4], [5, 6, 7, 8]]).float().requiresGrad_();
    const y = x.indexPut([T([2, 0])], v);
    await eq(y, [[5, 6, 7, 8], [4, 5, 6, 7], [1, 2, 3, 4]]);
    backwardWeighted(y, w12());
    await eq(x.grad, [[0, 0, 0, 0], [4, 5, 6, 7], [0, 0, 0, 0]]);
    await eq(v.grad, [[8, 9, 10, 11], [0, 1, 2, 3]]);
    const a = torch.zeros(3, 4);
    await eq(torch.indexPut(a, [T([0, 0, 2]), T([1, 1, 3])], T([1, 2, 3]).float(), { accumulate: true }), [[0, 3, 0, 0], [0, 0, 0, 0], [0, 0, 0, 3]]);
    const m = T([[true, false, true, false], [false, false, false, false], [true, true, false, true]]);
    await eq(a.indexPut([m], T(9).float()), [[9, 0, 9, 0], [0, 0, 0, 0], [9, 9, 0, 9]]);
    a.indexPut_([torch.arange(3), T([1])], T(4).float(), { accumulate: true }); // PyTorch: indices are Tensors, not None
    await eq(a, [[0, 4, 0, 0], [0, 4, 0, 0], [0, 4, 0, 0]]);
  });

  mt("nonzero, argwhere, maskedSelect", async () => {
    const n = T([[0, 1.5, 0], [2, 0, NaN]]);
    await eq(torch.nonzero(n), [[0, 1], [1, 0], [1, 2]]);
    assert.equal(torch.nonzero(n).dtype, "int64");
    const tup = n.nonzero({ asTuple: true });
    await eq(tup[0]!, [0, 1, 1]);
    await eq(tup[1]!, [1, 0, 2]);
    await eq(torch.argwhere(n), [[0, 1], [1, 0], [1, 2]]);
    assert.deepEqual(torch.nonzero(torch.zeros(2, 2)).shape, [0, 2]);
    const src = torch.arange(6).float().reshape(2, 3).requiresGrad_();
    const sel = torch.maskedSelect(src, T([true, false, true]));
    await eq(sel, [0, 2, 3, 5]);
    sel.sum().backward();
    await eq(src.grad, [[1, 0, 1], [1, 0, 1]]);
  });

  mt("indexSelect, gather, scatter, scatterAdd, indexAdd", async () => {
    const s = x12();
    await eq(torch.indexSelect(s, 1, T([3, 0, 3])), [[3, 0, 3], [7, 4, 7], [11, 8, 11]]);
    await eq(s.gather(1, T([[3, 0], [1, 1], [2, 0]])), [[3, 0], [5, 5], [10, 8]]);
    await eq(torch.gather(s, 0, T([[2, 0, 1]])), [[8, 1, 6]]);
    await eq(torch.zeros(3, 4).scatter(1, T([[1, 3], [0, 2]]), T([[1, 2, 9], [3, 4, 9]]).float()), [[0, 1, 0, 2], [3, 0, 4, 0], [0, 0, 0, 0]]);
    await eq(torch.scatter(torch.zeros(3, 4), 0, T([[2, 0, 1, 2]]), 5), [[0, 5, 0, 0], [0, 0, 5, 0], [5, 0, 0, 5]]);
    const idx = T([[2, 0, 1, 2], [2, 2, 2, 2]]);
    await eq(torch.ones(3, 4).scatter(0, idx, T([[1, 2, 3, 4], [5, 6, 7, 8]]).float(), { reduce: "add" }), [[1, 3, 1, 1], [1, 1, 4, 1], [7, 7, 8, 13]]);
    await eq(torch.full([3, 4], 2).float().scatter(0, idx, T([[1, -2, 3, 4], [5, 6, 0, 8]]).float(), { reduce: "multiply" }), [[2, -4, 2, 2], [2, 2, 6, 2], [10, 12, 0, 64]]);
    await eq(torch.zeros([2, 3], { dtype: "int64" }).scatter(1, T([[2], [0]]), T([[7], [8]])), [[0, 0, 7], [8, 0, 0]]);
    await eq(torch.ones(4, 2).indexAdd(0, T([3, 0, 3]), T([[1, 2], [3, 4], [5, 6]]).float(), { alpha: 2 }), [[7, 9], [1, 1], [1, 1], [13, 17]]);
    const sa = torch.zeros(2, 3);
    sa.scatterAdd_(1, T([[0, 0], [2, 1]]), T([[1, 2], [3, 4]]).float());
    await eq(sa, [[3, 0, 0], [0, 4, 3]]);
  });

  mt("gradients of scatter, indexAdd and take", async () => {
    const x = torch.arange(6).float().reshape(2, 3).requiresGrad_();
    const src = T([[1, 2], [3, 4]]).float().requiresGrad_();
    const w = torch.arange(6).float().reshape(2, 3);
    const y = x.scatter(1, T([[2, 0], [1, 2]]), src);
    await eq(y, [[2, 1, 1], [3, 3, 4]]);
    backwardWeighted(y, w);
    await eq(x.grad, [[0, 1, 0], [3, 0, 0]]);
    await eq(src.grad, [[2, 0], [4, 5]]);
    x.grad = null;
    src.grad = null;
    backwardWeighted(x.indexAdd(1, T([2, 2]), src), w);
    await eq(x.grad, [[0, 1, 2], [3, 4, 5]]);
    await eq(src.grad, [[2, 2], [5, 5]]);
    x.grad = null;
    const t = torch.take(x, T([[5, -1], [0, 2]]));
    await eq(t, [[5, 5], [0, 2]]);
    backwardWeighted(t, T([[1, 2], [3, 4]]).float());
    await eq(x.grad, [[3, 0, 4], [0, 0, 3]]);
  });

  mt("takeAlongDim", async () => {
    const s = x12();
    await eq(torch.takeAlongDim(s, T([[0], [3], [1]]), 1), [[0], [7], [9]]);
    await eq(s.takeAlongDim(T([[2, 0, 1, 0]]), 0), [[8, 1, 6, 3]]);
    await eq(torch.takeAlongDim(torch.arange(4).float().reshape(1, 4), T([[0], [3]]), 1), [[0], [3]]);
    await eq(torch.takeAlongDim(s, T([11, 0, 5])), [11, 0, 5]);
  });
}

test("errors name the op, the index and the size (PyTorch messages)", () => {
  const x = x24();
  assert.throws(() => x.index(5), { name: "RangeError", message: "index(): index 5 is out of bounds for dimension 0 with size 2" });
  assert.throws(() => x.index(-3), /index -3 is out of bounds for dimension 0 with size 2/);
  assert.throws(() => x.index(0, 0, 0, 0), /too many indices for tensor of dimension 3/);
  assert.throws(() => x.index("...", "..."), /an index can only have a single ellipsis/);
  assert.throws(() => x.index("::0"), /slice step cannot be zero/);
  assert.throws(() => x.index("::-1"), /step must be greater than zero/);
  assert.throws(() => x.index(1.5), { name: "RangeError", message: /only integers, slices .* are valid indices \(got float\)/ }); // IndexError
  assert.throws(() => x.index("a:b"), TypeError);
  assert.throws(() => torch.tensor(3).index(0), /invalid index of a 0-dim tensor/);
  assert.throws(() => x.index(T([0]), T([7])), /index 7 is out of bounds for dimension 1 with size 3/);
  assert.throws(() => x.index(":", ":", T([7])), /index 7 is out of bounds for dimension 0 with size 4/);
  assert.throws(() => x.index(T([-6])), /index -6 is out of bounds for dimension 0 with size 2/);
  assert.throws(() => x.index(T([true, false, true])), /The shape of the mask \[3\] at index 0 does not match the shape of the indexed tensor \[2, 3, 4\] at index 0/);
  assert.throws(() => x.index(T([1.5])), /tensors used as indices must be long, byte or bool tensors/);
  assert.throws(() => x.index(T([0, 1]), T([0, 1, 2])), /shape mismatch: indexing tensors could not be broadcast together with shapes \[2\], \[3\]/);
  assert.throws(() => torch.indexSelect(x, 0, T([5])), /index out of range in self/);
  assert.throws(() => torch.indexSelect(x, 0, T([-1])), /index out of range in self/);
  assert.throws(() => torch.indexSelect(x, 0, T([[1]])), /indexSelect\(\): Index is supposed to be a vector/);
  assert.throws(() => torch.take(x, T([100])), /out of range: tried to access index 100 on a tensor of 24 elements\./);
  assert.throws(() => x.gather(1, T([[5]])), /Index tensor must have the same number of dimensions as input tensor/);
  assert.throws(() => x.gather(1, T([[[0]]], "int32")), /gather\(\): Expected dtype int64 for index/);
  assert.throws(() => x.gather(1, torch.zeros([3, 3, 3], { dtype: "int64" })), /Size does not match at dimension 0 expected index \[3, 3, 3\] to be smaller than self \[2, 3, 4\] apart from dimension 1/);
  assert.throws(() => x.scatterAdd(0, torch.zeros([3, 3, 3], { dtype: "int64" }), x), /Expected index \[3, 3, 3\] to be smaller than self \[2, 3, 4\] apart from dimension 0 and to be smaller size than src \[2, 3, 4\]/);
  assert.throws(() => x.scatterAdd(0, torch.zeros([1, 1, 1], { dtype: "int64" }), x.double()), /scatterAdd\(\): Expected self.dtype to be equal to src.dtype/);
  assert.throws(() => x.maskedFill(T([true, false, true, true]), T([1]).float()), /masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension\(s\)\./);
  assert.throws(() => x.maskedFill(T([1, 0, 1, 1]), 1), /masked_fill_ only supports boolean masks/);
  assert.throws(() => x.clone().maskedFill_(torch.ones([3, 2, 3, 4], { dtype: "bool" }), 1), /output with shape \[2, 3, 4\] doesn't match the broadcast shape \[3, 2, 3, 4\]/);
  assert.throws(() => torch.indexPut(x, [T([5])], T(1).float()), /index 5 is out of bounds for dimension 0 with size 2/);
  assert.throws(() => torch.indexPut(torch.arange(3), [T([1])], T([1.5])), /Index put requires the source and destination dtypes match, got Long for the destination and Float for the source\./);
  assert.throws(() => x.indexAdd(0, T([0]), x.index(":1").long()), /indexAdd\(\): self \(Float\) and source \(Long\) must have the same scalar type/);
  assert.throws(() => x.indexAdd(0, T([5]), x.index(":1")), /index out of range in self/);
  assert.throws(() => x.set(T([0, 1]), T([1, 2, 3]).float()), /shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[2, 3, 4\]/);
});

test("gather/scatter index errors from the kernel name the op, the index and the size", async () => {
  await torch.withEagerMode("debug", async () => {
    const x = x12();
    await assert.rejects(async () => x.gather(1, T([[5]])).tolist(), /gather\(\): index 5 is out of bounds for dimension 1 with size 4/);
    await assert.rejects(async () => x.scatterAdd(0, T([[3]]), T([[1]]).float()).tolist(), /index 3 is out of bounds for dimension 0 with size 3/);
  });
});
