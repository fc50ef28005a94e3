// The op-table fuzzer in CI: a fixed seed over every op of the table (see fuzzer.ts). Locally:
// `node --expose-gc --import tsx test/fuzz/run.ts --seed 7 --long`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fuzzMain } from "./main.js";

test("op fuzzer: every calling form agrees, every mutated call succeeds or names the op, the canary holds", async () => {
  const lines: string[] = [];
  const code = await fuzzMain({ seed: 1, long: false }, (s) => {
    lines.push(s);
    if (!s.startsWith("  FAIL")) console.log(s);
  });
  const fails = lines.filter((l) => l.startsWith("  FAIL") || l.startsWith("UNCAUGHT"));
  assert.equal(code, 0, `${fails.length} fuzz failures:\n${fails.slice(0, 60).join("\n")}`);
  assert.match(lines.join("\n"), /fuzz: seed 1: \d+ ops, \d+ calls/);
});
