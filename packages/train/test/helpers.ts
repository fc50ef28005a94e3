// Paths and small helpers shared by the tests.
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const RECIPES = fileURLToPath(new URL("../../../recipes", import.meta.url));
export const TORCHTS_BIN = fileURLToPath(new URL("../../torchts/bin/torchts.js", import.meta.url));
/** The CLI runs from the repository root, as `npx torchts train` does (no tsconfig there: the CLI resolves torchts itself). */
export const REPO_ROOT = fileURLToPath(new URL("../../..", import.meta.url));

export function tmp(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `torchts-train-${prefix}-`));
}

export function readJsonl(path: string): Record<string, unknown>[] {
  return readFileSync(path, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Loss per step (the last record of a step wins: a resumed run logs its steps again). */
export function lossByStep(records: Record<string, unknown>[], key = "loss_metrics/global_avg_loss"): Map<number, number> {
  const m = new Map<number, number>();
  for (const r of records) m.set(r.step as number, r[key] as number);
  return m;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Run `torchts ARGS` (the repository's CLI, from the repository root), optionally killing it with SIGKILL as soon as a stdout line
 * matches `killOn`. Bounded by `timeoutMs`.
 */
export function runCli(args: string[], o: { killOn?: RegExp; timeoutMs?: number; env?: Record<string, string> } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [TORCHTS_BIN, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...o.env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs ?? 120_000);
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (o.killOn && o.killOn.test(stdout)) child.kill("SIGKILL");
    });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** A port that was free a moment ago (each launcher's --master-port: tests of other packages run at the same time). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}
