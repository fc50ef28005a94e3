// Clients that go away: streaming, non-streaming, waiting in the queue, with n choices, many at once.
// Each one's request ends with 'abort' within one engine step of the server seeing its socket close;
// the requests still connected finish untouched (the same greedy text as alone); afterwards running,
// waiting, vllm:kv_cache_usage_perc and torchts's live device bytes are back at their baseline.
// (server.test.ts checks the single fetch()-aborted stream; these cover the rest.)
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import v8 from "node:v8";
import vm from "node:vm";
import * as torch from "torchts";
import { load, modelDir } from "./helpers.js";
import { sampleValue, scrape } from "./robust_helpers.js";
import { post, startServer, until, type Running } from "./server_helpers.js";

let srv: Running;
let port: number;
/** engine.stats.steps when the server saw each client's socket close, by the client's port. */
const closedAtStep = new Map<number, number>();
/** Per engine request id: its finish reason, the step count then, and how many tokens it made. */
const finished = new Map<string, { reason: string; step: number }>();
const tokens = new Map<string, number[]>();
const prefilled = new Set<string>();
let baseline: { kv: number; liveBytes: number };

before(async () => {
  const { model, tokenizer } = await load(modelDir());
  srv = await startServer(model, tokenizer, { maxNumSeqs: 4 });
  port = Number(new URL(srv.url).port);
  srv.server.app.server.on("connection", (s: net.Socket) => {
    const remote = s.remotePort!;
    s.on("close", () => closedAtStep.set(remote, srv.engine.stats.steps));
  });
  srv.engine.onEvent((e) => {
    if (e.type === "prefill") prefilled.add(e.requestId);
    else if (e.type === "token") tokens.set(e.requestId, [...(tokens.get(e.requestId) ?? []), srv.engine.stats.steps]);
    else if (e.type === "finish") finished.set(e.requestId, { reason: e.reason, step: srv.engine.stats.steps });
  });
  // warm up, so that lazily made buffers are part of the baseline
  assert.equal((await post(`${srv.url}/v1/completions`, { prompt: "warm", max_tokens: 4 })).status, 200);
  await collect();
  baseline = { kv: srv.engine.stats.kvCacheUsage, liveBytes: torch.memory.stats().liveBytes };
});
after(async () => {
  await srv.close();
});

