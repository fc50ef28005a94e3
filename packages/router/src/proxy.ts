// Forwarding one request to one replica and its response to the client: status and headers as the
// replica sent them (less hop-by-hop ones), and the body's bytes as they come, each chunk written to the
// client before the router looks at it, so SSE reaches the client byte for byte with nothing held back.
// A client that disconnects closes the upstream request, which the replica takes as its disconnect
// (torchts serve and vLLM abort the generation). Failures before any byte reached the client are
// reported as retryable: the router may then try another replica.
import http from "node:http";
import type { Replica } from "./pool.js";
import { classify, UpstreamError } from "./upstream.js";
import { StreamObserver } from "./stream_observer.js";

const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length", "expect"]);

/** Request headers a replica should see: the client's, less hop-by-hop ones and the router's own. */
export function upstreamHeaders(h: http.IncomingHttpHeaders, drop: ReadonlySet<string> = new Set()): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP_BY_HOP.has(k) && !drop.has(k)) out[k] = v;
  return out;
}

export type Outcome =
  | { kind: "done"; status: number; observer: StreamObserver | null }
  /** Nothing reached the client: another replica may be tried. */
  | { kind: "retry"; error: UpstreamError; status?: number }
  | { kind: "broken"; error: UpstreamError }
  | { kind: "client-gone" };

export interface ForwardOptions {
  replica: Replica;
  method: string;
  path: string;
  headers: Record<string, string | string[]>;
  body: Buffer | null;
  res: http.ServerResponse;
  /** Added to the response's headers (replica served, session token). */
  extra: Record<string, string>;
  clientGone: AbortSignal;
  timeoutMs: number;
  /** A 503 from the replica (draining) is retried elsewhere rather than passed on. */
  retry503: boolean;
  /** Called when the upstream request has been handed to the socket (the router's own overhead ends). */
  onSent?: () => void;
  observe: boolean;
}

export function forward(o: ForwardOptions): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (v: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      o.clientGone.removeEventListener("abort", onGone);
      resolve(v);
    };
    let wrote = false;
    const up = http.request({
      host: o.replica.url.hostname,
      port: o.replica.url.port || 80,
      method: o.method,
      path: o.path,
      agent: o.replica.agent,
      headers: { ...o.headers, ...(o.body ? { "content-length": String(o.body.byteLength) } : {}) },
    });
    const timer = setTimeout(() => up.destroy(new UpstreamError("timeout", `the replica did not finish in ${o.timeoutMs} ms`)), o.timeoutMs);
    const onGone = () => {
      up.destroy();
      done({ kind: "client-gone" });
    };
    o.clientGone.addEventListener("abort", onGone, { once: true });
    const fail = (e: unknown) => {
      const err = classify(e);
      if (!wrote) return done({ kind: "retry", error: err });
      // the response had begun: end what the client has as cleanly as its framing allows
      if (!o.res.writableEnded) {
        const sse = String(o.res.getHeader("content-type") ?? "").startsWith("text/event-stream");
        if (sse) {
          o.res.end(`data: ${JSON.stringify({ error: { message: `the replica failed mid-stream: ${err.message}`, type: "upstream_error", param: null, code: 502 } })}\n\n`);
        } else o.res.destroy();
      }
      done({ kind: "broken", error: err });
    };
    up.on("error", fail);
    up.on("response", (ur) => {
      const status = ur.statusCode ?? 502;
      if (status === 503 && o.retry503) {
        ur.resume();
        return done({ kind: "retry", error: new UpstreamError("other", "the replica answered 503 (draining or overloaded)"), status });
      }
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(ur.headers)) if (v !== undefined && (!HOP_BY_HOP.has(k) || k === "content-length")) headers[k] = v;
      Object.assign(headers, o.extra);
      if (o.clientGone.aborted) return;
      o.res.writeHead(status, headers);
      o.res.flushHeaders();
      wrote = true;
      const sse = String(ur.headers["content-type"] ?? "").startsWith("text/event-stream");
      const observer = o.observe && sse && status === 200 ? new StreamObserver() : null;
      ur.on("data", (chunk: Buffer) => {
        // the client first; the observer reads the chunk after it is on its way
        if (!o.res.write(chunk)) {
          ur.pause();
          o.res.once("drain", () => ur.resume());
        }
        observer?.feed(chunk);
      });
      ur.on("end", () => {
        o.res.end();
        done({ kind: "done", status, observer });
      });
      ur.on("error", fail);
      ur.on("close", () => {
        if (!ur.complete) fail(new UpstreamError("reset", "the replica closed the response early"));
      });
    });
    up.end(o.body ?? undefined, () => o.onSent?.());
  });
}
