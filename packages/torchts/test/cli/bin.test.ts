// The `torchts` command's launcher (package.json "bin": bin/torchts.js): in a checkout it runs
// src/cli.ts through tsx, so `npm ci && npx torchts --help` works without a build; the published
// layout (no src/) runs dist/cli.js.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = fileURLToPath(new URL("../../", import.meta.url));
const rootDir = join(pkgDir, "../..");
const launcher = join(pkgDir, "bin/torchts.js");

test("package.json's bin is the committed launcher, and the lockfile (which npm ci links from) agrees", () => {
  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  assert.equal(pkg.bin.torchts, "./bin/torchts.js");
  assert.ok(pkg.files.includes("bin"), "the launcher is published");
  const lock = JSON.parse(readFileSync(join(rootDir, "package-lock.json"), "utf8"));
  assert.equal(lock.packages["packages/torchts"].bin.torchts, "bin/torchts.js");
  assert.ok(readFileSync(launcher, "utf8").startsWith("#!/usr/bin/env node\n"));
  assert.ok(statSync(launcher).mode & 0o100, "the launcher is executable");
});

test("torchts --help prints the usage (from src/ through tsx, no build needed)", () => {
  const out = execFileSync(process.execPath, [launcher, "--help"], { cwd: rootDir, encoding: "utf8", env: { ...process.env, TORCHTS_CLI_DIST: "" } });
  assert.match(out, /^usage:\n {2}torchts generate --model DIR/);
  assert.match(out, /torchts chat --model DIR/);
  assert.match(out, /torchts logits --model DIR/);
});

test("npx torchts --help (node_modules/.bin/torchts, which npm ci links to the launcher)", () => {
  const link = join(rootDir, "node_modules/.bin/torchts");
  assert.ok(existsSync(link), "node_modules/.bin/torchts is not linked: run `npm ci` at the repository root");
  assert.equal(realpathSync(link), realpathSync(launcher));
  const out = execFileSync(link, ["--help"], { cwd: rootDir, encoding: "utf8" });
  assert.match(out, /^usage:\n {2}torchts generate/);
});

test("the published layout (no src/) runs dist/cli.js; with neither it says what to do", () => {
  const dir = mkdtempSync(join(tmpdir(), "torchts-bin-"));
  try {
    mkdirSync(join(dir, "bin"));
    copyFileSync(launcher, join(dir, "bin/torchts.js"));
    writeFileSync(join(dir, "package.json"), '{ "type": "module" }\n');
    const missing = spawnSync(process.execPath, [join(dir, "bin/torchts.js"), "--help"], { encoding: "utf8" });
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /dist\/cli\.js is missing: run `npm run build`/);
    mkdirSync(join(dir, "dist"));
    writeFileSync(join(dir, "dist/cli.js"), 'process.stdout.write(`dist cli ${process.argv.slice(2).join(" ")}\\n`);\n');
    const r = spawnSync(process.execPath, [join(dir, "bin/torchts.js"), "--help"], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, "dist cli --help\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