/** An HTTP client on a bare socket: it sees the bytes as they come and can vanish at any point. */
class RawClient {
  data = "";
  closed = false;
  /** Read once connected: a destroyed socket no longer knows its port. */
  readonly localPort: number;
  private constructor(readonly sock: net.Socket) {
    this.localPort = sock.localPort!;
    sock.on("data", (d: Buffer) => (this.data += d.toString("utf8")));
    sock.on("close", () => (this.closed = true));
    sock.on("error", () => {});
  }
  static async open(path: string, body: unknown): Promise<RawClient> {
    const sock = net.connect(port, "127.0.0.1");
    await new Promise<void>((r) => sock.once("connect", () => r()));
    const c = new RawClient(sock);
    const b = Buffer.from(JSON.stringify(body));
    sock.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${b.length}\r\n\r\n`);
    sock.write(b);
    return c;
  }
  /** The response id of a stream (chatcmpl-… / cmpl-…): the engine's request ids start with it. */
  get streamId(): string | null {
    return /"id":"((?:chat)?cmpl-[0-9a-f]+)"/.exec(this.data)?.[1] ?? null;
  }
  /** The number of SSE events with text so far. */
  get pieces(): number {
    return (this.data.match(/"(content|text)":"[^"]/g) ?? []).length;
  }
  kill(): void {
    this.sock.destroy();
  }
}

/** The engine request ids that belong to response `id`. */
const idsOf = (id: string) => [...new Set([...prefilled, ...finished.keys()])].filter((r) => r.startsWith(`${id}-`));

/** Each engine request of a client killed mid-run ended with 'abort' at most one step after the server saw the close, and made at most one token after it. */
async function assertAbortedWithinOneStep(c: RawClient, ids: string[]): Promise<void> {
  assert.ok(ids.length > 0, "no engine request found for this client");
  assert.ok(await until(() => closedAtStep.has(c.localPort), 5000), "the server never saw the socket close");
  assert.ok(await until(() => ids.every((id) => finished.has(id)), 5000), `not finished: ${ids.filter((id) => !finished.has(id))}`);
  const closeStep = closedAtStep.get(c.localPort)!;
  for (const id of ids) {
    const f = finished.get(id)!;
    assert.equal(f.reason, "abort", id);
    assert.ok(f.step - closeStep <= 1, `${id} ended ${f.step - closeStep} steps after its client went away`);
    const late = (tokens.get(id) ?? []).filter((s) => s > closeStep).length;
    assert.ok(late <= 1, `${id} made ${late} tokens after its client went away`);
  }
}

// torchts frees unreachable buffers from a FinalizationRegistry: collect garbage before counting live bytes
v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;
async function collect(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function assertBaseline(): Promise<void> {
  assert.ok(await until(() => srv.engine.stats.running === 0 && srv.engine.stats.waiting === 0, 10_000), JSON.stringify(srv.engine.stats));
  const m = await scrape(srv.url);
  assert.equal(sampleValue(m, "vllm:num_requests_running"), 0);
  assert.equal(sampleValue(m, "vllm:num_requests_waiting"), 0);
  assert.equal(sampleValue(m, "vllm:kv_cache_usage_perc"), baseline.kv);
  await collect();
  assert.equal(torch.memory.stats().liveBytes, baseline.liveBytes, "device bytes held after the aborted requests");
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
}

const LONG = { max_tokens: 100, ignore_eos: true, temperature: 0 };

test("streams that disconnect mid-run (running and waiting) end at once; the others finish with their solo text", { timeout: 60_000 }, async () => {
  const prompt = (i: number) => `stream number ${i}`;
  const solo = async (i: number) => (await post(`${srv.url}/v1/completions`, { prompt: prompt(i), max_tokens: 12, temperature: 0 })).json().choices[0].text as string;
  const expected = [await solo(0), await solo(1)];
  // six streams on four slots: 0 and 1 stay; 2, 3 (running) and 5 (waiting) go away; 4 waits and then runs
  const clients: RawClient[] = [];
  for (let i = 0; i < 6; i++) {
    const body = i < 2 ? { prompt: prompt(i), max_tokens: 12, temperature: 0, stream: true } : { prompt: prompt(i), ...LONG, stream: true };
    clients.push(await RawClient.open("/v1/completions", body));
  }
  assert.ok(await until(() => clients.slice(2, 4).every((c) => c.pieces >= 2) && srv.engine.stats.waiting >= 1, 10_000), JSON.stringify(srv.engine.stats));
  for (const i of [2, 3, 5]) clients[i]!.kill();
  for (const i of [2, 3]) await assertAbortedWithinOneStep(clients[i]!, idsOf(clients[i]!.streamId!));
  assert.ok(await until(() => clients.slice(0, 2).every((c) => c.data.includes("data: [DONE]")), 20_000));
  for (const i of [0, 1]) {
    const text = [...clients[i]!.data.matchAll(/^data: (\{.*\})$/gm)].map((m) => (JSON.parse(m[1]!) as { choices: { text?: string }[] }).choices[0]?.text ?? "").join("");
    assert.equal(text, expected[i], `stream ${i} changed by its neighbours' disconnects`);
  }
  clients[4]!.kill();
  await assertAbortedWithinOneStep(clients[4]!, await waitIds(clients[4]!));
  for (const c of clients.slice(0, 2)) c.kill();
  await assertBaseline();
});

/** The engine ids of a client, once its stream has shown its id and the engine has prefilled it. */
async function waitIds(c: RawClient): Promise<string[]> {
  assert.ok(await until(() => c.streamId !== null && idsOf(c.streamId).length > 0, 10_000), `no stream id in ${c.data.slice(0, 300)}`);
  return idsOf(c.streamId!);
}

