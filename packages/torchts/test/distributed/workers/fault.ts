// A worker for the launcher tests (test/distributed/launcher.test.ts); argv[2] is the mode:
//   env:   print this worker's torchrun environment as `ENV {...}`, then all-reduce once
//   sleep: print `READY <rank> <pid>` and sleep (the test kills one worker with SIGKILL; the
//          launcher must stop the others; the last rank ignores SIGTERM, so it needs SIGKILL)
//   raise: rank 1 throws on the first attempt; after a restart every rank all-reduces and prints `SUM`
//   grow:  a group of fewer than 4 ranks prints `SMALL <rank>` and waits (for a node to join and the
//          launchers to restart the group with it); a group of 4 all-reduces
import * as torch from "../../../src/index.js";
const dist = torch.distributed;
const mode = process.argv[2];
const attempt = Number(process.env.TORCHELASTIC_RESTART_COUNT);
const KEYS = [
  "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE",
  "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
  "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS",
];
// INIT_METHOD=tcp://host:port (with RANK and WORLD_SIZE) instead of env://
const tcp = process.env.INIT_METHOD ? { initMethod: process.env.INIT_METHOD, rank: Number(process.env.RANK), worldSize: Number(process.env.WORLD_SIZE) } : {};
await dist.initProcessGroup({ backend: "gloo", timeout: 60_000, ...tcp });
const rank = dist.getRank();
const n = dist.getWorldSize();
if (mode === "env") console.log(`ENV ${JSON.stringify(Object.fromEntries(KEYS.map((k) => [k, process.env[k] ?? null])))}`);
if (mode === "sleep") {
  if (rank === n - 1) process.on("SIGTERM", () => console.log(`rank ${rank} ignores SIGTERM`));
  console.log(`READY ${rank} ${process.pid}`);
  await new Promise((r) => setTimeout(r, 120_000));
}
if (mode === "grow" && n < 4) {
  console.log(`SMALL ${rank}`);
  await new Promise((r) => setTimeout(r, 120_000));
}
if (mode === "raise" && rank === 1 && attempt === 0) throw new Error(`rank 1 fails on attempt ${attempt}`);
const t = torch.full([4], rank + 1);
dist.allReduce(t);
console.log(`SUM ${rank} ${attempt} ${await t.sum().item()}`);
await dist.destroyProcessGroup();
