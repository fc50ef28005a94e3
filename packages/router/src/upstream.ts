// HTTP to the replicas over node:http with one keep-alive agent per replica (no connection set-up per
// request: that is most of what a proxy would add to time-to-first-byte). Failures are classified,
// because they mean different things to the router: a refused connection is a dead replica, a timeout
// a busy (stale) one.
import http from "node:http";

/** A keep-alive agent for one replica (each router has its own: closing one router closes only its sockets). */
export function keepAliveAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, keepAliveMsecs: 1000, maxSockets: Infinity, maxFreeSockets: 256, scheduling: "lifo" });
}

/** Where a request goes: the replica's URL and its agent. */
export interface Target {
  url: URL;
  agent: http.Agent;
}

export type FailureKind = "refused" | "timeout" | "reset" | "aborted" | "other";

export class UpstreamError extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
  ) {
    super(message);
  }
}

export function classify(e: unknown): UpstreamError {
  if (e instanceof UpstreamError) return e;
  const err = e as NodeJS.ErrnoException;
  const code = err?.code ?? "";
  if (code === "ECONNREFUSED" || code === "EHOSTUNREACH" || code === "ENOTFOUND" || code === "EADDRNOTAVAIL") return new UpstreamError("refused", err.message);
  if (code === "ECONNRESET" || code === "EPIPE" || err?.message === "socket hang up") return new UpstreamError("reset", err.message);
  if (code === "ABORT_ERR" || err?.name === "AbortError") return new UpstreamError("aborted", err.message);
  return new UpstreamError("other", err?.message ?? String(e));
}

export interface Simple {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One whole request/response (health, metrics, prefill, tokenize), bounded by `timeoutMs` and `signal`. */
export function request(t: Target, method: string, path: string, body: Buffer | null, headers: Record<string, string>, timeoutMs: number, signal?: AbortSignal): Promise<Simple> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new UpstreamError("aborted", "aborted"));
    const base = t.url;
    const req = http.request(
      {
        host: base.hostname,
        port: base.port || 80,
        method,
        path,
        agent: t.agent,
        headers: { ...headers, ...(body ? { "content-length": String(body.byteLength) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          cleanup();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
        });
        res.on("error", (e) => {
          cleanup();
          reject(classify(e));
        });
      },
    );
    const timer = setTimeout(() => req.destroy(new UpstreamError("timeout", `no answer from ${base.host}${path} in ${timeoutMs} ms`)), timeoutMs);
    const onAbort = () => req.destroy(new UpstreamError("aborted", "aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    req.on("error", (e) => {
      cleanup();
      reject(classify(e));
    });
    req.end(body ?? undefined);
  });
}
