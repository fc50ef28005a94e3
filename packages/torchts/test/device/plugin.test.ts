// A device is a plugin: registering one that wraps the cpu kernels must be enough for
// every op, and mixing devices must raise PyTorch's error.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../src/index.js";
import type { DevicePlugin, IRGraph } from "../../src/index.js";

const cpu = torch.getDevice("cpu");
let compiles = 0;
let allocs = 0;
const counting: DevicePlugin = {
  ...cpu,
  name: "counting",
  allocate(dtype, n) {
    allocs++;
    return cpu.allocate(dtype, n);
  },
  compile(g: IRGraph) {
    compiles++;
    return cpu.compile(g);
  },
};
torch.registerDevice("counting", counting);

test("ops run on a registered device through the plugin interface", async () => {
  const a = torch.tensor([[1, 2], [3, 4]], { dtype: "float32", device: "counting" });
  const b = torch.ones(2, 2, { device: "counting" });
  const c = a.matmul(b).add(1).sum(0);
  assert.equal(c.device, "counting");
  assert.deepEqual(await c.tolist(), [12, 12]); // [[1,2],[3,4]] @ ones + 1, summed over rows
  assert.ok(compiles > 0, "device compiled executables");
  assert.ok(allocs > 0, "device allocated memory");
});

test("moving between devices and mixing devices", async () => {
  const x = torch.arange(4, { dtype: "float32" });
  const y = x.to("counting");
  assert.equal(y.device, "counting");
  assert.deepEqual(await y.mul(2).tolist(), [0, 2, 4, 6]);
  assert.throws(() => x.add(y), /Expected all tensors to be on the same device, but found at least two devices, cpu and counting/);
  // gradients flow back across the device move
  const w = torch.tensor([1, 2, 3], { dtype: "float32", requiresGrad: true });
  w.to("counting").mul(3).sum().backward();
  assert.equal(w.grad!.device, "cpu");
  assert.deepEqual(await w.grad!.tolist(), [3, 3, 3]);
});

test("unknown device names raise a clear error", () => {
  assert.throws(() => torch.zeros(2, { device: "tpu" }), /registered device types \(cpu, counting\).*tpu/);
});

test("strict mode reuses one executable per (op, shape, dtype): scalars do not recompile", () => {
  torch.withEagerMode("strict", () => {
    const x = torch.ones(3, 5, { device: "counting" });
    x.mul(2);
    const before = compiles;
    for (const s of [3, 4.5, -1, 7]) x.mul(s);
    assert.equal(compiles, before);
  });
});
