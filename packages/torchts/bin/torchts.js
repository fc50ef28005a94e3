#!/usr/bin/env node
// The `torchts` command (package.json "bin"). A repository checkout runs src/cli.ts through tsx,
// so `npm ci && npx torchts --help` works without a build and never runs a stale dist/; the
// published package (no src/) runs its build, dist/cli.js. Set TORCHTS_CLI_DIST=1 to run dist/
// in a checkout.
import { existsSync } from "node:fs";

const src = new URL("../src/cli.ts", import.meta.url);
const dist = new URL("../dist/cli.js", import.meta.url);

async function tsxRegister() {
  try {
    return (await import("tsx/esm/api")).register;
  } catch {
    return null; // tsx (a devDependency) is not installed
  }
}

if (existsSync(src) && process.env.TORCHTS_CLI_DIST !== "1") {
  const register = await tsxRegister();
  if (register) {
    register();
    await import(src.href);
  } else if (existsSync(dist)) await import(dist.href);
  else {
    process.stderr.write("torchts: neither tsx (run `npm ci` in the repository) nor a build (`npm run build`) is available\n");
    process.exitCode = 1;
  }
} else if (existsSync(dist)) await import(dist.href);
else {
  process.stderr.write(`torchts: ${dist.pathname} is missing: run \`npm run build\` in packages/torchts\n`);
  process.exitCode = 1;
}
