// The disk tier of the compile cache, across processes: a second process running the same
// compiled training script generates no code (even with TORCHTS_CACHE_ONLY=1), a corrupted
// entry is detected and regenerated, and cache-only mode turns a miss into an error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { TORCHTS_VERSION } from "../../src/runtime/disk_cache.js";

const child = fileURLToPath(new URL("./disk_cache_child.ts", import.meta.url));
const pkg = fileURLToPath(new URL("../../", import.meta.url));

interface Report {
  ok: boolean;
  error?: string;
  losses: number[];
  compiles: number;
  loads: number;
  codegen: number;
  disk: { diskHits: number; diskWrites: number; corrupt: number };
}

function run(dir: string, cacheOnly: boolean): Report {
  const out = execFileSync(process.execPath, ["--import", "tsx", child], {
    cwd: pkg,
    env: { ...process.env, TORCHTS_CACHE_DIR: dir, TORCHTS_CACHE_ONLY: cacheOnly ? "1" : "", TORCHTS_EAGER_MODE: "", TORCHTS_LOGS: "" },
    encoding: "utf8",
  });
  return JSON.parse(out.trim().split("\n").at(-1)!) as Report;
}

function entries(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".json"))
    .map((e) => join(e.parentPath, e.name));
}

test("disk cache: a second process compiles nothing; corruption is detected and recompiled", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-cache-"));
  try {
    const empty = run(dir, true);
    assert.equal(empty.ok, false);
    assert.match(empty.error!, /TORCHTS_CACHE_ONLY=1: kernel not in the disk cache/);

    const first = run(dir, false);
    assert.ok(first.ok, first.error ?? "");
    assert.equal(first.compiles, 1);
    assert.ok(first.codegen > 0 && first.disk.diskWrites === first.codegen, JSON.stringify(first));

    const second = run(dir, true);
    assert.ok(second.ok, second.error ?? "");
    assert.equal(second.compiles, 0, "the second process compiles nothing");
    assert.equal(second.loads, 1);
    assert.equal(second.codegen, 0);
    assert.equal(second.disk.diskHits, first.codegen);
    assert.deepEqual(second.losses, first.losses);

    const files = entries(dir);
    writeFileSync(files[0]!, '{"version": "garbage');
    writeFileSync(files[1]!, JSON.stringify({ version: TORCHTS_VERSION, key: "some other graph", source: "return 1" }));
    const third = run(dir, false);
    assert.ok(third.ok, third.error ?? "");
    assert.equal(third.disk.corrupt, 2);
    assert.equal(third.codegen, 2, "exactly the two corrupt entries were regenerated");
    assert.deepEqual(third.losses, first.losses);
    assert.ok(run(dir, true).ok, "repaired entries serve a cache-only run");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
