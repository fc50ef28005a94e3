// The GSM8K scorer (VeRL's strict format) and the generated arithmetic problems.
import { test } from "node:test";
import assert from "node:assert/strict";
import { extractAnswer, gsm8kScore } from "../src/grpo/reward.js";
import { arithmeticProblems, promptOf } from "../src/grpo/arith.js";

test("the answer is the number after the last '#### ' in the final 300 characters", () => {
  assert.equal(extractAnswer("3 + 4 = 7\n#### 7"), "7");
  assert.equal(extractAnswer("#### 1,234"), "1234");
  assert.equal(extractAnswer("#### -12"), "-12");
  assert.equal(extractAnswer("#### 3\nno wait\n#### 5"), "5");
  assert.equal(extractAnswer("####7"), null); // strict: a space after ####
  assert.equal(extractAnswer("the answer is 7"), null);
  assert.equal(extractAnswer(`#### 9 ${"x".repeat(300)}`), null); // outside the last 300 characters
  assert.equal(extractAnswer(`${"x".repeat(400)} #### 9`), "9");
  assert.equal(extractAnswer("#### 2.50"), "2.50");
});

test("score 1 for the right answer, the format score for a wrong one, 0 without an answer", () => {
  assert.equal(gsm8kScore("5 + 2 = 7\n#### 7", "7"), 1);
  assert.equal(gsm8kScore("5 + 2 = 8\n#### 8", "7"), 0);
  assert.equal(gsm8kScore("5 + 2 = 8\n#### 8", "7", { formatScore: 0.1 }), 0.1);
  assert.equal(gsm8kScore("7", "7", { formatScore: 0.1 }), 0);
  assert.equal(gsm8kScore("#### 1,000", "1000"), 1);
});

test("generated problems are seeded, GSM8K-formatted and correct", () => {
  const a = arithmeticProblems(200, 7);
  assert.deepEqual(a, arithmeticProblems(200, 7));
  assert.notDeepEqual(a, arithmeticProblems(200, 8));
  for (const p of a) {
    const m = /^(\d+) ([+-]) (\d+) = (-?\d+)\n#### (-?\d+)$/.exec(p.solution);
    assert.ok(m, p.solution);
    const [x, op, y, c, ans] = [Number(m[1]), m[2], Number(m[3]), Number(m[4]), m[5]];
    assert.equal(c, op === "+" ? x + y : x - y);
    assert.ok(c >= 0 && x <= 9 && y <= 9);
    assert.equal(ans, p.answer);
    assert.equal(gsm8kScore(p.solution, p.answer), 1);
    assert.ok(p.question.includes(String(x)) && p.question.includes(String(y)));
    assert.match(promptOf(p), /^Q: .+\?\nA: $/);
  }
  assert.ok(new Set(a.map((p) => p.solution.includes("+"))).size === 2, "both operations");
});
