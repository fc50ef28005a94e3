// The golden op suite with the plain-JS cpu kernels forced (TORCHTS_CPU_BACKEND=js), so the
// fallback used by runtimes without wasm SIMD/threads stays correct. One mode (strict) keeps
// it cheap; the wasm path runs all three modes in ops.test.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
// Without NODE_TEST_CONTEXT the child runs as its own test run instead of reporting to ours.
const childEnv: NodeJS.ProcessEnv = { ...process.env, TORCHTS_CPU_BACKEND: "js" };
delete childEnv.NODE_TEST_CONTEXT;

test("golden suite passes with the JS fallback forced (strict mode)", () => {
  const r = spawnSync(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "--test", "--test-reporter=tap", "--test-name-pattern=^strict ", "test/golden/ops.test.ts"],
    { cwd: root, env: childEnv, encoding: "utf8", maxBuffer: 1 << 26 },
  );
  const out = r.stdout + r.stderr;
  const pass = Number(/# pass (\d+)/.exec(out)?.[1] ?? 0);
  const fail = Number(/# fail (\d+)/.exec(out)?.[1] ?? -1);
  assert.equal(fail, 0, out.split("\n").filter((l) => l.startsWith("not ok")).join("\n") || out.slice(-2000));
  assert.ok(pass > 200, `expected the strict golden cases to run, got ${pass} passing`);
  assert.equal(r.status, 0);
});

test("torch.backends.cpu.info() reports the forced JS backend", () => {
  const code = `import * as torch from "./src/index.ts"; console.log(JSON.stringify(torch.backends.cpu.info()));`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
    cwd: root, env: childEnv, encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  const info = JSON.parse(r.stdout.trim().split("\n").pop()!);
  assert.equal(info.backend, "js");
  assert.equal(info.reason, "TORCHTS_CPU_BACKEND=js");
  assert.equal(info.threads, 1);
});
