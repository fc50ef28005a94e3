// initProcessGroup without the launcher, as a scheduler that starts every process itself does
// (Kubeflow's one process per pod): env:// with rank 0 serving the store, and tcp://host:port.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { freePort, worker } from "./helpers.js";

function start(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const p = spawn(process.execPath, ["--import", "tsx", worker("fault"), "env"], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  p.stdout.on("data", (d: Buffer) => (out += d.toString()));
  p.stderr.on("data", (d: Buffer) => (out += d.toString()));
  const kill = setTimeout(() => p.kill("SIGKILL"), 60_000);
  return new Promise((r) => p.on("exit", (code) => (clearTimeout(kill), r({ code, out }))));
}

for (const how of ["env://", "tcp://"] as const)
  test(`initProcessGroup ${how} across three processes started by hand`, async () => {
    const port = String(await freePort());
    const runs = await Promise.all(
      [0, 1, 2].map((rank) =>
        start({
          RANK: String(rank),
          WORLD_SIZE: "3",
          ...(how === "env://" ? { MASTER_ADDR: "127.0.0.1", MASTER_PORT: port } : { INIT_METHOD: `tcp://127.0.0.1:${port}`, MASTER_ADDR: "", MASTER_PORT: "" }),
          TORCHELASTIC_USE_AGENT_STORE: "",
        }),
      ),
    );
    for (const r of runs) {
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /^SUM \d \S+ 24$/m); // (1 + 2 + 3) * 4
    }
  });
