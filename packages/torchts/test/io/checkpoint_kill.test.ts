// SIGKILL during a checkpoint write leaves the previous checkpoint loadable, and resuming from
// whatever survived reproduces the losses of an uninterrupted run exactly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as torch from "../../src/index.js";

const CHILD = fileURLToPath(new URL("./checkpoint_child.ts", import.meta.url));
const STEPS = 12;

function run(ckpt: string, resume: boolean): number[] {
  const out = execFileSync(process.execPath, ["--import", "tsx", CHILD, ckpt, String(STEPS), ...(resume ? ["--resume"] : []), "--pad-mb", "8"], {
    encoding: "utf8",
    timeout: 60_000,
  });
  return JSON.parse(out.trim().split("\n").pop()!).losses;
}

/** Start the child and SIGKILL it `delayMs` after it announces the write of checkpoint `atStep`. */
function killDuringWrite(ckpt: string, atStep: number, delayMs: number, resume: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, ckpt, String(STEPS), ...(resume ? ["--resume"] : []), "--pad-mb", "8"]);
    let out = "";
    let armed = false;
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (!armed && out.includes(`begin ${atStep}\n`)) {
        armed = true;
        setTimeout(() => child.kill("SIGKILL"), delayMs);
      }
    });
    child.on("error", reject);
    child.on("exit", (_code, signal) => resolve(`${out}exit ${signal ?? _code}`));
  });
}

test("SIGKILL during checkpoint writes never corrupts the checkpoint; resume matches", async () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-kill-"));
  try {
    const reference = run(join(dir, "ref.pt"), false);
    assert.equal(reference.length, STEPS);
    assert.ok(reference[STEPS - 1]! < reference[0]!, `the model learns: ${reference[0]} -> ${reference[STEPS - 1]}`);

    const ckpt = join(dir, "run.pt");
    let lastSaved = 0;
    let killedMidWrite = 0;
    // kill at increasing steps with different delays into the write (0 ms = as it starts)
    const plan: [number, number][] = [[2, 0], [4, 3], [6, 1], [8, 6], [10, 2]];
    for (const [atStep, delay] of plan) {
      const log = await killDuringWrite(ckpt, atStep, delay, lastSaved > 0);
      assert.match(log, /exit SIGKILL$/, `child should be killed: ${log}`);
      const saved = [...log.matchAll(/saved (\d+)/g)].map((m) => Number(m[1]));
      const finished = saved.includes(atStep);
      if (!finished) killedMidWrite++;
      // the checkpoint on disk is complete: the last finished write, or the one being written
      const c = await torch.load(ckpt);
      assert.ok(c.step === atStep || c.step === atStep - 1, `checkpoint step ${c.step} after kill at ${atStep}`);
      if (!finished) assert.equal(c.step, Math.max(...saved, lastSaved), "a kill mid-write keeps the previous checkpoint");
      assert.deepEqual(c.losses, reference.slice(0, c.step), "losses so far equal the uninterrupted run's");
      lastSaved = c.step;
      // only stray temporaries may remain next to it, never a half-written run.pt
      for (const f of readdirSync(dir)) assert.ok(f === "ref.pt" || f === "run.pt" || f.startsWith("run.pt.tmp-"), f);
    }
    assert.ok(killedMidWrite >= 1, "at least one kill must land inside a write");
    const resumed = run(ckpt, true);
    assert.deepEqual(resumed, reference, "resumed losses equal the uninterrupted run's bit for bit");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
