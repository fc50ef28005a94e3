// The main job in a reduced config: the char-level minGPT must actually learn.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

test("minGPT on Tiny Shakespeare: validation loss falls by > 0.5 nats in 12 steps", () => {
  const root = new URL("../../../../", import.meta.url).pathname;
  const ckpt = join(mkdtempSync(join(tmpdir(), "mingpt-")), "m.safetensors");
  const out = execFileSync(
    process.execPath,
    ["--import", "tsx", "examples/mingpt/train.ts", "--steps", "12", "--batch-size", "8", "--block-size", "32",
      "--n-embd", "48", "--sample-tokens", "20", "--checkpoint", ckpt],
    { cwd: root, encoding: "utf8", timeout: 120_000 },
  );
  const last = JSON.parse(out.trim().split("\n").pop()!);
  assert.ok(last.initialValLoss > 4.0, `initial loss ${last.initialValLoss} should be near ln(65)=4.17`);
  assert.ok(last.finalValLoss < last.initialValLoss - 0.5, `loss ${last.initialValLoss} -> ${last.finalValLoss}`);
  assert.match(out, /saved .*m\.safetensors/);
  assert.match(out, /--- sample ---\nROMEO:/);
});
