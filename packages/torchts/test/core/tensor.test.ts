// Tensor basics: creation, views sharing storage, type promotion, casts, in-place ops and
// version counters. Expected values and dtypes are PyTorch 1.13's.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const f32 = { dtype: "float32" } as const;
const list = (t: torch.Tensor) => t.tolist();

test("creation: zeros/ones accept varargs or a shape array", async () => {
  for (const t of [torch.zeros(2, 3), torch.zeros([2, 3])]) {
    assert.deepEqual(t.shape, [2, 3]);
    assert.equal(t.dtype, "float32");
    assert.deepEqual(await list(t), [
      [0, 0, 0],
      [0, 0, 0],
    ]);
  }
  assert.equal(torch.zeros([2], { dtype: "int32" }).dtype, "int32");
  assert.deepEqual(await list(torch.ones(2, { dtype: "float64" })), [1, 1]);
  assert.deepEqual(torch.empty(2, 2).shape, [2, 2]);
  assert.deepEqual(torch.zeros([]).shape, []);
});

test("creation: dtype inference and defaults", async () => {
  assert.equal(torch.tensor([1, 2]).dtype, "int64");
  assert.equal(torch.tensor([1.5, 2]).dtype, "float32");
  assert.equal(torch.tensor([true, false]).dtype, "bool");
  assert.equal(torch.tensor(new Float64Array([1, 2])).dtype, "float64");
  assert.equal(torch.tensor(new Int32Array([1, 2])).dtype, "int32");
  assert.equal(torch.getDefaultDtype(), "float32");
  assert.equal(torch.full([2], 7).dtype, "int64");
  assert.equal(torch.full([2], 0.5).dtype, "float32");
  assert.equal(torch.full([2], true).dtype, "bool");
});

test("creation: arange, linspace, eye, full and *Like", async () => {
  const a = torch.arange(5);
  assert.equal(a.dtype, "int64");
  assert.deepEqual(await list(a), [0, 1, 2, 3, 4]);
  const af = torch.arange(0, 1, 0.25);
  assert.equal(af.dtype, "float32");
  assert.deepEqual(await list(af), [0, 0.25, 0.5, 0.75]);
  assert.deepEqual(await list(torch.arange(1, 4, f32)), [1, 2, 3]);
  assert.deepEqual(await list(torch.arange(10, 0, -3)), [10, 7, 4, 1]);
  assert.deepEqual(await list(torch.linspace(0, 1, 5)), [0, 0.25, 0.5, 0.75, 1]);
  assert.deepEqual(await list(torch.linspace(-1, 1, 3, { dtype: "float64" })), [-1, 0, 1]);
  assert.deepEqual(await list(torch.eye(2, 3)), [
    [1, 0, 0],
    [0, 1, 0],
  ]);
  assert.deepEqual(await list(torch.eye(2)), [
    [1, 0],
    [0, 1],
  ]);
  assert.deepEqual(await list(torch.full([2, 1], 7)), [[7], [7]]);
  const z = torch.zerosLike(torch.ones(2, { dtype: "float64" }));
  assert.equal(z.dtype, "float64");
  assert.deepEqual(await list(z), [0, 0]);
  const o = torch.onesLike(torch.arange(3));
  assert.equal(o.dtype, "int64");
  assert.deepEqual(await list(o), [1, 1, 1]);
  assert.deepEqual(await list(torch.fullLike(torch.arange(3), 4)), [4, 4, 4]);
  assert.equal(torch.zerosLike(torch.arange(3), f32).dtype, "float32");
});

