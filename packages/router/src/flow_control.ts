// Flow control in front of the scheduler (llm-d's flow controller): requests wait here while no replica
// has room, in strict priority bands (higher first; below 0 is sheddable), and within a band the
// tenants (x-gateway-inference-fairness-id) take turns, round robin, each tenant first come first served.
// The queue is bounded: a full queue answers 429 (a newcomer of a higher band evicts the newest request of
// the lowest band instead), a request that waits past queueTimeoutMs gets 503, and while every replica is
// saturated sheddable requests are refused (and queued ones dropped) before anything else.
export class Rejected extends Error {
  constructor(
    readonly status: 429 | 503,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** The client went away while its request waited. */
export class Cancelled extends Error {}

interface Waiter<T> {
  band: number;
  tenant: string;
  attempt: () => T | null;
  resolve: (v: T) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
  cleanup: () => void;
}

interface Band<T> {
  queues: Map<string, Waiter<T>[]>;
  /** Tenants with waiting requests, in turn order; `next` is whose turn it is. */
  order: string[];
  next: number;
}

export interface FlowOptions {
  maxQueued: number;
  queueTimeoutMs: number;
}

export class FlowController<T> {
  private readonly bands = new Map<number, Band<T>>();
  private size = 0;
  private pumping = false;
  /** Dispatch and rejection counts, for tests and metrics. */
  readonly counts = { dispatched: 0, queued: 0, rejected: 0 };

  constructor(
    private readonly o: FlowOptions,
    /** Every replica is saturated (sheddable requests go first). */
    private readonly saturated: () => boolean,
    private readonly onDepth: (band: number, tenant: string, depth: number) => void = () => {},
  ) {}

  get depth(): number {
    return this.size;
  }

  depthOf(band: number, tenant: string): number {
    return this.bands.get(band)?.queues.get(tenant)?.length ?? 0;
  }

  /**
   * Resolves with `attempt()`'s value once it is this request's turn and `attempt` finds room (it returns
   * null while there is none). Rejects with Rejected (429/503) or Cancelled (the signal).
   */
  admit(band: number, tenant: string, attempt: () => T | null, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(new Cancelled("cancelled"));
    // sheddable requests are dropped while every replica is saturated, even where a slot is free: the
    // replicas' queues are what saturation measures, and a free router slot does not empty them
    if (band < 0 && this.saturated()) {
      this.counts.rejected++;
      return Promise.reject(new Rejected(429, "saturated-sheddable", "every replica is saturated: sheddable requests (priority < 0) are dropped first"));
    }
    // nobody of this band or above is waiting: go now if there is room
    if (!this.waitingAtOrAbove(band)) {
      const v = attempt();
      if (v !== null) {
        this.counts.dispatched++;
        return Promise.resolve(v);
      }
    }
    if (this.size >= this.o.maxQueued) {
      const low = this.lowestBand();
      if (low === null || low >= band) {
        this.counts.rejected++;
        return Promise.reject(new Rejected(429, "queue-full", `the router's queue is full (${this.o.maxQueued} requests waiting)`));
      }
      this.evictNewest(low);
    }
    return new Promise<T>((resolve, reject) => {
      const w: Waiter<T> = {
        band,
        tenant,
        attempt,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.remove(w);
          this.counts.rejected++;
          reject(new Rejected(503, "queue-timeout", `waited ${this.o.queueTimeoutMs} ms in the router's queue without a replica free`));
        }, this.o.queueTimeoutMs),
        cleanup: () => {},
      };
      if (signal) {
        const onAbort = () => {
          this.remove(w);
          reject(new Cancelled("cancelled"));
        };
        signal.addEventListener("abort", onAbort, { once: true });
        w.cleanup = () => signal.removeEventListener("abort", onAbort);
      }
      this.push(w);
      this.counts.queued++;
      this.pump();
    });
  }

  /** Dispatch what can go: call when capacity may have changed (a request ended, metrics came). */
  pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      if (this.size && this.saturated()) this.shedSheddable();
      for (;;) {
        const band = this.highestBand();
        if (band === null) break;
        const b = this.bands.get(band)!;
        const tenant = b.order[b.next % b.order.length]!;
        const w = b.queues.get(tenant)![0]!;
        const v = w.attempt();
        // strict priority: when the head of the highest band cannot go, nothing below it goes
        if (v === null) break;
        this.remove(w, true);
        this.counts.dispatched++;
        w.resolve(v);
      }
    } finally {
      this.pumping = false;
    }
  }

  private waitingAtOrAbove(band: number): boolean {
    for (const [k, b] of this.bands) if (k >= band && b.order.length) return true;
    return false;
  }

  private highestBand(): number | null {
    let best: number | null = null;
    for (const [k, b] of this.bands) if (b.order.length && (best === null || k > best)) best = k;
    return best;
  }

  private lowestBand(): number | null {
    let low: number | null = null;
    for (const [k, b] of this.bands) if (b.order.length && (low === null || k < low)) low = k;
    return low;
  }

  private push(w: Waiter<T>): void {
    let b = this.bands.get(w.band);
    if (!b) this.bands.set(w.band, (b = { queues: new Map(), order: [], next: 0 }));
    let q = b.queues.get(w.tenant);
    if (!q) {
      b.queues.set(w.tenant, (q = []));
      b.order.push(w.tenant);
    }
    q.push(w);
    this.size++;
    this.onDepth(w.band, w.tenant, q.length);
  }

  /** Take `w` out of its queue; `served` moves the band's turn to the next tenant. */
  private remove(w: Waiter<T>, served = false): void {
    const b = this.bands.get(w.band);
    const q = b?.queues.get(w.tenant);
    const i = q ? q.indexOf(w) : -1;
    if (!b || !q || i < 0) return;
    clearTimeout(w.timer);
    w.cleanup();
    q.splice(i, 1);
    this.size--;
    this.onDepth(w.band, w.tenant, q.length);
    const pos = b.order.indexOf(w.tenant);
    if (!q.length) {
      b.queues.delete(w.tenant);
      b.order.splice(pos, 1);
      // the tenant after it moved into `pos`: that one's turn is next if this one's was (or was served)
      if (!served && pos < b.next) b.next--;
      if (served) b.next = pos;
    } else if (served) b.next = pos + 1;
    b.next = b.order.length ? b.next % b.order.length : 0;
  }

  private evictNewest(band: number): void {
    const b = this.bands.get(band)!;
    // the last tenant to have joined, its last request
    const q = b.queues.get(b.order[b.order.length - 1]!)!;
    const newest = q[q.length - 1]!;
    this.remove(newest);
    this.counts.rejected++;
    newest.reject(new Rejected(429, "queue-full-evicted", "the router's queue is full and a request of higher priority took this one's place"));
  }

  private shedSheddable(): void {
    for (const [k, b] of this.bands) {
      if (k >= 0) continue;
      for (const q of [...b.queues.values()])
        for (const w of [...q]) {
          this.remove(w);
          this.counts.rejected++;
          w.reject(new Rejected(429, "saturated-sheddable", "every replica is saturated: sheddable requests (priority < 0) are dropped first"));
        }
    }
  }

  /** Reject everything waiting (the router is closing). */
  close(): void {
    for (const b of this.bands.values())
      for (const q of [...b.queues.values()])
        for (const w of [...q]) {
          this.remove(w);
          w.reject(new Rejected(503, "shutting-down", "the router is shutting down"));
        }
  }
}
