// A tensor parallel worker of `torchts serve` (ranks 1..N-1), spawned by the server (executor.ts) with
// one JSON argument. It joins the server's process group, loads the checkpoint and keeps its shard, then
// runs the engine's steps as rank 0 sends them (channel.ts): forwardPaged over its own PagedKVCache of
// its kv heads; the row-parallel layers all-reduce with the other ranks, and rank 0 samples.
// It lives only as long as the server: it exits when the IPC channel to the server closes (the server
// exited or was killed) or when a collective fails (a peer is gone), and it ignores SIGINT/SIGTERM (a
// Ctrl-C reaches the whole process group; the server drains, then tells its workers to stop).
import * as torch from "torchts";
import * as dist from "torchts/distributed";
import { AutoModelForCausalLM, PagedKVCache, pagedBatch } from "torchts/transformers";
import type { DType } from "torchts";
import { receiveCommand } from "./channel.js";
import { shardModel } from "./shard.js";

/** What the server passes (argv[2], JSON). */
export interface WorkerArgs {
  rank: number;
  size: number;
  storeHost: string;
  storePort: number;
  model: string;
  dtype?: string;
  timeoutMs: number;
}

const args = JSON.parse(process.argv[2] ?? "{}") as WorkerArgs;
const who = `torchts serve: tensor parallel worker rank ${args.rank}`;

function die(message: string): never {
  process.stderr.write(`${who}: ${message}\n`);
  process.exit(1);
}

process.on("SIGINT", () => {});
process.on("SIGTERM", () => {});
process.on("disconnect", () => die("the server process is gone; exiting"));
if (!process.connected) die("started without an IPC channel to the server");

async function run(): Promise<void> {
  const store = new dist.TCPStore(args.storeHost, args.storePort, { worldSize: args.size, isMaster: false, timeout: args.timeoutMs });
  await dist.initProcessGroup({ backend: "gloo", store, rank: args.rank, worldSize: args.size, timeout: args.timeoutMs });
  const model = await AutoModelForCausalLM.fromPretrained(args.model, { deviceMap: "cpu", dtype: args.dtype as DType | undefined });
  shardModel(model);
  let cache: PagedKVCache | null = null;
  for (;;) {
    const cmd = await receiveCommand();
    if (cmd.op === "stop") break;
    if (cmd.op === "init") {
      cache?.dispose();
      cache = new PagedKVCache(cmd.cache);
    } else if (cmd.op === "copy") cache!.copyBlocks(cmd.src, cmd.dst);
    else if (cmd.op === "step") {
      const c = cache!;
      // no logits here: rank 0 samples (lm_head would run on zero rows)
      const seqs = cmd.seqs.map((s) => ({ ...s, wantLogits: false }));
      const out = torch.scope(() => torch.noGrad(() => model.forwardPaged(pagedBatch(seqs, c.blockSize, "cpu"), c)));
      out.dispose();
    }
  }
  await dist.destroyProcessGroup();
  await store.close();
}

run().then(
  () => process.exit(0),
  (e: Error) => die(e.message),
);
