// The golden op suite with OpenBLAS switched off (TORCHTS_CPU_BLAS=off), so the wasm GEMM that
// runs float32 products in the browser, and on Node without the native bridge, stays checked
// against PyTorch in every op that reaches it (matmul, linear, bmm, conv, attention, ...).
import { test } from "node:test";
import assert from "node:assert/strict";
import { childCpuInfo, childEnv, runGoldenChild } from "./child_run.js";

const env = childEnv({ TORCHTS_CPU_BLAS: "off" });
const skip = process.env.TORCHTS_CPU_BACKEND === "js";

test("golden suite passes on the wasm GEMM, OpenBLAS off (strict and fused)", { skip }, () => {
  const r = runGoldenChild(env, "^(strict|fused) ");
  assert.equal(r.fail, 0, r.failures);
  assert.ok(r.pass > 400, `expected the strict and fused golden cases to run, got ${r.pass} passing`);
  assert.equal(r.status, 0);
});

test("torch.backends.cpu.info() says why OpenBLAS is off", { skip }, () => {
  const { status, stderr, info } = childCpuInfo(env);
  assert.equal(status, 0, stderr);
  assert.equal(info!.backend, "wasm");
  assert.equal(info!.blas, "");
  assert.equal(info!.blasReason, "TORCHTS_CPU_BLAS=off");
});
