// Runs an example trainer in a child process (as `npm run example:<name>` does) and returns its
// stdout and the JSON summary it prints last.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const ROOT = new URL("../../../../", import.meta.url).pathname;

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function runExample(script: string, args: string[]): { out: string; last: any } {
  const out = execFileSync(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 600_000,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return { out, last: JSON.parse(out.trim().split("\n").pop()!) };
}
