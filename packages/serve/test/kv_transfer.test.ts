// Prefill/decode disaggregation with vLLM's connector protocol: a prefill replica answers a rewritten
// request (max_tokens 1, do_remote_decode) with kv_transfer_params; a decode replica given them pulls the
// prompt's KV blocks (POST /v1/kv_blocks) and computes only the rest; greedy output is the single
// replica's. A prefill replica that is gone, or a wrong hash, falls back to computing the prompt.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { load, modelDir } from "./helpers.js";
import { post, startServer, type Running } from "./server_helpers.js";
import { sampleValue, scrape } from "./robust_helpers.js";

let model: PreTrainedModel;
let tokenizer: PreTrainedTokenizer;
let prefill: Running;
let decode: Running;
before(async () => {
  ({ model, tokenizer } = await load(modelDir({ maxPositionEmbeddings: 1024 })));
  prefill = await startServer(model, tokenizer, { maxNumSeqs: 4 }, { kvTransfer: true });
  decode = await startServer(model, tokenizer, { maxNumSeqs: 4 }, { kvTransfer: true });
});
after(async () => {
  await prefill.close();
  await decode.close();
});

const prompt = Array.from({ length: 600 }, (_, i) => 3 + ((i * 29 + 7) % 250));
const request = { model: "tiny-llama", prompt, max_tokens: 12, temperature: 0, ignore_eos: true };

test("P/D: prefill on one replica, decode on another pulls the blocks; output equals a single replica's", async () => {
  const single = (await post(`${prefill.url}/v1/completions`, { ...request, cache_salt: "solo" })).json();
  const pre = await post(`${prefill.url}/v1/completions`, { ...request, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true } });
  assert.equal(pre.status, 200);
  const ktp = pre.json().kv_transfer_params;
  assert.equal(ktp.do_remote_prefill, true);
  assert.equal(ktp.remote_host, "127.0.0.1");
  assert.equal(ktp.remote_port, Number(new URL(prefill.url).port));
  assert.equal(ktp.remote_block_hashes.length, Math.floor(600 / 16));
  const dec = await post(`${decode.url}/v1/completions`, { ...request, kv_transfer_params: ktp });
  assert.equal(dec.status, 200);
  const body = dec.json();
  assert.equal(body.choices[0].text, single.choices[0].text);
  assert.ok(body.usage.prompt_tokens_details.cached_tokens >= 600 - 16, JSON.stringify(body.usage));
  const m = await scrape(decode.url);
  assert.ok(sampleValue(m, "torchts:kv_transfer_blocks_total") >= 37);
});

test("P/D falls back to computing the prompt when the prefill replica is unreachable or the blocks do not match", async () => {
  const p2 = prompt.map((t) => (t * 3) % 250 + 3);
  const single = (await post(`${decode.url}/v1/completions`, { ...request, prompt: p2, cache_salt: "solo2" })).json();
  const bad = { do_remote_prefill: true, remote_host: "127.0.0.1", remote_port: 1, remote_block_hashes: ["x"], remote_engine_id: "gone" };
  const r1 = await post(`${decode.url}/v1/completions`, { ...request, prompt: p2, cache_salt: "a", kv_transfer_params: { ...bad, remote_port: Number(new URL(prefill.url).port) } });
  assert.equal(r1.status, 200);
  assert.equal(r1.json().choices[0].text, single.choices[0].text);
  assert.equal(r1.json().usage.prompt_tokens_details.cached_tokens, 0);
  const pre = (await post(`${prefill.url}/v1/completions`, { ...request, prompt: p2, max_tokens: 1, cache_salt: "b", kv_transfer_params: { do_remote_decode: true } })).json();
  await prefill.close();
  const r2 = await post(`${decode.url}/v1/completions`, { ...request, prompt: p2, cache_salt: "b", kv_transfer_params: pre.kv_transfer_params });
  assert.equal(r2.status, 200);
  assert.equal(r2.json().choices[0].text, single.choices[0].text);
  prefill = await startServer(model, tokenizer, { maxNumSeqs: 4 }, { kvTransfer: true });
  const r3 = await post(`${decode.url}/v1/completions`, { ...request, stream: true, kv_transfer_params: { do_remote_decode: true } });
  assert.equal(r3.status, 400);
});

test("without --kv-transfer the field is ignored and /v1/kv_blocks is 404", async () => {
  const plain = await startServer(model, tokenizer, { maxNumSeqs: 2 });
  try {
    const r = await post(`${plain.url}/v1/completions`, { ...request, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    assert.equal(r.status, 200);
    assert.equal(r.json().kv_transfer_params, undefined);
    const k = await post(`${plain.url}/v1/kv_blocks`, { token_ids: [1, 2, 3] });
    assert.equal(k.status, 404);
  } finally {
    await plain.close();
  }
});
