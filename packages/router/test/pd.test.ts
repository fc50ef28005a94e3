// Prefill/decode disaggregation through the router, with real `torchts serve --kv-transfer` replicas: a
// long prompt is prefilled on the prefill replica and decoded on the decode replica (which pulls the
// blocks: cached_tokens shows it) with greedy output identical to a single replica's; the prefill leg on
// the wire is the connector contract (seen through a recording tap in front of the prefill replica); a
// short prompt stays decode-only; with the prefill replica killed, requests fall back and none fails.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { decodeRequest, prefillRequest } from "../src/index.js";
import { metric, modelDir, spawnReplica, type ChildReplica } from "./replicas.js";
import { post, startRouter, until, type RunningRouter } from "./router_helpers.js";

const dir = modelDir();
let prefill: ChildReplica, decode: ChildReplica, single: ChildReplica;
let rt: RunningRouter;
let tap: http.Server;
/** What the prefill replica was sent on its completion routes (the tap records, then forwards). */
const seen: { path: string; body: any }[] = [];

function startTap(target: () => string): Promise<string> {
  tap = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.url!.startsWith("/v1/") && req.method === "POST") seen.push({ path: req.url!, body: JSON.parse(body.toString()) });
      const t = new URL(target());
      const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode!, ur.headers);
        ur.pipe(res);
      });
      up.on("error", () => {
        if (!res.headersSent) res.writeHead(502).end();
      });
      up.end(body);
    });
  });
  return new Promise((r) => tap.listen(0, "127.0.0.1", () => r(`http://127.0.0.1:${(tap.address() as { port: number }).port}`)));
}

before(async () => {
  [prefill, decode, single] = await Promise.all([spawnReplica(dir, ["--kv-transfer"]), spawnReplica(dir, ["--kv-transfer"]), spawnReplica(dir)]);
  const tapUrl = await startTap(() => prefill.url);
  rt = await startRouter(
    [
      { url: tapUrl, role: "prefill", name: "prefill-0" },
      { url: decode.url, role: "decode", name: "decode-0" },
    ],
    { tokenizer: { model: dir }, disaggregation: { enabled: true, uncachedTokensThreshold: 64 } },
  );
});
after(async () => {
  await rt?.close();
  tap?.close();
  for (const r of [prefill, decode, single]) await r?.kill();
});

const longPrompt = (k: number) => `document ${k}: ` + Array.from({ length: 60 }, (_, i) => `w${(i * 7 + k) % 31}`).join(" ");
const decisions = async (t: string) => {
  const text = await (await fetch(`${rt.url}/metrics`)).text();
  return Number(new RegExp(`torchts_router_disagg_decision_total\\{decision_type="${t}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
};

test("the prefill leg is the connector contract: max_tokens 1, not streamed, kv_transfer_params.do_remote_decode", () => {
  const original = { model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 50, max_completion_tokens: 50, stream: true, stream_options: { include_usage: true }, temperature: 0, cache_salt: "s" };
  const p = prefillRequest(original);
  assert.deepEqual(p, {
    model: "m",
    messages: [{ role: "user", content: "x" }],
    max_tokens: 1,
    max_completion_tokens: 1,
    stream: false,
    temperature: 0,
    cache_salt: "s",
    kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null },
  });
  assert.equal(original.max_tokens, 50, "the original is not modified");
  const ktp = { do_remote_prefill: true, remote_host: "h", remote_port: 1, remote_block_hashes: ["a"], remote_engine_id: "e", cache_salt: "s" };
  assert.deepEqual(decodeRequest(original, ktp), { ...original, kv_transfer_params: ktp });
});

test("a long prompt: prefilled on the prefill replica, decoded on the decode replica, output identical to one replica", async () => {
  for (const stream of [false, true]) {
    seen.length = 0;
    const body = { model: "tiny", prompt: longPrompt(stream ? 1 : 0), max_tokens: 12, temperature: 0, ignore_eos: true, stream };
    const pulled = await metric(decode.url, "torchts:kv_transfer_blocks_total");
    const r = await post(`${rt.url}/v1/completions`, stream ? { ...body, stream_options: { include_usage: true } } : body);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get("x-torchts-prefill-replica"), "prefill-0");
    assert.equal(r.headers.get("x-torchts-replica"), "decode-0");
    // on the wire: the connector's rewrite of what the client sent
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.path, "/v1/completions");
    assert.deepEqual(seen[0]!.body, prefillRequest(stream ? { ...body, stream_options: { include_usage: true } } : body));
    const ref = await post(`${single.url}/v1/completions`, stream ? { ...body, stream_options: { include_usage: true } } : body);
    const text = (t: string) =>
      stream
        ? t.split("\n\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6))).map((c) => c.choices[0]?.text ?? "").join("")
        : JSON.parse(t).choices[0].text;
    assert.equal(text(r.text), text(ref.text));
    const usage = stream ? JSON.parse(r.text.split("\n\n").filter((l) => l.includes('"usage":{'))[0]!.slice(6)).usage : r.json().usage;
    assert.ok(usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 16, `decode reused the pulled blocks: ${JSON.stringify(usage)}`);
    assert.ok((await metric(decode.url, "torchts:kv_transfer_blocks_total")) > pulled);
  }
  assert.equal(await decisions("prefill-decode"), 2);
});

test("a short prompt is decode-only", async () => {
  seen.length = 0;
  const r = await post(`${rt.url}/v1/completions`, { model: "tiny", prompt: "short", max_tokens: 3, temperature: 0 });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("x-torchts-prefill-replica"), null);
  assert.equal(seen.length, 0);
  assert.equal(await decisions("decode-only"), 1);
});

test("with the prefill replica killed, requests fall back to decode-only and none fails", async () => {
  await prefill.kill();
  const results = await Promise.all(
    [2, 3, 4].map(async (k) => {
      const body = { model: "tiny", prompt: longPrompt(k), max_tokens: 8, temperature: 0, ignore_eos: true };
      const r = await post(`${rt.url}/v1/completions`, body);
      const ref = await post(`${single.url}/v1/completions`, body);
      return { r, ref };
    }),
  );
  for (const { r, ref } of results) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json().choices[0].text, ref.json().choices[0].text);
  }
  assert.ok(await until(() => !rt.router.pool.get("prefill-0")!.healthy, 5000), "the prefill replica left the pool");
  const after = await post(`${rt.url}/v1/completions`, { model: "tiny", prompt: longPrompt(5), max_tokens: 4, temperature: 0 });
  assert.equal(after.status, 200);
  assert.equal(after.headers.get("x-torchts-prefill-replica"), null);
  assert.equal((await decisions("prefill-fallback")) + (await decisions("decode-only")), 1 + 3 + 1, "each request counted once");
});
