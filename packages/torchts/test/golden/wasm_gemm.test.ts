// The golden op suite with OpenBLAS switched off (TORCHTS_CPU_BLAS=off), so the wasm GEMM that
// runs float32 products in the browser, and on Node without the native bridge, stays checked
// against PyTorch in every op that reaches it (matmul, linear, bmm, conv, attention, ...).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
// Without NODE_TEST_CONTEXT the child runs as its own test run instead of reporting to ours.
const childEnv: NodeJS.ProcessEnv = { ...process.env, TORCHTS_CPU_BLAS: "off" };
delete childEnv.NODE_TEST_CONTEXT;

test("golden suite passes on the wasm GEMM, OpenBLAS off (strict and fused)", { skip: process.env.TORCHTS_CPU_BACKEND === "js" }, () => {
  const r = spawnSync(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "--test", "--test-reporter=tap", "--test-name-pattern=^(strict|fused) ", "test/golden/ops.test.ts"],
    { cwd: root, env: childEnv, encoding: "utf8", maxBuffer: 1 << 26 },
  );
  const out = r.stdout + r.stderr;
  const pass = Number(/# pass (\d+)/.exec(out)?.[1] ?? 0);
  const fail = Number(/# fail (\d+)/.exec(out)?.[1] ?? -1);
  assert.equal(fail, 0, out.split("\n").filter((l) => l.startsWith("not ok")).join("\n") || out.slice(-2000));
  assert.ok(pass > 400, `expected the strict and fused golden cases to run, got ${pass} passing`);
  assert.equal(r.status, 0);
});

test("torch.backends.cpu.info() says why OpenBLAS is off", { skip: process.env.TORCHTS_CPU_BACKEND === "js" }, () => {
  const code = `import * as torch from "./src/index.ts"; console.log(JSON.stringify(torch.backends.cpu.info()));`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { cwd: root, env: childEnv, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const info = JSON.parse(r.stdout.trim().split("\n").pop()!);
  assert.equal(info.backend, "wasm");
  assert.equal(info.blas, "");
  assert.equal(info.blasReason, "TORCHTS_CPU_BLAS=off");
});
