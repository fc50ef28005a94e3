// Runs the golden op suite (test/golden/ops.test.ts) in a child process with other environment
// settings (a forced backend, OpenBLAS off) and returns its pass and fail counts.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("../..", import.meta.url));

/** The child's env: ours plus `over`, without NODE_TEST_CONTEXT (so it runs as its own test run). */
export function childEnv(over: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...over };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

export function runGoldenChild(env: NodeJS.ProcessEnv, namePattern: string): { pass: number; fail: number; status: number | null; failures: string } {
  const r = spawnSync(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "--test", "--test-reporter=tap", `--test-name-pattern=${namePattern}`, "test/golden/ops.test.ts"],
    { cwd: root, env, encoding: "utf8", maxBuffer: 1 << 26 },
  );
  const out = r.stdout + r.stderr;
  return {
    pass: Number(/# pass (\d+)/.exec(out)?.[1] ?? 0),
    fail: Number(/# fail (\d+)/.exec(out)?.[1] ?? -1),
    status: r.status,
    failures: out.split("\n").filter((l) => l.startsWith("not ok")).join("\n") || out.slice(-2000),
  };
}

/** torch.backends.cpu.info() as a child process with `env` reports it. */
export function childCpuInfo(env: NodeJS.ProcessEnv): { status: number | null; stderr: string; info: Record<string, unknown> | null } {
  const code = `import * as torch from "./src/index.ts"; console.log(JSON.stringify(torch.backends.cpu.info()));`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { cwd: root, env, encoding: "utf8" });
  const last = r.stdout.trim().split("\n").pop();
  return { status: r.status, stderr: r.stderr, info: r.status === 0 && last ? (JSON.parse(last) as Record<string, unknown>) : null };
}
