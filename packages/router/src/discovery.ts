// Replicas found by DNS: every address a name resolves to (a Kubernetes headless Service has one A record
// per ready pod), re-resolved every refreshMs. A name that fails to resolve keeps the last answer (a DNS
// hiccup should not empty the pool); pods that go away leave it.
import { lookup } from "node:dns/promises";
import type { RouterConfig } from "./config.js";
import type { Pool } from "./pool.js";

export class Discovery {
  private timer: NodeJS.Timeout | null = null;
  private readonly last = new Map<number, { url: string; role: RouterConfig["discovery"][number]["role"] }[]>();

  constructor(
    private readonly pool: Pool,
    private readonly sources: RouterConfig["discovery"],
  ) {}

  /** Resolve every source once (the router starts with what it finds), then keep refreshing. */
  async start(): Promise<void> {
    if (!this.sources.length) return;
    await this.refresh();
    const every = Math.min(...this.sources.map((s) => s.refreshMs));
    this.timer = setInterval(() => void this.refresh(), every);
  }

  private async refresh(): Promise<void> {
    await Promise.all(
      this.sources.map(async (s, i) => {
        try {
          const addrs = await lookup(s.dns, { all: true, family: s.family });
          this.last.set(i, addrs.map((a) => ({ url: `http://${a.family === 6 ? `[${a.address}]` : a.address}:${s.port}`, role: s.role })));
        } catch {
          /* keep the last answer */
        }
      }),
    );
    this.pool.setDiscovered([...this.last.values()].flat());
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
