// The command channel from the server (rank 0) to its tensor parallel workers: each command is two
// broadcasts over the world group, its byte length (int64) then its JSON. Rank 0 never waits for them
// (a broadcast's root returns at once), so a step costs it no round trip; a worker reads the length
// before it can post the receive of the bytes. Every rank issues the commands and the model's own
// collectives (the row-parallel all-reduces of a step) in the same order, as the group requires.
import * as torch from "torchts";
import * as dist from "torchts/distributed";
import type { PagedKVCacheOptions, PagedSequence } from "torchts/transformers";

export type TpCommand =
  /** The KV pool every rank allocates for its own kv heads (sent once, after the engine sized it). */
  | { op: "init"; cache: PagedKVCacheOptions }
  /** One engine step: the sequences of forwardPaged (the workers discard the logits). */
  | { op: "step"; seqs: PagedSequence[] }
  /** Copy-on-write of shared blocks, as the engine's pool does it. */
  | { op: "copy"; src: number[]; dst: number[] }
  /** Sent while idle so that a worker's pending receive never reaches the group's timeout. */
  | { op: "noop" }
  | { op: "stop" };

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Rank 0: queue `cmd` for every worker (returns at once). */
export function sendCommand(cmd: TpCommand): void {
  const bytes = enc.encode(JSON.stringify(cmd));
  dist.broadcast(torch.tensor([bytes.length], { dtype: "int64" }), 0);
  dist.broadcast(torch.tensor(bytes, { dtype: "uint8" }), 0);
}

/** A worker: the next command from rank 0. */
export async function receiveCommand(): Promise<TpCommand> {
  const len = torch.zeros([1], { dtype: "int64" });
  dist.broadcast(len, 0);
  const n = Number((await len.data())[0]);
  const buf = torch.zeros([n], { dtype: "uint8" });
  dist.broadcast(buf, 0);
  return JSON.parse(dec.decode((await buf.data()) as Uint8Array)) as TpCommand;
}
