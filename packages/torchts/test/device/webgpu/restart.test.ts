// torch.webgpu.shutdown() then init() again: a fresh device, and nothing cached from the old one
// (the number constants of ops are cached per device) is used on it.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";
import { skip } from "./setup.js";

test("after shutdown() and init() again, ops with number operands run on the new device", { skip }, async () => {
  const x = torch.arange(4, { dtype: "float32" });
  assert.deepEqual(Array.from(await x.to("webgpu").mul(3).add(0.5).data()), [0.5, 3.5, 6.5, 9.5]);
  torch.webgpu.shutdown();
  assert.equal(torch.webgpu.isInitialized(), false);
  assert.equal(await torch.webgpu.isAvailable(), true); // the adapter is still there
  assert.equal(await torch.webgpu.init(), true, torch.webgpu.unavailableReason());
  assert.deepEqual(Array.from(await x.to("webgpu").mul(3).add(0.5).data()), [0.5, 3.5, 6.5, 9.5]);
});