test("views share storage with their base", async () => {
  const b = torch.arange(12, f32);
  const v = b.view(3, 4);
  const views: [string, torch.Tensor][] = [
    ["view", v],
    ["reshape", b.reshape(-1, 6)],
    ["permute", v.permute(1, 0)],
    ["transpose", v.transpose(0, 1)],
    ["t", v.t()],
    ["expand", v.select(0, 0).unsqueeze(0).expand(2, 4)],
    ["narrow", v.narrow(1, 1, 2)],
    ["select", v.select(0, 1)],
    ["slice", v.slice(1, 0, 4, 2)],
    ["squeeze", v.unsqueeze(0).squeeze(0)],
    ["unsqueeze", v.unsqueeze(1)],
    ["flatten", v.flatten()],
    ["unflatten", b.unflatten(0, [2, 6])],
    ["chunk", b.chunk(3)[1]!],
    ["split", b.split([5, 7])[1]!],
    ["diagonal", v.diagonal()],
  ];
  for (const [name, t] of views) assert.equal(t.storage, b.storage, `${name} should be a view`);

  assert.deepEqual(await list(v.permute(1, 0)), [
    [0, 4, 8],
    [1, 5, 9],
    [2, 6, 10],
    [3, 7, 11],
  ]);
  assert.deepEqual(v.transpose(0, 1).stride(), [1, 4]);
  assert.equal(v.t().isContiguous(), false);
  assert.deepEqual(torch.tensor([1, 2]).expand(2, 2).stride(), [0, 1]);
  assert.deepEqual(await list(v.narrow(1, 1, 2)), [
    [1, 2],
    [5, 6],
    [9, 10],
  ]);
  assert.deepEqual(await list(v.select(0, 1)), [4, 5, 6, 7]);
  assert.deepEqual(await list(v.slice(1, 0, 4, 2)), [
    [0, 2],
    [4, 6],
    [8, 10],
  ]);
  assert.deepEqual(await list(v.diagonal()), [0, 5, 10]);
  assert.deepEqual(v.narrow(1, 1, 2).storageOffset(), 1);
  assert.deepEqual(torch.zeros(1, 2, 1).squeeze().shape, [2]);
  assert.deepEqual(torch.zeros(2, 3, 4).flatten(1).shape, [2, 12]);
  assert.deepEqual(torch.zeros(2, 12).unflatten(1, [3, 4]).shape, [2, 3, 4]);
  assert.deepEqual(
    b.chunk(3).map((c) => c.shape),
    [[4], [4], [4]],
  );
  assert.deepEqual(await list(b.split([5, 7])[1]!.narrow(0, 0, 2)), [5, 6]);
});

test("writes through a view are visible in the base", async () => {
  const base = torch.zeros(3, 4);
  base.select(0, 1).fill_(5);
  base.t().narrow(0, 2, 1).add_(1);
  assert.deepEqual(await list(base), [
    [0, 0, 1, 0],
    [5, 5, 6, 5],
    [0, 0, 1, 0],
  ]);
  assert.equal(base._version, 2);
  const flat = base.view(12);
  flat.narrow(0, 0, 1).fill_(-1);
  assert.deepEqual(await list(base.select(0, 0)), [-1, 0, 1, 0]);
});

test("contiguous copies only when needed", async () => {
  const v = torch.arange(6, f32).view(2, 3);
  assert.equal(v.contiguous(), v);
  const tt = v.t().contiguous();
  assert.equal(tt.isContiguous(), true);
  assert.notEqual(tt.storage, v.storage);
  assert.deepEqual(tt.stride(), [2, 1]);
  assert.deepEqual(await list(tt), [
    [0, 3],
    [1, 4],
    [2, 5],
  ]);
});

