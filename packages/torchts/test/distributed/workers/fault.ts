// A worker for the launcher's fault tests: `mode` picks how rank 1 fails.
//   raise: rank 1 throws after the group formed (on the first attempt only, with --max-restarts)
//   kill:  rank 1 is killed with SIGKILL while the others wait in a collective
import * as torch from "../../../src/index.js";
const dist = torch.distributed;
const mode = process.argv[2];
const attempt = Number(process.env.TORCHELASTIC_RESTART_COUNT);
await dist.initProcessGroup({ backend: "gloo", timeout: 60_000 });
const rank = dist.getRank();
console.log(`worker rank=${rank} attempt=${attempt} pid=${process.pid} env=${JSON.stringify({ RANK: process.env.RANK, LOCAL_RANK: process.env.LOCAL_RANK, WORLD_SIZE: process.env.WORLD_SIZE, LOCAL_WORLD_SIZE: process.env.LOCAL_WORLD_SIZE, GROUP_RANK: process.env.GROUP_RANK, MASTER_ADDR: process.env.MASTER_ADDR, MASTER_PORT: process.env.MASTER_PORT, TORCHELASTIC_RUN_ID: process.env.TORCHELASTIC_RUN_ID })}`);
const t = torch.ones([4]);
if (rank === 1 && mode === "kill") process.kill(process.pid, "SIGKILL");
if (rank === 1 && mode === "raise" && attempt === 0) throw new Error(`rank 1 fails on attempt ${attempt}`);
// the others wait here until the launcher stops them (the dead rank never joins this collective)
dist.allReduce(t);
console.log(`rank ${rank} sum ${await t.sum().item()}`);
await dist.destroyProcessGroup();
