// Starts an in-process router (createRouter over a validated config) on 127.0.0.1 with a random port,
// and small bounded HTTP helpers for the tests.
import { createRouter, validateConfig, type Router } from "../src/index.js";

export interface RunningRouter {
  url: string;
  router: Router;
  close(): Promise<void>;
}

/** `extra` is merged into the configuration's top level (replicas default to role both). */
export async function startRouter(replicas: (string | { url: string; role?: string; name?: string })[], extra: Record<string, unknown> = {}): Promise<RunningRouter> {
  const cfg = validateConfig({
    apiVersion: "torchts.router/v1",
    replicas: replicas.map((r) => (typeof r === "string" ? { url: r } : r)),
    server: { host: "127.0.0.1", port: 0 },
    ...extra,
  });
  const router = await createRouter(cfg);
  const url = await router.listen(0);
  return { url, router, close: () => router.close() };
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: () => any;
}

/** POST JSON with a time limit. */
export async function post(url: string, body: unknown, headers: Record<string, string> = {}, timeoutMs = 30_000): Promise<Reply> {
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: raw, signal: AbortSignal.timeout(timeoutMs) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: () => JSON.parse(text) };
}

/** Poll `cond` every 10 ms for at most `ms`. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return cond();
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
