// String(t) must equal PyTorch's repr(t). Expected strings were produced by PyTorch 1.13.
// JS has no 1.0 vs 1 literal distinction, so float tensors with integral values pass a dtype.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

const f32 = { dtype: "float32" } as const;

const cases: [string, () => torch.Tensor, string][] = [
  ["floats", () => torch.tensor([1.5, 2.0, -3.25]), "tensor([ 1.5000,  2.0000, -3.2500])"],
  [
    "integral floats",
    () =>
      torch.tensor(
        [
          [1, 2],
          [3, 4],
        ],
        f32,
      ),
    "tensor([[1., 2.],\n        [3., 4.]])",
  ],
  [
    "int64",
    () =>
      torch.tensor([
        [1, 2],
        [3, 4],
      ]),
    "tensor([[1, 2],\n        [3, 4]])",
  ],
  ["int32 suffix", () => torch.tensor([1, 2], { dtype: "int32" }), "tensor([1, 2], dtype=torch.int32)"],
  ["bool", () => torch.tensor([true, false]), "tensor([ True, False])"],
  ["0-dim", () => torch.tensor(3.5), "tensor(3.5000)"],
  [
    "float64 suffix",
    () => torch.tensor([0.5, 1.0], { dtype: "float64" }),
    "tensor([0.5000, 1.0000], dtype=torch.float64)",
  ],
  ["float16 suffix", () => torch.tensor([1, 2], { dtype: "float16" }), "tensor([1., 2.], dtype=torch.float16)"],
  ["requires_grad", () => torch.tensor([1, 2], { ...f32, requiresGrad: true }), "tensor([1., 2.], requires_grad=True)"],
  [
    "grad_fn",
    () => torch.tensor([1, 2], { ...f32, requiresGrad: true }).mul(2),
    "tensor([2., 4.], grad_fn=<MulBackward0>)",
  ],
  [
    "0-dim grad_fn",
    () => torch.tensor([1, 2], { ...f32, requiresGrad: true }).sum(),
    "tensor(3., grad_fn=<SumBackward0>)",
  ],
  ["scientific", () => torch.tensor([1e-5, 1.0, 1000.0]), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+03])"],
  ["scientific large", () => torch.tensor([1e9, 1], f32), "tensor([1.0000e+09, 1.0000e+00])"],
  ["mixed widths", () => torch.tensor([0.1234567, 10.5]), "tensor([ 0.1235, 10.5000])"],
  ["nan/inf do not set the width", () => torch.tensor([1, NaN, Infinity], f32), "tensor([1., nan, inf])"],
  ["nan padded", () => torch.tensor([NaN, 1.5]), "tensor([   nan, 1.5000])"],
  ["all zero", () => torch.zeros(2), "tensor([0., 0.])"],
  ["negative zero", () => torch.tensor([-0, 100], f32), "tensor([ -0., 100.])"],
  ["empty 2-d", () => torch.zeros(2, 0), "tensor([], size=(2, 0))"],
  [
    "3-d",
    () => torch.arange(1, 9, f32).reshape(2, 2, 2),
    "tensor([[[1., 2.],\n         [3., 4.]],\n\n        [[5., 6.],\n         [7., 8.]]])",
  ],
  [
    "non-contiguous view",
    () => torch.arange(6).reshape(2, 3).t(),
    "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])",
  ],
];

for (const [name, make, expected] of cases) {
  test(`printing: ${name}`, () => {
    assert.equal(String(make()), expected);
  });
}

test("printing: summarizes tensors over 1000 elements like PyTorch", () => {
  // repr(torch.arange(2000))
  assert.equal(String(torch.arange(2000)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
});

test("printing: flushes pending fused-mode work", () => {
  const s = torch.withEagerMode("fused", () => String(torch.tensor([1, 2], f32).add(1)));
  assert.equal(s, "tensor([2., 3.])");
});
