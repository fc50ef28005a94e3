// Prefill/decode disaggregation between `torchts serve` replicas, with vLLM's connector protocol on the
// request: a router sends the prompt to a prefill replica with `kv_transfer_params: {do_remote_decode:
// true}` (and max_tokens 1); that replica answers with `kv_transfer_params: {do_remote_prefill: true,
// remote_host, remote_port, remote_engine_id, remote_block_hashes, cache_salt}`; the router passes those
// to a decode replica, which pulls the prompt's KV blocks from the prefill replica (POST /v1/kv_blocks,
// plain TCP/HTTP) into its own prefix cache before it schedules the request, so it computes only the
// rest. Any failure falls back to computing the prompt (the decode replica never fails a request for it).
import { HostKVTier } from "./hicache.js";
import type { LLMEngine } from "./engine.js";

export interface KvTransferParams {
  do_remote_decode?: boolean;
  do_remote_prefill?: boolean;
  remote_host?: string;
  remote_port?: number;
  remote_engine_id?: string;
  remote_block_hashes?: string[];
  cache_salt?: string;
}

/** What a prefill replica returns for a prompt it computed: where to pull it from and the blocks' names. */
export function prefillResponse(engine: LLMEngine, engineId: string, host: string, port: number, prompt: readonly number[], salt: string): KvTransferParams {
  return {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_host: host,
    remote_port: port,
    remote_engine_id: engineId,
    remote_block_hashes: HostKVTier.keys(salt, [...prompt], engine.blockSize),
    cache_salt: salt,
  };
}

/** The body of POST /v1/kv_blocks: the cached blocks of `tokens`, concatenated, and their layout. */
export async function exportBlocks(engine: LLMEngine, tokens: readonly number[], salt: string): Promise<{ body: Buffer; headers: Record<string, string> }> {
  const blocks = await engine.exportPrefix(tokens, salt);
  const body = Buffer.concat(blocks.map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength)));
  return {
    body,
    headers: { "content-type": "application/octet-stream", "x-kv-blocks": String(blocks.length), "x-kv-layout": JSON.stringify(engine.kvLayout) },
  };
}

/**
 * Decode side: pull the prompt's blocks named in `p` from the prefill replica and import them. Returns the
 * blocks imported (0 on any failure: the prompt is then computed here).
 */
export async function pullBlocks(engine: LLMEngine, p: KvTransferParams, prompt: readonly number[], apiKey: string | undefined, timeoutMs = 30_000): Promise<number> {
  const salt = p.cache_salt ?? "";
  if (!p.remote_host || !Number.isInteger(p.remote_port) || !Array.isArray(p.remote_block_hashes)) return 0;
  // import only the blocks whose chained hashes match this replica's view of the prompt
  const mine = HostKVTier.keys(salt, [...prompt], engine.blockSize);
  let same = 0;
  while (same < mine.length && same < p.remote_block_hashes.length && mine[same] === p.remote_block_hashes[same]) same++;
  if (same === 0) return 0;
  const host = p.remote_host.includes(":") ? `[${p.remote_host}]` : p.remote_host;
  try {
    const r = await fetch(`http://${host}:${p.remote_port}/v1/kv_blocks`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
      body: JSON.stringify({ token_ids: prompt.slice(0, same * engine.blockSize), cache_salt: salt }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (r.status !== 200) return 0;
    const layout = r.headers.get("x-kv-layout");
    if (layout !== JSON.stringify(engine.kvLayout)) return 0;
    const n = Number(r.headers.get("x-kv-blocks"));
    const buf = new Uint8Array(await r.arrayBuffer());
    const { layers, kvHeads, headDim, blockSize } = engine.kvLayout;
    const per = layers * 2 * blockSize * kvHeads * headDim;
    if (!Number.isInteger(n) || n < 0 || buf.byteLength !== n * per * 4) return 0;
    const all = new Float32Array(buf.buffer, buf.byteOffset, n * per);
    const blocks = Array.from({ length: Math.min(n, same) }, (_, i) => all.slice(i * per, (i + 1) * per));
    return engine.importPrefix(prompt, blocks, salt);
  } catch {
    return 0;
  }
}
