// `torchts run`: torchrun's environment, stopping every worker when one is killed (with
// torchelastic's report naming the rank and exit code), --max-restarts, and two launchers forming
// one job (--nnodes 2 static, and --nnodes 1:2 with a rendezvous endpoint) on localhost.
import { test } from "node:test";
import assert from "node:assert/strict";
import { freePort, launch, worker, type Run } from "./helpers.js";

function lines(out: string, tag: string): string[][] {
  return out.split("\n").filter((l) => l.startsWith(`${tag} `)).map((l) => l.split(" ").slice(1));
}

test("workers get torchrun's environment (flags from PET_* as Kubeflow sets them)", async () => {
  const run = await launch(["--standalone", "--rdzv_id", "job7", worker("fault"), "env"], { env: { PET_NPROC_PER_NODE: "2", PET_MAX_RESTARTS: "3" } });
  assert.equal(run.code, 0, run.stderr);
  const envs = run.stdout.split("\n").filter((l) => l.startsWith("ENV ")).map((l) => JSON.parse(l.slice(4)) as Record<string, string | null>);
  envs.sort((a, b) => Number(a.RANK) - Number(b.RANK));
  assert.equal(envs.length, 2);
  for (const [r, e] of envs.entries()) {
    assert.deepEqual(
      { ...e, MASTER_PORT: null, TORCHELASTIC_ERROR_FILE: null },
      {
        RANK: String(r), LOCAL_RANK: String(r), WORLD_SIZE: "2", LOCAL_WORLD_SIZE: "2", GROUP_RANK: "0", ROLE_RANK: String(r),
        ROLE_WORLD_SIZE: "2", GROUP_WORLD_SIZE: "1", MASTER_ADDR: "127.0.0.1", MASTER_PORT: null, TORCHELASTIC_RUN_ID: "job7",
        TORCHELASTIC_RESTART_COUNT: "0", TORCHELASTIC_MAX_RESTARTS: "3", TORCHELASTIC_USE_AGENT_STORE: "True",
        TORCHELASTIC_ERROR_FILE: null, OMP_NUM_THREADS: "1",
      },
    );
    assert.ok(Number(e.MASTER_PORT) > 0);
    assert.match(e.TORCHELASTIC_ERROR_FILE!, new RegExp(`attempt_0/${r}/error\\.json$`));
  }
  assert.deepEqual(lines(run.stdout, "SUM").map((l) => l[2]), ["12", "12"]);
});

test("kill -9 of one worker stops all workers within 30 s; the report names its rank and exit code", async () => {
  const pids = new Map<number, number>();
  let killed = 0;
  const run = await launch(["--standalone", "--nproc-per-node", "4", worker("fault"), "sleep"], {
    limitMs: 60_000,
    onLine: (l) => {
      const m = /^READY (\d+) (\d+)$/.exec(l);
      if (!m) return;
      pids.set(Number(m[1]), Number(m[2]));
      if (pids.size === 4) {
        killed = Date.now();
        process.kill(pids.get(1)!, "SIGKILL");
      }
    },
  });
  assert.ok(killed > 0, `the workers never got ready:\n${run.stderr}`);
  assert.equal(run.code, 1);
  assert.ok(Date.now() - killed < 30_000, "every worker was stopped within 30 s");
  for (const [r, pid] of pids) assert.throws(() => process.kill(pid, 0), /ESRCH/, `rank ${r} (pid ${pid}) is gone`);
  const report = run.stderr.slice(run.stderr.indexOf("Root Cause (first observed failure):"));
  assert.match(report, /rank {6}: 1 \(local_rank: 1\)/);
  assert.match(report, new RegExp(`exitcode  : -9 \\(pid: ${pids.get(1)}\\)`));
  assert.match(report, /traceback : Signal 9 \(SIGKILL\) received by PID/);
  assert.match(run.stderr, /fault\.ts FAILED/);
  // the rank that ignored SIGTERM was killed after the grace period
  assert.match(run.stdout, /rank 3 ignores SIGTERM/);
  assert.match(run.stderr, /closing signal SIGKILL/);
});

