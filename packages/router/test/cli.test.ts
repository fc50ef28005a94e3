// `npx torchts router` through torchts's CLI: --help, bad flags and bad files (exit 2 with the reason),
// --print-config (the validated configuration as YAML), and a router in front of a real replica that
// drains on SIGTERM (the stream in flight finishes) and exits 0.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../src/index.js";
import { BIN, modelDir, spawnReplica } from "./replicas.js";

const run = (args: string[]) =>
  new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const c = spawn(process.execPath, [BIN, "router", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (err += d));
    c.on("exit", (code) => resolve({ code, out, err }));
  });

test("torchts router --help, bad flags, bad files, --print-config", { timeout: 60_000 }, async () => {
  const h = await run(["--help"]);
  assert.equal(h.code, 0);
  assert.match(h.out, /usage: torchts router --config router\.yaml/);
  const flag = await run(["--replcia", "http://127.0.0.1:1"]);
  assert.equal(flag.code, 2);
  assert.match(flag.err, /replcia/);
  const none = await run([]);
  assert.equal(none.code, 2);
  assert.match(none.err, /give --config FILE or at least one --replica URL/);
  const dir = modelDir();
  const bad = join(dir, "bad.yaml");
  writeFileSync(bad, "apiVersion: torchts.router/v1\nreplicas:\n  - url: http://127.0.0.1:1\nscheduling:\n  picker: { type: best }\n");
  const b = await run(["--config", bad]);
  assert.equal(b.code, 2);
  assert.match(b.err, /\/scheduling\/picker\/type \(line 5\): must be one of "max-score"/);
  const missing = await run(["--config", join(dir, "nope.yaml")]);
  assert.equal(missing.code, 2);
  assert.match(missing.err, /nope\.yaml: ENOENT/);
  const p = await run(["--replica", "http://127.0.0.1:8001", "--prefill", "http://127.0.0.1:8002", "--tokenizer", dir, "--pd-threshold", "128", "--print-config"]);
  assert.equal(p.code, 0, p.err);
  const cfg = parseConfig(p.out);
  assert.deepEqual(cfg.replicas.map((r) => r.role), ["both", "prefill"]);
  assert.equal(cfg.disaggregation.enabled, true);
  assert.equal(cfg.disaggregation.uncachedTokensThreshold, 128);
  assert.equal(cfg.scheduling.scorers[0]!.type, "precise-prefix-cache");
});

test("torchts router in front of a replica: serves, then drains on SIGTERM and exits 0", { timeout: 60_000 }, async () => {
  const rep = await spawnReplica(modelDir());
  const child = spawn(process.execPath, [BIN, "router", "--replica", rep.url, "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "", err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no 'listening' line: ${out} ${err}`)), 45_000);
      child.stdout.on("data", () => {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1]!);
        }
      });
    });
    assert.match(out, /1\/1 replicas healthy/);
    const r = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny", prompt: "drain me", max_tokens: 200, ignore_eos: true, temperature: 0, stream: true }),
      signal: AbortSignal.timeout(30_000),
    });
    const reader = r.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    child.kill("SIGTERM");
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    assert.match(text, /"finish_reason":"length"/);
    assert.match(text, /data: \[DONE\]\n\n$/);
    assert.equal(await exited, 0, err);
    assert.match(out, /SIGTERM: draining/);
  } finally {
    child.kill("SIGKILL");
    await rep.kill();
  }
});
