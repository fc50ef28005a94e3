// Boolean-mask indexing of webgpu tensors: a webgpu mask raises an error that names the op, says
// why (the number of true elements must be read on the host; webgpu reads are async) and gives
// the workaround; a cpu mask (or cpu int index) indexes a webgpu tensor, as in PyTorch.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { skip } from "./setup.js";

const why = (op: string) => ({
  message: new RegExp(`^${op}: a boolean mask on webgpu needs its number of true \\(nonzero\\) elements on the host, since they size the result, and webgpu tensors cannot be read synchronously\\. Pass the mask on the cpu instead, e\\.g\\. x\\.index\\(await mask\\.cpuAsync\\(\\)\\)`),
});

test("a webgpu boolean mask raises a clear error naming the op and the workaround", { skip }, () => {
  const x = torch.tensor([[1, -2, 3], [-4, 5, -6]], { dtype: "float32" }).to("webgpu");
  const m = x.gt(0); // a webgpu mask, same device as x
  assert.equal(m.device, "webgpu");
  assert.throws(() => x.index(m), why("index"));
  assert.throws(() => x.maskedSelect(m), why("maskedSelect"));
  assert.throws(() => x.set(m, 0), why("set"));
  assert.throws(() => x.index(torch.tensor(true).to("webgpu")), why("index"));
  assert.throws(() => torch.nonzero(m), /^Error: nonzero: the input on webgpu needs its number of true \(nonzero\) elements on the host.*torch\.nonzero\(await t\.cpuAsync\(\)\)/);
  assert.throws(() => torch.argwhere(m), /^Error: argwhere: the input on webgpu .*torch\.argwhere\(await t\.cpuAsync\(\)\)/);
  // masked_fill / where need no count: they run on the device
  assert.doesNotThrow(() => x.maskedFill(m, 0));
});

test("the workaround: a cpu mask indexes a webgpu tensor (index, maskedSelect, set, gradients)", { skip }, async () => {
  const data = [[1, -2, 3], [-4, 5, -6]];
  const xc = torch.tensor(data, { dtype: "float32" });
  const x = xc.to("webgpu");
  const m = await x.gt(0).cpuAsync();
  assert.equal(m.device, "cpu");

  const r = x.index(m);
  assert.equal(r.device, "webgpu");
  assert.deepEqual(await r.tolist(), [1, 3, 5]);
  assert.deepEqual(await x.index(":", m.index(0)).tolist(), [[1, 3], [-4, -6]]); // a mask over one dim
  assert.deepEqual(await x.maskedSelect(m).tolist(), [1, 3, 5]);
  assert.deepEqual(await x.maskedSelect(torch.tensor([true, false, true])).tolist(), [1, 3, -4, -6]); // broadcast
  assert.deepEqual(await x.index([true, false]).tolist(), [[1, -2, 3]]); // a list index (made on the cpu)

  const y = x.clone();
  y.set(m, 0);
  assert.deepEqual(await y.tolist(), [[0, -2, 0], [-4, 0, -6]]);

  const w = torch.tensor(data, { dtype: "float32", device: "webgpu", requiresGrad: true });
  w.index(m).mul(2).sum().backward();
  assert.deepEqual(await w.grad!.tolist(), [[2, 0, 2], [0, 2, 0]]);
});

test("a cpu int index tensor indexes a webgpu tensor, bounds-checked on the host", { skip }, async () => {
  const x = torch.tensor([10, 20, 30, 40], { dtype: "float32" }).to("webgpu");
  assert.deepEqual(await x.index(torch.tensor([0, -1, 2])).tolist(), [10, 40, 30]);
  assert.throws(() => x.index(torch.tensor([9])), /^RangeError: index\(\): index 9 is out of bounds for dimension 0 with size 4/);
});
