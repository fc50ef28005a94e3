// Test replicas: real `torchts serve` processes (through torchts's bin, as `npx torchts serve` runs them)
// or in-process servers (createServer + LLMEngine from @torchts/serve), over a model folder made from
// torchts's tiny random-weight fixtures (llama_gqa: 4 layers, vocab 256; the byte-level tokenizer with a
// small chat template).
import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const HF = fileURLToPath(new URL("../../torchts/test/fixtures/hf/", import.meta.url));
export const BIN = fileURLToPath(new URL("../../torchts/bin/torchts.js", import.meta.url));

/** A model folder in a temp dir; `maxPositionEmbeddings` widens the fixture's 128-token context. */
export function modelDir(maxPositionEmbeddings = 1024): string {
  const dir = mkdtempSync(join(tmpdir(), "torchts-router-"));
  const cfg = JSON.parse(readFileSync(join(HF, "llama_gqa/config.json"), "utf8")) as Record<string, unknown>;
  cfg.max_position_embeddings = maxPositionEmbeddings;
  writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
  copyFileSync(join(HF, "llama_gqa/model.safetensors"), join(dir, "model.safetensors"));
  copyFileSync(join(HF, "byte_tokenizer/tokenizer.json"), join(dir, "tokenizer.json"));
  copyFileSync(join(HF, "byte_tokenizer/tokenizer_config.json"), join(dir, "tokenizer_config.json"));
  return dir;
}

export interface ChildReplica {
  url: string;
  port: number;
  child: ChildProcess;
  /** SIGKILL and wait for the exit. */
  kill(): Promise<void>;
  output(): string;
}

/** `torchts serve --model DIR --port PORT ...extra` as a child process; resolves once it listens. */
export function spawnReplica(dir: string, extra: string[] = [], port = 0, timeoutMs = 60_000): Promise<ChildReplica> {
  const child = spawn(process.execPath, [BIN, "serve", "--model", dir, "--port", String(port), "--served-model-name", "tiny", ...extra], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`replica did not listen within ${timeoutMs} ms: ${out}`));
    }, timeoutMs);
    const onData = () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (!m) return;
      clearTimeout(t);
      child.stdout!.off("data", onData);
      const url = m[1]!.replace("localhost", "127.0.0.1");
      resolve({
        url,
        port: Number(new URL(url).port),
        child,
        output: () => out,
        async kill() {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
          await exited;
        },
      });
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(t);
      reject(new Error(`replica exited (${code}) before listening: ${out}`));
    });
  });
}

/** Start several replicas at once (their model loads overlap). */
export function spawnReplicas(n: number, dir: string, extra: string[] = []): Promise<ChildReplica[]> {
  return Promise.all(Array.from({ length: n }, () => spawnReplica(dir, extra)));
}

/** One Prometheus sample's value from a replica's /metrics (summed over label sets matching `labels`). */
export async function metric(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([^\s{]+)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = m[2] ?? "";
    if (Object.entries(labels).every(([k, v]) => ls.includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

export interface ChildRouter {
  url: string;
  child: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
  output(): string;
}

/** `torchts router --config FILE --port 0` as a child process; resolves once it listens. */
export function spawnRouter(configFile: string, timeoutMs = 60_000): Promise<ChildRouter> {
  const child = spawn(process.execPath, [BIN, "router", "--config", configFile, "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`router did not listen within ${timeoutMs} ms: ${out}`));
    }, timeoutMs);
    child.stdout!.on("data", () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (!m) return;
      clearTimeout(t);
      resolve({
        url: m[1]!.replace("localhost", "127.0.0.1"),
        child,
        output: () => out,
        async kill(signal: NodeJS.Signals = "SIGKILL") {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
      });
    });
    child.once("exit", (code) => {
      clearTimeout(t);
      reject(new Error(`router exited (${code}) before listening: ${out}`));
    });
  });
}
