// The processes the serving benchmark talks to: a torchts server (forked server_child.ts, with IPC
// for the engine's stats, or the real `torchts serve` command line), and the llama.cpp runner.
// Every process gets the same thread count (TORCHTS_NUM_THREADS for torchts, threads for llama.cpp).
import { fork, spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { EngineStats, LLMEngineOptions } from "../../packages/serve/src/engine.js";
import type { LlamaRun } from "./llama_cpp_child.js";

const HERE = fileURLToPath(new URL(".", import.meta.url));
const BIN = fileURLToPath(new URL("../../packages/torchts/bin/torchts.js", import.meta.url));
const START_TIMEOUT_MS = 180_000;

export interface TorchtsServer {
  url: string;
  /** The engine's counters (forked servers only; the command line's /metrics has no prefix-cache or HiCache series). */
  stats(): Promise<EngineStats>;
  close(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", () => r())));
}

/** Ends `child` (this benchmark's own process): the graceful way first, SIGKILL after `ms`. */
async function stop(child: ChildProcess, graceful: () => void, ms = 30_000): Promise<void> {
  const done = exited(child);
  graceful();
  const t = setTimeout(() => child.kill("SIGKILL"), ms);
  await done;
  clearTimeout(t);
}

/** createServer() + LLMEngine over `dir` in a forked process. */
export async function forkServer(dir: string, opts: Partial<LLMEngineOptions>, threads: number): Promise<TorchtsServer> {
  const child = fork(join(HERE, "server_child.ts"), [dir, JSON.stringify(opts)], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, TORCHTS_NUM_THREADS: String(threads) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("the forked server did not listen in time")), START_TIMEOUT_MS);
    child.on("message", (m: { type: string; url?: string }) => {
      if (m.type === "listening") {
        clearTimeout(t);
        resolve(m.url!);
      }
    });
    child.once("exit", (code) => reject(new Error(`the forked server exited (${code}) before listening`)));
  });
  return {
    url,
    stats: () =>
      new Promise((resolve) => {
        const on = (m: { type: string; stats?: EngineStats }) => {
          if (m.type !== "stats") return;
          child.off("message", on);
          resolve(m.stats!);
        };
        child.on("message", on);
        child.send({ type: "stats" });
      }),
    close: () => stop(child, () => child.send({ type: "close" })),
  };
}

/** `torchts serve --model DIR --port 0 ARGS` (the command line users run), until SIGTERM drains it. */
export async function cliServer(dir: string, args: string[], threads: number): Promise<TorchtsServer> {
  const child = spawn(process.execPath, [BIN, "serve", "--model", dir, "--port", "0", ...args], {
    env: { ...process.env, TORCHTS_NUM_THREADS: String(threads) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`torchts serve did not listen in time: ${out}`)), START_TIMEOUT_MS);
    child.stdout!.on("data", (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`torchts serve exited (${code}) before listening: ${out}`)));
  });
  return {
    url,
    stats: () => Promise.reject(new Error("the command line server has no stats channel")),
    close: () => stop(child, () => child.kill("SIGTERM")),
  };
}

/** llama.cpp on `gguf`: the first counts[i] prompts at concurrency[i] (see llama_cpp_child.ts). */
export async function runLlamaCpp(
  gguf: string,
  job: { prompts: number[][]; counts: number[]; concurrency: number[]; outputLen: number; threads: number; batchSize: number },
  tmp: string,
): Promise<LlamaRun[]> {
  const jobFile = join(tmp, "llama_job.json");
  writeFileSync(jobFile, JSON.stringify(job));
  const child = spawn(process.execPath, ["--import", "tsx", join(HERE, "llama_cpp_child.ts"), gguf, jobFile], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d));
  const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
  const runs = out.split("\n").filter((l) => l.startsWith("RESULT ")).map((l) => JSON.parse(l.slice(7)) as LlamaRun);
  if (code !== 0 || runs.length !== job.concurrency.length) throw new Error(`llama.cpp runner exited ${code} with ${runs.length} of ${job.concurrency.length} results: ${out.slice(-500)}`);
  return runs;
}
