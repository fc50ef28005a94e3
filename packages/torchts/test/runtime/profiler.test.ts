// torch.profiler: kernels are recorded while a profile is active; recordShapes names single-op
// kernels with their params, input views and output, as PyTorch's record_shapes does.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";

test("profiler: recordShapes names strict kernels with their input and output views", () => {
  const a = torch.randn(3, 4), b = torch.randn(4, 5);
  torch.withEagerMode("strict", () => {
    const plain = torch.profiler.profile();
    a.matmul(b);
    plain.stop();
    assert.deepEqual(plain.keyAverages().map((r) => r.name), ["matmul"]);
    const shaped = torch.profiler.profile({ recordShapes: true });
    a.matmul(b);
    a.t().exp();
    shaped.stop();
    const names = shaped.keyAverages().map((r) => r.name).sort();
    assert.deepEqual(names, [
      "matmul {} float32[3,4]{4,1} float32[4,5]{5,1} -> float32[3,5]",
      'unary {"op":"exp"} float32[4,3]{1,4} -> float32[4,3]',
    ]);
  });
});
