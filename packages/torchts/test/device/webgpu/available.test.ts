// torch.webgpu.isAvailable() answers before init() (an awaited adapter probe that registers
// nothing), and init() throws a clear error when there is no adapter. This file does not use
// setup.ts: it needs a process where init() has not run yet.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import * as torch from "../../../src/index.js";

after(() => torch.webgpu.shutdown());

const notRegistered = /Expected one of the registered device types|webgpu/;

test("no adapter (an unknown Dawn backend): isAvailable() is false and init() throws why", async () => {
  const o = { backend: "no-such-backend" };
  assert.equal(await torch.webgpu.isAvailable(o), false);
  assert.equal(await torch.webgpu.isAvailable(o), false); // cached
  assert.match(torch.webgpu.unavailableReason(), /no-such-backend/);
  await assert.rejects(torch.webgpu.init(o), (e: Error) => {
    assert.match(e.message, /^webgpu: no WebGPU adapter is available \(.*no-such-backend.*\)\. To get one: /s);
    assert.match(e.message, /`webgpu` npm package/);
    assert.match(e.message, /TORCHTS_WEBGPU_BACKEND=opengles/);
    assert.match(e.message, /await torch\.webgpu\.isAvailable\(\)/);
    return true;
  });
  assert.equal(torch.webgpu.isInitialized(), false);
  assert.throws(() => torch.zeros(1, { device: "webgpu" }), notRegistered);
});

test("isAvailable() is truthful before init() and registers nothing; init() agrees with it", async () => {
  assert.equal(torch.webgpu.isInitialized(), false);
  const available = await torch.webgpu.isAvailable();
  if (process.env.TORCHTS_REQUIRE_WEBGPU === "1") assert.equal(available, true, torch.webgpu.unavailableReason());
  assert.equal(torch.webgpu.isInitialized(), false, "the probe creates no device");
  assert.throws(() => torch.zeros(1, { device: "webgpu" }), notRegistered);
  if (!available) {
    await assert.rejects(torch.webgpu.init(), /^Error: webgpu: no WebGPU adapter is available \(/);
    return;
  }
  assert.equal(await torch.webgpu.init(), true);
  assert.equal(torch.webgpu.isInitialized(), true);
  assert.equal(await torch.webgpu.isAvailable(), true);
  assert.deepEqual(Array.from(await torch.ones(3, { device: "webgpu" }).mul(2).data()), [2, 2, 2]);
});
