// The thread a master TCPStore serves from (see store_server.ts): it reports the port it listens on
// (or why it could not) through a shared flag the constructing thread blocks on, then serves
// until told to close.
import { parentPort, workerData } from "node:worker_threads";
import { StoreServer } from "./store_server.js";

const { host, port, flag } = workerData as { host: string; port: number; flag: SharedArrayBuffer };
const state = new Int32Array(flag, 0, 2); // [0]: 0 starting, 1 listening, 2 failed; [1]: the port
const text = new Uint8Array(flag, 8);
const server = new StoreServer();

server.listen(host, port).then(
  (p) => {
    Atomics.store(state, 1, p);
    Atomics.store(state, 0, 1);
    Atomics.notify(state, 0);
  },
  (e: NodeJS.ErrnoException) => {
    const msg = new TextEncoder().encode(`${e.code ?? "error"}: ${e.message}`).subarray(0, text.length - 1);
    text.set(msg);
    Atomics.store(state, 0, 2);
    Atomics.notify(state, 0);
  },
);

parentPort!.on("message", (m: { type: string }) => {
  if (m.type === "close") void server.close().then(() => process.exit(0));
});
