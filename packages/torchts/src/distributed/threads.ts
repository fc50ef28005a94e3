// Starting this package's worker threads. A repository checkout runs the TypeScript sources
// through tsx: a worker does not inherit the parent's loader (neither `--import tsx` nor tsx's
// register()), so it starts from a one-line bootstrap that registers tsx and then imports the
// worker's module. A build (dist/) starts the .js module directly.
import { Worker, type Transferable } from "node:worker_threads";

const fromSource = import.meta.url.endsWith(".ts");

export function spawnWorker(name: string, workerData: unknown, transferList: Transferable[] = []): Worker {
  const url = new URL(`./${name}.${fromSource ? "ts" : "js"}`, import.meta.url);
  if (!fromSource) return new Worker(url, { workerData, transferList });
  const api = import.meta.resolve("tsx/esm/api");
  const boot = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(url.href)}); })`;
  return new Worker(boot, { eval: true, workerData, transferList });
}
