// The server side of leak.test.ts, run in a child process started with --expose-gc: it serves the
// fixture model on 127.0.0.1 and, when asked, collects garbage and reports its memory.
import * as torch from "torchts";
import { load, modelDir } from "./helpers.js";
import { startServer } from "./server_helpers.js";

export interface MemoryReport {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  liveBytes: number;
  liveBuffers: number;
  running: number;
  waiting: number;
  kvCacheUsage: number;
  /** torchts's compile cache (an LRU of at most 8,192 executables keyed by shape): bounded growth, not a leak. */
  compiled: number;
}

const exposed = (globalThis as { gc?: () => void }).gc;
if (!exposed || !process.send) throw new Error("leak_server.ts runs as a child process started with --expose-gc");
const gc: () => void = exposed;

const { model, tokenizer } = await load(modelDir());
const srv = await startServer(model, tokenizer, { maxNumSeqs: 4 });

process.on("message", async (m: { cmd: string }) => {
  if (m.cmd === "measure") {
    // torchts releases unreachable buffers from a FinalizationRegistry, whose callbacks run after a collection
    for (let i = 0; i < 4; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 25));
    }
    const u = process.memoryUsage();
    const t = torch.memory.stats();
    const s = srv.engine.stats;
    const report: MemoryReport = { rss: u.rss, heapUsed: u.heapUsed, external: u.external, arrayBuffers: u.arrayBuffers, liveBytes: t.liveBytes, liveBuffers: t.liveBuffers, running: s.running, waiting: s.waiting, kvCacheUsage: s.kvCacheUsage, compiled: torch.compiler.cacheStats().entries };
    process.send!({ report });
  } else if (m.cmd === "stop") {
    await srv.close();
    process.exit(0);
  }
});
// the test process went away without asking to stop: do not outlive it
process.on("disconnect", () => process.exit(1));
process.send({ url: srv.url });
