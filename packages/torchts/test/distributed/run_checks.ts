// Launch a worker under `torchts run` and turn its ranks' RESULT lines into subtests: a check
// passes when it passed on every rank.
import type { TestContext } from "node:test";
import assert from "node:assert/strict";
import { launch, worker } from "./helpers.js";

export async function runChecks(t: TestContext, name: string, n: number, opts: { minChecks: number; args?: string[]; limitMs?: number }): Promise<void> {
  const run = await launch(["--standalone", "--nproc-per-node", String(n), worker(name), ...(opts.args ?? [])], { limitMs: opts.limitMs ?? 120_000 });
  assert.equal(run.code, 0, `launcher failed:\n${run.stdout.slice(-2000)}\n${run.stderr.slice(-4000)}`);
  const byRank = new Map<number, { name: string; ok: boolean; detail?: string }[]>();
  for (const line of run.stdout.split("\n")) {
    const m = /^RESULT (\d+) (.*)$/.exec(line);
    if (m) byRank.set(Number(m[1]), JSON.parse(m[2]!) as { name: string; ok: boolean; detail?: string }[]);
  }
  assert.deepEqual([...byRank.keys()].sort(), [...Array(n).keys()], "every rank reports");
  const names = byRank.get(0)!.map((r) => r.name);
  assert.ok(names.length >= opts.minChecks, `ran ${names.length} checks`);
  for (const [i, check] of names.entries())
    await t.test(check, () => {
      for (const [r, res] of byRank) {
        assert.equal(res[i]!.name, check);
        assert.ok(res[i]!.ok, `rank ${r}: ${res[i]!.detail}`);
      }
    });
}
