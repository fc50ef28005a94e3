// A browser-style `Worker` global over node:worker_threads, for libraries that start their
// thread pool with `new Worker(blobUrl)` (jax-js). Supports blob: URLs of classic/module scripts
// that use self.onmessage / postMessage.
import { Worker as NodeWorker } from "node:worker_threads";
import { resolveObjectURL } from "node:buffer";

const PRELUDE = `
const { parentPort } = require("node:worker_threads");
globalThis.self = globalThis;
globalThis.postMessage = (m) => parentPort.postMessage(m);
parentPort.on("message", (data) => { const h = globalThis.onmessage || self.onmessage; if (h) h({ data }); });
`;

class ShimWorker {
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onerror: ((e: { message: string }) => void) | null = null;
  private w!: NodeWorker;
  private pending: unknown[] | null = [];
  constructor(url: string | URL) {
    const blob = resolveObjectURL(String(url));
    if (!blob) throw new Error(`worker shim: only blob: URLs are supported, got ${url}`);
    void blob.text().then((src) => {
      this.w = new NodeWorker(PRELUDE + src, { eval: true });
      this.w.unref();
      this.w.on("message", (data) => this.onmessage?.({ data }));
      this.w.on("error", (e) => this.onerror?.({ message: String(e) }));
      for (const m of this.pending!) this.w.postMessage(m);
      this.pending = null;
    });
  }
  postMessage(m: unknown): void {
    if (this.pending) this.pending.push(m);
    else this.w.postMessage(m);
  }
  terminate(): void {
    void this.w?.terminate();
  }
}

(globalThis as { Worker?: unknown }).Worker ??= ShimWorker;
(globalThis as { navigator?: unknown }).navigator ??= { hardwareConcurrency: 2 };
