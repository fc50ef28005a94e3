// Leak check: the server's RSS after 2,000 requests is within 10% of its RSS after 200, and torchts's
// live device bytes are too (no KV cache, buffer or per-request state kept). The server runs in a
// child process started with --expose-gc (leak_server.ts), so its memory is measured after a full
// collection and apart from the client's. The requests mix every path a request can take: plain,
// chat, streamed, n = 2, refused with 400, and streams whose client goes away after the first chunk.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { MemoryReport } from "./leak_server.js";
import { post } from "./server_helpers.js";

const SERVE = fileURLToPath(new URL("..", import.meta.url));

test("RSS and torchts live bytes after 2,000 requests are within 10% of those after 200", { timeout: 180_000 }, async (t) => {
  const child = fork(fileURLToPath(new URL("leak_server.ts", import.meta.url)), [], { cwd: SERVE, execArgv: ["--expose-gc", "--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const message = <T>(key: string) =>
    new Promise<T>((resolve, reject) => {
      const on = (m: Record<string, unknown>) => {
        if (key in m) {
          child.off("message", on);
          resolve(m[key] as T);
        }
      };
      child.on("message", on);
      void exited.then((code) => reject(new Error(`the server process exited (${code}) before sending ${key}`)));
    });
  try {
    const url = await message<string>("url");
    const measure = () => {
      const m = message<MemoryReport>("report");
      child.send({ cmd: "measure" });
      return m;
    };
    let sent = 0;
    const problems: string[] = [];
    const one = async (i: number) => {
      const kind = i % 10;
      if (kind === 8) {
        const r = await post(`${url}/v1/completions`, { prompt: `bad ${i}`, max_tokens: 1000 });
        if (r.status !== 400) problems.push(`#${i}: ${r.status}`);
        return;
      }
      if (kind === 9) {
        // a stream whose client leaves after the first chunk
        const ac = new AbortController();
        const r = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: `leave ${i}` }], max_tokens: 30, ignore_eos: true, stream: true }), signal: ac.signal });
        await r.body!.getReader().read();
        ac.abort();
        return;
      }
      const chat = kind === 5 || kind === 6;
      const body = chat
        ? { messages: [{ role: "user", content: `request ${i}` }], max_tokens: 2, stream: kind === 6 }
        : { prompt: `request ${i} ${"x".repeat(i % 8)}`, max_tokens: 2, n: kind === 7 ? 2 : 1, stream: kind === 4 };
      const r = await post(`${url}/v1/${chat ? "chat/completions" : "completions"}`, body, {}, 30_000);
      if (r.status !== 200) problems.push(`#${i}: ${r.status} ${r.text.slice(0, 200)}`);
    };
    const run = async (upTo: number) => {
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          for (let i = sent++; i < upTo; i = sent++) await one(i);
        }),
      );
      sent = upTo;
    };
    await run(200);
    const early = await measure();
    await run(2000);
    const late = await measure();
    t.diagnostic(`after 200: rss ${(early.rss / 2 ** 20).toFixed(1)} MiB, heap ${(early.heapUsed / 2 ** 20).toFixed(1)} MiB, torchts ${early.liveBytes} B in ${early.liveBuffers} buffers, ${early.compiled} executables`);
    t.diagnostic(`after 2000: rss ${(late.rss / 2 ** 20).toFixed(1)} MiB, heap ${(late.heapUsed / 2 ** 20).toFixed(1)} MiB, torchts ${late.liveBytes} B in ${late.liveBuffers} buffers, ${late.compiled} executables`);
    assert.deepEqual(problems, []);
    for (const m of [early, late]) assert.deepEqual([m.running, m.waiting, m.kvCacheUsage], [0, 0, 0], "the engine is idle when measured");
    assert.ok(late.rss <= early.rss * 1.1, `RSS grew from ${early.rss} to ${late.rss} bytes`);
    assert.ok(late.liveBytes <= early.liveBytes * 1.1, `torchts live bytes grew from ${early.liveBytes} to ${late.liveBytes}`);
    assert.ok(late.liveBuffers <= early.liveBuffers * 1.1, `torchts live buffers grew from ${early.liveBuffers} to ${late.liveBuffers}`);
    child.send({ cmd: "stop" });
    assert.equal(await exited, 0);
  } finally {
    if (child.exitCode === null) child.kill();
  }
});
