// Every collective and dtype against a single-process reference, async Work and overlap, outputs
// pending on transfers (strict and fused), subgroups, mpmd mismatch, timeouts and
// monitoredBarrier: workers/collectives.ts under `torchts run` at world sizes 2 and 4.
import { test } from "node:test";
import assert from "node:assert/strict";
import { launch, worker } from "./helpers.js";

for (const n of [2, 4])
  test(`collectives at world size ${n}`, async (t) => {
    const run = await launch(["--standalone", "--nproc-per-node", String(n), worker("collectives")]);
    assert.equal(run.code, 0, `launcher failed:\n${run.stderr.slice(-4000)}`);
    const byRank = new Map<number, { name: string; ok: boolean; detail?: string }[]>();
    for (const line of run.stdout.split("\n")) {
      const m = /^RESULT (\d+) (.*)$/.exec(line);
      if (m) byRank.set(Number(m[1]), JSON.parse(m[2]!) as { name: string; ok: boolean; detail?: string }[]);
    }
    assert.deepEqual([...byRank.keys()].sort(), [...Array(n).keys()], "every rank reports");
    const names = byRank.get(0)!.map((r) => r.name);
    assert.ok(names.length > 60, `ran ${names.length} checks`);
    for (const [i, name] of names.entries())
      await t.test(name, () => {
        for (const [r, res] of byRank) {
          assert.equal(res[i]!.name, name);
          assert.ok(res[i]!.ok, `rank ${r}: ${res[i]!.detail}`);
        }
      });
  });
