// Run under `torchts run` by bench/distributed/distributed.ts. Rank 0 prints one `ROW {...}` line per
// measurement:
//   tcp:       a raw TCP stream from rank 1 to rank 0 on 127.0.0.1 (node:net, 4 MB writes, read
//              into one reused 4 MB buffer, 256 MB), the same machine and moment as the
//              collectives: the reference bandwidth; and the raw ring (every rank streams 256 MB to
//              its right neighbour at once), the slowest link: what a ring algorithm can get;
//              and a plain stream (node:net's default reads, a fresh Buffer each)
//   allreduce: float32 SUM of 1 KB .. 256 MB; time = the slowest rank's median over the repetitions;
//              algbw = bytes / time, busbw = algbw * 2 (n - 1) / n (nccl-tests' definition)
import { createConnection, createServer, type Socket } from "node:net";
import * as torch from "../../packages/torchts/src/index.js";
const dist = torch.distributed;

await dist.initProcessGroup({ backend: "gloo", timeout: 600_000 });
const rank = dist.getRank();
const n = dist.getWorldSize();
const store = dist.getDefaultStore();
const quick = process.argv.includes("--quick");
const emit = (r: object) => rank === 0 && console.log(`ROW ${JSON.stringify(r)}`);

let streams = 0;
const READ_BUFFER = 4 << 20;

/**
 * One raw stream, the sending side: listen and publish the port now; the returned function waits
 * for the receiver to dial (rawRecv: it reads with node:net's fastest path, one reused 4 MB
 * buffer with `onread`, what the collectives' receiving sockets use) and writes `bytes` in 4 MB
 * writes. Publishing before anything waits on the store keeps the store's requests from queueing
 * behind a get.
 */
async function rawSender(key: string, bytes: number, start: () => Promise<void>): Promise<() => Promise<void>> {
  const chunk = Buffer.alloc(4 << 20, 7);
  const srv = createServer();
  const incoming = new Promise<Socket>((r) => srv.once("connection", r));
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  await store.set(`${key}/port/${rank}`, String((srv.address() as { port: number }).port));
  return async () => {
    const sock = await incoming;
    await start();
    for (let sent = 0; sent < bytes; sent += chunk.length) if (!sock.write(chunk)) await new Promise((r) => sock.once("drain", r));
    await new Promise((r) => sock.once("data", r)); // the receiver's "got it all"
    sock.destroy();
    srv.close();
  };
}

/** The receiving side: `plain` reads with node:net's default ('data' events, a fresh Buffer per read). */
async function rawRecv(key: string, bytes: number, from: number, start: () => Promise<void>, plain = false): Promise<number> {
  const port = Number(await store.get(`${key}/port/${from}`));
  let got = 0;
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  const buffer = Buffer.allocUnsafe(READ_BUFFER);
  const onread = { buffer, callback: (k: number) => ((got += k) >= bytes && done(), true) };
  const sock = createConnection({ host: "127.0.0.1", port, ...(plain ? {} : { onread }) });
  if (plain) sock.on("data", (d: Buffer) => (got += d.length) >= bytes && done());
  await new Promise<void>((r) => sock.once("connect", r));
  await start();
  const t0 = performance.now();
  await all;
  const ms = performance.now() - t0;
  sock.write("k");
  sock.end();
  return (bytes / ms) * 1e3;
}

/** Every participant connected: start at once (a counter in the store). */
function starter(key: string, parties: number): () => Promise<void> {
  return async () => {
    await store.add(`${key}/ready`, 1);
    while (Number(await store.add(`${key}/ready`, 0)) < parties) await new Promise((r) => setTimeout(r, 1));
  };
}

/** Rank 1 streams to rank 0 alone: the reference bandwidth (`plain`: read as node:net does by default). */
async function tcpStream(bytes: number, plain = false): Promise<number> {
  const key = `bench/tcp/${streams++}`;
  if (rank > 1) return 0;
  const go = starter(key, 2);
  if (rank === 1) {
    await (await rawSender(key, bytes, go))();
    return 0;
  }
  return rawRecv(key, bytes, 1, go, plain);
}

/**
 * The raw ring: every rank streams to its right neighbour while receiving from its left, all at
 * once (what every step of a ring all-reduce asks of the machine); the slowest link's rate. At 2
 * ranks this is both directions of one pair at once.
 */
async function tcpRing(bytes: number): Promise<number> {
  const key = `bench/ring/${streams++}`;
  const go = starter(key, 2 * n);
  const left = (rank - 1 + n) % n;
  const send = await rawSender(key, bytes, go);
  const [rate] = await Promise.all([rawRecv(key, bytes, left, go), send()]);
  const t = torch.tensor([rate]);
  dist.allReduce(t, { op: dist.ReduceOp.MIN });
  return t.item();
}

async function allReduceMs(bytes: number, reps: number): Promise<number> {
  const t = torch.ones([bytes / 4]);
  await dist.allReduce(t, { asyncOp: true })!.wait(); // warm-up (connections, buffers)
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    dist.barrier();
    const t0 = performance.now();
    await dist.allReduce(t, { asyncOp: true })!.wait();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const med = torch.tensor([times[Math.floor(times.length / 2)]!]);
  dist.allReduce(med, { op: dist.ReduceOp.MAX });
  return med.item();
}

const tcpBytes = (quick ? 64 : 256) << 20;
const tcpBefore = await tcpStream(tcpBytes);
dist.barrier();
const sizes = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, ...(quick ? [] : [256 << 20])];
for (const bytes of sizes) {
  const reps = bytes <= 1 << 20 ? 20 : bytes <= 16 << 20 ? 8 : 3;
  const ms = await allReduceMs(bytes, reps);
  const algbw = (bytes / ms) * 1e3;
  emit({ kind: "allreduce", n, bytes, ms, algbw, busbw: (algbw * 2 * (n - 1)) / n, reps });
}
const tcpAfter = await tcpStream(tcpBytes);
dist.barrier();
const ring = await tcpRing(tcpBytes);
dist.barrier();
const plain = await tcpStream(tcpBytes, true);
emit({ kind: "tcp", n, bytes: tcpBytes, before: tcpBefore, after: tcpAfter, ring, plain });
await dist.destroyProcessGroup();