test("type promotion matches PyTorch", () => {
  const i32 = torch.tensor([1], { dtype: "int32" });
  const cases: [string, torch.Tensor, string][] = [
    ["int32 + int64", i32.add(torch.tensor([1])), "int64"],
    ["int32 + float scalar", i32.add(2.5), "float32"],
    ["int32 + int scalar", i32.add(2), "int32"],
    ["int32 / int scalar", i32.div(2), "float32"],
    ["bool * float", torch.tensor([true]).mul(torch.tensor([1.5])), "float32"],
    ["bool + int scalar", torch.tensor([true]).add(1), "int64"],
    ["bool + bool", torch.tensor([true]).add(torch.tensor([true])), "bool"],
    // PyTorch gives int16 here; torchts has no int16 and promotes to the next signed type.
    ["uint8 + int8", torch.tensor([1], { dtype: "uint8" }).add(torch.tensor([1], { dtype: "int8" })), "int32"],
    ["int32 + 0-dim int64", i32.add(torch.tensor(5)), "int32"],
    ["int32 + 0-dim float64", i32.add(torch.tensor(2.5, { dtype: "float64" })), "float64"],
    [
      "float16 + 0-dim float64",
      torch.tensor([1], { dtype: "float16" }).add(torch.tensor(1, { dtype: "float64" })),
      "float16",
    ],
    ["0-dim int32 + 0-dim int64", torch.tensor(1, { dtype: "int32" }).add(torch.tensor(1)), "int64"],
    ["float32 + float64", torch.ones(1).add(torch.ones(1, { dtype: "float64" })), "float64"],
  ];
  for (const [name, t, dt] of cases) assert.equal(t.dtype, dt, name);
  assert.equal(torch.promoteTypes("int32", "float16"), "float16");
  assert.equal(torch.promoteTypes("float16", "bfloat16"), "float32");
  assert.equal(torch.promoteTypes("bool", "int8"), "int8");
});

test("casts: .to, .float, .long, .half, .bfloat16", async () => {
  const v = torch.arange(4, f32).view(2, 2);
  assert.equal(v.to("float64").dtype, "float64");
  const i = v.to({ dtype: "int32" });
  assert.equal(i.dtype, "int32");
  assert.deepEqual(await list(i), [
    [0, 1],
    [2, 3],
  ]);
  assert.equal(v.to("cpu").device, "cpu");
  assert.deepEqual(await list(torch.tensor([1.7, -1.7, 2.5]).long()), [1, -1, 2]); // truncation toward zero
  assert.equal(torch.tensor([1, 2]).float().dtype, "float32");
  // float16/bfloat16 are stored rounded: 1.0001 is not representable in either.
  const h = torch.tensor([1.0001, 65504, 70000]).half();
  assert.equal(h.dtype, "float16");
  assert.deepEqual(await list(h), [1, 65504, Infinity]);
  assert.deepEqual(await list(torch.tensor([1.0001, 3.14159]).bfloat16()), [1, 3.140625]);
  assert.deepEqual(await list(torch.tensor([0.1], { dtype: "float16" })), [0.0999755859375]);
  // int64 is stored as float64: exact to 2^53.
  assert.deepEqual(await list(torch.tensor([2 ** 53 - 1]).add(0)), [2 ** 53 - 1]);
  assert.deepEqual(await list(torch.tensor([true, false]).float()), [1, 0]);
  assert.deepEqual(await list(torch.tensor([0, 2, -1]).bool()), [false, true, true]);
});

test("in-place ops return self and bump the version counter shared by views", async () => {
  const x = torch.ones(2, 2);
  const v = x.select(0, 0);
  assert.equal(x._version, 0);
  const r = x.add_(1);
  assert.equal(r, x);
  assert.equal(x._version, 1);
  assert.equal(v._version, 1);
  x.mul_(3).sub_(torch.tensor([1, 2], f32));
  assert.equal(x._version, 3);
  assert.deepEqual(await list(x), [
    [5, 4],
    [5, 4],
  ]);
  v.zero_();
  assert.equal(x._version, 4);
  assert.deepEqual(await list(x), [
    [0, 0],
    [5, 4],
  ]);
  const y = torch.tensor([1, 2, 3], f32);
  y.copy_(torch.tensor([7, 8, 9]));
  assert.deepEqual(await list(y), [7, 8, 9]);
  assert.equal(y.dtype, "float32");
  y.clamp_(7.5, 8.5);
  assert.deepEqual(await list(y), [7.5, 8, 8.5]);
});

test("metadata: size, stride, dim, numel, item", async () => {
  const t = torch.zeros(2, 3, 4);
  assert.deepEqual(t.size(), [2, 3, 4]);
  assert.equal(t.size(-1), 4);
  assert.deepEqual(t.stride(), [12, 4, 1]);
  assert.equal(t.dim(), 3);
  assert.equal(t.ndim, 3);
  assert.equal(t.numel(), 24);
  assert.equal(await torch.tensor([[2.5]]).item(), 2.5);
});
