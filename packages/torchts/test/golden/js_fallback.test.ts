// The golden op suite with the plain-JS cpu kernels forced (TORCHTS_CPU_BACKEND=js), so the
// fallback used by runtimes without wasm SIMD/threads stays correct. One mode (strict) keeps
// it cheap; the wasm path runs all three modes in ops.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { childCpuInfo, childEnv, runGoldenChild } from "./child_run.js";

const env = childEnv({ TORCHTS_CPU_BACKEND: "js" });

test("golden suite passes with the JS fallback forced (strict mode)", () => {
  const r = runGoldenChild(env, "^strict ");
  assert.equal(r.fail, 0, r.failures);
  assert.ok(r.pass > 200, `expected the strict golden cases to run, got ${r.pass} passing`);
  assert.equal(r.status, 0);
});

test("torch.backends.cpu.info() reports the forced JS backend", () => {
  const { status, stderr, info } = childCpuInfo(env);
  assert.equal(status, 0, stderr);
  assert.equal(info!.backend, "js");
  assert.equal(info!.reason, "TORCHTS_CPU_BACKEND=js");
  assert.equal(info!.threads, 1);
});
