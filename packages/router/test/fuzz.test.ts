// Never trust a request: 400 mutated requests (fields of every JSON type in the places the router reads,
// odd headers, broken bodies) through the router in front of a real replica. None gets a 5xx from the
// router itself, every error body is OpenAI's shape, and the router still serves afterwards.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { uniformInt } from "pure-rand/distribution/uniformInt";
import { xoroshiro128plus } from "pure-rand/generator/xoroshiro128plus";
import { modelDir, spawnReplica, type ChildReplica } from "./replicas.js";
import { startRouter, type RunningRouter } from "./router_helpers.js";

let rep: ChildReplica;
let rt: RunningRouter;
before(async () => {
  rep = await spawnReplica(modelDir());
  rt = await startRouter([rep.url], { tokenizer: { model: modelDir() }, disaggregation: { enabled: false } });
});
after(async () => {
  await rt?.close();
  await rep?.kill();
});

const rng = xoroshiro128plus(20261201);
const pick = <T>(xs: readonly T[]): T => xs[uniformInt(rng, 0, xs.length - 1)]!;
const VALUES: unknown[] = [null, true, 0, -1, 1.5, 2 ** 53, -(2 ** 40), "", "x", "\u0000\uffff", [], [1, 2], ["a"], [[1], [2]], {}, { role: "user" }, { type: "text", text: 1 }, "9".repeat(400)];
const FIELDS = ["messages", "prompt", "model", "user", "priority", "cache_salt", "stream", "stream_options", "max_tokens", "tools", "add_generation_prompt", "kv_transfer_params", "n"];
const HEADERS: Record<string, string>[] = [
  {},
  { "x-torchts-priority": "-1" },
  { "x-torchts-priority": "1e9" },
  { "x-torchts-priority": " 7 " },
  { "x-session-token": "%%%" },
  { "x-session-token": Buffer.from("../../etc").toString("base64url") },
  { "x-session-token": "A".repeat(600) },
  { "x-gateway-inference-fairness-id": "t".repeat(300) },
  { "x-torchts-dry-run": "1" },
];

function mutated(): { path: string; body: string; headers: Record<string, string> } {
  const path = pick(["/v1/chat/completions", "/v1/completions"]);
  const base: Record<string, unknown> =
    path === "/v1/completions" ? { model: "tiny", prompt: "fuzz", max_tokens: 2 } : { model: "tiny", messages: [{ role: "user", content: "fuzz" }], max_tokens: 2 };
  for (let k = uniformInt(rng, 1, 3); k > 0; k--) base[pick(FIELDS)] = pick(VALUES);
  if (uniformInt(rng, 0, 9) === 0) base.messages = [pick(VALUES), { role: pick(VALUES), content: pick(VALUES) }];
  let body = JSON.stringify(base);
  const cut = uniformInt(rng, 0, 19);
  if (cut === 0) body = body.slice(0, uniformInt(rng, 0, body.length));
  else if (cut === 1) body = JSON.stringify(pick(VALUES));
  return { path, body, headers: pick(HEADERS) };
}

test("400 mutated requests: no 5xx from the router, OpenAI error bodies, still serving", { timeout: 120_000 }, async () => {
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < 400; i = next++) {
      const m = mutated();
      const r = await fetch(`${rt.url}${m.path}`, { method: "POST", headers: { "content-type": "application/json", ...m.headers }, body: m.body, signal: AbortSignal.timeout(30_000) });
      const text = await r.text();
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      assert.ok(r.status < 500 || r.headers.get("x-torchts-replica") !== null, `router ${r.status} for ${m.path} ${m.body.slice(0, 200)}: ${text.slice(0, 200)}`);
      if (r.status >= 400 && !text.startsWith("data:")) {
        const j = JSON.parse(text);
        assert.equal(typeof j.error?.message, "string", text);
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  console.log(`# statuses ${JSON.stringify([...statuses].sort())}`);
  const ok = await fetch(`${rt.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", prompt: "still there?", max_tokens: 2 }) });
  assert.equal(ok.status, 200);
  assert.equal((await (await fetch(`${rt.url}/health`)).json()).status, "ok");
});
