// The CLI (`node --import tsx src/cli.ts ...`) on the golden checkpoints: `logits --json` within
// 1e-4 of transformers, `generate --greedy --json` reproduces the greedy continuations, in strict
// and fused modes; --prompt and `chat` through a byte-level tokenizer; usage errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";
import { GOLDEN, expected, fixtureDir, maxAbsDiff, referenceTensors } from "./helpers.js";

const pkgDir = fileURLToPath(new URL("../../", import.meta.url));

function cli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      ["--import", "tsx", "src/cli.ts", ...args],
      { cwd: pkgDir },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin!.end(stdin ?? "");
  });
}

// Spawning is mostly waiting (tsx start-up), so the runs go n at a time.
async function pool<T>(jobs: (() => Promise<T>)[], n = 4): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]!();
      }
    }),
  );
  return out;
}

// Which prompt each mode checks: every mode and every prompt is covered by both commands.
const PLAN = { strict: { logits: 0, generate: 0 }, fused: { logits: 1, generate: 1 }, compiled: { logits: 0, generate: 1 } } as const;

test("CLI logits and greedy generate match transformers on the golden models (strict, fused, compiled)", async () => {
  const checks: (() => Promise<void>)[] = [];
  for (const [mode, plan] of Object.entries(PLAN))
    for (const name of GOLDEN) {
      const exp = expected(name);
      const lp = exp.prompts[plan.logits]!;
      checks.push(async () => {
        const r = await cli(["logits", "--model", fixtureDir(name), "--input-ids", lp.input_ids.join(","), "--json", "--mode", mode]);
        assert.equal(r.code, 0, r.stderr);
        const out = JSON.parse(r.stdout) as { shape: number[]; logits: number[][][] };
        assert.deepEqual(out.shape, [1, lp.input_ids.length, 256]);
        const ref = await referenceTensors(name);
        const d = await maxAbsDiff(torch.tensor(out.logits, { dtype: "float32" }), ref[`logits.${plan.logits}`]!);
        assert.ok(d < 1e-4, `${name} (${mode}): CLI logits differ by ${d}`);
      });
      const gp = exp.prompts[plan.generate]!;
      checks.push(async () => {
        const g = await cli(["generate", "--model", fixtureDir(name), "--input-ids", gp.input_ids.join(","), "--max-new-tokens", "16", "--greedy", "--json", "--mode", mode]);
        assert.equal(g.code, 0, g.stderr);
        const res = JSON.parse(g.stdout) as { new_tokens: number[]; sequence: number[] };
        assert.deepEqual(res.new_tokens, gp.greedy_continuation, `${name} (${mode}): CLI greedy continuation`);
        assert.deepEqual(res.sequence, gp.full_sequence);
      });
    }
  await pool(checks, 2);
});

test("CLI --prompt and chat go through the model's tokenizer and chat template", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-cli-"));
  try {
    cpSync(fixtureDir("llama_gqa"), dir, { recursive: true });
    cpSync(fixtureDir("byte_tokenizer"), dir, { recursive: true });
    // the byte-level tokenizer maps each byte to its own id, so the prompt's ids are its bytes
    const text = "*6'\u0086";
    const g = await cli(["generate", "--model", dir, "--prompt", text, "--max-new-tokens", "4", "--greedy", "--json"]);
    assert.equal(g.code, 0, g.stderr);
    const res = JSON.parse(g.stdout) as { input_ids: number[]; new_tokens: number[]; text: string };
    assert.deepEqual(res.input_ids, [...Buffer.from(text, "utf8")]);
    assert.equal(res.new_tokens.length, 4);
    assert.equal(typeof res.text, "string");
    const c = await cli(["chat", "--model", dir, "--max-new-tokens", "3", "--greedy"], "hello\nagain\n");
    assert.equal(c.code, 0, c.stderr);
    assert.equal(c.stdout.split("\n").filter((l) => l !== "").length <= 2, true, c.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("CLI usage errors are clear", async () => {
  // independent runs: start them together (spawning is mostly waiting)
  const [a, b, c, d] = await Promise.all([
    cli(["generate", "--model", fixtureDir("gpt2")]),
    cli(["generate", "--model", fixtureDir("gpt2"), "--prompt", "hi"]),
    cli(["frobnicate"]),
    cli(["logits", "--model", "/nonexistent/dir", "--input-ids", "1,2"]),
  ]);
  assert.equal(a.code, 2);
  assert.match(a.stderr, /--prompt TEXT or --input-ids/);
  assert.equal(b.code, 2);
  assert.match(b.stderr, /tokenizer\.json/);
  assert.equal(c.code, 2);
  assert.match(c.stderr, /unknown command 'frobnicate'/);
  assert.equal(d.code, 1);
  assert.match(d.stderr, /config\.json/);
});
