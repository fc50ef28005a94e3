// The webgpu allocator refuses bad sizes (RangeError) and sizes past the adapter
// (torch.OutOfMemoryError) before anything changes: the pool's statistics stay as they were
// and later computations are exact.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { withOp } from "../../../src/runtime/mode.js";
import { skip } from "./setup.js";

test("webgpu: bad element counts are RangeErrors, the pool unchanged", { skip }, async () => {
  await torch.webgpu.synchronize();
  const dev = torch.getDevice("webgpu");
  const { pipelines: _p, dispatches: _d, submits: _s, ...s0 } = torch.webgpu.memoryStats();
  for (const n of [NaN, -1, 2.5, Infinity])
    assert.throws(() => withOp("empty", () => dev.allocate("float32", n)), (e: Error) => {
      assert.ok(e instanceof RangeError);
      assert.match(e.message, /^empty\(\): invalid allocation size: webgpu was asked for .* elements/);
      return true;
    });
  const { pipelines: _p1, dispatches: _d1, submits: _s1, ...s1 } = torch.webgpu.memoryStats();
  assert.deepEqual(s1, s0);
  assert.equal(await torch.arange(4096, { dtype: "float32", device: "webgpu" }).mul(2).sum().item(), 4095 * 4096);
});

test("webgpu: a tensor past the adapter's largest buffer is a torch.OutOfMemoryError naming the bytes", { skip }, async () => {
  const live = torch.webgpu.memoryStats().liveBytes;
  assert.throws(() => withOp("zeros", () => torch.zeros(1e12, { device: "webgpu" })), (e: Error) => {
    assert.ok(e instanceof torch.OutOfMemoryError);
    assert.equal(e.name, "OutOfMemoryError");
    assert.match(e.message, /^zeros\(\): OutOfMemoryError: tried to allocate 4000000000000 bytes \(webgpu: the adapter's largest storage buffer/);
    return true;
  });
  assert.equal(torch.webgpu.memoryStats().liveBytes, live);
  const x = torch.tensor([1, 2, 3], { device: "webgpu" });
  assert.deepEqual(await x.mul(x).add(1).tolist(), [2, 5, 10]);
});
