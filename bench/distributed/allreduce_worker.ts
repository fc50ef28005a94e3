// Run under `torchts run` by bench/distributed/distributed.ts. Rank 0 prints one `ROW {...}` line per
// measurement:
//   tcp:       a raw TCP stream between rank 0 and rank 1 on 127.0.0.1 (node:net, 4 MB writes,
//              256 MB), the same machine and moment as the collectives: the reference bandwidth;
//              and both directions at once (each of the two sends 256 MB to the other), per direction
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
async function tcpStream(bytes: number): Promise<number> {
  const key = `bench/tcp/${streams++}`;
  const chunk = Buffer.alloc(4 << 20, 7);
  if (rank === 0) {
    const srv = createServer();
    const incoming = new Promise<Socket>((r) => srv.once("connection", r));
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    await store.set(key, String((srv.address() as { port: number }).port));
    const sock = await incoming;
    const t0 = performance.now();
    let got = 0;
    await new Promise<void>((resolve) =>
      sock.on("data", (d: Buffer) => {
        got += d.length;
        if (got >= bytes) resolve();
      }),
    );
    const ms = performance.now() - t0;
    sock.end("k");
    srv.close();
    return (bytes / ms) * 1e3;
  }
  if (rank === 1) {
    const port = Number(await store.get(key));
    const sock = createConnection({ host: "127.0.0.1", port });
    await new Promise<void>((r) => sock.once("connect", r));
    for (let sent = 0; sent < bytes; sent += chunk.length) if (!sock.write(chunk)) await new Promise((r) => sock.once("drain", r));
    await new Promise((r) => sock.once("data", r));
    sock.destroy();
  }
  return 0;
}

/** Both directions at once (rank 0 <-> rank 1, what a ring step does): bytes per second per direction. */
async function tcpBoth(bytes: number): Promise<number> {
  if (rank > 1) return 0;
  const key = `bench/tcp2/${streams++}`;
  const chunk = Buffer.alloc(4 << 20, 7);
  const srv = createServer();
  const incoming = new Promise<Socket>((r) => srv.once("connection", r)); // before the peer can connect
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  await store.set(`${key}/${rank}`, String((srv.address() as { port: number }).port));
  const peerPort = Number(await store.get(`${key}/${1 - rank}`));
  const out = createConnection({ host: "127.0.0.1", port: peerPort });
  await new Promise<void>((r) => out.once("connect", r));
  const inSock = await incoming;
  await store.add(`${key}/ready`, 1);
  while (Number(await store.add(`${key}/ready`, 0)) < 2) await new Promise((r) => setTimeout(r, 1));
  const t0 = performance.now();
  const received = new Promise<void>((resolve) => {
    let got = 0;
    inSock.on("data", (d: Buffer) => {
      got += d.length;
      if (got >= bytes) resolve();
    });
  });
  for (let sent = 0; sent < bytes; sent += chunk.length) if (!out.write(chunk)) await new Promise((r) => out.once("drain", r));
  await received;
  const ms = performance.now() - t0;
  out.destroy();
  inSock.destroy();
  srv.close();
  return (bytes / ms) * 1e3;
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
const both = await tcpBoth(tcpBytes);
emit({ kind: "tcp", n, bytes: tcpBytes, before: tcpBefore, after: tcpAfter, both });
await dist.destroyProcessGroup();
