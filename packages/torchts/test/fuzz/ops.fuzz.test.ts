// The op-table fuzzer in CI: a fixed seed, the long mode (every sample, every mutation, every mode) over
// every op of the table (see fuzzer.ts); about 70 s on 2 cores. Locally, other seeds:
// `node --expose-gc --import tsx test/fuzz/run.ts --seed 7 --long`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fuzzMain } from "./main.js";

test("op fuzzer: every calling form agrees, every mutated call succeeds or names the op, the canary holds", async () => {
  const lines: string[] = [];
  const code = await fuzzMain({ seed: 1, long: true }, (s) => {
    lines.push(s);
    if (!s.startsWith("  FAIL")) console.log(s);
  });
  const fails = lines.filter((l) => l.startsWith("  FAIL") || l.startsWith("UNCAUGHT"));
  assert.equal(code, 0, `${fails.length} fuzz failures:\n${fails.slice(0, 60).join("\n")}`);
  assert.match(lines.join("\n"), /fuzz: seed 1 \(long\): \d+ ops, \d+ calls/);
});
