// GET /v1/kv_events: a snapshot of the prefix cache, then BlockStored (chained block hashes, as
// HostKVTier.keys computes them, so a router can hash prompts itself) and BlockRemoved when the pool
// evicts; 404 when the server was started without it.
import { before, test } from "node:test";
import assert from "node:assert/strict";
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { HostKVTier } from "../src/hicache.js";
import { load, modelDir } from "./helpers.js";
import { post, startServer } from "./server_helpers.js";

let model: PreTrainedModel;
let tokenizer: PreTrainedTokenizer;
before(async () => {
  ({ model, tokenizer } = await load(modelDir({ maxPositionEmbeddings: 512 })));
});

interface Ev { seq: number; type: string; block_hashes: string[]; parent_block_hash?: string | null; token_ids?: number[]; cache_salt: string }

/** Reads SSE events from the stream until `until` holds (bounded in time). */
async function reader(url: string) {
  const ac = new AbortController();
  const r = await fetch(url, { signal: ac.signal });
  assert.equal(r.status, 200);
  const events: Ev[] = [];
  const dec = new TextDecoder();
  let buf = "";
  const pump = (async () => {
    try {
      for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
        buf += dec.decode(chunk, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (line.startsWith("data: ")) events.push(JSON.parse(line.slice(6)) as Ev);
        }
      }
    } catch {
      /* aborted */
    }
  })();
  return {
    events,
    async until(cond: () => boolean, ms = 5000) {
      const end = Date.now() + ms;
      while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      return cond();
    },
    async close() {
      ac.abort();
      await pump;
    },
  };
}

test("KV events: snapshot, BlockStored with the prompt's chained hashes, BlockRemoved on eviction", async () => {
  const srv = await startServer(model, tokenizer, { maxNumSeqs: 2, numKvBlocks: 12, kvEvents: true }, { kvEvents: true });
  try {
    const a = Array.from({ length: 70 }, (_, i) => 3 + ((i * 7) % 250));
    // something cached before the subscriber connects comes in its snapshot
    assert.equal((await post(`${srv.url}/v1/completions`, { prompt: a, max_tokens: 2, temperature: 0 })).status, 200);
    const ev = await reader(`${srv.url}/v1/kv_events`);
    const keysA = HostKVTier.keys("", a, 16);
    assert.ok(await ev.until(() => ev.events.some((e) => e.type === "BlockStored")));
    const snap = ev.events.filter((e) => e.type === "BlockStored").flatMap((e) => e.block_hashes);
    for (const k of keysA.slice(0, 4)) assert.ok(snap.includes(k), "the snapshot names a's blocks by their chained hashes");
    // a new prompt under another salt: stored under its own hashes; the small pool evicts a's blocks
    const b = Array.from({ length: 150 }, (_, i) => 3 + ((i * 11 + 5) % 250));
    assert.equal((await post(`${srv.url}/v1/completions`, { prompt: b, max_tokens: 2, temperature: 0, cache_salt: "t2" })).status, 200);
    const keysB = HostKVTier.keys("t2", b, 16);
    assert.ok(await ev.until(() => ev.events.some((e) => e.type === "BlockStored" && e.cache_salt === "t2")));
    const stored = ev.events.filter((e) => e.type === "BlockStored" && e.cache_salt === "t2");
    assert.deepEqual(stored.flatMap((e) => e.block_hashes), keysB.slice(0, stored.flatMap((e) => e.block_hashes).length));
    assert.equal(stored[0]!.parent_block_hash, null);
    assert.deepEqual(stored[0]!.token_ids!.slice(0, 16), b.slice(0, 16));
    assert.ok(await ev.until(() => ev.events.some((e) => e.type === "BlockRemoved")));
    const removed = ev.events.filter((e) => e.type === "BlockRemoved").flatMap((e) => e.block_hashes);
    assert.ok(removed.every((k) => keysA.includes(k)), "evicted: a's blocks");
    assert.deepEqual(ev.events.map((e) => e.seq), ev.events.map((_, i) => i));
    await ev.close();
  } finally {
    await srv.close();
  }
  const off = await startServer(model, tokenizer, {});
  try {
    const r = await fetch(`${off.url}/v1/kv_events`);
    assert.equal(r.status, 404);
    assert.equal(((await r.json()) as { error: { type: string } }).error.type, "not_found_error");
  } finally {
    await off.close();
  }
});
