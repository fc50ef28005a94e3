// Running `torchts run` from the distributed tests: bounded in time, output captured.
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

export const BIN = fileURLToPath(new URL("../../bin/torchts.js", import.meta.url));
export const worker = (name: string) => fileURLToPath(new URL(`./workers/${name}.ts`, import.meta.url));

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Start the launcher; `onLine` sees each stdout line as it comes. Killed after `limitMs`. */
export function launch(args: string[], opts: { limitMs?: number; onLine?: (line: string) => void; env?: Record<string, string> } = {}): Promise<Run> {
  const t0 = Date.now();
  const p = spawn(process.execPath, [BIN, "run", ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...opts.env } });
  let stdout = "";
  let stderr = "";
  let partial = "";
  p.stdout.on("data", (d: Buffer) => {
    stdout += d.toString();
    partial += d.toString();
    const lines = partial.split("\n");
    partial = lines.pop()!;
    for (const l of lines) opts.onLine?.(l);
  });
  p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const kill = setTimeout(() => p.kill("SIGKILL"), opts.limitMs ?? 90_000);
  return new Promise((resolve) =>
    p.on("exit", (code, signal) => {
      clearTimeout(kill);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - t0 });
    }),
  );
}

/** A port that was free a moment ago (for a --master-port two launchers must share). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
