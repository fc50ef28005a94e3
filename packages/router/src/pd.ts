// Prefill/decode disaggregation, vLLM's connector protocol (as llm-d's sidecar speaks it): the prefill
// replica gets the original request rewritten to compute the prompt only, `max_tokens: 1`, not streamed,
// `kv_transfer_params: {do_remote_decode: true}`; its answer's `kv_transfer_params` (where the blocks are:
// remote_host, remote_port, remote_block_hashes, remote_engine_id, cache_salt) go with the original
// request to the decode replica, which pulls the blocks and decodes. Any failure of the prefill leg
// leaves the original request to the decode replica alone (decode-only fallback).
import type { Replica } from "./pool.js";
import type { Body } from "./request_info.js";
import { request } from "./upstream.js";

/** The prefill leg's body: the original, computing the prompt and one token, answered as one JSON body. */
export function prefillRequest(body: Body): Body {
  const b: Body = { ...body, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null } };
  // stream_options is only valid on a stream; a chat request's max_completion_tokens outranks max_tokens
  delete b.stream_options;
  if ("max_completion_tokens" in b) b.max_completion_tokens = 1;
  return b;
}

/** The decode leg's body: the original request, with where to pull the prompt's KV blocks from. */
export function decodeRequest(body: Body, kvTransferParams: Body): Body {
  return { ...body, kv_transfer_params: kvTransferParams };
}

export type PrefillResult = { ok: true; params: Body } | { ok: false; why: string; refused: boolean };

/** Run the prefill leg on `r`; never throws. */
export async function runPrefill(r: Replica, path: string, body: Body, headers: Record<string, string | string[]>, timeoutMs: number, signal: AbortSignal): Promise<PrefillResult> {
  const h: Record<string, string> = { "content-type": "application/json" };
  for (const k of ["authorization", "x-request-id"]) if (typeof headers[k] === "string") h[k] = headers[k] as string;
  try {
    const res = await request(r, "POST", path, Buffer.from(JSON.stringify(prefillRequest(body))), h, timeoutMs, signal);
    if (res.status !== 200) return { ok: false, why: `prefill answered ${res.status}`, refused: false };
    const j = JSON.parse(res.body.toString("utf8")) as Body;
    const p = j.kv_transfer_params;
    if (!p || typeof p !== "object" || (p as Body).do_remote_prefill !== true) return { ok: false, why: "the prefill answer has no kv_transfer_params", refused: false };
    return { ok: true, params: p as Body };
  } catch (e) {
    const kind = (e as { kind?: string }).kind;
    return { ok: false, why: (e as Error).message, refused: kind === "refused" || kind === "reset" };
  }
}
