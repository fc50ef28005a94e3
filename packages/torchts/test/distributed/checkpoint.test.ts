// distributed.checkpoint at world sizes 2 and 4 (workers/checkpoint.ts): round trips, resharding
// (saved at 4, loaded at 2 and 1; saved at 2, loaded at 4), one writer per piece, overwriting,
// asyncSave; and (workers/ckpt_train.ts) a DDP run killed by SIGKILL inside a save resumes, after the
// launcher restarts it, from the previous checkpoint with the losses of a run that was never killed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launch, worker } from "./helpers.js";
import { runChecks } from "./run_checks.js";

const root = mkdtempSync(join(tmpdir(), "torchts-dcp-"));
test.after(() => rmSync(root, { recursive: true, force: true }));

for (const n of [2, 4]) test(`distributed checkpoints at world size ${n}`, (t) => runChecks(t, "checkpoint", n, { minChecks: n === 4 ? 9 : 7, args: ["save", join(root, `n${n}`), root] }));
for (const n of [1, 2])
  test(`checkpoints saved at other world sizes load at ${n}`, (t) => runChecks(t, "checkpoint", n, { minChecks: 2, args: ["load", join(root, `load${n}`), root] }));

test("a run killed with SIGKILL during a save resumes from the previous checkpoint with identical losses", async () => {
  const losses = (out: string) => [...out.matchAll(/^LOSS (\d+) (\S+)$/gm)].map((m) => [Number(m[1]), m[2]!] as const);
  const args = (dir: string) => ["--standalone", "--nproc-per-node", "2", "--max-restarts", "1", worker("ckpt_train"), dir, "6", "2"];
  const [ref, run] = await Promise.all([launch(args(join(root, "ref"))), launch(args(join(root, "killed")), { env: { CRASH_AT_SAVE: "2" } })]);
  assert.equal(ref.code, 0, ref.stderr.slice(-3000));
  assert.equal(run.code, 0, run.stderr.slice(-3000));
  const want = new Map(losses(ref.stdout));
  assert.deepEqual([...want.keys()], [1, 2, 3, 4, 5, 6]);
  // attempt 0: steps 1-4, killed while committing the step-4 save; attempt 1: from the step-2 checkpoint
  assert.match(run.stdout, /^KILLED in save 2$/m);
  assert.match(run.stderr + run.stdout, /exitcode\s*: -9/);
  const [before, after] = run.stdout.split(/^RESUMED at step 3 \(attempt 1\)$/m);
  assert.ok(after !== undefined, `the restart did not resume at step 3:\n${run.stdout}`);
  assert.deepEqual(losses(before!), [1, 2, 3, 4].map((s) => [s, want.get(s)]));
  assert.deepEqual(losses(after), [3, 4, 5, 6].map((s) => [s, want.get(s)]));
});
