// Subscribes to each healthy replica's KV-event stream (GET /v1/kv_events: server-sent events of JSON,
// a snapshot first) and feeds the PreciseIndex. A broken stream clears that replica's entries (the next
// connection's snapshot restores them); a 404 means the replica publishes no events (vLLM without a
// bridge, torchts serve without --kv-events), so it is asked again only now and then.
import http from "node:http";
import { createParser } from "eventsource-parser";
import type { Pool, Replica } from "./pool.js";
import type { KvEvent, PreciseIndex } from "./prefix_index.js";

export class KvEventSubscriber {
  private readonly live = new Map<string, http.ClientRequest>();
  private readonly retryAt = new Map<string, number>();
  private stopped = false;
  private readonly onUpdate = () => this.sync();
  private readonly onDown = (r: Replica) => this.disconnect(r.id);

  constructor(
    private readonly pool: Pool,
    private readonly index: PreciseIndex,
    private readonly reconnectMs: number,
  ) {
    pool.on("update", this.onUpdate);
    pool.on("down", this.onDown);
  }

  /** Replicas whose stream is open. */
  connected(id: string): boolean {
    return this.live.has(id);
  }

  private sync(): void {
    if (this.stopped) return;
    const now = Date.now();
    for (const r of this.pool.replicas)
      if (r.healthy && !this.live.has(r.id) && (this.retryAt.get(r.id) ?? 0) <= now) this.connect(r);
  }

  private connect(r: Replica): void {
    const req = http.get({ host: r.url.hostname, port: r.url.port || 80, path: "/v1/kv_events", headers: { accept: "text/event-stream" } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        // no stream here (yet): ask again later, rarely when the replica has none at all
        this.retryAt.set(r.id, Date.now() + (res.statusCode === 404 ? Math.max(5000, this.reconnectMs) : this.reconnectMs));
        this.live.delete(r.id);
        return;
      }
      this.index.clear(r.id);
      const parser = createParser({
        onEvent: (ev) => {
          try {
            const e = JSON.parse(ev.data) as KvEvent;
            if (e && typeof e === "object" && typeof e.type === "string") this.index.apply(r.id, e);
          } catch {
            /* a malformed event changes nothing */
          }
        },
      });
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => parser.feed(chunk));
      res.on("close", () => this.ended(r.id, req));
    });
    req.on("error", () => this.ended(r.id, req));
    this.live.set(r.id, req);
  }

  private ended(id: string, req: http.ClientRequest): void {
    if (this.live.get(id) !== req) return;
    this.live.delete(id);
    this.index.clear(id);
    this.retryAt.set(id, Date.now() + this.reconnectMs);
  }

  private disconnect(id: string): void {
    const req = this.live.get(id);
    this.index.clear(id);
    if (req) {
      this.live.delete(id);
      req.destroy();
    }
  }

  stop(): void {
    this.stopped = true;
    this.pool.off("update", this.onUpdate);
    this.pool.off("down", this.onDown);
    for (const id of [...this.live.keys()]) this.disconnect(id);
  }
}