test("a client waiting in the queue that goes away is dropped before it runs", { timeout: 60_000 }, async () => {
  const busy: RawClient[] = [];
  for (let i = 0; i < 4; i++) busy.push(await RawClient.open("/v1/completions", { prompt: `busy ${i}`, ...LONG, stream: true }));
  assert.ok(await until(() => srv.engine.stats.running === 4 && busy.every((c) => c.pieces >= 1), 10_000));
  const waiter = await RawClient.open("/v1/chat/completions", { messages: [{ role: "user", content: "wait" }], ...LONG, stream: true });
  assert.ok(await until(() => srv.engine.stats.waiting === 1 && waiter.streamId !== null, 10_000), JSON.stringify(srv.engine.stats));
  const id = waiter.streamId!;
  waiter.kill();
  assert.ok(await until(() => srv.engine.stats.waiting === 0, 5000));
  assert.ok(await until(() => finished.has(`${id}-0`) || [...finished.keys()].some((k) => k.startsWith(id)), 5000));
  const mine = [...finished.keys()].filter((k) => k.startsWith(id));
  for (const k of mine) {
    assert.equal(finished.get(k)!.reason, "abort");
    assert.ok(!prefilled.has(k), "a request whose client left while it waited was prefilled");
  }
  assert.ok(closedAtStep.has(waiter.localPort));
  for (const c of busy) c.kill();
  for (const c of busy) await assertAbortedWithinOneStep(c, idsOf(c.streamId!));
  await assertBaseline();
});

test("a non-streaming client that goes away mid-generation aborts its request", { timeout: 60_000 }, async () => {
  const seen = prefilled.size;
  const c = await RawClient.open("/v1/completions", { prompt: "not streamed", ...LONG });
  assert.ok(await until(() => prefilled.size > seen, 10_000));
  const id = [...prefilled].at(-1)!;
  assert.ok(await until(() => (tokens.get(id)?.length ?? 0) >= 3, 10_000));
  c.kill();
  await assertAbortedWithinOneStep(c, [id]);
  assert.ok((tokens.get(id)?.length ?? 0) < 100);
  await assertBaseline();
});

test("n = 3 choices of one stream all end when its client goes away", { timeout: 60_000 }, async () => {
  const c = await RawClient.open("/v1/chat/completions", { messages: [{ role: "user", content: "three" }], n: 3, ...LONG, temperature: 1, seed: 5, stream: true });
  assert.ok(await until(() => c.pieces >= 3, 10_000));
  const ids = idsOf(c.streamId!);
  assert.equal(ids.length, 3);
  c.kill();
  await assertAbortedWithinOneStep(c, ids);
  await assertBaseline();
});

test("24 clients that vanish at random points leave nothing behind", { timeout: 60_000 }, async () => {
  let s = 99;
  const r = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const clients = await Promise.all(
    Array.from({ length: 24 }, (_, i) =>
      RawClient.open(i % 2 ? "/v1/completions" : "/v1/chat/completions", i % 2 ? { prompt: `p${i}`, ...LONG, stream: i % 3 !== 0 } : { messages: [{ role: "user", content: `m${i}` }], ...LONG, stream: i % 3 !== 0 }),
    ),
  );
  // each goes after a random number of engine steps (0 to 60): some before they run, some mid-run
  const start = srv.engine.stats.steps;
  const leaveAt = clients.map(() => Math.floor(r() * 60));
  await until(() => {
    clients.forEach((c, i) => srv.engine.stats.steps - start >= leaveAt[i]! && !c.closed && c.kill());
    return clients.every((c) => c.closed);
  }, 20_000);
  assert.ok(clients.every((c) => c.closed));
  for (const c of clients) assert.ok(await until(() => closedAtStep.has(c.localPort), 5000));
  await assertBaseline();
});
