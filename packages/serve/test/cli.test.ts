// `npx torchts serve`: torchts's CLI dispatches to this package; SIGTERM drains (the running request
// finishes, new ones are refused) and the process exits 0.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { modelDir } from "./helpers.js";

const BIN = fileURLToPath(new URL("../../torchts/bin/torchts.js", import.meta.url));

test("torchts serve: serves, then drains on SIGTERM and exits 0", { timeout: 60_000 }, async () => {
  const dir = modelDir();
  const child = spawn(process.execPath, [BIN, "serve", "--model", dir, "--port", "0", "--served-model-name", "tiny", "--max-num-seqs", "2"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no 'listening' line in 45 s: ${out} ${err}`)), 45_000);
      child.stdout.on("data", () => {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1]!);
        }
      });
      child.on("exit", () => reject(new Error(`exited early: ${out} ${err}`)));
    });
    const models = await (await fetch(`${url}/v1/models`)).json();
    assert.equal(models.data[0].id, "tiny");
    const r = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny", prompt: "drain me", max_tokens: 60, ignore_eos: true, temperature: 0, stream: true }),
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
    assert.match(out, /draining/);
  } finally {
    child.kill("SIGKILL");
  }
});

test("torchts serve --help, and a bad flag", async () => {
  const run = (args: string[]) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const c = spawn(process.execPath, [BIN, "serve", ...args], { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      c.stdout.on("data", (d) => (out += d));
      c.stderr.on("data", (d) => (out += d));
      c.on("exit", (code) => resolve({ code, out }));
    });
  const h = await run(["--help"]);
  assert.equal(h.code, 0);
  assert.match(h.out, /usage: torchts serve --model DIR/);
  const bad = await run(["--model", "x", "--port", "abc"]);
  assert.equal(bad.code, 2);
  assert.match(bad.out, /--port/);
});