test("--max-restarts 1 restarts the group after a worker raised; the error file's message is in the log", async () => {
  const run = await launch(["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", worker("fault"), "raise"]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /worker group failed; restarting \(1\/1\)/);
  assert.deepEqual(lines(run.stdout, "SUM").map((l) => l.join(" ")).sort(), ["0 1 12", "1 1 12"]);
  // without restarts the same failure ends the job, with rank 1's error in the report
  const once = await launch(["--standalone", "--nproc-per-node", "2", worker("fault"), "raise"]);
  assert.equal(once.code, 1);
  const root = once.stderr.slice(once.stderr.indexOf("Root Cause (first observed failure):"));
  assert.match(root, /rank {6}: 1 \(local_rank: 1\)/);
  assert.match(root, /exitcode {2}: 1 /);
  assert.match(root, /error_file: \/.*attempt_0\/1\/error\.json/);
  assert.match(root, /traceback : Error: rank 1 fails on attempt 0/);
});

for (const kind of ["static", "c10d"] as const)
  test(`two launchers form one job of 4 ranks (${kind === "static" ? "--nnodes 2 --node-rank" : "--nnodes 1:2 --rdzv-endpoint"})`, async () => {
    const port = await freePort();
    const args = (node: number) =>
      kind === "static"
        ? ["--nnodes", "2", "--node-rank", String(node), "--master-port", String(port)]
        : ["--nnodes", "1:2", "--rdzv-endpoint", `127.0.0.1:${port}`, "--rdzv-conf", "last_call_timeout=20"];
    const runs = await Promise.all([0, 1].map((node) => launch([...args(node), "--nproc-per-node", "2", worker("fault"), "env"])));
    for (const r of runs) assert.equal(r.code, 0, r.stderr);
    const envs = runs.flatMap((r) => r.stdout.split("\n").filter((l) => l.startsWith("ENV ")).map((l) => JSON.parse(l.slice(4)) as Record<string, string>));
    assert.deepEqual(envs.map((e) => Number(e.RANK)).sort(), [0, 1, 2, 3]);
    for (const e of envs) {
      assert.equal(e.WORLD_SIZE, "4");
      assert.equal(e.GROUP_WORLD_SIZE, "2");
      assert.equal(Number(e.GROUP_RANK), Math.floor(Number(e.RANK) / 2));
      assert.equal(Number(e.LOCAL_RANK), Number(e.RANK) % 2);
      assert.equal(e.MASTER_PORT, String(port));
    }
    assert.deepEqual(runs.flatMap((r) => lines(r.stdout, "SUM").map((l) => l[2])), ["40", "40", "40", "40"]);
  });

test("--nnodes 1:2: a node that comes after the group formed is admitted by restarting the group", async () => {
  const port = await freePort();
  const args = ["--nnodes", "1:2", "--rdzv-endpoint", `127.0.0.1:${port}`, "--rdzv-conf", "last_call_timeout=0.5", "--nproc-per-node", "2", worker("fault"), "grow"];
  const second: { run: Promise<Run> | null } = { run: null };
  const first = await launch(args, {
    limitMs: 60_000,
    onLine: (l) => {
      // the first node formed a group alone (its workers run): now the second node comes
      if (l.startsWith("SMALL ") && !second.run) second.run = launch(args, { limitMs: 60_000 });
    },
  });
  assert.ok(second.run, `the first node never formed a group:\n${first.stderr}`);
  const late = await second.run;
  assert.equal(first.code, 0, first.stderr);
  assert.equal(late.code, 0, late.stderr);
  assert.match(first.stderr, /a node is waiting to join: restarting the worker group with it/);
  assert.match(first.stderr, /round 1: node 0 of 2, ranks 0\.\.1 of 4/);
  assert.match(late.stderr, /round 1: node 1 of 2, ranks 2\.\.3 of 4/);
  assert.deepEqual([...lines(first.stdout, "SUM"), ...lines(late.stdout, "SUM")].map((l) => l[2]), ["40", "40", "40", "40"]);
});

test("torchts run: usage errors exit 2", async () => {
  const bad = await launch(["--nproc-per-node", "x", "script.ts"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--nproc-per-node: expected an integer >= 1, got 'x'/);
  const none = await launch(["--nproc-per-node", "2"]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /the training script is required/);
});
