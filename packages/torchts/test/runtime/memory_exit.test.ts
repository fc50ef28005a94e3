// Tensors that die while the process exits never abort it: see memory_exit_child.ts and
// retireAtExit in src/runtime/memory.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const CHILD = fileURLToPath(new URL("./memory_exit_child.ts", import.meta.url));

for (const where of ["exit", "beforeExit", "exitCall"]) {
  test(`a collection in "${where}" leaves a clean exit`, () => {
    // the abort depended on when the collection ran: several runs make a miss unlikely
    // (the unfixed code aborted in every run tried of the "exit" and "beforeExit" cases)
    for (let run = 0; run < 4; run++) {
      const r = spawnSync(process.execPath, ["--expose-gc", "--import", "tsx", CHILD, where], {
        encoding: "utf8",
        timeout: 60_000,
      });
      const what = `run ${run}: status ${r.status}, signal ${r.signal}\n${r.stderr}`;
      assert.equal(r.signal, null, what);
      assert.equal(r.status, 0, what);
      assert.ok(r.stdout.includes(`${where} handler done`), what);
      assert.ok(!r.stderr.includes("illegal access"), what);
    }
  });
}
