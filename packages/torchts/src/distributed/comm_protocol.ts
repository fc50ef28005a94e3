// The messages between a process's main thread (comm.ts) and its communication thread
// (comm_worker.ts).
import type { DType } from "../ir/dtype.js";
import type { ReduceOpName } from "./reduce_ops.js";

export type OpKind =
  | "allReduce" | "broadcast" | "reduce" | "allGather" | "reduceScatter" | "allToAll" | "gather" | "scatter"
  | "barrier" | "send" | "recv" | "monitoredBarrier";

export interface OpRequest {
  type: "op";
  id: number;
  kind: OpKind;
  /** Group id and its members (global ranks, in group order). */
  gid: number;
  ranks: number[];
  /** Position of this collective in its group's sequence (point-to-point ops: null). */
  seq: number | null;
  /** What this rank runs, compared with what the other ranks run (mpmd safety). */
  fp: string;
  timeoutMs: number;
  dtype: DType;
  /** This rank's input (transferred), or null when it sends nothing. */
  input: ArrayBuffer | null;
  /**
   * Instead of `input`: the operand in place in the process's shared (wasm) memory, which is also
   * where the result goes (allReduce of a cpu tensor: no copy in, no copy out). The storage is set
   * aside while the operation runs, so nothing else touches these bytes.
   */
  inPlace?: { buffer: SharedArrayBuffer; byteOffset: number };
  /** Elements of the result (or, for broadcast/scatter, of one rank's block). */
  numel: number;
  op?: ReduceOpName;
  /** Group rank of the root / the peer. */
  root?: number;
  peer?: number;
  tag?: number;
  inSplits?: number[];
  outSplits?: number[];
  waitAllRanks?: boolean;
  /** monitoredBarrier: how long rank 0 waits for the others (the operation's own timeout is longer). */
  budgetMs?: number;
}

export type ToWorker =
  | OpRequest
  | { type: "connect"; addrs: string[]; deadline: number }
  | { type: "close" };

export type FromWorker =
  | { type: "listening"; port: number }
  | { type: "connected" }
  | { type: "done"; id: number; output: ArrayBuffer | null }
  | { type: "error"; id: number; name: string; message: string; gid: number; breaksGroup: boolean }
  | { type: "fatal"; message: string };

/** ctrl[0] counts messages posted to the main thread (it blocks on this word with Atomics.wait). */
export const CTRL_POSTED = 0;
