// Starts createServer() on 127.0.0.1 with a random port, over the fixture model.
import type { PreTrainedModel, PreTrainedTokenizer } from "torchts/transformers";
import { LLMEngine, type LLMEngineOptions } from "../src/engine.js";
import { createServer, type Server, type ServerOptions } from "../src/server.js";

export interface Running {
  url: string;
  engine: LLMEngine;
  server: Server;
  close(): Promise<void>;
}

export async function startServer(
  model: PreTrainedModel,
  tokenizer: PreTrainedTokenizer,
  engineOpts: Partial<LLMEngineOptions> = {},
  serverOpts: Partial<ServerOptions> = {},
): Promise<Running> {
  const engine = new LLMEngine({ model, tokenizer, ...engineOpts });
  const server = await createServer({ engine, modelName: "tiny-llama", ...serverOpts });
  const url = await server.app.listen({ host: "127.0.0.1", port: 0 });
  return {
    url,
    engine,
    server,
    async close() {
      await engine.close({ abortAll: true });
      await server.app.close();
    },
  };
}

/** POST JSON (or raw bytes) with a time limit; returns status, headers and the body text. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}, timeoutMs = 20000): Promise<{ status: number; headers: Headers; text: string; json: () => any }> {
  const raw = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: raw as BodyInit, signal: AbortSignal.timeout(timeoutMs) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: () => JSON.parse(text) };
}

/** Poll `cond` every 5 ms for at most `ms`. */
export async function until(cond: () => boolean, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  return cond();
}
